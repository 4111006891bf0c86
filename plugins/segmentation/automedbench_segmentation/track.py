"""The segmentation track: organ + lesion (binary pair) and multi-label tasks on NIfTI volumes."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from automedbench.api import (
    S3_PAPER_LEVELS,
    CaseScore,
    CaseVerdict,
    MetricBlock,
    PackagedTrack,
    Rubric,
    ScriptedSolution,
    StagedData,
    TaskSpec,
    UserError,
    default_rubric,
    reword,
    with_ladder,
)

HERE = Path(__file__).parent

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


class SegmentationTrack(PackagedTrack):
    name = "segmentation"
    root = HERE

    def __init__(self) -> None:
        super().__init__()
        self._case_cache: Any = None

    @property
    def _cache(self) -> Any:
        """Made on first use: numpy and nibabel load only when a case is checked (fast `automedbench plugins`)."""
        if self._case_cache is None:
            from .io import CaseCache

            self._case_cache = CaseCache()
        return self._case_cache

    # ---------------------------------------------------------------- staging

    def stage_demo(self, task: TaskSpec, dest: Path) -> StagedData:
        from .demo import stage_demo

        return stage_demo(task, dest)

    def stage_source(self, task: TaskSpec, dest: Path, source: Path) -> StagedData:
        from .stagers import stage_real

        return stage_real(task, dest, source)

    # ---------------------------------------------------------------- checking and scoring

    def check_case(self, task: TaskSpec, case_id: str, submitted: Path, public: Path) -> CaseVerdict:
        from . import checker

        self._cache.begin(case_id)
        return checker.check_case(task, case_id, submitted, public, self._cache)

    def score_case(self, task: TaskSpec, case_id: str, submitted: Path, private: Path) -> CaseScore:
        from . import score

        self._cache.begin(case_id)
        if task.params.get("kind") == "multilabel":
            return score.score_multilabel(task, case_id, submitted, private, self._cache)
        return score.score_organ_lesion(task, case_id, submitted, private, self._cache)

    def aggregate(self, task: TaskSpec, scores: list[CaseScore | None], case_ids: list[str],
                  private: Path) -> MetricBlock:
        from . import score

        self._cache.begin("")  # the last case's volumes are no longer needed
        return score.aggregate(task, scores, case_ids, private)

    # ---------------------------------------------------------------- rubric, agents, baselines

    def rubric(self, task: TaskSpec) -> Rubric:
        if task.params.get("kind") == "multilabel":
            hints = multilabel_hints(task)
            rubric = reword(default_rubric(), MULTILABEL_WORDING, {**HINTS, **hints})
            return with_ladder(rubric, "S3", S3_PAPER_LEVELS, MULTILABEL_S3_WORDING, hints["s3_validate"])
        rubric = reword(default_rubric(), WORDING, HINTS)
        return with_ladder(rubric, "S3", S3_PAPER_LEVELS, S3_WORDING, {"checks": S3_CHECKS})

    def positive_evidence(self, task: TaskSpec) -> str:
        if task.params.get("kind") == "multilabel":
            return "Dice > 0 for a label the reference contains"
        return "organ or lesion Dice > 0 against a non-empty reference"

    def positive_case(self, task: TaskSpec, row: dict[str, Any]) -> bool:
        from .score import positive_case

        return positive_case(task, row)

    def reference_solution(self, task: TaskSpec, tier: str, data_dir: str, workspace: str) -> ScriptedSolution:
        if not task.demo:  # real data needs a real model: no scripted method stands in for it
            raise UserError(f"the scripted reference solution covers the phantom demos only, not {task.id}")
        if task.params.get("phantom") == "airway":
            from .solution_airway import airway_solution

            return airway_solution(task, tier, data_dir, workspace)
        if task.params.get("kind") == "multilabel":
            from .solution_multilabel import multilabel_solution

            return multilabel_solution(task, tier, data_dir, workspace)
        from .solution import organ_lesion_solution

        return organ_lesion_solution(task, tier, data_dir, workspace)

    def baselines(self) -> dict[str, str]:
        return {"perfect": "the references themselves", "empty": "all-zero masks",
                "constant": "every voxel foreground"}

    def write_baseline(self, task: TaskSpec, name: str, staged: StagedData, dest: Path) -> None:
        import nibabel as nib
        import numpy as np

        from . import io

        for case in staged.case_ids:
            target = dest / case
            target.mkdir(parents=True, exist_ok=True)
            if name == "perfect":
                for out in task.output_files:
                    shutil.copyfile(staged.private / case / out, target / out)
                continue
            image = nib.load(str(staged.public / case / task.input_files[0]))
            fill = 0 if name == "empty" else 1
            mask = np.full(image.shape, fill, dtype=np.uint8)
            for out in task.output_files:
                io.save(target / out, mask, image.affine)
