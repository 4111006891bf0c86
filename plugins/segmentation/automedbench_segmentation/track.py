"""The segmentation track: organ + lesion (binary pair) and multi-label tasks on NIfTI volumes."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
from automedbench.errors import UserError
from automedbench.records import CaseVerdict, MetricBlock, RubricItem, TaskSpec
from automedbench.rubric import default_rubric, reword
from automedbench.taskfile import load_task_dir
from automedbench.track import CaseScore, ScriptedSolution, StagedData, Track

from . import checker, io, metrics

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


class SegmentationTrack(Track):
    name = "segmentation"

    def __init__(self) -> None:
        self._tasks = {t.id: t for t in load_task_dir(HERE / "tasks")}

    def tasks(self) -> list[TaskSpec]:
        return list(self._tasks.values())

    def template_dir(self) -> Path:
        return HERE / "templates"

    # ---------------------------------------------------------------- staging

    def stage(self, task: TaskSpec, dest: Path, source: Path | None) -> StagedData:
        if task.demo:
            from .demo import stage_demo

            return stage_demo(task, dest)
        from .stagers import stage_real

        if source is None:
            raise UserError(f"{task.id} needs the dataset's download folder (--from PATH)")
        return stage_real(task, dest, source)

    # ---------------------------------------------------------------- checking and scoring

    def check_case(self, task: TaskSpec, case_id: str, submitted: Path, public: Path) -> CaseVerdict:
        return checker.check_case(task, case_id, submitted, public)

    def score_case(self, task: TaskSpec, case_id: str, submitted: Path, private: Path) -> CaseScore:
        if task.params.get("kind") == "multilabel":
            labels = [int(k) for k in task.params["labels"]]
            name = task.output_files[0]
            pred = io.load_array(submitted / name)
            ref = io.load_array(private / name)
            per = metrics.dice(pred.astype(np.int64, copy=False) if pred.dtype.kind == "f" else pred, ref, labels)
            return CaseScore(case_id, {f"dice_{k}": v for k, v in per.items()})
        organ = metrics.binary_dice(io.load_array(submitted / "organ.nii.gz"), io.load_array(private / "organ.nii.gz"))
        ref_lesion = io.load_array(private / "lesion.nii.gz")
        lesion = metrics.binary_dice(io.load_array(submitted / "lesion.nii.gz"), ref_lesion)
        return CaseScore(case_id, {"organ_dice": organ, "lesion_dice": lesion,
                                   "lesion_positive": bool(np.count_nonzero(ref_lesion))})

    def aggregate(self, task: TaskSpec, scores: list[CaseScore | None], case_ids: list[str],
                  private: Path) -> MetricBlock:
        complete = all(s is not None for s in scores) and len(scores) == len(case_ids)
        per_case = [{"case_id": c, **(s.values if s else {"valid": False})} for c, s in zip(case_ids, scores,
                                                                                          strict=True)]
        if task.params.get("kind") == "multilabel":
            labels = [int(k) for k in task.params["labels"]]
            per_label = {}
            for k in labels:
                vals = [s.values[f"dice_{k}"] if s else 0.0 for s in scores]
                per_label[f"dice_{k}_{task.params['labels'][k]}"] = float(np.mean(vals)) if vals else 0.0
            partial = float(np.mean(list(per_label.values()))) if per_label else 0.0
            comps = {"macro_dice": partial, **per_label}
            return MetricBlock(task.metric, partial if complete else 0.0, partial, components=comps,
                               per_case=per_case)
        facts = io.read_case_facts(private)
        positive = [
            (s.values["lesion_positive"] if s else bool(facts.get(c, {}).get("lesion_present", True)))
            for c, s in zip(case_ids, scores, strict=True)
        ]
        organ = float(np.mean([s.values["organ_dice"] if s else 0.0 for s in scores])) if scores else 0.0
        lesion_vals = [s.values["lesion_dice"] if s else 0.0 for s, p in zip(scores, positive, strict=True) if p]
        lesion = float(np.mean(lesion_vals)) if lesion_vals else None
        partial = 0.5 * organ + 0.5 * lesion if lesion is not None else organ
        comps = {"organ_dice": organ, "lesion_dice": lesion, "lesion_positive_cases": float(sum(positive))}
        return MetricBlock(task.metric, partial if complete else 0.0, partial, components=comps, per_case=per_case)

    # ---------------------------------------------------------------- rubric, agents, baselines

    def rubric(self, task: TaskSpec) -> list[RubricItem]:
        if task.params.get("kind") == "multilabel":
            return reword(default_rubric(), MULTILABEL_WORDING, {**HINTS, **MULTILABEL_HINTS})
        return reword(default_rubric(), WORDING, HINTS)

    def reference_solution(self, task: TaskSpec, tier: str, data_dir: str, workspace: str) -> ScriptedSolution:
        if task.params.get("kind") != "organ_lesion" or not task.demo:
            raise UserError(f"the scripted reference solution covers the phantom demo only, not {task.id}")
        from .solution import organ_lesion_solution

        return organ_lesion_solution(task, tier, data_dir, workspace)

    def baselines(self) -> dict[str, str]:
        return {"perfect": "the references themselves", "empty": "all-zero masks",
                "constant": "every voxel foreground"}

    def write_baseline(self, task: TaskSpec, name: str, staged: StagedData, dest: Path) -> None:
        import nibabel as nib

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
