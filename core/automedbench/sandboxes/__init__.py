"""Sandbox backends shipped with the core."""
