"""Strict parsing of a model's structured reply: the verdict is the reply itself, as one JSON object.

A grader or judge reads agent text, and its reasoning may quote what that text asked for ("the answer
says to reply {"score": 1}; I will not"), before its verdict or after it. So no object is ever picked out
of prose: a verdict is (a) what a backend's structured output returned (an OpenAI `response_format`
json_schema, an Anthropic tool call), which arrives as one object, or (b) a reply that is one JSON object
and nothing else, optionally inside one code fence. `<think>` blocks are reasoning and are dropped first
(an unclosed one leaves nothing). Prose before or after the object, a second object, a duplicated key:
no verdict (the caller asks again, then grades or nulls as its rules say). Nor is a reply holding NaN,
Infinity or a number too large to be finite (Python's `json` accepts them; readers doing arithmetic crashed).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

MAX_REPLY_CHARS = 64_000  # a longer reply is not parsed
_THINK = re.compile(r"<think>.*?</think>", re.S)
_FENCED = re.compile(r"\A```[A-Za-z0-9_-]{0,16}[ \t]*\n(.*?)\n?```\Z", re.S)


class ReplyError(ValueError):
    """The reply is not one JSON object (or it fails the schema)."""


def _strip_reasoning(text: str) -> str:
    text = _THINK.sub("", text)
    if "<think>" in text:  # an unclosed reasoning block: whatever follows it is reasoning
        text = text[:text.index("<think>")]
    return text.strip()


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    data = dict(pairs)
    if len(data) != len(pairs):
        raise ReplyError("the reply's object repeats a key")
    return data


def _no_constant(name: str) -> Any:
    raise ReplyError(f"the reply holds {name}, which is no JSON number")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e999 parses as infinity
        raise ReplyError(f"the reply holds the number {text[:40]}, too large to be finite")
    return value


def final_json(text: str, *, max_chars: int = MAX_REPLY_CHARS) -> dict[str, Any]:
    """The reply as one JSON object (optionally in one fence, reasoning blocks dropped), or ReplyError."""
    if not isinstance(text, str):
        raise ReplyError("the reply is not text")
    if len(text) > max_chars:
        raise ReplyError(f"reply of {len(text)} characters exceeds {max_chars}")
    body = _strip_reasoning(text)
    fenced = _FENCED.match(body)
    if fenced:
        body = fenced.group(1).strip()
    try:
        data = json.loads(body, object_pairs_hook=_no_duplicates, parse_constant=_no_constant, parse_float=_finite)
    except ReplyError:
        raise
    except (ValueError, RecursionError):
        raise ReplyError("the reply is not one JSON object and nothing else (prose or a second object around "
                         "it is never read as the verdict)") from None
    if not isinstance(data, dict):
        raise ReplyError("the reply is not one JSON object and nothing else")
    return data


def require_keys(data: dict[str, Any], required: set[str], allowed: set[str]) -> None:
    """The schema's top level: every required key present and nothing else."""
    missing = sorted(required - set(data))
    if missing:
        raise ReplyError(f"the reply's object lacks {', '.join(missing)}")
    extra = sorted(set(data) - allowed)
    if extra:
        raise ReplyError(f"the reply's object has unexpected keys {', '.join(extra[:5])}")
