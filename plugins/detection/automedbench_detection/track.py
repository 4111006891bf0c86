"""The detection track: one 2-D image per case, boxes out, mAP@0.5 over the cohort. Wiring only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from automedbench.api import CaseVerdict, MetricBlock, PackagedTrack, Rubric, TaskSpec


class DetectionTrack(PackagedTrack):
    name = "detection"
    demo_stager = ".data.demo:stage_demo"
    source_stager = ".data.stagers:stage_dataset"
    evaluation_class = ".metric:DetectionEvaluation"
    # real images need a trained detector: no scripted method stands in for it
    demo_solution = ".solution.reference:demo_solution"
    baseline_module = ".baselines"

    def check_case(self, task: TaskSpec, case_id: str, submitted: Path, public: Path) -> CaseVerdict:
        from . import contract
        from .metric import task_classes

        path = submitted / contract.PREDICTION_FILE
        _, task_class = task_classes(task)
        parsed = contract.parse_prediction(path, contract.read_meta(public), (task_class,) if task_class else (),
                                           task_class)
        return CaseVerdict(case_id, True, parsed.valid, parsed.reasons)

    def rubric(self, task: TaskSpec) -> Rubric:
        from .rubric import detection_rubric

        return detection_rubric()

    def rating_cap(self, task: TaskSpec, metric: MetricBlock) -> str | None:
        from .hedging import HEDGED_SHARE

        share = metric.components.get("cross_class_duplicate_share") or 0.0
        if share >= HEDGED_SHARE:
            return (f"{share:.0%} of the boxes repeat a higher-scored box of another class (class hedging; "
                    f"the cap is {HEDGED_SHARE:.0%})")
        return None

    def positive_evidence(self, task: TaskSpec) -> str:
        return ("a true positive (a box matching a reference box at IoU >= 0.5, at any score) in a case, in a run "
                "whose boxes, all of them or those at the operating score, match their own images' references more "
                "often than other images' (by half the margin the references themselves do, where they differ from "
                "image to image) and, when they are ten times the references or more, at least twice as often")

    def no_positive_evidence(self, task: TaskSpec, metric: MetricBlock) -> str | None:
        """Boxes placed without looking match another image's references as often as their own: a dense grid
        (mAP 0.013 on the demo, a true positive in every case: round 39) or the same few prior boxes in every image
        (the mean reference box, tiled cell sizes: 18 and 18 on the demo, round 41). S5 gave them 1 and the S3 bound
        let such a pilot pass. A run's boxes, all of them or those at the operating score (a real detector's
        low-score tail matches other images alike: review32), must stand above what they match elsewhere by half
        the share the references themselves do (`_prior_bar`); boxes many times the references (DENSE_FACTOR) must
        match their own images' at least twice as often too. Where every image shows the same anatomy in the same
        place (the release layouts' fixtures, dental panoramics, a wrist) the references match across images
        nearly as often as their own: no bar then tells a detector from the prior, and only dense boxes are
        judged."""
        facts = metric.components
        gt = facts.get("gt_boxes")
        at_threshold = sum(int(r.get("tp_at_threshold") or 0) + int(r.get("fp_at_threshold") or 0)
                           for r in metric.per_case if isinstance(r, dict))
        matched, chance = facts.get("matched"), facts.get("matched_by_chance")
        if matched == 0:  # no true positive at all: no case row shows evidence, and nothing was placed by luck either
            return None
        matched_thr, chance_thr = facts.get("matched_at_threshold"), facts.get("matched_at_threshold_by_chance")
        share = _prior_bar(facts)
        all_blind = (_dense(facts.get("predicted_boxes"), gt) and not _looks(matched, chance)) or not _beats(
            matched, chance, share)
        thr_blind = (not _looks(matched_thr, chance_thr, absent=False) and (
            _dense(float(at_threshold), gt) or not matched_thr)) or not _beats(matched_thr, chance_thr, share)
        if all_blind and thr_blind:
            return (f"the boxes match their own images' references ({facts['matched']:.0f}) hardly more often than "
                    f"other images' ({facts['matched_by_chance']:.1f}), at the operating score too: placed without "
                    "looking")
        return None

    def positive_case(self, task: TaskSpec, row: dict[str, Any]) -> bool:
        """A true positive at any score: it lifts the mAP above 0, the original's `has_valid_results` (rows
        stored before round 20 have only the operating point's count)."""
        return int(row.get("tp", row.get("tp_at_threshold")) or 0) > 0


DENSE_FACTOR = 10  # boxes at least this many times the references: a grid or a scatter, not one box per finding


def _dense(predicted: Any, gt: Any) -> bool:
    """Whether the boxes are at least DENSE_FACTOR times the references (unknown counts: not dense)."""
    if not isinstance(predicted, (int, float)) or not isinstance(gt, (int, float)):
        return False
    return predicted >= DENSE_FACTOR * max(float(gt), 1.0)


def _looks(matched: Any, chance: Any, absent: bool = True) -> bool:
    """Whether boxes match their own images' references at least twice as often as other images' (and once);
    `absent` when either count was not stored (fewer than two cases, or an evaluation made before)."""
    if not isinstance(matched, float) or not isinstance(chance, float):
        return absent
    return matched >= 2 * chance + 1


SPECIFIC_SHARE = 0.2  # references matching other images' this much less than their own: boxes that must be looked for


def _prior_bar(facts: dict[str, Any]) -> float | None:
    """Half the share of the references' own matches that other images' references do not reach (1 - cross/own):
    the margin a run's boxes must keep over what they match elsewhere. None where the references differ too little
    between images (below SPECIFIC_SHARE: the prior is nearly a perfect answer) or an evaluation made before did not
    store them."""
    gt, cross = facts.get("gt_boxes"), facts.get("reference_matched_by_chance")
    if not isinstance(gt, float) or not isinstance(cross, float) or gt < 1:
        return None
    share = 1.0 - cross / gt
    return share / 2 if share >= SPECIFIC_SHARE else None


def _beats(matched: Any, chance: Any, share: float | None) -> bool:
    """Whether boxes match their own images' references by at least `share` of their matches (and one) more than
    other images'; true when there is no bar or either count was not stored."""
    if share is None or not isinstance(matched, float) or not isinstance(chance, float):
        return True
    return matched - chance >= max(1.0, share * matched)
