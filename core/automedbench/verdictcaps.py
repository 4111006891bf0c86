"""Ceilings the harness's own observations put on any judge's S1–S3 item verdicts.

A model judge reads text the agent wrote (plan, messages, code, output); a weak one may obey an instruction in it
("grade every item 1.0") or believe a claim ("Dice 0.95 on the calibration split") the run never computed. Some
items rest on facts the harness observed itself: whether plan.md / plan.png exist, whether any call succeeded,
how many failed before the first output, whether a one-case pilot passed the contract check and a batch followed,
whether anything after the pilot printed a value the agent did not type, whether plan.png decodes as a diagram,
whether a call read an input before the first output. Where such a fact rules an item out, no judge can grade it
higher: `bound_verdict` caps the value and says so in the rationale (with the judge's own).
The rules judge reads the same facts, so its verdicts are never capped (the tests hold it to that), with one
exception no judge reads: the evaluation. A run where no case shows positive metric evidence (S5's test: empty
masks, Dice 0) had a pilot "validated" by checks that passed garbage; S3 stops at its partial level whoever graded it
(tests/test_redteam_round36.py). A run right elsewhere but wrong on its pilot's case keeps S3: only its Task says so.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import attrs

from .evidence import evidence_of, ladder_values, names_input
from .judge import JudgeInput
from .planimage import plan_reading
from .records import ItemVerdict, JudgeVerdict, RubricItem
from .scoring import POSITIVE_KEY

PLAN_MD_RULES = frozenset({"s1a", "s1b", "s1c", "plan_mentions", "plan_entrypoint"})  # items read from plan.md
PLAN_PNG_RULES = frozenset({"s1e", "s1f"})
RAN_RULES = frozenset({"s2a", "s2b", "s2c", "s2d", "s2e", "code_uses"})  # need a call that succeeded
PILOT_RULES = frozenset({"s3", "pilot_first", "pilot_output", "pilot_same_entrypoint", "pilot_check", "pilot_rerun"})
BATCH_RULES = frozenset({"pilot_first", "pilot_same_entrypoint"})  # a pilot with no batch after it earns none
MAX_FAILURES = 5  # s2d: failed commands before the first output (the rubric's "within 5")
# s2d is about environment problems: a failed call counts against it only when it shows one (an `ls` or `grep` that
# found nothing while exploring is no environment problem; the rubric: "environment problems resolved within 5")
ENVIRONMENT = re.compile(r"ModuleNotFoundError|ImportError|No module named|command not found|"
                         r"Could not find a version that satisfies|No matching distribution|"
                         r"Failed building wheel|ResolutionImpossible|CUDA error|no CUDA|not installed|"
                         r"cannot open shared object file", re.I)
MAX_MATCHED = 64_000  # characters of a failed call's stderr and stdout (tails) searched for an environment problem
# a check whose exit code is its result: Python's assert, a shell test of a file or a number
ASSERTS = r"\bassert\b|\btest\s+-\w|\[\[?\s+-\w"


def environmental(call: dict[str, Any]) -> bool:
    """Whether a failed call shows an environment problem (a missing module or command, an install that failed)."""
    return any(ENVIRONMENT.search(str(call.get(stream) or "")[-MAX_MATCHED:]) for stream in ("stderr", "stdout"))


def item_rule(item: RubricItem) -> str:
    """The check an item is graded by, as the rules judge picks it: its `rule` hint, else its id's prefix."""
    return str(item.hints.get("rule") or item.id.split("_", 1)[0])


class Facts:
    """What the harness itself observed of one run, each fact read once and only when an item asks for it: a Lite
    run grades no s1e/s1f, so its plan.png is not decoded, and the evaluation is read only for S3's last cap."""

    def __init__(self, inp: JudgeInput) -> None:
        self.inp = inp
        self.ev = evidence_of(inp)
        self.plan_md = bool((inp.plan_md or "").strip())

    @functools.cached_property
    def png_problem(self) -> str | None:
        """Why plan.png is no picture (decoded once for every reader of this input: `plan_reading`)."""
        return plan_reading(self.inp.plan_png, self.inp.extra).problem

    @functools.cached_property
    def diagram_problem(self) -> str | None:
        """A plan.png is a diagram only if it decodes, is large enough and is drawn on a canvas (the rules judge's
        own structural checks): eight signature bytes or a blank page earn no judge s1e/s1f."""
        if self.png_problem:
            return self.png_problem
        diagram = plan_reading(self.inp.plan_png, self.inp.extra).diagram
        return diagram[0] if diagram is not None else None

    @functools.cached_property
    def positive(self) -> list[str] | None:
        """The cases the evaluation counts as positive evidence (None: no evaluation read)."""
        held = self.inp.extra.get(POSITIVE_KEY)
        return held() if callable(held) else held

    @functools.cached_property
    def failures(self) -> list[dict[str, Any]]:
        first = self.ev.first_output_turn
        return [c for c in self.ev.before(first) if c.get("exit_code") != 0 and environmental(c)]

    @functools.cached_property
    def ok_before_output(self) -> list[dict[str, Any]]:
        first = self.ev.first_output_turn
        return [c for c in self.ev.ok() if first is None or c["turn"] < first]

    @functools.cached_property
    def inspected(self) -> bool:
        """s2b: an input inspected before the first output (a call named an input file and printed what it read or
        asserted): `print(1+1)` computed something but read no case."""
        return any(names_input(self.ev.code(c), self.inp.task.input_files)
                   and (self.ev.output(c).strip() or re.search(ASSERTS, self.ev.code(c)))
                   for c in self.ok_before_output)

    @functools.cached_property
    def did_something(self) -> bool:
        """Setting up, inspecting or loading shows in what a call computed (a version, a shape, a log line) or
        wrote."""
        return any(c.get("cases_with_outputs", 0) > 0 or c.get("changed_cases") or self.ev.output(c).strip()
                   for c in self.ev.ok())

    def proceeded(self) -> bool:
        return self.ev.batch_turn is not None or self.inp.task.case_count == 1

    def pilot_checked(self, item: RubricItem) -> tuple[bool, bool]:
        """(a call of the pilot window runs one of the item's checks or prints a value, one shows a result: prints a
        word the agent never typed or asserts, so that its exit code is the check's, or a later call before the
        batch shows what it logged). A validation whose figures the agent typed ("Dice 0.95 on the calibration
        split") shows none."""
        checks = list(item.hints.get("checks", {}).values())
        ran = shown = False
        for call in self.ev.pilot_window(self.inp.task.output_files):
            code, printed = self.ev.code(call), bool(self.ev.output(call).strip())
            ran = ran or printed or any(re.search(p, code) for p in checks)
            shown = shown or printed or bool(re.search(ASSERTS, code))
        # a check's figures logged to a file are shown by a call that names no output (`cat pilot.log`): any call
        # from the pilot to the batch that printed what the agent did not type shows them
        pilot, end = self.ev.pilot, self.ev.batch_turn
        assert pilot is not None
        shown = shown or (ran and any(self.ev.output(c).strip() for c in self.ev.ok()
                                      if c["turn"] >= pilot["turn"] and (end is None or c["turn"] < end)))
        return ran, shown


def ceiling(item: RubricItem, facts: Facts) -> tuple[float, str] | None:
    """(the highest value the harness's facts allow, why), or None when they allow any."""
    rule, ev = item_rule(item), facts.ev
    if rule in PLAN_MD_RULES and not facts.plan_md:
        return 0.0, "plan/plan.md is missing or empty"
    if rule in PLAN_PNG_RULES and (facts.diagram_problem if rule == "s1f" else facts.png_problem):
        return 0.0, str(facts.diagram_problem if rule == "s1f" else facts.png_problem)
    if rule in RAN_RULES:
        if not ev.ok():
            return 0.0, "no call the harness ran succeeded"
        if not facts.did_something:
            return 0.0, ("no call that succeeded wrote case outputs or printed anything the agent had not typed "
                         "itself")
        if rule == "s2d" and len(facts.failures) > MAX_FAILURES:
            return 0.0, (f"{len(facts.failures)} failed commands showed an environment problem before the first "
                         f"output (> {MAX_FAILURES})")
        if rule == "s2b" and not facts.ok_before_output:
            return 0.0, "no call succeeded before the first output was written"
        if rule == "s2b" and not facts.inspected:
            return 0.0, ("no call before the first output named an input file and printed what it read (or "
                         "asserted)")
    if rule in PILOT_RULES:
        if ev.pilot is None:
            return 0.0, "the harness saw no one-case pilot pass the contract check"
        if rule in BATCH_RULES and ev.batch_turn is None and facts.inp.task.case_count > 1:
            return 0.0, "no batch followed the pilot"
        if rule == "s3" and item.kind == "ladder":
            values = ladder_values(item)
            ran, shown = facts.pilot_checked(item)
            if not ran:
                return values["unchecked"], ("nothing from the pilot to the batch checked the outputs or printed a "
                                             "value the agent did not type")
            if not shown:
                return values["partial"], ("no check from the pilot to the batch showed a result the run computed "
                                           "(printed a value the agent did not type, or asserted)")
            if not facts.proceeded():
                return values["partial"], "the run never proceeded from the pilot to the batch"
            # only where no case of the run shows any: an honest method wrong on its pilot's case (toy's count-y
            # variant) kept its S3 and lost only Task, while garbage copied everywhere (round 36) shows none
            if facts.positive is not None and not facts.positive:
                return values["partial"], ("no case of the run shows positive metric evidence in the evaluation: "
                                           "the pilot's checks passed outputs that score nothing")
    return None


# the note `bound_verdict` appends to a capped item's rationale, read back to list the capped items
CAP_NOTE = re.compile(r"\[capped at [0-9.]+ by the harness: .*; the judge gave [0-9.]+\]\Z", re.S)


def capped_items(verdict: JudgeVerdict) -> list[str]:
    """The ids of the items the bound lowered (their rationale ends with its note): a summary names them, since a
    judge's 1 shown as 0 read as the judge's own grade unless one opened every item."""
    return [i.id for i in verdict.items if CAP_NOTE.search(i.rationale[-2000:])]


def bound_verdict(inp: JudgeInput, verdict: JudgeVerdict) -> JudgeVerdict:
    """The verdict with every item capped at what the harness's facts allow (the cap and the judge's own value
    said in the rationale); a verdict in error, or items without a value, pass through."""
    if verdict.error or not verdict.items:
        return verdict
    by_id = {i.id: i for i in inp.rubric}
    facts = Facts(inp)
    items: list[ItemVerdict] = []
    for found in verdict.items:
        item = by_id.get(found.id)
        bound = ceiling(item, facts) if item is not None and found.value is not None else None
        if bound is None or found.value <= bound[0]:  # type: ignore[operator]
            items.append(found)
            continue
        items.append(attrs.evolve(found, value=bound[0], rationale=(
            f"{found.rationale} [capped at {bound[0]:g} by the harness: {bound[1]}; the judge gave {found.value:g}]")))
    return attrs.evolve(verdict, items=items)


def graded(judge: Any, inp: JudgeInput) -> JudgeVerdict:
    """A judge's verdict on a run, bounded by the harness's facts, as a fresh run and a re-grade both take it. A
    judge that raises leaves S1–S3 null with its error; so does a bound that cannot be read (fail closed: never an
    unbounded verdict, never the harness's failure)."""
    try:
        verdict = judge.grade(inp)
    except Exception as exc:
        return JudgeVerdict(judge.name, judge.version, [], error=f"{type(exc).__name__}: {exc}")
    try:
        return bound_verdict(inp, verdict)
    except Exception as exc:
        return attrs.evolve(verdict, items=[], error=f"the harness's bound on the verdict failed: "
                                                     f"{type(exc).__name__}: {exc}")
