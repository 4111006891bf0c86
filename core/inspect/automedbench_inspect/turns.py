"""What inspect's model said before a sandbox call: read from the sample's transcript, so any agent (react, a
custom loop, an agent bridge) gets its text, reasoning and tokens into the AutoMedBench trajectory without
being changed. Each model event is carried once, into the first call after it; a call with no new model event
(a second call of one reply, a solver's own call) carries nothing."""

from __future__ import annotations

import threading
from typing import Any

from .bridge import Turn

MAX_TEXT = 200_000  # characters of a reply or its reasoning kept in the turn
_seen = threading.local()  # ids of the model events already carried, per event loop thread


def _text(message: Any) -> tuple[str, str]:
    """(the reply's text, its reasoning) from an inspect assistant message."""
    content = getattr(message, "content", "")
    if isinstance(content, str):
        return content[:MAX_TEXT], ""
    texts, reasoning = [], []
    for block in content or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            texts.append(str(getattr(block, "text", "")))
        elif kind == "reasoning":
            reasoning.append(str(getattr(block, "reasoning", "") or getattr(block, "summary", "") or ""))
    return "\n".join(texts)[:MAX_TEXT], "\n".join(reasoning)[:MAX_TEXT]


def model_turn() -> Turn:
    """The latest model event of the current sample not yet carried, as a Turn (empty when there is none)."""
    try:
        from inspect_ai.event import ModelEvent
        from inspect_ai.log import transcript

        events = transcript().history.events_since_last(ModelEvent)
    except Exception:  # outside a sample, or a transcript whose history is gone: nothing to carry
        return Turn()
    event = events[0] if events and isinstance(events[0], ModelEvent) else None
    if event is None:
        return Turn()
    seen: set[str] = getattr(_seen, "ids", None) or set()
    _seen.ids = seen
    key = str(getattr(event, "uuid", None) or getattr(event, "id", None) or id(event))
    if key in seen:
        return Turn()
    seen.add(key)
    output = event.output
    content, reasoning = _text(output.message) if output and output.choices else ("", "")
    usage = output.usage if output else None
    return Turn(content, reasoning, int(getattr(usage, "input_tokens", 0) or 0),
                int(getattr(usage, "output_tokens", 0) or 0), int(getattr(usage, "input_tokens_cache_read", 0) or 0),
                str(event.model))
