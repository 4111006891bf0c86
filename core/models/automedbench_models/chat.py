"""Chat-model agents: a provider backend (OpenAI-compatible or Anthropic) behind the Agent interface.

The backend turns OpenAI-style messages into one provider call and back; this module adds what every
provider needs: the context rule, retries, continuation after a reply cut off by the token limit,
argument repair, per-call token and cost accounting, and what open-weight servers need: a retry with a
smaller context after a context-overflow refusal, and (opt-in) tool calls recovered from the reply text.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from typing import Any

from attrs import Factory, define
from automedbench.api import (
    TOOLS,
    Agent,
    AgentContext,
    AgentError,
    AgentTurn,
    ContentRefused,
    ModelConfig,
    ProviderUnavailable,
    ToolCall,
    Usage,
    UserError,
    get_model,
)

from .chat_common import (
    CHARS_PER_TOKEN,
    REFUSAL_FINISH,
    ContextOverflow,
    content_refusal,
    estimate_tokens,
    fit_context,
    repair_json,
    with_retries,
)
from .pricing import config_prices
from .providerwatch import ProviderDown, ProviderWatch
from .textcalls import TextCall, find_text_calls

TRUNCATED_NUDGE = ("Your reply was cut off at the output-token limit before any tool call. Reply more "
                   "briefly: state the next step in a sentence and make one tool call.")


@define
class Completion:
    """One provider reply, normalised."""

    content: str = ""
    reasoning: str = ""
    tool_calls: list[ToolCall] = Factory(list)
    usage: Usage = Factory(Usage)
    finish_reason: str = ""


class Backend(ABC):
    """One provider's wire format, through its official SDK. Subclasses build the client lazily, handing the SDK
    `self.watch.sdk_options(sdk, timeout_s)` (its HTTP client and timeout) so a provider that stops answering ends
    a call in about `outage_after` seconds (`ProviderDown`), not `timeout_s` x attempts."""

    provider: str = ""

    def __init__(self, cfg: ModelConfig) -> None:
        self.cfg = cfg
        self.api_key = cfg.api_key()  # fail fast, before any run folder exists
        self.prices = config_prices(cfg)
        self.retries: list[dict[str, Any]] = []
        self.watch = ProviderWatch(cfg.outage_after)
        self.sleep = self.watch.pause  # time.sleep, cut short when the provider is declared down
        self._client: Any = self.make_client()  # no network yet; a missing SDK fails here, not mid-run
        self.watch.base_url = cfg.base_url or str(getattr(self._client, "base_url", "") or "")

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = self.make_client()
        return self._client

    @abstractmethod
    def make_client(self) -> Any:
        """The SDK client (max_retries=0: retries are ours, so they are counted and bounded)."""

    @abstractmethod
    def request(self, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None,
                json_schema: dict[str, Any] | None, max_tokens: int) -> Completion:
        """One raw call (no retries). `json_schema` asks for a structured JSON reply in `content`."""

    def complete(self, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None = None,
                 json_schema: dict[str, Any] | None = None, max_tokens: int | None = None) -> Completion:
        def note(attempt: int, wait: float, exc: BaseException) -> None:
            self.retries.append({"attempt": attempt, "wait_s": round(wait, 3), "error": type(exc).__name__,
                                 "status": getattr(exc, "status_code", None)})

        what = f"{self.provider} call to {self.cfg.model}"
        self.watch.begin()
        try:
            return with_retries(
                lambda: self.request(messages, tools=tools, json_schema=json_schema,
                                     max_tokens=max_tokens or self.cfg.max_tokens),
                attempts=self.cfg.max_retries, backoff_s=self.cfg.backoff_s, max_backoff_s=self.cfg.max_backoff_s,
                what=what, sleep=self.sleep, on_retry=note, stopped=self.watch.stopped)
        except ContextOverflow:
            raise
        except AgentError as exc:
            self.watch.end()  # no probe of the watch's own beside the one `outage` may send
            down = self.watch.outage()
            if down is None:
                raise
            raise ProviderDown(f"{what}: {down}", down.never_answered) from exc
        finally:
            self.watch.end()

    def complete_text(self, system: str, prompt: str, max_tokens: int | None = None) -> str:
        """Plain completion (no tools): the text reply to one system + user message, with retries.
        A refusal of the prompt's content (an error naming a content policy, or a reply that finished
        with a content filter or refusal) raises ContentRefused."""
        return self._text([{"role": "system", "content": system}, {"role": "user", "content": prompt}], max_tokens)

    def _text(self, messages: list[dict[str, Any]], max_tokens: int | None,
              schema: dict[str, Any] | None = None) -> str:
        try:
            reply = self.complete(messages, json_schema=schema, max_tokens=max_tokens)
        except Exception as exc:
            refused = content_refusal(exc)
            if refused is not None:
                raise refused from exc
            raise
        if reply.finish_reason in REFUSAL_FINISH:
            raise ContentRefused(f"the model stopped with finish reason {reply.finish_reason!r}")
        return reply.content

    def complete_structured(self, system: str, prompt: str, schema: dict[str, Any],
                            max_tokens: int | None = None) -> str:
        """`complete_text` with the reply held to `schema` (OpenAI `response_format` json_schema where
        json_mode is schema, Anthropic a forced tool): the reply is the object, never prose around it."""
        return self._text([{"role": "system", "content": system}, {"role": "user", "content": prompt}],
                          max_tokens, schema)

    def close(self) -> None:
        if self._client is not None and hasattr(self._client, "close"):
            self._client.close()
        self._client = None


# What a model provider plugin implements (registered through `automedbench_register_model_backends`).
ModelBackend = Backend


# The one way to get a model backend (the model contract, automedbench.models); this name stays for callers.
make_backend = get_model


def add_usage(a: Usage, b: Usage) -> Usage:
    return Usage(a.prompt + b.prompt, a.completion + b.completion, a.cached + b.cached,
                 a.cache_write + b.cache_write)


class ChatAgent(Agent):
    """`--agent openai|anthropic`: the model decides every turn through the two tools."""

    provider = ""

    def __init__(self, provider: str = "", **options: Any) -> None:
        self.provider = provider or self.provider
        if not self.provider:
            raise UserError("the chat agent needs provider=NAME (a model backend: see `automedbench plugins`)")
        self.backend = make_backend(self.provider, dict(options))
        self.cfg = self.backend.cfg
        self.name = f"{self.provider}:{self.cfg.model}"
        self.continues = self.cfg.continues
        self.tools: list[dict[str, Any]] = TOOLS
        self.context_stats: dict[str, int] = {"elided": 0, "dropped": 0}
        self.window = self.cfg.context_window  # shrinks when a server says the context is smaller
        self.max_tokens = self.cfg.max_tokens
        self.overflows: list[dict[str, Any]] = []
        self.recovered = 0
        self._reported_retries = 0

    def start(self, context: AgentContext) -> None:
        self.tools = context.tools
        self._check_fit(context)

    def _check_fit(self, context: AgentContext) -> None:
        """A prompt that cannot fit the declared context window is the user's setting, refused before turn 1."""
        first = [{"role": "system", "content": context.brief}, {"role": "user", "content": context.kickoff}]
        prompt = estimate_tokens(first) + len(json.dumps(self.tools)) // CHARS_PER_TOKEN
        if prompt + self.max_tokens > self.window:
            raise UserError(f"the first prompt needs about {prompt} tokens (brief, kickoff and tool schemas) plus "
                            f"max_tokens {self.max_tokens}, but context_window is {self.window}: raise "
                            f"context_window (and the server's context size, e.g. N_CTX) to at least "
                            f"{prompt + self.max_tokens + 1024} or lower max_tokens")

    def next_turn(self, messages: list[dict[str, Any]]) -> AgentTurn:
        try:
            return self._turn(messages)
        except ProviderDown as exc:
            if exc.never_answered:  # nothing the model said has run: an outage, not the agent's doing
                raise ProviderUnavailable(str(exc)) from exc
            raise  # after an answer, as any model call failing after its retries: the agent's failure

    def _turn(self, messages: list[dict[str, Any]]) -> AgentTurn:
        keep = self.cfg.keep_turns
        for attempt in range(self.cfg.overflow_retries + 1):
            sent, stats = fit_context(messages, context_window=self.window, max_tokens=self.max_tokens,
                                      keep_turns=keep)
            self.context_stats = stats
            try:
                usage, partial, reply, found = self._complete(sent)
                break
            except ContextOverflow as exc:
                last = attempt == self.cfg.overflow_retries
                if not last:
                    self._shrink(exc, estimate_tokens(sent))
                    keep = max(1, keep // 2)
                # every refusal is recorded (the runner drains these even when the last one ends the run)
                self.overflows.append({"attempt": attempt + 1, "error": str(exc)[:300], "limit": exc.limit,
                                       "context_window": self.window, "max_tokens": self.max_tokens,
                                       "keep_turns": keep, "final": last})
                if last:
                    raise
        for call in reply.tool_calls:
            fixed = repair_json(call.arguments)
            if fixed != call.arguments:
                call.error, call.arguments = "arguments repaired (raw control characters / trailing commas)", fixed
        if self.cfg.text_tool_calls and not reply.tool_calls:
            reply.tool_calls = self._recover(self._read(reply.content) if found is None else found)
            if not reply.tool_calls and partial:  # a call cut off at the limit, finished in the continuation
                reply.tool_calls = self._recover(self._read("".join([*partial, reply.content])))
        cost = self.backend.prices.cost(self.cfg.model, usage)
        content = "\n".join(p for p in [*partial, reply.content] if p)
        return AgentTurn(content, reply.tool_calls, reply.reasoning, usage.prompt, usage.completion, usage.cached,
                         cost.usd, reply.finish_reason)

    def _complete(self, sent: list[dict[str, Any]]) -> tuple[Usage, list[str], Completion, list[TextCall] | None]:
        """One reply, continued while it is cut off at the token limit before any tool call; with it the text
        calls already read from the last reply (None when it was not read), so it is parsed once."""
        usage, partial, extra = Usage(), [], []
        for attempt in range(self.cfg.length_retries + 1):
            reply = self.backend.complete(sent + extra, tools=self.tools, max_tokens=self.max_tokens)
            usage = add_usage(usage, reply.usage)
            found = None
            if reply.finish_reason == "length" and not reply.tool_calls and self.cfg.text_tool_calls:
                found = self._read(reply.content)
            # a call written in the text before the limit is a call: the reply is not continued
            cut = reply.finish_reason == "length" and not reply.tool_calls and not found
            if cut and attempt < self.cfg.length_retries:
                partial.append(reply.content)
                extra += [{"role": "assistant", "content": reply.content or "(cut off)"},
                          {"role": "user", "content": TRUNCATED_NUDGE}]
                continue
            break
        return usage, partial, reply, found

    def _shrink(self, exc: ContextOverflow, sent_tokens: int) -> None:
        """Smaller context for this and later turns: the server's stated limit, else 70% of what failed."""
        tried = min(self.window, sent_tokens + self.max_tokens)
        self.window = max(1024, exc.limit if exc.limit and exc.limit < tried else int(tried * 0.7))
        self.max_tokens = min(self.max_tokens, max(256, self.window // 4))

    def _names(self) -> frozenset[str]:
        return frozenset(str(t.get("name")) for t in self.tools)

    def _read(self, text: str) -> list[TextCall]:
        """The calls to offered tools written in a reply's text."""
        return find_text_calls(text, self._names())

    def _recover(self, found_calls: list[TextCall]) -> list[ToolCall]:
        """Calls read from a reply's text, as tool calls numbered for the run."""
        calls = []
        for found in found_calls:
            self.recovered += 1
            calls.append(ToolCall(f"text_{self.recovered:03d}", found.name, found.arguments,
                                  source=f"text:{found.source}"))
        return calls

    def drain_events(self) -> list[dict[str, Any]]:
        """Retries and context trimming of the last turn, for the trajectory (the runner cannot see them)."""
        events: list[dict[str, Any]] = [{"type": "api_retry", **r}
                                        for r in self.backend.retries[self._reported_retries:]]
        self._reported_retries = len(self.backend.retries)
        events += [{"type": "context_overflow", **o} for o in self.overflows]
        self.overflows = []
        if any(self.context_stats.values()):
            events.append({"type": "context_trimmed", **self.context_stats})
        return events

    def close(self) -> None:
        self.backend.close()
