"""One view of a trajectory for everything that reads it after a run: the rules judge, the error-code
detectors (generic and the tracks'), the harness's pilot tracker.

It holds the one definition of the two moments the S3 rubric turns on (paper, Table 7: "pilot patient
tested before batch"; 0 for "batch run immediately"):

- the **batch** is the first execute_code call after which more than one case has outputs, whatever its
  exit code and whoever reported it: from then on the cohort is being processed;
- a **pilot** is a successful execute_code call the harness itself observed (not one a CLI agent
  reported), in a turn before the batch, that left exactly one case with outputs.

An installed agent's session call (`session`: the whole program ran in it) is no call of the work: the steps
inside it that the harness observed are the calls (`observed.ObservedSteps`).
  With the harness's contract checks (`pilot_checks.json`) the run's pilot is the first such call whose
  output passed the track's checker; for a run recorded before those checks, the first output call if
  it is a pilot.
"""

from __future__ import annotations

import re
from functools import cached_property
from typing import Any

from .codetext import effective

EXCEPTION_LINE = re.compile(r"^(?P<type>[A-Za-z_][\w.]*(?:Error|Exception|Interrupt))(?::|$)", re.M)

# Agent output is matched only this far (each stream's tail); a call's code only its head.
MAX_MATCHED = 64_000
# Calls examined per trajectory: past this, the rest are left out and `Trace.note` says so.
MAX_CALLS = 5_000


def _same_line(first: str, then: str) -> str:
    """`first`, later on the same line `then`, in linear time: `first.*then` retries `.*` from every
    occurrence of `first` (quadratic on a line of repeats); the atomic group commits to the line's first."""
    return rf"(?m:^(?>[^\n]*?{first})[^\n]*(?:{then}))"


# Exceptions that mean "could not get data, model or environment" (E2) rather than a logic crash (E4).
SETUP_PATTERNS = [
    r"ModuleNotFoundError", r"ImportError", r"No module named", r"command not found",
    r"Could not find a version that satisfies", r"No matching distribution", _same_line("pip", "error"),
    r"FileNotFoundError", r"No such file or directory", r"CUDA out of memory", r"OutOfMemoryError",
    r"CUDA error", r"no CUDA", r"ConnectionError", r"HTTPError", r"Temporary failure in name resolution",
    r"401 Client Error|403 Client Error|404 Client Error", r"checkpoint|state_dict",
    _same_line("weights", "missing|not found"),
]
SETUP = re.compile("|".join(SETUP_PATTERNS), re.I)
# What checking an output looks like in code: shapes, value sets, ranges, counts, assertions.
CHECKS = re.compile(r"\.shape|unique|\bassert\b|\.min\(|\.max\(|count_nonzero|\.sum\(|isin|allclose|isnan")


# A script a call names (runs, or writes by name): the look-behind starts a match only where a path starts
# (without it, a long run of word characters is rescanned from each of its positions: quadratic).
SCRIPT = re.compile(r"(?<![\w./-])[\w./-]{1,200}\.(?:py|sh|R|jl)\b")
MAX_SCRIPTS_PER_CALL = 5


def workspace_path(path: str, workspace_dir: str = "/workspace") -> str | None:
    """`path` as a workspace-relative path (how the run page and the kept scripts name a file), or None
    when it points outside the workspace or climbs out of it."""
    root = workspace_dir.rstrip("/") or "/workspace"
    if path.startswith("/"):
        if not path.startswith(root + "/"):
            return None
        path = path[len(root) + 1:]
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        return None
    return "/".join(parts)


def _stream(call: dict[str, Any], name: str) -> str:
    text = call.get(name, "")
    return text[-MAX_MATCHED:] if isinstance(text, str) else ""


def code_head(call: dict[str, Any]) -> str:
    """A call's code, cut to its first MAX_MATCHED characters (the code the agent sent may be megabytes)."""
    code = call.get("code", "")
    return code[:MAX_MATCHED] if isinstance(code, str) else ""


def _well_typed(call: dict[str, Any]) -> dict[str, Any]:
    """The call with every field the rules compare of the type they expect (a trajectory an agent could edit,
    under `local-plain`, or a CLI agent's own log may hold anything): a wrong type reads as absent."""
    bad = [n for n in ("code", "stdout", "stderr", "language", "call_id") if n in call and not isinstance(call[n], str)]
    count = "cases_with_outputs" in call and type(call["cases_with_outputs"]) is not int
    changed = call.get("changed_cases")
    changed_bad = changed is not None and not (isinstance(changed, list) and all(isinstance(c, str) for c in changed))
    if not (bad or count or changed_bad):
        return call  # the same object: callers compare calls by identity
    fixed = {**call, **{n: "" for n in bad}}
    if count:
        del fixed["cases_with_outputs"]
    if changed_bad:
        fixed["changed_cases"] = []
    return fixed


def is_batch(call: dict[str, Any]) -> bool:
    """After this call more than one case has outputs (see the module docstring)."""
    return call.get("cases_with_outputs", 0) > 1


def is_pilot(call: dict[str, Any]) -> bool:
    """A successful, harness-observed call that left exactly one case with outputs (whether it came
    before the batch is the trajectory's question: `Trace.pilots`)."""
    return (call.get("exit_code") == 0 and not call.get("timed_out") and not call.get("imported")
            and call.get("cases_with_outputs") == 1)


class Trace:
    """Ordered execute_code calls with their outcomes, the batch and the pilot, and the submit call if any.

    `calls` are the calls that ran (they have an exit code); `attempts` also hold the ones refused or
    never run (malformed arguments, past the budget), which count as failed commands for the rules judge.
    """

    def __init__(self, events: list[dict[str, Any]], output_names: list[str] | None = None,
                 pilot_checks: list[dict[str, Any]] | None = None) -> None:
        self.events = events = [e for e in events if isinstance(e, dict)]
        attempts = [_well_typed(e) for e in events if e.get("type") == "tool" and e.get("name") == "execute_code"
                    and type(e.get("turn")) is int and not e.get("session")]
        # bounded whatever the trajectory holds: the calls past MAX_CALLS are not examined, and the note says so
        self.note = (f"trajectory has {len(attempts)} execute_code calls: only the first {MAX_CALLS} were examined"
                     if len(attempts) > MAX_CALLS else "")
        self.attempts = attempts[:MAX_CALLS]
        self.calls = [e for e in self.attempts if "exit_code" in e]
        self.assistant = [e for e in events if e.get("type") == "assistant"]
        self.output_names = output_names or []
        self.pilot_checks = pilot_checks
        self._effective: dict[int, str] = {}
        submits = [e for e in events if e.get("type") == "tool" and e.get("name") == "submit_results"]
        self.submit = submits[-1] if submits else None

    # ---------------------------------------------------------------- pilot and batch

    @cached_property
    def first_output(self) -> dict[str, Any] | None:
        """The first call after which any case has outputs."""
        return next((c for c in self.attempts if c.get("cases_with_outputs", 0) > 0), None)

    @cached_property
    def batch(self) -> dict[str, Any] | None:
        return next((c for c in self.attempts if is_batch(c)), None)

    @property
    def batch_turn(self) -> int | None:
        return self.batch["turn"] if self.batch else None

    def before_batch(self, call: dict[str, Any]) -> bool:
        """In a turn before the batch's (or there is no batch)."""
        return self.batch is None or call["turn"] < self.batch["turn"]

    @cached_property
    def pilots(self) -> list[dict[str, Any]]:
        """Every call that qualifies as a pilot, in order (unverified: see `pilot`)."""
        return [c for c in self.attempts if is_pilot(c) and self.before_batch(c)]

    @cached_property
    def pilot(self) -> dict[str, Any] | None:
        """The run's pilot: the first one whose output passed the contract check, else None."""
        if self.pilot_checks is None:  # a run recorded before pilot checks: the old rule (first output)
            first = self.first_output
            return first if first is not None and any(first is c for c in self.pilots) else None
        passed = {(c.get("turn"), c.get("call_id")) for c in self.pilot_checks if c.get("valid") is True}
        return next((c for c in self.pilots if (c["turn"], c.get("call_id")) in passed), None)

    @cached_property
    def failed_pilots(self) -> list[dict[str, Any]]:
        """The harness's verdicts on pilots whose output failed the contract check."""
        return [c for c in self.pilot_checks or [] if c.get("valid") is not True]

    @staticmethod
    def text(call: dict[str, Any]) -> str:
        """The call's output streams, each cut to its last MAX_MATCHED characters (what patterns see)."""
        return f"{_stream(call, 'stdout')}\n{_stream(call, 'stderr')}"

    @staticmethod
    def failed(call: dict[str, Any]) -> bool:
        return call.get("exit_code") != 0 or bool(call.get("timed_out"))

    def exception(self, call: dict[str, Any]) -> str | None:
        """The last exception type named in a failed call's output ('' if it failed without one)."""
        if not self.failed(call):
            return None
        found = EXCEPTION_LINE.findall(_stream(call, "stderr") or _stream(call, "stdout"))
        return found[-1] if found else ("Timeout" if call.get("timed_out") else "")

    @cached_property
    def writes(self) -> list[dict[str, Any]]:
        """Calls that created or changed at least one case's outputs."""
        return [c for c in self.calls if c.get("changed_cases")]

    @cached_property
    def first_write(self) -> dict[str, Any] | None:
        return self.writes[0] if self.writes else None

    @cached_property
    def last_write(self) -> dict[str, Any] | None:
        return self.writes[-1] if self.writes else None

    def outputs_before(self, call: dict[str, Any]) -> int:
        """How many cases had outputs just before `call` ran."""
        index = self._position[id(call)]
        return self.calls[index - 1].get("cases_with_outputs", 0) if index else 0

    @cached_property
    def _position(self) -> dict[int, int]:
        """Index of each call by identity (list.index compares dicts by value and walks the list)."""
        return {id(c): i for i, c in enumerate(self.calls)}

    @cached_property
    def _inspections(self) -> list[dict[str, Any]]:
        refs = [re.escape(n) for n in self.output_names] + [r"outputs"]
        pattern = re.compile("|".join(refs))
        return [c for c in self.calls if not c.get("changed_cases") and self.outputs_before(c) > 0
                and pattern.search(self.effective_code(c))]

    def inspections(self) -> list[dict[str, Any]]:
        """Calls that looked at existing outputs without writing any (pilot checks, verification)."""
        return self._inspections

    @cached_property
    def _inspection_ids(self) -> set[int]:
        return {id(c) for c in self._inspections}

    def is_inspection(self, call: dict[str, Any]) -> bool:
        return id(call) in self._inspection_ids

    def checked_pilots(self) -> list[dict[str, Any]]:
        """Pilots that wrote and whose own code also checks what they wrote (pilot and check in one call)."""
        return [c for c in self.pilots if c.get("changed_cases") and CHECKS.search(self.effective_code(c))]

    def effective_code(self, call: dict[str, Any]) -> str:
        """The head of a call's code as it runs (no comments, no printed or echoed text): an output named or a
        check written only in a comment looked at nothing (`codetext.effective`)."""
        key = id(call)
        if key not in self._effective:
            self._effective[key] = effective(str(call.get("language", "")), code_head(call))
        return self._effective[key]

    def after(self, call: dict[str, Any] | None) -> list[dict[str, Any]]:
        if call is None:
            return list(self.calls)
        return self.calls[self._position[id(call)] + 1:]

    def setup_failures(self) -> list[dict[str, Any]]:
        return [c for c in self.calls if self.failed(c) and SETUP.search(self.text(c))]

    def runtime_failures(self) -> list[dict[str, Any]]:
        """Crashes that are not setup problems and not a deliberate check failing."""
        out = []
        for call in self.calls:
            kind = self.exception(call)
            if kind is None or SETUP.search(self.text(call)) or kind == "AssertionError":
                continue
            out.append(call)
        return out

    def submit_turn(self) -> int | None:
        return self.submit["turn"] if self.submit else None

    # ---------------------------------------------------------------- evidence: files and cases

    @cached_property
    def workspace_dir(self) -> str:
        start = next((e for e in self.events if e.get("type") == "start"), {})
        found = start.get("workspace_dir")
        return found if isinstance(found, str) and found.startswith("/") else "/workspace"

    def scripts(self, call: dict[str, Any]) -> list[str]:
        """The workspace scripts a call names (runs it, or writes it by name), as workspace paths."""
        found: list[str] = []
        for match in SCRIPT.finditer(code_head(call)):
            path = workspace_path(match.group(), self.workspace_dir)
            if path is not None and path not in found:
                found.append(path)
                if len(found) >= MAX_SCRIPTS_PER_CALL:
                    break
        return found

    def case_of(self, call: dict[str, Any] | None) -> list[str]:
        """The case a one-case output call wrote (the harness's pilot check names it, else the changed case)."""
        if call is None:
            return []
        for check in self.pilot_checks or []:
            if (check.get("turn"), check.get("call_id")) == (call.get("turn"), call.get("call_id")) and \
                    isinstance(check.get("case"), str):
                return [check["case"]]
        changed = call.get("changed_cases") or []
        return list(changed[:1])
