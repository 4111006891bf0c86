"""Fixtures for the segmentation plugin's own tests (amb_run, amb_data_root)."""

pytest_plugins = ["automedbench.testing"]
