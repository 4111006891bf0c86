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
    returning the reply text; `close` frees the client. A backend that can hold a reply to a JSON schema
    (the built-in OpenAI and Anthropic ones) also offers `complete_structured(system, prompt, schema)`,
    which the grading step and the error-code tagger use where present (`structured_reply`)."""

    cfg: ModelConfig

    def complete(self, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None = None,
                 **kwargs: Any) -> Any: ...

    def complete_text(self, system: str, prompt: str, max_tokens: int | None = None) -> str: ...

    def close(self) -> None: ...


def structured_reply(backend: Any, system: str, prompt: str, schema: dict[str, Any]) -> str:
    """The reply to one system + prompt call, held to `schema` by the backend where it offers that
    (`complete_structured`: OpenAI `response_format` json_schema, Anthropic a forced tool), else plain text;
    either way the caller reads it with `replyjson.final_json` (one object, nothing else)."""
    structured = getattr(backend, "complete_structured", None)
    if callable(structured):
        return structured(system, prompt, schema)
    return backend.complete_text(system, prompt)


def get_model(provider: str, options: dict[str, Any], role: str = "agent", reg: Any = None) -> ModelBackend:
    """The registered model backend `provider`, configured from `options` (an unknown name is one line)."""
    from .plugins import registry

    component = (reg or registry()).get("model", provider)
    return component.factory(resolve(provider, options, role, component.declared))


# A verdict is the reply itself as one JSON object (a backend's structured output, or a reply that is one object,
# optionally fenced); never an object quoted before, after or inside reasoning (`replyjson`, issues 21 and 35).
extract_json = final_json
