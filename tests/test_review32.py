"""Review 32 (red team rounds 39 and 40): honest runs the round-39 whole-run facts denied positive evidence.

Each test builds the run's components with the evaluator's own functions (the confusion matrix and kappa of
classification, the repeat share and agreement beyond chance of VQA) and asks the track, as S5 and the rating do.
"""

from __future__ import annotations

import json

import numpy as np
from automedbench.api import MetricBlock

# a skin-lesion-like class mix (HAM10000's shares of 1000 cases): the commonest class two thirds of the cases
MIX = {"melanocytic_nevi": 670, "melanoma": 111, "benign_keratosis": 110, "basal_cell_carcinoma": 51,
       "actinic_keratoses": 33, "vascular_lesions": 14, "dermatofibroma": 11}


def _classification_metric(predict, classes: list[str]) -> MetricBlock:
    """The evaluator's components for one run: `predict(true_class, i)` names the label of the i-th case."""
    from automedbench_classification.metric import chance_kappa, confusion, one_label_score, scores_from_confusion

    truth = [c for c in classes for _ in range(MIX[c])]
    predicted = [predict(c, i) for i, c in enumerate(truth)]
    matrix = confusion(truth, predicted, classes)
    ba = float(scores_from_confusion(matrix)["balanced_accuracy"])
    components = {"one_label_score": one_label_score(matrix, "balanced_accuracy"), "chance_kappa": chance_kappa(matrix)}
    return MetricBlock("balanced_accuracy", ba, ba, components=components)


def test_a_weak_classifier_that_spreads_its_labels_keeps_its_evidence(reg):
    """Right on a quarter of each class, its mistakes spread evenly over the other classes (a class-weighted model's
    way): balanced accuracy 0.25 against one label's 1/7, Cohen's kappa 0.08, weighted by the commonest class.
    Before: 'no better than chance', S5 positive 0, F (C by its Task). Now the bar is balanced accuracy's own chance
    correction (0.125), which the blind label prior (any prior: 1/classes) does not reach."""
    track, task = reg.task("classification/skin-lesion")
    classes = list(MIX)
    rng = np.random.default_rng(0)

    def weak(true: str, i: int) -> str:
        others = [c for c in classes if c != true]
        return true if rng.random() < 0.25 else others[int(rng.integers(len(others)))]

    metric = _classification_metric(weak, classes)
    assert 0.22 < metric.partial < 0.28 and metric.components["chance_kappa"] < 0.1, (metric.partial, metric.components)
    assert track.no_positive_evidence(task, metric) is None

    # labels drawn blind from the class prior, and from a uniform one: still no evidence
    shares = np.array([MIX[c] for c in classes], float) / sum(MIX.values())
    for prior in (shares, np.full(len(classes), 1 / len(classes))):
        blind = _classification_metric(lambda true, i, p=prior: classes[int(rng.choice(len(classes), p=p))], classes)
        assert track.no_positive_evidence(task, blind), blind.partial


def test_an_accuracy_task_still_asks_cohens_kappa(reg):
    """Accuracy is no chance correction: on those tasks Cohen's kappa stays the bar (round 39's rule)."""
    track, task = reg.task("classification/chest-xray-pneumonia")
    metric = MetricBlock("accuracy", 0.64, 0.64, components={"one_label_score": 0.625, "chance_kappa": 0.05})
    assert "kappa 0.05" in (track.no_positive_evidence(task, metric) or "")


def _vqa_metric(answers: list[str], golds: list[str]) -> MetricBlock:
    """A yes/no set's components as the VQA evaluator computes them (one polar wording form, no template)."""
    from automedbench_vqa.chance import agreement_beyond_chance
    from automedbench_vqa.metric import repeat_share

    pairs = enumerate(zip(answers, golds, strict=True))
    rows = [{"kind": "closed", "answer_key": a, "gold_key": g, "score": float(a == g), "form": "polar",
             "question_key": f"is there a finding in image {i}"} for i, (a, g) in pairs]
    components = {"answer_repeat_share": repeat_share(rows, "answer_key"),
                  "gold_repeat_share": repeat_share(rows, "gold_key"), **agreement_beyond_chance(rows)}
    accuracy = sum(r["score"] for r in rows) / len(rows)
    return MetricBlock("accuracy", accuracy, accuracy, components=components, per_case=rows)


def test_a_yes_biased_reader_is_held_at_c_not_denied_evidence(reg):
    """40 yes/no questions, half 'yes': a reader that says 'yes' to 32 of them (all 20 'yes' and 12 of the 'no')
    repeats one answer 80% of the time, yet agrees beyond chance (kappa 0.4, 70% right). Before: no positive
    evidence, F. Now S5 keeps its evidence and the rating cap still holds it at C."""
    track, task = reg.task("vqa/demo")
    golds = ["yes"] * 20 + ["no"] * 20
    biased = ["yes"] * 20 + ["yes"] * 12 + ["no"] * 8
    metric = _vqa_metric(biased, golds)
    assert metric.components["chance_kappa"] >= 0.3 and metric.components["answer_repeat_share"] >= 0.8
    assert track.rating_cap(task, metric)  # the cap's fact stands: held at C
    assert track.no_positive_evidence(task, metric) is None

    # the blind ones keep none: 'yes' everywhere, and 'yes' with a few random 'no' (kappa ~0)
    assert track.no_positive_evidence(task, _vqa_metric(["yes"] * 40, golds))
    rng = np.random.default_rng(1)
    noisy = ["no" if rng.random() < 0.15 else "yes" for _ in golds]
    noisy_metric = _vqa_metric(noisy, golds)
    assert noisy_metric.components["chance_kappa"] < 0.1, noisy_metric.components
    assert track.no_positive_evidence(task, noisy_metric)


def test_repetition_decides_where_kappa_cannot_be_measured(reg):
    """Fewer than QUESTIONS_MIN informative questions: kappa is None and the repeat share alone denies evidence."""
    track, task = reg.task("vqa/demo")
    metric = _vqa_metric(["yes"] * 10, ["yes"] * 5 + ["no"] * 5)
    assert metric.components["chance_kappa"] is None
    assert track.no_positive_evidence(task, metric)


def _grid(meta: dict) -> list[dict]:
    """Round 39's dense grid of boxes (a smear, placed without looking), at the low score of a detector's tail."""
    boxes = []
    for name, s in (("RBC", 40), ("WBC", 70), ("Platelets", 20)):
        for y in range(0, int(meta["height"] - s) + 1, s // 2):
            for x in range(0, int(meta["width"] - s) + 1, s // 2):
                boxes.append({"class": name, "score": 0.01, "x1": x, "y1": y, "x2": x + s, "y2": y + s})
    return boxes


def test_a_perfect_detector_with_a_low_score_tail_keeps_its_evidence(data_root, tmp_path):
    """The reference's boxes (score 1) plus a low-score grid, as a detector run at a score floor of 0.001 for mAP
    writes its tail: mAP 1.0, yet its boxes at any score match other images' references about as often as their
    own (411 vs 320). Before: no positive evidence, rating F. Now its boxes at the operating score (0.5) decide:
    S5 positive 1, A; the grid alone, at any score, still shows none (round 39's test)."""
    import shutil

    from automedbench.testing import run_cli

    perfect = tmp_path / "perfect"
    done = run_cli("evaluate", "--task", "detection/demo", "--baseline", "perfect", "--out", str(perfect),
                   "--no-pictures", "--data-root", str(data_root))
    assert done.exit_code == 0, done.output
    submission = tmp_path / "sub"
    shutil.copytree(perfect / "submission", submission)
    for case in sorted(p for p in submission.iterdir() if p.is_dir()):
        meta = json.loads((data_root / "detection" / "demo" / "public" / case.name / "meta.json").read_text())
        prediction = json.loads((case / "prediction.json").read_text())
        prediction["boxes"] += _grid(meta)
        (case / "prediction.json").write_text(json.dumps(prediction))
    out = tmp_path / "tail"
    done = run_cli("evaluate", "--task", "detection/demo", "--submission", str(submission), "--out", str(out),
                   "--no-pictures", "--data-root", str(data_root))
    assert done.exit_code in (0, 1), done.output
    result = json.loads((out / "result.json").read_text())
    components = json.loads((out / "evaluation.json").read_text())["metric"]["components"]
    assert components["matched"] < 2 * components["matched_by_chance"] + 1, components  # the any-score count fails
    items = {i["id"]: i["value"] for s in result["stages"] for i in s["items"]}
    assert items["s5_positive_evidence"] == 1.0 and result["aggregate"]["rating"] == "A", result["aggregate"]


def test_a_warm_mrct_evaluation_scores_the_body_outline_once(data_root):
    """The body outline's SSIM (round 39's per-case bar) depends on the reference alone, yet every evaluation scored
    it again beside the submission's: twice the SSIM work of a warm MR->CT evaluation. A kept reference now scores
    it once; the value is the one the outline itself gets."""
    from automedbench.testing import run_cli
    from automedbench_synthesis import refcache
    from automedbench_synthesis.metric import HU_HI, HU_LO

    done = run_cli("evaluate", "--task", "synthesis/demo-mrct", "--baseline", "perfect", "--data-root", str(data_root))
    assert done.exit_code == 0, done.output  # staged, and scored with the outline as S5's bar
    private = data_root / "synthesis" / "demo-mrct" / "private"
    case = sorted(p.name for p in private.iterdir() if p.is_dir())[0]
    refcache.clear()
    ref = refcache.reference(private, case, HU_LO, HU_HI)
    calls = []
    scorer = ref.ssim
    ref.ssim = lambda volume: calls.append(1) or scorer(volume)
    first = ref.outline_ssim()
    again = refcache.reference(private, case, HU_LO, HU_HI)
    assert again is ref and again.outline_ssim() == first and len(calls) == 1
    outline = np.where(ref.mask > 0, 0.0, -1000.0).astype(np.float32)
    assert first == float(scorer(outline)["ssim"]) and first < 0.9
