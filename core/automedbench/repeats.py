"""Noticing an agent that repeats itself: the same tool call, answered the same way, again and again.

A weak model (0.5 B, measured) copied the corrective message's example call 22 times until the time limit and
nothing said so. A streak counts consecutive calls with the same tool, the same arguments (as JSON, so spacing
does not matter) and the same outcome (exit code, or the refusal's kind); a call whose outcome changed (a retried
download that now succeeds) starts a new streak. The output is not compared: nothing of a call outlives it, so
the same call right after itself differs only by chance or the clock, and sandboxes put per-call scratch names
in the workspace (a listing of it differs every time). From `NOTICE_AT` on the agent is told in the tool result
and the trajectory gets a `repeated_call` event (the error-code detectors read it); at the run's
`repeat_limit` (0: never) the run stops.
"""

from __future__ import annotations

import hashlib
import json

from attrs import define

# The call's count within its streak from which the agent is told (the third identical call in a row).
NOTICE_AT = 3
# Default bound: the run stops at this many identical calls in a row (RunOptions.repeat_limit; 0 never stops).
DEFAULT_LIMIT = 10


def call_key(name: str, arguments: str, outcome: str) -> str:
    """A digest of a call and its outcome; arguments that parse as JSON are compared by value."""
    try:
        args = json.dumps(json.loads(arguments), sort_keys=True, ensure_ascii=False) if arguments.strip() else "{}"
    except (ValueError, RecursionError):
        args = arguments
    digest = hashlib.sha256()
    for part in (name, args, outcome):
        digest.update(part.encode("utf-8", "replace") + b"\0")
    return digest.hexdigest()


@define
class RepeatWatch:
    """The current streak of identical calls with the same outcome."""

    key: str = ""
    streak: int = 0

    def see(self, name: str, arguments: str, outcome: str) -> int:
        """Count this call into the streak (or start a new one) and return its place in it (1 = new)."""
        key = call_key(name, arguments, outcome)
        self.streak = self.streak + 1 if key == self.key else 1
        self.key = key
        return self.streak


# How the notice begins under a tool's answer (an agent bridged to another loop finds it there).
NOTICE_MARK = "\n\nNOTE from the harness: this is the same call"


def notice(streak: int, limit: int) -> str:
    """What the agent is told under the answer of a repeated call."""
    stop = (f" The run stops at {limit} identical calls in a row." if limit else "")
    return (f"{NOTICE_MARK} with the same outcome {streak} times in a row; "
            f"repeating it changes nothing. Do the next step of the task instead (write code that makes "
            f"progress, or call submit_results when the outputs are done).{stop}")
