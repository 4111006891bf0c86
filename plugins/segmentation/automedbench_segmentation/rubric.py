"""The segmentation rubric: plan wording and rule hints (lesion-aware or label-map), and the S3 ladder."""

from __future__ import annotations

from typing import Any

from automedbench.api import S3_PAPER_LEVELS, Rubric, TaskSpec, default_rubric, reword, with_ladder

WORDING = {
    "s1c_task_model": "the plan chose a model that predicts the LESION/TUMOUR label (not only a general organ "
                      "segmenter)",
}
MULTILABEL_WORDING = {
    "s1c_task_model": "the plan's label scheme covers every required label, with any remapping documented",
}
HINTS = {
    "s1c_task_model": {"patterns": [r"tumou?r", r"lesion"]},
    "s1d_researched_3": {"candidates": [r"nnU-?Net", r"\bMONAI\b", r"TotalSegmentator", r"VISTA-?3D",
                                        r"Swin-?UNETR", r"SegResNet", r"MedFormer", r"STU-?Net", r"MedSAM",
                                        r"classical|threshold"], "minimum": 3},
    "s2a_model_obtained": {"patterns": [r"(?i)method obtained", r"nnUNet_results|nnunetv2", r"bundle download"]},
}
MULTILABEL_HINTS = {"s1c_task_model": {"patterns": [r"label", r"remap|mapping"]}}
# S3 for label maps: the pilot check must test the values against the allowed labels and count each
# structure (a structure with no voxels is the usual remapping error); a one-label mask needs its count.
PER_LABEL_COUNT = r"count_nonzero\([^)\n]*==|==[^\n]*\)\.sum\(|bincount|for \w+ in [^\n]*label"
MULTILABEL_S3 = {"checks": {"shape": r"\.shape", "labels": r"unique|isin|\bset\(|bincount",
                            "coverage": PER_LABEL_COUNT}, "partial": ["shape", "labels"]}


def multilabel_hints(task: TaskSpec) -> dict[str, dict[str, Any]]:
    """Rule hints for a label-map task: the label-scheme plan item and the per-structure pilot check."""
    s3 = {**MULTILABEL_S3, "checks": dict(MULTILABEL_S3["checks"])}
    if len(task.params["labels"]) == 1:  # one structure: its voxel count is the coverage check
        s3["checks"]["coverage"] = PER_LABEL_COUNT + r"|count_nonzero|\.sum\(|voxels"
    return {**MULTILABEL_HINTS, "s3_validate": s3}

# Paper Table 7: S3 on {0, 0.5, 1.0}. Full credit is a one-case pilot whose output shape and values were
# checked (multi-label: the labels and per-label coverage) before the batch; any other pilot is 0.5.
S3_WORDING = ("pilot on ONE case before the batch and check its output: 1.0 pilot with the output's shape and "
              "values checked, then the batch; 0.5 some but incomplete validation (a pilot with partial or no "
              "output checks, or never proceeding to the batch); 0 no pilot, or the batch first")
MULTILABEL_S3_WORDING = ("pilot on ONE case before the batch and check its label map: 1.0 pilot with shape, "
                         "label values and per-label coverage (voxels per label) checked, then the batch; 0.5 some "
                         "but incomplete validation (a pilot with partial or no checks); 0 no pilot, or the batch "
                         "first")
S3_CHECKS = {"shape": r"\.shape", "values": r"unique|isin|\bset\(|\.min\(|\.max\("}


def segmentation_rubric(task: TaskSpec) -> Rubric:
    """The default rubric reworded for the task kind, with the paper's three-level S3 ladder."""
    if task.params.get("kind") == "multilabel":
        hints = multilabel_hints(task)
        rubric = reword(default_rubric(), MULTILABEL_WORDING, {**HINTS, **hints})
        return with_ladder(rubric, "S3", S3_PAPER_LEVELS, MULTILABEL_S3_WORDING, hints["s3_validate"])
    rubric = reword(default_rubric(), WORDING, HINTS)
    return with_ladder(rubric, "S3", S3_PAPER_LEVELS, S3_WORDING, {"checks": S3_CHECKS})
