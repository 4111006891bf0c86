"""The scripted reference solution for the report demo and its flawed variants."""
