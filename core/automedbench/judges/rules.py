"""The rules judge: deterministic evidence checks over plan.md, plan.png and the trajectory.

It is the offline default. It cannot understand a diagram or a clinical argument, so it checks the
observable traces of each rubric item (files, commands that succeeded, outputs written per turn) and
says so in every rationale. Same input, same verdict.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from ..evidence import (  # noqa: F401 - Evidence, ladder_values and the limits are read from here too
    MAX_ANALYSED,
    MAX_ANALYSED_OVER,
    MAX_ANALYSED_TOTAL,
    MAX_EVIDENCE_CASES,
    MAX_EVIDENCE_FILES,
    PLAN_MD,
    PLAN_PNG,
    RULE_FILES,
    Evidence,
    evidence_of,
    ladder_values,
    names_input,
)
from ..judge import Judge, JudgeInput
from ..planimage import plan_reading
from ..records import ItemVerdict, JudgeVerdict, RubricItem
from ..trace import code_head

PHASES = {
    "load": r"load|read|input",
    "preprocess": r"pre-?process|normali[sz]|resampl|window|intensity",
    "inference": r"infer|predict|segment|model|forward",
    "save": r"post-?process|save|write|export",
    "validate": r"validat|pilot|check|verify|sanity",
}


def _any(patterns: Iterable[str], text: str) -> bool:
    return any(re.search(p, text) for p in patterns)


class RulesJudge(Judge):
    name = "rules"
    version = "1"

    def grade(self, judge_input: JudgeInput) -> JudgeVerdict:
        ev = evidence_of(judge_input)
        items = []
        for item in judge_input.rubric:
            # a track's own item names the check it is graded by (`rule` hint): a generic one below or a
            # built-in item's (e.g. "s2e"); otherwise the id's prefix picks the built-in check
            rule = str(item.hints.get("rule") or item.id.split("_", 1)[0])
            check = getattr(self, "_" + rule, None) if rule in CHECKS or re.fullmatch(r"s\d[a-z]?", rule) else None
            if check is None:
                items.append(ItemVerdict(item.id, item.stage, item.description, None,
                                         "rules judge has no check for this item"))
                continue
            value, rationale, turns, *more = check(item, judge_input, ev)
            if ev.note:  # bounded analysis of an outsized trajectory: the verdict says what it did not read
                rationale += f" (note: {ev.note})"
            turns = sorted({t for t in turns if type(t) is int})
            files, cases = ev.evidence(rule, turns, more[0] if more else {})
            items.append(ItemVerdict(item.id, item.stage, item.description, value, "rules: " + rationale, turns,
                                     evidence_files=files, evidence_cases=cases))
        return JudgeVerdict(self.name, self.version, items)

    # ---------------------------------------------------------------- S1

    def _s1a(self, item: RubricItem, inp: JudgeInput, ev: Evidence):
        plan = (inp.plan_md or "").strip()  # the paper's item is "plan.md exists": its quality is s1b's
        if not plan:
            return 0.0, "plan/plan.md missing or empty", []
        return 1.0, f"plan.md present ({len(plan)} characters)", self._turns_writing(ev, "plan.md")

    def _s1b(self, item: RubricItem, inp: JudgeInput, ev: Evidence):
        plan = inp.plan_md or ""
        # [ \t], not \s: a \s* at every line start would scan all following blank lines (quadratic)
        steps = len(re.findall(r"(?m)^[ \t]*(?:\d+[.)]|[-*]|#{1,4})[ \t]+\S", plan))
        phases = [name for name, pattern in PHASES.items() if re.search(pattern, plan, re.I)]
        if steps >= 3 and len(phases) >= 3:
            return 1.0, f"{steps} listed steps covering {', '.join(phases)}", []
        return 0.0, f"{steps} listed steps, phases named: {', '.join(phases) or 'none'} (need 3 and 3)", []

    def _s1c(self, item: RubricItem, inp: JudgeInput, ev: Evidence):
        plan = inp.plan_md or ""
        patterns = item.hints.get("patterns", [])
        hits = [p for p in patterns if re.search(p, plan, re.I)]
        if hits:
            return 1.0, f"plan names a task-suited model/method (matched {hits[0]!r})", []
        # say what was looked for: a track author whose plan fails here learns which hint to set, not only that
        looked = ", ".join(repr(p) for p in patterns[:6]) or "nothing (the item has no patterns)"
        return 0.0, (f"plan does not name a model/method suited to the task: plan.md matches none of {looked} "
                     f"(the track's rubric hints of {item.id} set them)"), []

    def _s1d(self, item: RubricItem, inp: JudgeInput, ev: Evidence):
        minimum = item.hints.get("minimum", 3)
        candidates: list[str] = item.hints.get("candidates", [])
        corpus = (inp.plan_md or "") + "\n" + ev.all_text()
        found = [c for c in candidates if re.search(c, corpus, re.I)]
        turns = [c["turn"] for c in ev.calls if any(re.search(p, ev.text(c), re.I) for p in found)][:5]
        value = 1.0 if len(found) >= minimum else 0.0
        return value, f"{len(found)} distinct candidates found (need {minimum}): {', '.join(found) or 'none'}", turns

    def _s1e(self, item: RubricItem, inp: JudgeInput, ev: Evidence):
        plan = plan_reading(inp.plan_png, inp.extra)  # decoded once for s1e, s1f and the bound
        if plan.problem:
            return 0.0, plan.problem, []
        w, h = plan.found.image.size  # type: ignore[attr-defined]
        return 1.0, f"plan.png present ({w}x{h})", self._turns_writing(ev, "plan.png")

    def _s1f(self, item: RubricItem, inp: JudgeInput, ev: Evidence):
        diagram = plan_reading(inp.plan_png, inp.extra).diagram
        if diagram is None:
            return 0.0, "no decodable plan.png", []
        problem, colours, dominant = diagram
        if problem:
            return 0.0, problem, []
        return 1.0, (f"structural check only: {colours} colours, background {dominant:.0%} "
                     "(the rules judge cannot read the diagram)"), []

    @staticmethod
    def _turns_writing(ev: Evidence, name: str) -> list[int]:
        return [c["turn"] for c in ev.ok() if name in code_head(c)][:3]

    # ---------------------------------------------------------------- S2

    def _matching(self, ev: Evidence, patterns: list[str], calls=None) -> list[dict[str, Any]]:
        pool = ev.ok() if calls is None else calls
        return [c for c in pool if _any(patterns, ev.text(c))]

    def _s2a(self, item: RubricItem, inp: JudgeInput, ev: Evidence):
        patterns = list(item.hints.get("patterns", []))
        model = inp.task.tiers.get(inp.tier)
        if model is not None and model.model:
            patterns.append(re.escape(model.model))
        hits = self._matching(ev, patterns)
        if hits:
            return 1.0, f"turn {hits[0]['turn']} obtained the model/method and succeeded", [h["turn"] for h in hits[:3]]
        if not inp.task.needs.weights:  # the task declares a method with nothing to download: running it is it
            ran = [c for c in ev.ok() if c.get("cases_with_outputs", 0) > 0]
            if ran:
                return 1.0, (f"the task's method needs no weights (declared by the task); it ran and wrote outputs "
                             f"at turn {ran[0]['turn']}"), [ran[0]["turn"]]
            tried = [c for c in ev.failed() if c.get("changed_cases")]
            return 0.0, "the task's method needs no weights, but no successful command ran it" + self._tried(
                tried), [c["turn"] for c in tried[:3]]
        tried = self._matching(ev, patterns, ev.failed())
        return 0.0, "no successful command obtained weights or the method" + self._tried(tried), [
            c["turn"] for c in tried[:3]]

    def _s2b(self, item: RubricItem, inp: JudgeInput, ev: Evidence):
        minimum = item.hints.get("minimum", 2)
        patterns = item.hints.get("patterns", [])
        pool = [c for c in ev.ok() if ev.first_output_turn is None or c["turn"] < ev.first_output_turn]
        looked = []
        for call in pool:
            code = ev.code(call)
            # the input named where the code uses it (a path string is data, kept), or a glob that finds it
            # (`*/*.nii.gz`): a name only in a comment or in printed text, beside shape/dtype checks of anything
            # else, inspected no input
            if not names_input(code, inp.task.input_files):
                continue
            looked.append(call["turn"])
            tool = next((t for t in item.hints.get("inspectors", []) if call.get("language") == "bash"
                         and re.search(t, code)), None)
            if tool is not None and ev.output(call).strip():  # `nib-ls ct.nii.gz` printed the header it read
                return 1.0, f"turn {call['turn']} inspected the input with a header tool before inference", [
                    call["turn"]]
            matched = [p for p in patterns if re.search(p, code)]
            if len(matched) >= minimum:
                why = f"turn {call['turn']} inspected the input ({len(matched)} properties) before inference"
                return 1.0, why, [call["turn"]]
        where = (f"; turns {', '.join(map(str, looked[:3]))} read the inputs without enough checks" if looked else "")
        return 0.0, "no successful input inspection (shape/dtype/spacing) before the first output" + where, [
            *looked[:3], *([ev.first_output_turn] if ev.first_output_turn is not None else [])]

    def _s2c(self, item: RubricItem, inp: JudgeInput, ev: Evidence):
        hits = self._matching(ev, item.hints.get("patterns", []))
        if hits:
            return 1.0, f"environment confirmed at turn {hits[0]['turn']}", [hits[0]["turn"]]
        tried = self._matching(ev, item.hints.get("patterns", []), ev.failed())
        return 0.0, "no successful environment set-up or dependency check" + self._tried(tried), [
            c["turn"] for c in tried[:3]]

    def _s2d(self, item: RubricItem, inp: JudgeInput, ev: Evidence):
        ready = self._matching(ev, GENERIC_ENV)
        failures = [c for c in ev.before(ev.first_output_turn) if c.get("exit_code") != 0]
        if not ready:
            return 0.0, "environment never confirmed", [c["turn"] for c in failures[:5]]
        if len(failures) > 5:
            turns = [c["turn"] for c in failures[:5]]
            return 0.0, f"{len(failures)} failed commands before the first output (> 5)", turns
        # no failure to show: the calls examined (those before the first output) are the evidence
        shown = failures or ev.before(ev.first_output_turn)[:5]
        return 1.0, f"{len(failures)} failed command(s) before the first output (<= 5)", [c["turn"] for c in shown]

    def _s2e(self, item: RubricItem, inp: JudgeInput, ev: Evidence):
        loaded = [c for c in ev.ok() if _any(item.hints.get("patterns", []), ev.output(c))]
        if loaded:
            return 1.0, f"model confirmed loaded at turn {loaded[0]['turn']}", [loaded[0]["turn"]]
        produced = [c for c in ev.ok() if c.get("cases_with_outputs", 0) > 0]
        if produced:
            return 1.0, f"model ran and wrote outputs at turn {produced[0]['turn']}", [produced[0]["turn"]]
        failed = [c for c in ev.failed() if (c.get("changed_cases") or _any(
            item.hints.get("patterns", []), ev.output(c)))]
        return 0.0, "no evidence the model was loaded or run" + self._tried(failed), [c["turn"] for c in failed[:3]]

    @staticmethod
    def _tried(calls: list[dict[str, Any]]) -> str:
        return f" (tried and failed at turn {', '.join(str(c['turn']) for c in calls[:3])})" if calls else ""

    # ---------------------------------------------------------------- S3

    # ---------------------------------------------------------------- generic checks for track items
    # Parameterised by the item's hints; a track names one with {"rule": NAME} (see CHECKS).

    def _plan_mentions(self, item: RubricItem, inp: JudgeInput, ev: Evidence):
        plan = inp.plan_md or ""
        if not plan.strip():
            return 0.0, "no plan.md", []
        patterns = item.hints.get("patterns", [])
        minimum = item.hints.get("minimum", 1)
        hits = [p for p in patterns if re.search(p, plan)]
        if len(hits) >= minimum:
            return 1.0, f"plan.md states it (matched {hits[0]!r})", []
        return 0.0, f"plan.md does not state it ({len(hits)} of {minimum} required patterns)", []

    def _code_uses(self, item: RubricItem, inp: JudgeInput, ev: Evidence):
        """A successful call's effective code (or, with where=output/any, its observed output) matches;
        with `outputs`, only calls that left case outputs count (no patterns: any such call). Calls that
        write plan.md/plan.png are the plan, not the work, and never count."""
        patterns = item.hints.get("patterns", [])
        minimum = item.hints.get("minimum", 1) if patterns else 0
        where = item.hints.get("where", "code")
        pool = [c for c in ev.ok() if not re.search(r"plan\.(md|png)", code_head(c))
                and (not item.hints.get("outputs") or c.get("cases_with_outputs", 0) > 0)]
        for call in pool:
            if not patterns:
                return 1.0, f"turn {call['turn']} succeeded and left case outputs", [call["turn"]]
            text = ev.output(call) if where == "output" else ev.text(call) if where == "any" else ev.code(call)
            hits = [p for p in patterns if re.search(p, text)]
            if len(hits) >= minimum:
                return 1.0, f"turn {call['turn']} did it and succeeded (matched {hits[0]!r})", [call["turn"]]
        tried = [c for c in ev.failed()
                 if patterns and sum(bool(re.search(p, ev.text(c))) for p in patterns) >= minimum]
        return 0.0, f"no successful call shows it ({minimum} of the item's patterns needed)" + self._tried(tried), [
            c["turn"] for c in tried[:3]]

    def _plan_entrypoint(self, item: RubricItem, inp: JudgeInput, ev: Evidence):
        """A successful call runs an entrypoint the plan names (a script or `-m` module)."""
        named = {m.split("/")[-1] for m in re.findall(ENTRYPOINT, inp.plan_md or "")}
        if not named:
            return 0.0, "plan.md names no script or module entrypoint", []
        for call in ev.ok():
            ran = {m.split("/")[-1] for m in re.findall(ENTRYPOINT, ev.code(call))} & named
            if ran:
                return 1.0, f"turn {call['turn']} ran {', '.join(sorted(ran))}, named in the plan", [call["turn"]]
        return 0.0, f"no successful call ran the plan's entrypoint ({', '.join(sorted(named))})", [], {
            "files": sorted(named)}

    def _pilot_first(self, item: RubricItem, inp: JudgeInput, ev: Evidence):
        if ev.pilot is None:
            return 0.0, self._no_pilot(ev), *self._no_pilot_evidence(ev)
        pilot = self._pilot_cases(ev)
        if ev.batch_turn is None and inp.task.case_count > 1:
            return 0.0, f"pilot at turn {ev.pilot['turn']}, but no batch followed", [ev.pilot["turn"]], pilot
        return 1.0, f"one-case pilot at turn {ev.pilot['turn']} before the batch", [ev.pilot["turn"]], pilot

    def _pilot_output(self, item: RubricItem, inp: JudgeInput, ev: Evidence):
        if ev.pilot is None:
            return 0.0, self._no_pilot(ev), *self._no_pilot_evidence(ev)
        return 1.0, f"the pilot at turn {ev.pilot['turn']} wrote one case's outputs (contract checked)", [
            ev.pilot["turn"]], self._pilot_cases(ev)

    def _pilot_same_entrypoint(self, item: RubricItem, inp: JudgeInput, ev: Evidence):
        """The pilot and the batch run the same entrypoint: a script, module or the item's patterns."""
        if ev.pilot is None:
            return 0.0, self._no_pilot(ev), *self._no_pilot_evidence(ev)
        if ev.batch_turn is None:
            return 0.0, "no batch to compare the pilot with", [ev.pilot["turn"]], self._pilot_cases(ev)
        batch = next(c for c in ev.calls if c["turn"] == ev.batch_turn)
        patterns = item.hints.get("patterns", [])

        def points(call: dict[str, Any]) -> set[str]:
            code = ev.code(call)
            scripts = {m.split("/")[-1] for m in re.findall(ENTRYPOINT, code)}
            return scripts | {p for p in patterns if re.search(p, code)}

        shared = points(ev.pilot) & points(batch)
        turns = [ev.pilot["turn"], batch["turn"]]
        if shared:
            return 1.0, f"pilot and batch both run {', '.join(sorted(shared))}", turns, self._pilot_cases(ev)
        return 0.0, "the pilot and the batch share no entrypoint (script, module or named function)", turns, \
            self._pilot_cases(ev)

    def _pilot_check(self, item: RubricItem, inp: JudgeInput, ev: Evidence):
        """Between the pilot and the batch, a call on the outputs matches the item's `pattern`."""
        if ev.pilot is None:
            return 0.0, self._no_pilot(ev), *self._no_pilot_evidence(ev)
        pattern = item.hints.get("pattern", "")
        for call in self._pilot_window(inp, ev):
            if pattern and re.search(pattern, ev.code(call)):
                return 1.0, f"checked at turn {call['turn']} after the pilot of turn {ev.pilot['turn']}", [
                    call["turn"]], self._pilot_cases(ev)
        return 0.0, f"no such check of the pilot's output after turn {ev.pilot['turn']}", [
            ev.pilot["turn"], *([ev.batch_turn] if ev.batch_turn is not None else [])], self._pilot_cases(ev)

    def _pilot_rerun(self, item: RubricItem, inp: JudgeInput, ev: Evidence):
        """After a failed one-case pilot, a pilot that passed came before the batch."""
        end = ev.batch_turn
        failed = [c for c in ev.calls if c.get("cases_with_outputs", 0) <= 1 and (end is None or c["turn"] < end)
                  and (c.get("changed_cases") or c.get("cases_with_outputs", 0) > 0)
                  and (c.get("exit_code") != 0 or c.get("timed_out"))]
        failed_turns = sorted({c["turn"] for c in failed} | {c["turn"] for c in ev.failed_pilots if isinstance(
            c.get("turn"), int) and (end is None or c["turn"] < end)})
        if not failed_turns:
            shown = [ev.pilot["turn"]] if ev.pilot is not None else []
            return 1.0, "no pilot failed", shown, self._pilot_cases(ev)
        if ev.pilot is not None and ev.pilot["turn"] > failed_turns[0]:
            return 1.0, f"pilot failed at turn {failed_turns[0]}, rerun passed at turn {ev.pilot['turn']} before " \
                        "the batch", [failed_turns[0], ev.pilot["turn"]], self._pilot_cases(ev)
        return 0.0, f"pilot failed at turn {failed_turns[0]} and no passing rerun came before the batch", [
            failed_turns[0], *([end] if end is not None else [])], {
            "cases": [c for call in failed if call["turn"] == failed_turns[0] for c in ev.trace.case_of(call)]
            + [c["case"] for c in ev.failed_pilots if c.get("turn") == failed_turns[0]
               and isinstance(c.get("case"), str)]}

    @staticmethod
    def _pilot_cases(ev: Evidence) -> dict[str, list[str]]:
        return {"cases": ev.trace.case_of(ev.pilot)}

    @staticmethod
    def _no_pilot_evidence(ev: Evidence) -> tuple[list[int], dict[str, list[str]]]:
        """Where a missing pilot shows: the failed pilot's turn and case, else the call that first wrote outputs
        (several cases at once: the batch) and the cases it wrote."""
        if ev.failed_pilots:
            bad = ev.failed_pilots[0]
            case = bad.get("case")
            return [bad.get("turn")], {"cases": [case] if isinstance(case, str) else []}
        first = ev.trace.first_output
        if first is None:
            return [], {}
        return [first["turn"]], {"cases": list((first.get("changed_cases") or [])[:MAX_EVIDENCE_CASES])}

    @staticmethod
    def _no_pilot(ev: Evidence) -> str:
        if ev.first_output_turn is None:
            return "no outputs were ever written"
        if ev.failed_pilots:
            return f"no pilot passed the contract check (turn {ev.failed_pilots[0].get('turn')} failed)"
        return f"no single-case pilot: turn {ev.first_output_turn} wrote several cases at once"

    @staticmethod
    def _pilot_window(inp: JudgeInput, ev: Evidence) -> list[dict[str, Any]]:
        return ev.pilot_window(inp.task.output_files)

    def _s3(self, item: RubricItem, inp: JudgeInput, ev: Evidence):
        if ev.pilot is None:
            if ev.first_output_turn is None:
                return 0.0, "no outputs were ever written", []
            turns, cases = self._no_pilot_evidence(ev)
            if ev.failed_pilots:
                bad = ev.failed_pilots[0]
                return 0.0, (f"no pilot passed the contract check: the one-case output of turn {bad.get('turn')} "
                             f"failed ({'; '.join(map(str, bad.get('reasons', [])))[:200]})"), turns, cases
            return 0.0, f"no single-case pilot: turn {ev.first_output_turn} wrote several cases at once", turns, cases
        pilot_turn = ev.pilot["turn"]
        end = ev.batch_turn
        checks: dict[str, str] = item.hints.get("checks", {})
        found: dict[str, int] = {}
        for call in self._pilot_window(inp, ev):
            code = ev.code(call)
            for name, pattern in checks.items():
                if name not in found and re.search(pattern, code):
                    found[name] = call["turn"]
        proceeded = end is not None or inp.task.case_count == 1
        names = sorted(found)
        turns = sorted({pilot_turn, *found.values()})
        value = ladder_values(item)
        pilot = self._pilot_cases(ev)
        if len(found) == len(checks) and proceeded:
            return value["full"], (f"pilot on one case at turn {pilot_turn}, checked {', '.join(names)}, then ran "
                                   "the batch"), turns, pilot
        partial = item.hints.get("partial", ["shape", "values"])
        # short of full credit: the batch that followed without the missing checks shows where
        batch = [end] if end is not None else []
        if any(name in found for name in partial):
            return value["partial"], f"pilot at turn {pilot_turn}, partial checks ({', '.join(names)})" + (
                "" if proceeded else "; never proceeded to the batch"), turns + batch, pilot
        return value["unchecked"], f"pilot at turn {pilot_turn} without output checks", turns + batch, pilot


# The generic checks a track item may name with {"rule": NAME} (built-in item checks: "s1a" ... "s3").
CHECKS = ("plan_mentions", "code_uses", "plan_entrypoint", "pilot_first", "pilot_output", "pilot_same_entrypoint",
          "pilot_check", "pilot_rerun")

# a script or module someone runs; the look-behind starts a match only where a path starts (without it, a
# long run of word characters with no ".py" is rescanned from each of its positions: quadratic)
ENTRYPOINT = r"(?<![\w./-])[\w./-]+\.py\b|-m\s+[\w.]+"

GENERIC_ENV = [r"pip install", r"\bvenv\b", r"__version__", r"importlib\.metadata", r"import \w+"]
