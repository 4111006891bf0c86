"""Anthropic messages backend (official `anthropic` SDK).

The runner speaks OpenAI-style messages; this module converts them: the system message becomes
`system`, assistant tool calls become `tool_use` blocks, consecutive tool results one user message of
`tool_result` blocks, and data-URL images `image` blocks. Thinking blocks (with their signatures) are
kept per assistant turn and sent back unchanged, as extended thinking with tools requires.
"""

from __future__ import annotations

import json
from typing import Any

from automedbench.api import ToolCall, Usage, UserError

from .chat import Backend, ChatAgent, Completion

VERDICT_TOOL = "submit_verdict"
STOP_REASONS = {"max_tokens": "length", "end_turn": "stop", "tool_use": "tool_calls", "stop_sequence": "stop"}


def _blocks(content: Any) -> list[dict[str, Any]]:
    """OpenAI-style content (a string or a list of text / image_url parts) as Anthropic blocks."""
    if isinstance(content, str) or content is None:
        return [{"type": "text", "text": content}] if content else []
    out = []
    for part in content:
        if part.get("type") == "text" and part.get("text"):
            out.append({"type": "text", "text": part["text"]})
        elif part.get("type") == "image_url":
            url = part["image_url"]["url"]
            header, _, data = url.partition(",")
            media = header.removeprefix("data:").split(";")[0] or "image/png"
            out.append({"type": "image", "source": {"type": "base64", "media_type": media, "data": data}})
    return out


def _arguments(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text) if text.strip() else {}
    except (ValueError, RecursionError):  # ValueError: also a number past Python's int-digit limit
        return {"_unparsed_arguments": text}
    return value if isinstance(value, dict) else {"_arguments": value}


def convert(messages: list[dict[str, Any]], thinking: dict[tuple[str, ...], list[dict[str, Any]]]
            ) -> tuple[str, list[dict[str, Any]]]:
    """(system, messages) in the Anthropic format; roles alternate and tool results follow their calls."""
    system_parts: list[str] = []
    out: list[dict[str, Any]] = []

    def push(role: str, blocks: list[dict[str, Any]]) -> None:
        if not blocks:
            return
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": list(blocks)})

    for msg in messages:
        role = msg.get("role")
        if role == "system":
            system_parts.append(msg.get("content") or "")
        elif role == "user":
            push("user", _blocks(msg.get("content")))
        elif role == "tool":
            push("user", [{"type": "tool_result", "tool_use_id": msg["tool_call_id"],
                           "content": msg.get("content") or "(no output)"}])
        elif role == "assistant":
            calls = msg.get("tool_calls") or []
            key = tuple(c["id"] for c in calls)
            blocks = list(thinking.get(key, [])) if key else []
            blocks += _blocks(msg.get("content"))
            blocks += [{"type": "tool_use", "id": c["id"], "name": c["function"]["name"],
                        "input": _arguments(c["function"].get("arguments") or "")} for c in calls]
            push("assistant", blocks or [{"type": "text", "text": "(no text)"}])
    if out and out[0]["role"] != "user":
        out.insert(0, {"role": "user", "content": [{"type": "text", "text": "Begin."}]})
    return "\n\n".join(p for p in system_parts if p), out


class AnthropicBackend(Backend):
    provider = "anthropic"

    def __init__(self, cfg) -> None:
        self.thinking: dict[tuple[str, ...], list[dict[str, Any]]] = {}
        super().__init__(cfg)

    def make_client(self) -> Any:
        try:
            import anthropic
        except ImportError:
            raise UserError("the anthropic backend needs the anthropic SDK: "
                            "pip install 'automedbench[anthropic]'") from None
        return anthropic.Anthropic(api_key=self.api_key, base_url=self.cfg.base_url, max_retries=0,
                                   **self.watch.sdk_options(anthropic, self.cfg.timeout_s))

    def request(self, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None,
                json_schema: dict[str, Any] | None, max_tokens: int) -> Completion:
        cfg = self.cfg
        system, converted = convert(messages, self.thinking)
        kwargs: dict[str, Any] = {"model": cfg.model, "max_tokens": max_tokens, "messages": converted}
        if system:
            kwargs["system"] = system
        body = dict(cfg.extra_body)
        if cfg.thinking_tokens > 0:
            kwargs["thinking"] = {"type": "enabled", "budget_tokens": cfg.thinking_tokens}
        elif cfg.temperature is not None:  # only when asked for: newer models and SDKs take no sampling knobs
            body["temperature"] = cfg.temperature
        spec = [{"name": t["name"], "description": t.get("description", ""),
                 "input_schema": t.get("parameters", {"type": "object"})} for t in tools or []]
        if json_schema is not None:
            spec = [{"name": VERDICT_TOOL, "description": "Record the verdict for every rubric item.",
                     "input_schema": json_schema}]
            # extended thinking allows only tool_choice auto; the verdict is then parsed from text or the tool
            kwargs["tool_choice"] = {"type": "auto"} if cfg.thinking_tokens > 0 else {"type": "tool",
                                                                                    "name": VERDICT_TOOL}
        if spec:
            kwargs["tools"] = spec
        if body:
            kwargs["extra_body"] = body
        response = self.client.messages.create(**kwargs)
        text, reasoning, calls, kept, verdict = [], [], [], [], []
        for block in response.content:
            kind = getattr(block, "type", "")
            if kind == "text":
                text.append(block.text)
            elif kind == "thinking":
                reasoning.append(block.thinking)
                kept.append({"type": "thinking", "thinking": block.thinking, "signature": block.signature})
            elif kind == "redacted_thinking":
                kept.append({"type": "redacted_thinking", "data": block.data})
            elif kind == "tool_use":
                if json_schema is not None and block.name == VERDICT_TOOL:
                    verdict.append(json.dumps(block.input))
                else:
                    calls.append(ToolCall(block.id, block.name, json.dumps(block.input)))
        if calls and kept:
            self.thinking[tuple(c.id for c in calls)] = kept
        u = response.usage
        cached = getattr(u, "cache_read_input_tokens", 0) or 0
        written = getattr(u, "cache_creation_input_tokens", 0) or 0
        usage = Usage(u.input_tokens + cached + written, u.output_tokens, cached, written)
        reason = STOP_REASONS.get(response.stop_reason or "", response.stop_reason or "")
        if verdict:  # the structured verdict is the reply; any text beside it is reasoning, never parsed
            return Completion(verdict[-1] if len(verdict) == 1 else "\n".join(verdict),
                              "\n".join([*reasoning, *text]), calls, usage, reason)
        return Completion("\n".join(text), "\n".join(reasoning), calls, usage, reason)


class AnthropicChatAgent(ChatAgent):
    provider = "anthropic"
