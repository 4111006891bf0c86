"""Model access as a contract: what a model backend offers, how it is configured, and the one way to get one.

The grading step, the LLM judge, the error-code tagger, the chat agents and any track reach a model only
through `get_model` (a backend registered by a plugin through `automedbench_register_model_backends`,
configured from `ModelConfig`); what they may call on it is `ModelBackend`.
"""

from __future__ import annotations

import json
import re
from typing import Any, Protocol, runtime_checkable

from .modelconfig import ModelConfig, resolve
from .pricing import Usage

__all__ = ["ModelBackend", "ModelConfig", "ReplyError", "Usage", "extract_json", "get_model"]


@runtime_checkable
class ModelBackend(Protocol):
    """One configured model. `complete` is the chat call (OpenAI-style messages, optional tools) returning
    a completion with `content`, `tool_calls` and `usage`; `complete_text` is one system + prompt call
    returning the reply text; `close` frees the client."""

    cfg: ModelConfig

    def complete(self, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None = None,
                 **kwargs: Any) -> Any: ...

    def complete_text(self, system: str, prompt: str, max_tokens: int | None = None) -> str: ...

    def close(self) -> None: ...


def get_model(provider: str, options: dict[str, Any], role: str = "agent", reg: Any = None) -> ModelBackend:
    """The registered model backend `provider`, configured from `options` (an unknown name is one line)."""
    from .plugins import registry

    component = (reg or registry()).get("model", provider)
    return component.factory(resolve(provider, options, role))


class ReplyError(ValueError):
    """A model reply that does not hold what was asked for."""


def extract_json(text: str) -> Any:
    """The JSON object in a reply: whole text, a fenced block, or the outermost braces (after <think>)."""
    text = re.sub(r"(?s)<think>.*?</think>", "", text or "").strip()
    candidates = [text]
    fenced = re.search(r"(?s)```(?:json)?\s*(.*?)```", text)
    if fenced:
        candidates.append(fenced.group(1))
    if "{" in text and "}" in text:
        candidates.append(text[text.index("{"): text.rindex("}") + 1])
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except json.JSONDecodeError:
            continue
    raise ReplyError("the reply is not a JSON object")
