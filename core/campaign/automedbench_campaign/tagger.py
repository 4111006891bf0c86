"""Optional LLM tagger: asks a text-completion backend to assign E1–E5 from the recorded run.

Any judge backend can serve if it offers `complete(system, prompt) -> str` (the `CompletionBackend`
protocol). The reply must be JSON: {"codes": [{"code": "E3", "evidence_turns": [7], "rationale": "..."}]}.
Codes outside E1–E5 and unparsable replies are reported as an H-TAGGER code, never guessed. Everything the
agent wrote (plan, words, code, output, tool results, file names in the evaluator's reasons) reaches the
prompt fenced or quoted as the LLM judge's is (`agenttext`), so it cannot pass for the harness's lines.
"""

from __future__ import annotations

import json
from typing import Any, Protocol, runtime_checkable

from automedbench.api import (
    AGENT_TEXT_NOTE,
    TAXONOMY,
    CodeContext,
    FiredCode,
    ReplyError,
    fence_agent_text,
    final_json,
    quote_line,
)

MAX_FIELD = 600
MAX_TURNS = 200  # evidence turns read from one code of a reply


@runtime_checkable
class CompletionBackend(Protocol):
    name: str

    def complete(self, system: str, prompt: str) -> str:
        """Return the model's text reply."""


SYSTEM = (
    "You label failed or flawed runs of an autonomous medical-AI research agent with post-run error codes. "
    "Codes are diagnostic only. A run may have several codes or none. Codes:\n"
    + "\n".join(f"{c.code} {c.name}: {c.definition}" for c in TAXONOMY.values())
    + "\n" + AGENT_TEXT_NOTE
    + '\nReply with JSON only: {"codes": [{"code": "E<n>", "evidence_turns": [<turn>], "rationale": "<why>"}]}'
)


def _clip(text: Any) -> str:
    text = str(text or "")
    return text if len(text) <= MAX_FIELD else text[:MAX_FIELD // 2] + " [...] " + text[-MAX_FIELD // 2:]


def _num(value: Any) -> str:
    """A harness-recorded number as is; anything else as one quoted line."""
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else quote_line(value, 40)


def _agent(text: Any) -> str:
    """Agent-written text, clipped and fenced (the fence's nonce is a hash of the text: it cannot be closed early)."""
    return fence_agent_text(_clip(text))


def render_prompt(ctx: CodeContext, max_events: int = 120) -> str:
    """The run as the tagger sees it: brief facts, each turn's action and outcome, the evaluator's verdicts."""
    result = ctx.result
    lines = [f"task: {result.header.task} (track {result.header.track}, tier {result.header.tier})",
             f"run ended: {result.end_reason}; submitted: {result.submission.submitted}"]
    if ctx.plan_md:
        lines.append("plan.md:\n" + _agent(ctx.plan_md))
    lines.append("turns:")
    for event in ctx.events[:max_events]:
        turn = _num(event.get("turn"))
        if event.get("type") == "assistant":
            lines.append(f"[turn {turn}] agent:\n{_agent(event.get('content'))}")
        elif event.get("type") == "tool" and event.get("name") == "execute_code":
            lines.append(f"[turn {turn}] execute_code exit={_num(event.get('exit_code'))} "
                         f"cases_with_outputs={json.dumps(event.get('cases_with_outputs'))[:300]}\n"
                         f"code:\n{_agent(event.get('code'))}\nstdout:\n{_agent(event.get('stdout'))}\n"
                         f"stderr:\n{_agent(event.get('stderr'))}")
        elif event.get("type") == "tool":
            lines.append(f"[turn {turn}] {quote_line(event.get('name'), 60)}:\n{_agent(event.get('result'))}")
    bad = [f"{quote_line(c.case_id, 80)}: {'present' if c.present else 'missing'}, "
           f"{'valid' if c.valid else 'invalid'} {quote_line('; '.join(c.reasons), 300)}"
           for c in result.cases if not (c.present and c.valid)]
    lines.append(f"evaluator: {len(result.cases)} expected case(s); problems: {'; '.join(bad) or 'none'}")
    return "\n".join(lines)


# The reply's schema, for backends that hold a reply to one (OpenAI json_schema, Anthropic a forced tool)
TAG_SCHEMA = {"type": "object", "additionalProperties": False, "required": ["codes"], "properties": {"codes": {
    "type": "array", "items": {"type": "object", "additionalProperties": False,
                               "required": ["code", "rationale", "evidence_turns"],
                               "properties": {"code": {"type": "string", "enum": ["E1", "E2", "E3", "E4", "E5"]},
                                              "rationale": {"type": "string"},
                                              "evidence_turns": {"type": "array", "items": {"type": "integer"}}}}}}}


def parse_reply(text: str, source: str) -> list[FiredCode]:
    """The tagger's codes from the reply as one JSON object only (`replyjson`: an object quoted from the
    trajectory before, after or inside the reasoning is never read as the tagger's answer)."""
    try:
        data = final_json(text)
        entries = data["codes"]
        if not isinstance(entries, list):
            raise TypeError("'codes' is not a list")
    except (ReplyError, KeyError, TypeError) as exc:
        return [FiredCode("H-TAGGER", f"unparsable tagger reply ({type(exc).__name__}): {_clip(text)}",
                          source=source)]
    fired = []
    for entry in entries:
        code = str(entry.get("code", "")).strip().upper() if isinstance(entry, dict) else ""
        if code not in TAXONOMY:
            fired.append(FiredCode("H-TAGGER", f"tagger proposed unknown code {code or entry!r}", source=source))
            continue
        listed = entry.get("evidence_turns", [])
        turns = [int(t) for t in (listed if isinstance(listed, list) else [])[:MAX_TURNS]
                 if isinstance(t, int | float) and not isinstance(t, bool) and 0 <= t < 1 << 31 and t == int(t)]
        fired.append(FiredCode(code, str(entry.get("rationale", "")).strip() or "(no rationale)", "",
                               sorted(set(turns)), source))
    return fired


class LLMTagger:
    def __init__(self, backend: CompletionBackend, max_events: int = 120) -> None:
        self.backend = backend
        self.max_events = max_events

    @property
    def source(self) -> str:
        return f"llm:{getattr(self.backend, 'name', type(self.backend).__name__)}"

    def tag(self, ctx: CodeContext) -> list[FiredCode]:
        try:
            reply = self.backend.complete(SYSTEM, render_prompt(ctx, self.max_events))
        except Exception as exc:  # an unavailable backend leaves the detectors' codes in place
            return [FiredCode("H-TAGGER", f"tagger backend failed: {type(exc).__name__}: {exc}",
                              source=self.source)]
        return parse_reply(reply, self.source)


class ScriptedBackend:
    """A fixed reply (or a function of the prompt): deterministic, offline, for tests and dry runs."""

    name = "scripted"

    def __init__(self, reply: Any) -> None:
        self.reply = reply
        self.prompts: list[str] = []

    def complete(self, system: str, prompt: str) -> str:
        self.prompts.append(prompt)
        return self.reply(prompt) if callable(self.reply) else str(self.reply)


class _ModelText:
    """A registered model backend seen through the tagger's `complete(system, prompt)` interface."""

    def __init__(self, name: str, backend: Any) -> None:
        self.name = name
        self.backend = backend

    def complete(self, system: str, prompt: str) -> str:
        from automedbench.api import structured_reply

        return structured_reply(self.backend, system, prompt, TAG_SCHEMA)


def tagger_from_registry(registry: Any, name: str, options: dict[str, Any] | None = None) -> LLMTagger:
    """A tagger over the registered model backend `name` (openai, anthropic, or a third party's)."""
    from automedbench.api import get_model

    return LLMTagger(_ModelText(name, get_model(name, dict(options or {}), role="tagger", reg=registry)))
