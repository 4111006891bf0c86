"""Agents shipped with the core."""
