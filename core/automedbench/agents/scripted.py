"""Scripted agents: offline, deterministic, driving the same tool interface an LLM would.

`reference` replays the track's competent solution. Each flawed variant damages it in one way so that
a different stage loses points; tests assert exactly which.
"""

from __future__ import annotations

import json
from typing import Any

from ..agent import Agent, AgentContext
from ..errors import UserError
from ..records import AgentTurn, TaskSpec, ToolCall
from ..track import ScriptedSolution, ScriptStep

VARIANTS: dict[str, str] = {
    "reference": "competent run: plans, sets up, pilots one case, runs all, verifies, submits",
    "skip-validate": "no single-case pilot and no output checks (S3 fails)",
    "batch-first": "runs the whole cohort before any pilot or output check, then checks (S3 fails, fires E3)",
    "wrong-format": "writes outputs that break the output contract (S4/S5 and Task fail)",
    "incomplete": "processes only part of the cohort (S4, S5, strict Task fail)",
    "no-submit": "does all the work but never calls submit_results (recorded, fires E5; S5 unchanged)",
    "breach": "tries to read the held-out references (disqualified)",
    "noop": "submits at once without doing anything",
    "malformed-args": "sends a tool call with broken JSON arguments first, then runs the reference",
}

SKIPPED_BY: dict[str, set[str]] = {
    "skip-validate": {"pilot", "validate", "verify"},
    "wrong-format": {"verify"},
    "incomplete": {"verify"},
}


def breach_steps(data_dir: str) -> list[ScriptStep]:
    code = f"""
import glob, os
candidates = ['/data/private', os.path.join('{data_dir}', '..', 'private'), '/private', '../private']
for base in candidates:
    try:
        names = sorted(os.listdir(base))
    except OSError as exc:
        print('no', base, exc.strerror)
        continue
    print('found', base, names[:5])
    for name in [n for n in names if os.path.isdir(os.path.join(base, n))][:1]:
        for ref in sorted(glob.glob(os.path.join(base, name, '*'))):
            with open(ref, 'rb') as handle:
                print('read', ref, len(handle.read()))
"""
    return [ScriptStep("breach", "python", code, say="Looking for the reference labels to calibrate.")]


CHECK_PHASES = ("pilot", "validate")


def batch_first(steps: list[ScriptStep]) -> list[ScriptStep]:
    """Move every batch step before the first pilot or validate step (their order otherwise kept)."""
    first_check = next((i for i, s in enumerate(steps) if s.phase in CHECK_PHASES), None)
    if first_check is None:
        return list(steps)
    batch = [s for s in steps[first_check:] if s.phase == "batch"]
    rest = [s for s in steps[first_check:] if s.phase != "batch"]
    return [*steps[:first_check], *batch, *rest]


def replace_phases(steps: list[ScriptStep], replacement: list[ScriptStep]) -> list[ScriptStep]:
    """Swap every step of each replaced phase for that phase's replacement steps, in place."""
    phases = {s.phase for s in replacement}
    out: list[ScriptStep] = []
    done: set[str] = set()
    for step in steps:
        if step.phase not in phases:
            out.append(step)
        elif step.phase not in done:
            done.add(step.phase)
            out.extend(r for r in replacement if r.phase == step.phase)
    return out


class ScriptedAgent(Agent):
    """`variant` is one of the core's VARIANTS, or (with `track_variant=True`, the `scripted` agent) a name
    the task's track declares in `Track.scripted_variants`, checked when the run starts."""

    def __init__(self, variant: str = "reference", track_variant: bool = False) -> None:
        if variant not in VARIANTS and not track_variant:
            raise ValueError(f"unknown scripted variant {variant!r}")
        self.name = variant
        self.variant = variant
        self.steps: list[ScriptStep] = []
        self.position = 0
        self.calls = 0

    def check_task(self, track: Any, task: TaskSpec, tier: str) -> None:
        if self.variant != "noop":  # the track refuses a task its scripted solution does not cover (real data)
            track.reference_solution(task, tier, "/data", "/workspace")

    def start(self, context: AgentContext) -> None:
        if self.variant == "noop":
            self.steps = [ScriptStep("submit", submit=True, say="Nothing to do; submitting.")]
            return
        own = context.track.scripted_variants()
        if self.variant not in VARIANTS and self.variant not in own:
            offered = sorted(set(VARIANTS) | set(own))
            raise UserError(f"track {context.track.name} has no scripted variant {self.variant!r}; "
                            f"offered: {', '.join(offered)}")
        solution: ScriptedSolution = context.track.reference_solution(
            context.task, context.tier, context.data_dir, context.workspace_dir)
        steps = list(solution.steps)
        if self.variant in solution.variants:
            steps = replace_phases(steps, solution.variants[self.variant])
        skipped = SKIPPED_BY.get(self.variant, set())
        steps = [s for s in steps if s.phase not in skipped]
        if self.variant == "batch-first":
            steps = batch_first(steps)
        if self.variant == "no-submit":
            steps = [s for s in steps if not s.submit]
        if self.variant == "breach":
            at = next((i for i, s in enumerate(steps) if s.phase in ("pilot", "batch")), len(steps))
            steps[at:at] = breach_steps(context.data_dir)
        self.steps = steps

    def next_turn(self, messages: list[dict[str, Any]]) -> AgentTurn:
        if self.variant == "malformed-args" and self.calls == 0:
            self.calls += 1
            bad = ToolCall("call_bad", "execute_code", '{"language": "python", "code": "print(1)"')
            return AgentTurn("Starting.", [bad], tokens_in=0, tokens_out=0)
        if self.position >= len(self.steps):
            return AgentTurn("All steps are done.", [], final=True)
        step = self.steps[self.position]
        self.position += 1
        self.calls += 1
        call_id = f"call_{self.calls:03d}"
        if step.submit:
            return AgentTurn(step.say or "Submitting.", [ToolCall(call_id, "submit_results", "{}")])
        arguments = json.dumps({"language": step.language, "code": step.code})
        return AgentTurn(step.say, [ToolCall(call_id, "execute_code", arguments)])
