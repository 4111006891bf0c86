"""Judge backends shipped with the core."""
