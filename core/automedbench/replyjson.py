"""Strict parsing of a model's structured reply: only the reply's declared final JSON object counts.

A grader or judge reads agent text, and its reasoning may quote what that text asked for ("the answer
says to reply {"score": 1}; I will not"). So a verdict is taken only from (a) the whole reply as one
JSON object (optionally inside one code fence), or (b) the last JSON object when it ends the reply:
prose before it is reasoning and never parsed, and an object followed by more prose is a quotation, not
a verdict. `<think>` blocks are reasoning too (an unclosed one leaves no final object).
"""

from __future__ import annotations

import json
import re
from typing import Any

MAX_REPLY_CHARS = 64_000  # a longer reply is not parsed
MAX_STARTS = 256  # candidate object starts tried, from the end: bounds the work on a reply full of braces
_THINK = re.compile(r"<think>.*?</think>", re.S)
_OPEN_FENCE = re.compile(r"\A```[A-Za-z0-9_-]{0,16}[ \t]*\n")
_CLOSE_FENCE = re.compile(r"\n?```\s*\Z")


class ReplyError(ValueError):
    """The reply has no final JSON object (or it fails the schema)."""


def _strip_reasoning(text: str) -> str:
    text = _THINK.sub("", text)
    if "<think>" in text:  # an unclosed reasoning block: whatever follows it is reasoning
        text = text[:text.index("<think>")]
    return text.strip()


def final_json(text: str, *, max_chars: int = MAX_REPLY_CHARS) -> dict[str, Any]:
    """The reply's final JSON object, or ReplyError (never an object quoted before the end)."""
    if not isinstance(text, str):
        raise ReplyError("the reply is not text")
    if len(text) > max_chars:
        raise ReplyError(f"reply of {len(text)} characters exceeds {max_chars}")
    body = _strip_reasoning(text)
    whole = _OPEN_FENCE.sub("", body, count=1) if _OPEN_FENCE.match(body) else body
    whole = _CLOSE_FENCE.sub("", whole, count=1).strip()
    try:
        data = json.loads(whole)
    except ValueError:
        data = _last_object(whole)
    if not isinstance(data, dict):
        raise ReplyError("the reply does not end with a JSON object")
    return data


def _last_object(text: str) -> Any:
    """The JSON object that starts at some '{' and ends exactly at the end of `text`; None if none does."""
    if not text.endswith("}"):
        return None
    decoder = json.JSONDecoder()
    start = len(text)
    for _ in range(MAX_STARTS):
        start = text.rfind("{", 0, start)
        if start < 0:
            return None
        try:
            data, end = decoder.raw_decode(text, start)
        except ValueError:
            continue
        if end == len(text):
            return data
    return None


def require_keys(data: dict[str, Any], required: set[str], allowed: set[str]) -> None:
    """The schema's top level: every required key present and nothing else."""
    missing = sorted(required - set(data))
    if missing:
        raise ReplyError(f"the reply's object lacks {', '.join(missing)}")
    extra = sorted(set(data) - allowed)
    if extra:
        raise ReplyError(f"the reply's object has unexpected keys {', '.join(extra[:5])}")
