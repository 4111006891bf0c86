"""Synthetic stored runs for tests and the leaderboard benchmark: schema-valid result.json files with
known scores and codes, shaped like real ones (full rubric items, per-case rows), written fast."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
from automedbench.api import (
    STAGE_NAMES,
    STAGE_WEIGHTS,
    STAGES,
    Aggregate,
    CaseVerdict,
    FiredCode,
    Header,
    Isolation,
    ItemVerdict,
    MetricBlock,
    Result,
    Runtime,
    StageScore,
    SubmissionManifest,
    default_rubric,
    to_dict,
)
from automedbench.engine import RunFolder, write_result

AGENT_SKILL = {"opus": 0.80, "glm": 0.72, "gemini": 0.68, "gpt": 0.64, "minimax": 0.58, "qwen": 0.56}
# Relative stage difficulty, S3 hardest and S2 easiest as the paper finds.
STAGE_BIAS = {"S1": 0.0, "S2": 0.12, "S3": -0.25, "S4": 0.05, "S5": -0.02}
CODE_P = {"E1": 0.005, "E2": 0.07, "E3": 0.20, "E4": 0.06, "E5": 0.21}


def template(cases: int = 20) -> dict[str, Any]:
    items = [StageScore(s, STAGE_NAMES[s], 0.0, STAGE_WEIGHTS[s],
                        [ItemVerdict(i.id, s, i.description, 1.0, "rules: synthetic rationale of typical length, "
                                     "naming the evidence the judge used", [3, 4]) for i in default_rubric().items
                         if i.stage == s], "rule") for s in STAGES]
    case_ids = [f"case_{k:03d}" for k in range(cases)]
    result = Result(
        Header("x", "t", "track", "lite", "a", "local", "rules", "2026-06-01T00:00:00+00:00",
               {"automedbench": "0.1.0", "python": "3.11"}, {"task": "0" * 64, "brief": "1" * 64}),
        "scored", "submitted", Runtime(), items,
        MetricBlock("macro Dice", 0.0, 0.0, components={"organ_dice": 0.9, "lesion_dice": 0.5},
                    per_case=[{"case_id": c, "organ_dice": 0.9, "lesion_dice": 0.5} for c in case_ids]),
        Aggregate(0.0, 0.0, 0.0, "A", "", "rule"), Isolation("local", ["private data not mounted"]),
        SubmissionManifest([], "0" * 64, True), [CaseVerdict(c, True, True) for c in case_ids], [])
    return to_dict(result)


def make_run(base: dict[str, Any], rng: np.random.Generator, agent: str, task: str, tier: str,
             repeat: int) -> dict[str, Any]:
    """One run: stage scores around the agent's skill, codes drawn per category, Overall by the real rule."""
    data = copy.deepcopy(base)
    skill = AGENT_SKILL.get(agent, 0.6)
    stages = {s: float(np.clip(rng.normal(skill + STAGE_BIAS[s], 0.15), 0, 1)) for s in STAGES}
    codes = [c for c, p in CODE_P.items() if rng.random() < p * (1.6 - skill)]
    task_score = float(np.clip(rng.normal(skill - 0.15 - 0.2 * len(codes), 0.15), 0, 1))
    agentic = sum(STAGE_WEIGHTS[s] * v for s, v in stages.items())
    data["header"].update(run_id=f"{agent}.{task.replace('/', '-')}.{tier}.r{repeat:03d}", task=task,
                          track=task.split("/")[0], tier=tier, agent=agent)
    for stage in data["stages"]:
        stage["score"] = round(stages[stage["stage"]], 4)
    data["aggregate"].update(agentic=round(agentic, 4), task=round(task_score, 4),
                             overall=round(0.5 * agentic + 0.5 * task_score, 4),
                             rating="A" if task_score >= 0.7 else "B" if task_score >= 0.3 else "C")
    data["task"]["strict"] = data["task"]["partial"] = round(task_score, 4)
    data["runtime"].update(turns=int(rng.integers(5, 60)), wall_s=float(rng.uniform(60, 3000)),
                           tokens_in=int(rng.integers(10_000, 2_000_000)), tokens_out=int(rng.integers(1000, 50_000)),
                           cost_usd=float(rng.uniform(0.5, 20)))
    data["error_codes"] = [to_dict(FiredCode(c, "synthetic", "", [2], "detector:synthetic")) for c in codes]
    return data


def write_runs(root: Path, n: int, *, seed: int = 0, agents: list[str] | None = None,
               tasks: list[str] | None = None, tiers: tuple[str, ...] = ("lite", "standard")) -> list[Path]:
    """Write `n` run folders under `root`, cycling over agents × tasks × tiers; returns their paths."""
    rng = np.random.default_rng(seed)
    agents = agents or list(AGENT_SKILL)
    tasks = tasks or [f"segmentation/task{k:02d}" for k in range(8)] + [f"vqa/task{k:02d}" for k in range(5)]
    cells = [(a, t, tier) for a in agents for t in tasks for tier in tiers]
    base = template()
    paths = []
    for i in range(n):
        agent, task, tier = cells[i % len(cells)]
        data = make_run(base, rng, agent, task, tier, i // len(cells))
        folder = root / data["header"]["run_id"]
        folder.mkdir(parents=True, exist_ok=True)
        write_result(RunFolder(folder), data)  # signed as the harness signs its own (they count)
        paths.append(folder)
    return paths
