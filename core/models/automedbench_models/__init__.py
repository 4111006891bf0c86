"""automedbench-models: what reaches a model — chat agents over any registered model backend, the OpenAI-
compatible and Anthropic backends, the stored-trajectory replay agent, the CLI coding-agent adapter and the
LLM judge (with its trajectory digest), the model-graded scoring step (`grading`: grade requests answered
outside the evaluator, the signed reply cache) and the reply hints for replies without a tool call (`replyhint`).

A plugin of the `automedbench` entry-point group like any third party's (`plugin.py`); the core never imports
it. The SDKs come with the `openai` and `anthropic` extras (the root's `automedbench[openai]` asks for them).
"""
