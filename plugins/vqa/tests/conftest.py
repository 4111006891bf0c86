"""Fixtures for the VQA plugin's own tests (amb_run, amb_data_root)."""

pytest_plugins = ["automedbench.testing"]
