"""The trajectory as the rules read it (`Evidence`): what each call did, as the harness observed it, read once.

The rules judge grades from it, and the harness bounds every judge's verdict with it (`verdictcaps`): both read
the same facts, so a judge's grade is never capped where the rules' reading of the same run would give it.
"""

from __future__ import annotations

import fnmatch
import itertools
import re
from collections.abc import Iterable
from typing import Any

from .codetext import Authored, effective, literal_words, observed_output, run_scripts, written_scripts
from .judge import JudgeInput
from .records import RubricItem
from .trace import Trace

MAX_ANALYSED = 100_000  # characters of one call's code (head) and stdout (tail) the rules analyse
# All calls together: past this budget each further call is analysed only this far (`Evidence.note` says so).
MAX_ANALYSED_TOTAL = 8_000_000
MAX_ANALYSED_OVER = 2_000
# The plan file each rule reads: evidence of the verdict whether the file is there or missing.
PLAN_MD, PLAN_PNG = "plan/plan.md", "plan/plan.png"
RULE_FILES = {"s1a": (PLAN_MD,), "s1b": (PLAN_MD,), "s1c": (PLAN_MD,), "s1d": (PLAN_MD,), "s1e": (PLAN_PNG,),
              "s1f": (PLAN_PNG,), "plan_mentions": (PLAN_MD,), "plan_entrypoint": (PLAN_MD,)}
MAX_EVIDENCE_FILES = 10
MAX_EVIDENCE_CASES = 20


class Evidence:
    """The trajectory as the rules read it: the shared `Trace` (pilot, batch, calls in order) plus what
    each call did as text.

    Patterns are matched against what a call did (`text`: effective code and observed output, see
    `codetext`), never against comments, string literals or keywords printed back. Steps a CLI agent
    reported in its own log are never `ok`: the harness did not observe their exit codes. With pilot
    checks (from the run folder), the pilot is the first one-case output that passed the contract."""

    def __init__(self, events: list[dict[str, Any]], pilot_checks: list[dict[str, Any]] | None = None) -> None:
        self.source, self.checks_source = events, pilot_checks  # what it was read from (`evidence_of` reuses it)
        self.trace = trace = Trace(events, pilot_checks=pilot_checks)
        self.calls = trace.attempts  # every execute_code call, refused and unrun ones too (failed commands)
        self.assistant = trace.assistant
        self._text: dict[int, tuple[str, str]] = {}
        self.first_output_turn = trace.first_output["turn"] if trace.first_output else None
        self.batch_turn = trace.batch_turn
        self.pilot = trace.pilot
        self.failed_pilots = trace.failed_pilots
        # how far each call is analysed, fixed up front in call order (the same verdict whatever asks first)
        self._cap: dict[int, int] = {}
        left, cut = MAX_ANALYSED_TOTAL, 0
        for call in self.calls:
            size = min(len(call.get("code", "")) + len(call.get("stdout", "")), 2 * MAX_ANALYSED)
            self._cap[id(call)] = MAX_ANALYSED if size <= left else MAX_ANALYSED_OVER
            cut += size > left
            left = max(0, left - size)
        self._carried = self._scripts_run()
        # the literal text each call typed, in call order: a later call's output made only of it was authored, not
        # observed (a log written with a heredoc and shown with `cat`, a script written earlier that only prints)
        self._authored = Authored()
        self._typed: dict[int, tuple[int, set[str]]] = {}  # per call: its index and the literal words it typed
        for index, call in enumerate(self.calls):
            code = str(call.get("code", ""))[:self._cap[id(call)]]
            self._typed[id(call)] = index, literal_words(str(call.get("language", "")), code, None)
            self._authored.add_call(index, str(call.get("language", "")), code)
        notes = [trace.note] if trace.note else []
        if cut:
            notes.append(f"{cut} calls past the first {MAX_ANALYSED_TOTAL} characters analysed only "
                         f"{MAX_ANALYSED_OVER} characters deep")
        self.note = "; ".join(notes)

    def _scripts_run(self) -> dict[int, list[tuple[str, str]]]:
        """Per call, the scripts it runs that an earlier successful call wrote with a heredoc (the latest body of
        each name): `cat > check.py <<EOF ... EOF` in one call and `python3 check.py ct.nii.gz` in the next is one
        check. Bounded: the bodies carried add up to at most MAX_ANALYSED_TOTAL characters, each one's cap."""
        written: dict[str, tuple[str, str]] = {}
        carried: dict[int, list[tuple[str, str]]] = {}
        left = MAX_ANALYSED_TOTAL
        for call in self.calls:
            code = str(call.get("code", ""))[:self._cap[id(call)]]
            own = written_scripts(code) if call.get("language") == "bash" else {}
            for name in sorted(run_scripts(code) & written.keys() - own.keys()):
                language, body = written[name]
                body = body[:min(self._cap[id(call)], left)]
                left -= len(body)
                carried.setdefault(id(call), []).append((language, body))
            if call.get("exit_code") == 0 and not call.get("imported"):
                written.update(own)
        return carried

    def _split(self, call: dict[str, Any]) -> tuple[str, str]:
        key = id(call)
        if key not in self._text:
            # bounded: a call's code may be megabytes, and tokenizing is linear but not free
            cap = self._cap.get(key, MAX_ANALYSED_OVER)
            language, code = str(call.get("language", "")), str(call.get("code", ""))[:cap]
            stdout = str(call.get("stdout", ""))[-cap:]
            ran = [effective(lang, body) for lang, body in self._carried.get(key, [])]  # scripts written earlier
            index, typed = self._typed.get(key, (0, None))
            self._text[key] = ("\n".join([effective(language, code), *ran]),
                               observed_output(language, code, stdout,
                                               self._authored.before(index),
                                               typed))
        return self._text[key]

    def code(self, call: dict[str, Any]) -> str:
        """The code as it runs: no comments, no string literals (but `python -c` and run heredocs kept), with the
        scripts it runs that an earlier call wrote."""
        return self._split(call)[0]

    def output(self, call: dict[str, Any]) -> str:
        """stdout lines that are not just the code's own literals printed back."""
        return self._split(call)[1]

    def text(self, call: dict[str, Any]) -> str:
        return "\n".join(self._split(call))

    def ok(self) -> list[dict[str, Any]]:
        return [c for c in self.calls if c.get("exit_code") == 0 and not c.get("imported")]

    def failed(self) -> list[dict[str, Any]]:
        """Calls that failed or never ran (refused, past the budget): where a missing success was tried."""
        return [c for c in self.calls if c.get("exit_code") != 0 and not c.get("imported")]

    def before(self, turn: int | None) -> list[dict[str, Any]]:
        return [c for c in self.calls if turn is None or c["turn"] < turn]

    def evidence(self, rule: str, turns: list[int], more: dict[str, list[str]]) -> tuple[list[str], list[str]]:
        """The files and cases a verdict was decided from: the plan file its rule reads (present or missing),
        the scripts its evidence turns ran or wrote, and what the check itself named (`more`)."""
        files = list(more.get("files", []))
        files += [f for f in RULE_FILES.get(rule, ()) if f not in files]
        by_turn = {c["turn"]: c for c in reversed(self.calls)}
        for turn in turns:
            call = by_turn.get(turn)
            files += [f for f in (self.trace.scripts(call) if call else []) if f not in files]
        return files[:MAX_EVIDENCE_FILES], list(dict.fromkeys(more.get("cases", [])))[:MAX_EVIDENCE_CASES]

    def pilot_window(self, output_files: list[str]) -> list[dict[str, Any]]:
        """Successful calls from the pilot up to the batch: the pilot itself and those that touch outputs, named
        where the code uses them (a comment naming the outputs above checks of another array checks nothing)."""
        assert self.pilot is not None
        end = self.batch_turn
        refs = [re.escape(f) for f in output_files] + [r"outputs"]
        return [c for c in self.ok() if c["turn"] >= self.pilot["turn"] and (end is None or c["turn"] < end)
                and (c is self.pilot or any(re.search(r, self.code(c)) for r in refs))]

    def all_text(self) -> str:
        parts = [str(a.get("content", ""))[:MAX_ANALYSED] for a in self.assistant[:len(self.calls) + 100]]
        parts += [self.text(c) for c in self.calls]
        return "\n".join(parts)


_GLOB = re.compile(r"[\w.*?\[\]-]*\*[\w.*?\[\]-]*")  # a file-name pattern's last part (after the last '/')


def globs_match(code: str, names: Iterable[str]) -> bool:
    """Whether a wildcard pattern in the code (`glob('/data/public/*/*.nii.gz')`, `for f in */ct.*`) finds one of
    the input file names: a pattern with an extension (`*.nii.gz`), not a bare `*` (`import *`, `a * b`)."""
    bases = [n.rsplit("/", 1)[-1] for n in names]
    for found in itertools.islice(_GLOB.finditer(code), MAX_GLOBS):
        pattern = found.group()
        if "." in pattern.strip("*?") and any(fnmatch.fnmatchcase(b, pattern) for b in bases):
            return True
    return False


MAX_GLOBS = 200  # wildcard patterns tried per call


def names_input(code: str, input_files: list[str]) -> bool:
    """Whether code (as it runs: `Evidence.code`) names one of the task's input files where it uses it, or a glob
    that finds one: the rules' s2b and the harness's bound on every judge's s2b read inputs by it."""
    return any(re.search(re.escape(f), code) for f in input_files) or globs_match(code, input_files)


def ladder_values(item: RubricItem) -> dict[str, float]:
    """What each S3 outcome is worth on the item's declared ladder (a `ladder` hint overrides it): full
    credit is the top level, partial checks 0.5 (else the level below the top), an unchecked pilot the
    lowest non-zero level (0.2 on 0/0.2/0.5/1.0; 0.5 on the paper's 0/0.5/1.0)."""
    levels = sorted(item.levels)
    nonzero = [v for v in levels if v > 0] or [1.0]
    partial = 0.5 if 0.5 in levels else nonzero[max(0, len(nonzero) - 2)]
    derived = {"full": levels[-1], "partial": partial, "unchecked": nonzero[0], "none": 0.0}
    return {**derived, **item.hints.get("ladder", {})}


EVIDENCE_KEY = "_evidence"  # where `evidence_of` keeps a judge input's reading (never sent to a model)


def evidence_of(inp: JudgeInput) -> Evidence:
    """The judge input's trajectory read once: the rules judge and the harness's bound on the verdict
    (`verdictcaps`) share it, so a run's trajectory is tokenized once, not once for each."""
    pilot_checks = inp.extra.get("pilot_checks")
    held = inp.extra.get(EVIDENCE_KEY)
    if isinstance(held, Evidence) and held.source is inp.events and held.checks_source is pilot_checks:
        return held
    inp.extra[EVIDENCE_KEY] = ev = Evidence(inp.events, pilot_checks)
    return ev
