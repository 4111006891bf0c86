"""Track-independent detectors: they read the trajectory, the evaluator's case verdicts and the judge items.

Each rule names its evidence turns. They follow the paper's firing rules (App. G): E2 when the main
blocker is set-up, E3 when bad or unchecked outputs go unrepaired, E4 when the pipeline fails while
processing inputs, E5 when the remaining failure is packaging or submission.
"""

from __future__ import annotations

from automedbench.api import CodeContext, Detector, FiredCode


def _case_list(cases: list[str], limit: int = 5) -> str:
    shown = ", ".join(cases[:limit])
    return shown + (f" (+{len(cases) - limit} more)" if len(cases) > limit else "")


class SubmissionDetector(Detector):
    """E5: usable outputs exist (or could have), but the deliverable is missing, incomplete or malformed."""

    name = "submission"

    def detect(self, ctx: CodeContext) -> list[FiredCode]:
        fired = []
        trace, result = ctx.trace, ctx.result
        submit = trace.submit_turn()
        last = trace.last_write["turn"] if trace.last_write else None
        if not result.submission.submitted and ctx.present:
            fired.append(self.fire("E5", f"outputs for {len(ctx.present)}/{ctx.expected} case(s) were written "
                                         "but submit_results was never called", [last] if last else [], "S5"))
        if result.submission.submitted and ctx.missing:
            fired.append(self.fire("E5", f"submitted with {len(ctx.missing)}/{ctx.expected} case(s) missing: "
                                         f"{_case_list(ctx.missing)}", [submit] if submit else [], "S5"))
        if ctx.invalid:
            reasons = sorted({r for c in ctx.invalid for r in c.reasons})
            fired.append(self.fire("E5", f"{len(ctx.invalid)} case(s) break the output contract: "
                                         f"{'; '.join(reasons[:3]) or 'invalid'}",
                                   [t for t in (last, submit) if t], "S5"))
        return fired


class VerificationDetector(Detector):
    """E3: no validation before scaling up, bad outputs left unchecked, or a failed check ignored."""

    name = "verification"

    def detect(self, ctx: CodeContext) -> list[FiredCode]:
        trace = ctx.trace
        fired = []
        first = trace.first_write
        if first is not None and ctx.expected > 1:
            batch = trace.batch
            checked_before = [c for c in trace.inspections() + trace.checked_pilots() if trace.before_batch(c)]
            if batch is not None and not checked_before:
                fired.append(self.fire("E3", f"skipped validation: turn {batch['turn']} ran the batch "
                                             "without any check of a pilot output", [batch["turn"]], "S3"))
        last = trace.last_write
        if last is not None and ctx.invalid:
            later = [c for c in trace.inspections() if c["turn"] >= last["turn"] and c is not last]
            if not later:
                fired.append(self.fire("E3", f"{len(ctx.invalid)} invalid output(s) went out unchecked: nothing "
                                             f"inspected the outputs after turn {last['turn']} rewrote them",
                                       [last["turn"]], "S3"))
        failed_checks = [c for c in trace.inspections() if trace.exception(c) == "AssertionError"]
        if failed_checks and (ctx.result.submission.submitted or not trace.after(failed_checks[-1])):
            last_fail = failed_checks[-1]
            repaired = [c for c in trace.after(last_fail) if trace.is_inspection(c) and not trace.failed(c)]
            if not repaired:
                fired.append(self.fire("E3", f"the check at turn {last_fail['turn']} failed and was never "
                                             "passed afterwards", [c["turn"] for c in failed_checks], "S3"))
        return fired


class ExecutionDetector(Detector):
    """E4: the pipeline crashed, timed out or stopped part-way through the cohort."""

    name = "execution"

    def detect(self, ctx: CodeContext) -> list[FiredCode]:
        trace = ctx.trace
        fired = []
        if trace.writes and ctx.missing:
            fired.append(self.fire("E4", f"partial execution: the pipeline produced outputs for "
                                         f"{len(ctx.present)}/{ctx.expected} case(s)",
                                   [c["turn"] for c in trace.writes][-3:], "S4"))
        crashes = trace.runtime_failures()
        unresolved = [c for c in crashes if not any(not trace.failed(x) and x.get("changed_cases")
                                                    for x in trace.after(c))]
        if unresolved and (ctx.missing or ctx.invalid or not trace.writes):
            kinds = sorted({trace.exception(c) or "non-zero exit" for c in unresolved})
            fired.append(self.fire("E4", f"{len(unresolved)} failed execution(s) never recovered "
                                         f"({', '.join(kinds)})", [c["turn"] for c in unresolved], "S4"))
        return fired


class SetupDetector(Detector):
    """E2: data, model, dependency or runtime set-up failures that block the pipeline."""

    name = "setup"

    def detect(self, ctx: CodeContext) -> list[FiredCode]:
        trace = ctx.trace
        failures = trace.setup_failures()
        if not failures:
            return []
        first = trace.first_write
        blocking = [c for c in failures if first is None or c["turn"] <= first["turn"]]
        recovered = first is not None and not ctx.missing
        if blocking and not recovered:
            return [self.fire("E2", f"{len(blocking)} set-up failure(s) (missing module, file, weights or "
                                    "resources) before any complete output", [c["turn"] for c in blocking], "S2")]
        return []


class UnderstandingDetector(Detector):
    """E1: the plan exists but the judge found no model or method suited to the task."""

    name = "understanding"

    def detect(self, ctx: CodeContext) -> list[FiredCode]:
        if ctx.item("s1a_plan_md") == 1.0 and ctx.item("s1c_task_model") == 0.0:
            return [self.fire("E1", "the plan does not choose a model or method that fits the task's target "
                                    "(judge item s1c failed)", [], "S1")]
        return []


class RepetitionDetector(Detector):
    """E3: the agent repeated one call with the same outcome and did not change course (a stuck loop)."""

    name = "repetition"

    def detect(self, ctx: CodeContext) -> list[FiredCode]:
        # the runner writes a `repeated_call` event from the third identical call in a row with the same answer
        seen = [e for e in ctx.trace.events if e.get("type") == "repeated_call"
                and isinstance(e.get("streak"), int) and isinstance(e.get("turn"), int)]
        if not seen:
            return []
        longest = max(e["streak"] for e in seen)
        stopped = any(e.get("action") == "stop" for e in seen)
        turns = sorted({e["turn"] for e in seen})
        return [self.fire("E3", f"stuck: the same call with the same outcome {longest} times in a row"
                                + ("; the run was stopped at its repeat limit" if stopped else
                                   " (the agent was told and did not change course)" if longest > 3 else
                                   " (the agent was told)"), turns[:20])]


GENERIC_DETECTORS: dict[str, type[Detector]] = {
    cls.name: cls for cls in (SubmissionDetector, VerificationDetector, ExecutionDetector, SetupDetector,
                              UnderstandingDetector, RepetitionDetector)
}
