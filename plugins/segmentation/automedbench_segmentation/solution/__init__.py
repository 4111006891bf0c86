"""Scripted solutions of the segmentation track (agent code run in the sandbox) and their methods."""
