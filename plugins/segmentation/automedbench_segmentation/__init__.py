"""AutoMedBench segmentation track."""

__version__ = "0.1.0"
