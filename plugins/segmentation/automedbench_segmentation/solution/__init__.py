"""Scripted solutions of the segmentation track (agent code run in the sandbox) and their methods."""

from __future__ import annotations

from automedbench.api import ScriptedSolution, TaskSpec


def demo_solution(task: TaskSpec, tier: str, data_dir: str, workspace: str) -> ScriptedSolution:
    """The scripted solution for a phantom demo: airway tree, label map, or organ + lesion pair."""
    if task.params.get("phantom") == "airway":
        from .airway import airway_solution

        return airway_solution(task, tier, data_dir, workspace)
    if task.params.get("kind") == "multilabel":
        from .multilabel import multilabel_solution

        return multilabel_solution(task, tier, data_dir, workspace)
    from .reference import organ_lesion_solution

    return organ_lesion_solution(task, tier, data_dir, workspace)
