"""Model access as a contract: what a model backend offers, how it is configured, and the one way to get one.

The grading step, the LLM judge, the error-code tagger, the chat agents and any track reach a model only
through `get_model` (a backend registered by a plugin through `automedbench_register_model_backends`,
configured from `ModelConfig`); what they may call on it is `ModelBackend`.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from attrs import define

from .modelconfig import ModelConfig, resolve
from .replyjson import ReplyError, final_json

__all__ = ["ModelBackend", "ModelConfig", "ReplyError", "Usage", "extract_json", "get_model"]


@define(frozen=True)
class Usage:
    """One call's tokens. `prompt` counts every prompt token, cached ones included."""

    prompt: int = 0
    completion: int = 0
    cached: int = 0
    cache_write: int = 0


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
    return component.factory(resolve(provider, options, role, component.declared))


# A verdict is read only from the reply's declared final structure: the whole reply, or the JSON object that
# ends it; never an object quoted or fenced inside reasoning before it (`replyjson`, issue 21).
extract_json = final_json
