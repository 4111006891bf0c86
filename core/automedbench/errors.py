"""Exceptions the CLI turns into one clear line, and the harness's own codes for how a run ended."""

from __future__ import annotations


class AutoMedBenchError(Exception):
    """Base of every error the harness raises on purpose."""


class UserError(AutoMedBenchError):
    """Bad input from the person at the keyboard: unknown names, missing files, malformed task files."""


class InfrastructureError(AutoMedBenchError):
    """The harness, sandbox or evaluator failed; the run is retryable and is not the agent's fault."""


class ProviderUnavailable(InfrastructureError):
    """An agent's model provider never answered (down, stalled, refusing) and the harness's own request to it failed
    too, before any reply of the model could have run anything: an outage, not the agent's doing, so the run is
    an infrastructure failure (retryable). Raised by an agent's `next_turn`; an outage after the model had answered
    stays the agent's failure (what it ran since could have caused it)."""


class SubmissionError(AutoMedBenchError):
    """The evaluator could not finish on this submission (past its memory, CPU-time or time limits): the
    submission is the agent's, so the run is an agent failure, never a retryable harness failure."""


class AgentError(AutoMedBenchError):
    """The agent backend failed (API down after retries, CLI crashed): the agent's failure."""


def did_you_mean(name: str, choices: list[str], most: int | None = None, list_all: str = "") -> str:
    """The nearest choice as a hint, then the known choices; past `most` of them, only the closest few and
    `list_all` (the command listing them all): sixty task ids after the one suggested buried it."""
    import difflib

    close = difflib.get_close_matches(name, choices, n=1)
    if not close and "/" not in name:  # `kidney` for `segmentation/kidney`: match the part after the track
        short = {c.rsplit("/", 1)[-1]: c for c in choices if "/" in c}
        near = difflib.get_close_matches(name, list(short), n=1)
        close = [short[near[0]]] if near else []
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    if most is not None and len(choices) > most:
        near = difflib.get_close_matches(name, choices, n=most, cutoff=0.5) or close
        rest = f"{len(choices) - len(near)} more" if near else f"{len(choices)} in all"
        return f"{hint}; known: {', '.join([*near, rest])} ({list_all} lists them all)"
    listing = ", ".join(sorted(choices)) or "none installed"
    return f"{hint}; known: {listing}"


# How a run ended (Result.end_reason). Stable strings: reports and sweeps group on them.
END_SUBMITTED = "submitted"
END_AGENT_STOPPED = "agent_stopped"
END_NO_TOOL_CALL = "no_tool_call"  # text-only replies after every allowed continue message
END_REPEATED_CALLS = "repeated_calls"  # the same call with the same answer, repeat_limit times in a row
END_TURN_LIMIT = "turn_limit"
END_TIME_LIMIT = "time_limit"
END_BREACH = "isolation_breach"
END_AGENT_ERROR = "agent_error"
END_INFRA_ERROR = "infrastructure_error"
END_PROVIDER_DOWN = "provider_unavailable"  # an infrastructure failure: the agent's model provider never answered
END_CANCELLED = "cancelled"
END_NO_AGENT = "no_agent"


class ContentRefused(Exception):
    """A model provider refused the content of a request (a content filter or a model refusal), not the
    request itself: for a grader, the text it was shown decides, not the harness. Model backends raise it
    from `complete_text`."""
