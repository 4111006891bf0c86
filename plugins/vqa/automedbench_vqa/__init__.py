"""AutoMedBench VQA track."""

__version__ = "0.1.0"
