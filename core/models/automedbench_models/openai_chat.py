"""OpenAI chat-completions backend (official `openai` SDK): OpenAI, vLLM, SGLang, Ollama, LiteLLM, OpenRouter.

`base_url` picks the server; everything else is the standard chat-completions wire format with function
tools. Reasoning text is read from `reasoning_content` (DeepSeek, vLLM, SGLang) or `reasoning`
(OpenRouter, Ollama) when the server sends it.
"""

from __future__ import annotations

from typing import Any

from automedbench.api import AgentError, ToolCall, Usage, UserError

from .chat import Backend, ChatAgent, Completion

# Model families that take max_completion_tokens and no temperature.
REASONING_PREFIXES = ("o1", "o3", "o4", "gpt-5")


def function_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"type": "function", "function": {"name": t["name"], "description": t.get("description", ""),
                                              "parameters": t.get("parameters", {"type": "object"})}}
            for t in tools]


class OpenAIBackend(Backend):
    provider = "openai"

    def make_client(self) -> Any:
        try:
            import openai
        except ImportError:
            raise UserError("the openai backend needs the openai SDK: pip install 'automedbench[openai]'") from None
        return openai.OpenAI(api_key=self.api_key, base_url=self.cfg.base_url, max_retries=0,
                             **self.watch.sdk_options(openai, self.cfg.timeout_s))

    def request(self, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None,
                json_schema: dict[str, Any] | None, max_tokens: int) -> Completion:
        cfg = self.cfg
        bare = cfg.model.rsplit("/", 1)[-1]
        reasoning_model = bare.startswith(REASONING_PREFIXES)
        kwargs: dict[str, Any] = {"model": cfg.model, "messages": messages}
        kwargs["max_completion_tokens" if reasoning_model else "max_tokens"] = max_tokens
        if cfg.temperature is not None and not reasoning_model:
            kwargs["temperature"] = cfg.temperature
        if cfg.reasoning_effort:
            kwargs["reasoning_effort"] = cfg.reasoning_effort
        if tools:
            kwargs["tools"] = function_tools(tools)
            kwargs["tool_choice"] = "auto"
        if json_schema is not None and cfg.json_mode == "schema":
            kwargs["response_format"] = {"type": "json_schema",
                                         "json_schema": {"name": "verdict", "schema": json_schema, "strict": True}}
        elif json_schema is not None and cfg.json_mode == "object":
            kwargs["response_format"] = {"type": "json_object"}
        if cfg.extra_body:
            kwargs["extra_body"] = cfg.extra_body
        response = self.client.chat.completions.create(**kwargs)
        if not response.choices:
            raise AgentError(f"openai call to {cfg.model}: the server returned no choices")
        choice = response.choices[0]
        message = choice.message
        extra = message.model_extra or {}
        reasoning = extra.get("reasoning_content") or extra.get("reasoning") or ""
        calls = []
        for i, call in enumerate(message.tool_calls or []):
            function = getattr(call, "function", None)
            if function is None:
                continue
            calls.append(ToolCall(call.id or f"call_{i}", function.name or "", function.arguments or ""))
        usage = response.usage
        details = getattr(usage, "prompt_tokens_details", None)
        cached = (getattr(details, "cached_tokens", 0) or 0) if details is not None else 0
        return Completion(
            message.content or "", reasoning if isinstance(reasoning, str) else str(reasoning), calls,
            Usage(usage.prompt_tokens or 0, usage.completion_tokens or 0, cached) if usage else Usage(),
            choice.finish_reason or "")


class OpenAIChatAgent(ChatAgent):
    provider = "openai"
