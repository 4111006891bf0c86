"""Scripted reference solution (classical, scikit-image/scipy) and its flawed variants."""
