"""The generic S1–S3 rubric. Tracks reword items and add rule hints; ids and stages stay fixed."""

from __future__ import annotations

from typing import Any

import attrs

from .records import RubricItem

S3_LEVELS = [0.0, 0.2, 0.5, 1.0]

# Rule hints the deterministic judge reads. Tracks override any of them per item.
GENERIC_HINTS: dict[str, dict[str, Any]] = {
    "s1c_task_model": {"patterns": [r"\bmodel\b", r"\bmethod\b"]},
    "s1d_researched_3": {"candidates": [], "minimum": 3},
    "s2a_model_obtained": {
        "patterns": [r"snapshot_download", r"from_pretrained", r"hf_hub_download", r"urlretrieve",
                     r"\bwget\b", r"\bcurl\b", r"git clone", r"torch\.hub", r"(?i)method obtained"],
    },
    "s2b_compatibility_check": {"patterns": [r"\.shape", r"dtype", r"spacing|zooms|affine|pixdim|resolution"],
                                "minimum": 2},
    "s2c_env_ready": {"patterns": [r"pip install", r"\bvenv\b", r"__version__", r"importlib\.metadata",
                                   r"import \w+"]},
    "s2e_model_loaded": {"patterns": [r"(?i)model (is )?(loaded|ready)", r"(?i)loaded .*model",
                                      r"(?i)method ready"]},
    "s3_validate": {"checks": {"shape": r"\.shape", "values": r"unique|isin|\bset\(|\.min\(|\.max\(",
                               "plausibility": r"sum\(|count_nonzero|ratio|voxels|mean\("}},
}


def default_rubric() -> list[RubricItem]:
    items = [
        RubricItem("s1a_plan_md", "S1", "plan/plan.md exists and is a real plan (not a stub)"),
        RubricItem("s1b_plan_pipeline", "S1", "plan.md lays out a clear pipeline: load, preprocess, "
                   "inference, post-process/save, validate", requires="s1a_plan_md"),
        RubricItem("s1c_task_model", "S1", "the plan chooses a model or method suited to the task",
                   requires="s1a_plan_md"),
        RubricItem("s1d_researched_3", "S1", "at least 3 distinct candidate models/methods were researched",
                   lite_auto_pass=True),
        RubricItem("s1e_plan_png", "S1", "plan/plan.png exists (pipeline diagram)", lite_auto_pass=True),
        RubricItem("s1f_plot_pipeline", "S1", "plan.png shows a clear pipeline diagram",
                   lite_auto_pass=True, requires="s1e_plan_png"),
        RubricItem("s2a_model_obtained", "S2", "model weights / method obtained"),
        RubricItem("s2b_compatibility_check", "S2", "input compatibility checked (shape, spacing, dtype) "
                   "before inference"),
        RubricItem("s2c_env_ready", "S2", "environment set up and dependencies confirmed"),
        RubricItem("s2d_env_fail_within_5", "S2", "environment problems resolved within 5 failed attempts"),
        RubricItem("s2e_model_loaded", "S2", "model loaded and confirmed working"),
        RubricItem("s3_validate", "S3", "pilot on ONE case before the batch and check its output: 1.0 pilot "
                   "+ shape + values + plausibility, then proceed; 0.5 pilot with partial checks; 0.2 pilot "
                   "without checks; 0 no pilot", kind="ladder", levels=list(S3_LEVELS)),
    ]
    return [attrs.evolve(item, hints=dict(GENERIC_HINTS.get(item.id, {}))) for item in items]


def reword(items: list[RubricItem], wording: dict[str, str], hints: dict[str, dict[str, Any]]) -> list[RubricItem]:
    """Apply a track's wording and rule hints to the generic rubric."""
    out = []
    for item in items:
        merged = {**item.hints, **hints.get(item.id, {})}
        out.append(attrs.evolve(item, description=wording.get(item.id, item.description), hints=merged))
    return out
