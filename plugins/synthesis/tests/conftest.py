pytest_plugins = ["automedbench.testing"]
