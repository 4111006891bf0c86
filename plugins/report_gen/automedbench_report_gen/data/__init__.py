"""Staged data for the report track: the generated demo and the stagers for the official layouts."""
