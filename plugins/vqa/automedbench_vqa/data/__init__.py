"""Staging of the VQA tasks: the generated demo, the dataset stagers and the staged question layout."""
