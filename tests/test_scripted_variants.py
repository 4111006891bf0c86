"""Scripted-solution phases are a declared type, and tracks may declare flawed variants of their own."""

from __future__ import annotations

import pytest
from automedbench.agents.scripted import VARIANTS, ScriptedAgent, batch_first
from automedbench.api import PHASES, ScriptedSolution, ScriptStep, UserError
from automedbench.plugins import registry


def test_a_misspelt_phase_fails_when_the_step_is_made():
    with pytest.raises(ValueError) as caught:
        ScriptStep("valdiate", "python", "print(1)")
    message = str(caught.value)
    assert "'valdiate'" in message and "\n" not in message
    assert all(phase in message for phase in ("pilot", "validate", "batch", "verify"))
    step = ScriptStep("validate")
    with pytest.raises(ValueError, match="not one of"):
        step.phase = "check"  # attrs validates on assignment too


def test_every_demo_solution_uses_declared_phases():
    """Each registered track's scripted solutions (reference and variants), at every tier, built for real."""
    built = 0
    for task_id, (track, task) in sorted(registry().tasks().items()):
        if not task.demo:
            continue
        for tier in task.tiers:
            solution = track.reference_solution(task, tier, "/data", "/workspace")
            steps = solution.steps + [s for v in solution.variants.values() for s in v]
            assert {s.phase for s in steps} <= set(PHASES), task_id
            built += 1
    assert built >= 10


def names(steps):
    return [s.phase for s in steps]


def test_batch_first_runs_the_cohort_before_any_pilot_or_check():
    steps = [ScriptStep(p, say=p) for p in ("explore", "plan", "setup", "pilot", "validate", "batch", "verify",
                                            "submit")]
    moved = batch_first(steps)
    assert names(moved) == ["explore", "plan", "setup", "batch", "pilot", "validate", "verify", "submit"]
    two = [ScriptStep(p, say=str(i)) for i, p in enumerate(("setup", "pilot", "batch", "validate", "batch"))]
    assert [s.say for s in batch_first(two)] == ["0", "2", "4", "1", "3"]  # both batches, in their order
    assert names(batch_first([ScriptStep("batch"), ScriptStep("submit")])) == ["batch", "submit"]


class _Ctx:
    def __init__(self, track):
        self.track, self.task, self.tier = track, None, "lite"
        self.data_dir, self.workspace_dir = "/data", "/workspace"


class _Track:
    name = "mini"

    def __init__(self, own=None):
        self.own = own or {}

    def scripted_variants(self):
        return self.own

    def reference_solution(self, task, tier, data_dir, workspace):
        steps = [ScriptStep(p, say=p) for p in ("setup", "pilot", "validate", "batch", "verify")]
        steps.append(ScriptStep("submit", submit=True))
        return ScriptedSolution(steps, {"swap-labels": [ScriptStep("batch", say="batch without the remap")]})


def test_a_track_variant_replaces_its_phases_and_an_unknown_one_is_refused():
    agent = ScriptedAgent("swap-labels", track_variant=True)
    agent.start(_Ctx(_Track({"swap-labels": "writes the model's own labels (Task fails)"})))
    assert [s.say for s in agent.steps][:5] == ["setup", "pilot", "validate", "batch without the remap", "verify"]
    with pytest.raises(UserError, match=r"track mini has no scripted variant 'swap-label'; offered: .*swap-labels"):
        ScriptedAgent("swap-label", track_variant=True).start(_Ctx(_Track({"swap-labels": "..."})))
    with pytest.raises(ValueError, match="unknown scripted variant"):
        ScriptedAgent("swap-labels")  # a named agent is one of the core's variants only


def test_the_core_variants_and_the_scripted_agent_are_registered():
    agents = registry().components["agent"]
    assert "batch-first" in VARIANTS and set(VARIANTS) <= set(agents)
    made = registry().create("agent", "scripted", variant="anything")
    assert isinstance(made, ScriptedAgent) and made.variant == "anything"
