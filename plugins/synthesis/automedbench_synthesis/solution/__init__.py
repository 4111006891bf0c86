"""Scripted reference solution for the generated demos and its flawed variants."""
