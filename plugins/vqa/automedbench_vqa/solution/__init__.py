"""The scripted VQA solution (agent code run in the sandbox) and its answering method."""
