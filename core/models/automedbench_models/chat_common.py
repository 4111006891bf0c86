"""What the OpenAI and Anthropic chat backends share: retries, tool-argument repair, context truncation.

Context rule (documented in the README): the system message and the kickoff are always kept; the last
`keep_turns` turns (an assistant message with the tool results that answer it) are kept whole; older
tool outputs are replaced by a one-line stub; if the estimate (characters / 4) still exceeds
`context_window - max_tokens - margin`, the oldest turns are dropped whole (never splitting a tool call
from its result) and the kickoff says how many were left out.
"""

from __future__ import annotations

import email.utils
import json
import random
import re
import time
from collections.abc import Callable
from typing import Any, TypeVar

from automedbench.api import AgentError, ContentRefused

T = TypeVar("T")
RETRY_STATUS = {408, 409, 429, 500, 502, 503, 504, 529}
CHARS_PER_TOKEN = 4
CONTEXT_MARGIN = 1024
ELIDED = "[tool output elided to fit the context window; re-run the command if you need it]"


# ------------------------------------------------------------------ retries


def retry_after(exc: BaseException) -> float | None:
    """Seconds from a Retry-After (or retry-after-ms) header of an SDK error, if the server sent one."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value) if value else None
        return max(0.0, parsed.timestamp() - time.time()) if parsed else None


def is_retryable(exc: BaseException) -> bool:
    status = getattr(exc, "status_code", None)
    if status is not None:
        return int(status) in RETRY_STATUS
    if isinstance(exc, json.JSONDecodeError):  # an HTTP 200 whose body is not JSON: a proxy or gateway hiccup
        return True
    name = type(exc).__name__
    return name in ("APITimeoutError", "APIConnectionError") or isinstance(exc, (TimeoutError, ConnectionError))


# How servers word "the prompt does not fit": OpenAI (code context_length_exceeded), vLLM and
# llama-cpp-python ("This model's maximum context length is N tokens"), llama.cpp's server
# (exceed_context_size_error, "exceeds the available context size"), Ollama ("input length exceeds the
# context length"), Anthropic ("prompt is too long"), LiteLLM / TGI ("Input validation error ... tokens").
OVERFLOW_TEXT = re.compile(
    r"context[_ ]length|context[_ ](?:window|size|limit)|exceed_context|maximum context|prompt is too long|"
    r"prompt too long|too many tokens|input is too long|reduce the length of the (?:messages|prompt)", re.I)
OVERFLOW_LIMIT = re.compile(
    r"(?:maximum context length is|context window of|context size of|context length of|n_ctx\W{0,4}|"
    r">|must be <=)\s*(\d{3,8})", re.I)
OVERFLOW_STATUS = {400, 413, 422}


class ContextOverflow(AgentError):
    """The server refused the request because the prompt (plus max_tokens) exceeds its context."""

    def __init__(self, message: str, limit: int | None) -> None:
        super().__init__(message)
        self.limit = limit


def context_overflow(exc: BaseException) -> ContextOverflow | None:
    """A ContextOverflow if `exc` is a server's context-length refusal (with the limit if it names one)."""
    status = getattr(exc, "status_code", None)
    if status is not None and int(status) not in OVERFLOW_STATUS:
        return None
    text = " ".join(str(x) for x in (getattr(exc, "message", ""), getattr(exc, "body", ""), exc) if x)[:4000]
    if not OVERFLOW_TEXT.search(text):
        return None
    found = OVERFLOW_LIMIT.search(text)
    return ContextOverflow(describe(exc), int(found.group(1)) if found else None)


REFUSAL_TEXT = re.compile(r"content[ _-]?(?:policy|filter|management)|safety (?:system|policy)|flagged as|"
                          r"responsible ?ai|invalid_prompt", re.I)
REFUSAL_FINISH = {"content_filter", "refusal", "safety"}


def content_refusal(exc: BaseException) -> ContentRefused | None:
    """A ContentRefused if `exc` is a provider's refusal of the prompt's content (a 400 naming a content
    policy or filter); None for every other error. The SDK's error may be wrapped (the retry loop raises
    an AgentError from it): the chain of causes is followed."""
    seen = 0
    while exc is not None and getattr(exc, "status_code", None) is None and seen < 8:
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    if exc is None:
        return None
    status = getattr(exc, "status_code", None)
    if status is None or int(status) != 400:
        return None
    text = " ".join(str(x) for x in (getattr(exc, "message", ""), getattr(exc, "body", ""), exc) if x)[:4000]
    return ContentRefused(describe(exc)) if REFUSAL_TEXT.search(text) else None


def describe(exc: BaseException) -> str:
    """An SDK's or HTTP library's error in one line for the run's record, with the credentials of a URL it quotes
    (httpx names the request's URL: a base_url's user:password or ?api_key=) masked."""
    from automedbench.engine import mask_value  # at an error only: no click import on every start

    status = getattr(exc, "status_code", None)
    message = mask_value("message", getattr(exc, "message", None) or str(exc))
    return f"{type(exc).__name__}{f' {status}' if status else ''}: {message}"[:400]


def with_retries(call: Callable[[], T], *, attempts: int, backoff_s: float, max_backoff_s: float,
                 what: str, sleep: Callable[[float], None] = time.sleep,
                 on_retry: Callable[[int, float, BaseException], None] | None = None,
                 stopped: Callable[[], bool] = lambda: False) -> T:
    """Call, retrying 429/5xx/timeouts with exponential back-off (Retry-After wins when given); no retry once
    `stopped()` (the provider was declared down while the call or the back-off ran)."""
    for attempt in range(attempts + 1):
        try:
            return call()
        except Exception as exc:
            overflow = context_overflow(exc)
            if overflow is not None:
                raise overflow from exc
            if not is_retryable(exc) or attempt == attempts or stopped():
                tries = f" after {attempt + 1} attempts" if attempt else ""
                raise AgentError(f"{what} failed{tries}: {describe(exc)}") from exc
            wait = retry_after(exc)
            if wait is None:
                wait = backoff_s * (2 ** attempt) + random.uniform(0, backoff_s / 2)
            wait = min(wait, max_backoff_s)
            if on_retry:
                on_retry(attempt + 1, wait, exc)
            sleep(wait)
            if stopped():
                raise AgentError(f"{what} failed after {attempt + 1} attempts: {describe(exc)}") from exc
    raise AssertionError("unreachable")


# ------------------------------------------------------------------ tool arguments


def repair_json(text: str) -> str:
    """Return `text` if it parses; else try the usual model slips (raw newlines/tabs in strings,
    trailing commas, a code fence around the object). Unrepairable text comes back unchanged so the
    runner can report it to the model."""
    if not text.strip():
        return text
    try:
        json.loads(text)
        return text
    except (ValueError, RecursionError):  # ValueError: also a number past Python's int-digit limit
        pass
    candidate = text.strip()
    if candidate.startswith("```"):
        candidate = candidate.strip("`").removeprefix("json").strip()
    candidate = _repair_pass(candidate)
    try:
        json.loads(candidate)
        return candidate
    except (ValueError, RecursionError):
        return text


_NEXT_CHAR = re.compile(r"\s*(.?)", re.S)  # the first character after whitespace ("" at the end)


def _repair_pass(text: str) -> str:
    """One walk over the text: escape raw control characters inside strings, drop trailing commas."""
    out, in_string, escaped = [], False, False
    for i, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
            elif ch in "\n\r\t":
                ch = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}[ch]
        elif ch == '"':
            in_string = True
        elif ch == "," and _NEXT_CHAR.match(text, i + 1).group(1) in ("}", "]"):
            continue  # a trailing comma (the lookahead skips whitespace only: linear over the text)
        out.append(ch)
    return "".join(out)


# ------------------------------------------------------------------ context


def estimate_tokens(messages: list[dict[str, Any]]) -> int:
    chars = 0
    for msg in messages:
        chars += 16 + len(str(msg.get("content") or ""))
        for call in msg.get("tool_calls") or []:
            chars += 16 + len(call["function"].get("arguments") or "")
    return chars // CHARS_PER_TOKEN


def _turns(messages: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Group everything after system + kickoff into turns: an assistant message and what follows it."""
    groups: list[list[dict[str, Any]]] = []
    for msg in messages:
        if msg.get("role") == "assistant" or not groups:
            groups.append([msg])
        else:
            groups[-1].append(msg)
    return groups


def fit_context(messages: list[dict[str, Any]], *, context_window: int, max_tokens: int,
                keep_turns: int) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Apply the context rule; returns the messages to send and what was elided/dropped."""
    budget = max(1024, context_window - max_tokens - CONTEXT_MARGIN)
    stats = {"elided": 0, "dropped": 0}
    if estimate_tokens(messages) <= budget:
        return messages, stats
    head, rest = messages[:2], messages[2:]
    turns = _turns(rest)
    old, recent = turns[:-keep_turns] if keep_turns else turns, turns[-keep_turns:] if keep_turns else []
    trimmed = []
    for turn in old:
        new_turn = []
        for msg in turn:
            if msg.get("role") == "tool" and msg.get("content") != ELIDED:
                msg = {**msg, "content": ELIDED}
                stats["elided"] += 1
            new_turn.append(msg)
        trimmed.append(new_turn)
    turns = trimmed + recent

    def assemble() -> list[dict[str, Any]]:
        out = [dict(m) for m in head]
        if stats["dropped"] and len(out) > 1:
            out[1]["content"] = (f"{out[1].get('content') or ''}\n\n[{stats['dropped']} earlier turn(s) were "
                                 "left out to fit the context window; files you wrote are still there.]")
        return out + [m for turn in turns for m in turn]

    result = assemble()
    while estimate_tokens(result) > budget and len(turns) > 1:
        turns.pop(0)
        stats["dropped"] += 1
        result = assemble()
    return result, stats


def tool_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)
