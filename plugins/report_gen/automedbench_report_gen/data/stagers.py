"""Stagers for the official dataset layouts (filled in below)."""
