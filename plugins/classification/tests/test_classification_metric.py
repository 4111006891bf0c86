"""The metric against scikit-learn (the oracle) and hand-computed cases, through the real evaluation."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from automedbench.api import StagedData
from automedbench_classification.metric import ClassificationEvaluation, confusion, scores_from_confusion
from automedbench_classification.track import ClassificationTrack

TRACK = ClassificationTrack()
SENTINEL = "__missing__"


def _task(task_id: str = "classification/demo"):
    return next(t for t in TRACK.tasks() if t.id == task_id)


def evaluate(tmp_path, task, truth: list[str], predicted: list[str | None]):
    """Stage references in a temporary folder, write predictions, score them like the evaluator does."""
    ids = [f"c{k:04d}" for k in range(len(truth))]
    for case, label in zip(ids, truth, strict=True):
        (tmp_path / "private" / case).mkdir(parents=True)
        (tmp_path / "private" / case / "label.json").write_text(json.dumps({"label": label}))
    staged = StagedData(tmp_path, tmp_path / "public", tmp_path / "private", ids)
    evaluation = ClassificationEvaluation(task, staged)
    scores = []
    for case, label in zip(ids, predicted, strict=True):
        if label is None:
            scores.append(None)
            continue
        (tmp_path / "out" / case).mkdir(parents=True)
        (tmp_path / "out" / case / "prediction.json").write_text(json.dumps({"label": label}))
        scores.append(evaluation.score_case(case, tmp_path / "out" / case))
    return evaluation.aggregate(scores, ids)


def oracle(truth, predicted, classes):
    # imported here, not at collection: scikit-learn costs seconds to import, and only these tests need it
    sklearn_metrics = pytest.importorskip("sklearn.metrics")
    pred = [p if p is not None else SENTINEL for p in predicted]
    seen = [c for c in classes if c in truth or c in pred]
    with warnings.catch_warnings():  # "y_pred contains classes not in y_true": the sentinel, on purpose
        warnings.simplefilter("ignore", UserWarning)
        balanced = sklearn_metrics.balanced_accuracy_score(truth, pred)
    return {"balanced_accuracy": balanced,
            "accuracy": sklearn_metrics.accuracy_score(truth, pred),
            "macro_f1": sklearn_metrics.f1_score(truth, pred, labels=seen, average="macro", zero_division=0),
            "recall": sklearn_metrics.recall_score(truth, pred, labels=classes, average=None, zero_division=0),
            "cm": sklearn_metrics.confusion_matrix(truth, pred, labels=[*classes, SENTINEL])}


def test_hand_computed_cases(tmp_path):
    task = _task()
    nv, mel, df = "melanocytic_nevi", "melanoma", "dermatofibroma"
    # three correct naevi, one melanoma with no prediction: accuracy 3/4, balanced (1 + 0) / 2
    block = evaluate(tmp_path / "a", task, [nv, nv, nv, mel], [nv, nv, nv, None])
    assert block.partial == 0.5 and block.strict == 0.0  # strict: not every case valid
    assert block.components["accuracy"] == 0.75 and block.components["completeness"] == 0.75
    assert block.components["cm_melanoma__missing"] == 1.0 and block.components["recall_melanoma"] == 0.0
    # a class predicted but absent from the reference does not enter the mean: (1/2 + 1) / 2
    block = evaluate(tmp_path / "b", task, [mel, mel, nv], [mel, df, nv])
    assert block.strict == block.partial == 0.75
    assert block.components["recall_dermatofibroma"] is None and block.components["support_dermatofibroma"] == 0.0
    # macro-F1 over mel, nv, df: mel 2/3, nv 1, df 0
    assert block.components["macro_f1"] == pytest.approx((2 / 3 + 1 + 0) / 3)


@pytest.mark.parametrize("seed", range(6))
def test_equal_to_sklearn_on_generated_sets(tmp_path, seed):
    task = _task()
    classes = list(task.params["classes"])
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 80))
    prior = rng.dirichlet(np.full(len(classes), 0.6))
    truth = list(rng.choice(classes, n, p=prior))
    predicted = [t if rng.random() < 0.5 else (None if rng.random() < 0.2 else str(rng.choice(classes)))
                 for t in truth]
    block = evaluate(tmp_path, task, truth, predicted)
    want = oracle(truth, predicted, classes)
    comps = block.components
    assert block.partial == pytest.approx(want["balanced_accuracy"], abs=1e-12)
    assert comps["accuracy"] == pytest.approx(want["accuracy"], abs=1e-12)
    assert comps["macro_f1"] == pytest.approx(want["macro_f1"], abs=1e-12)
    for k, c in enumerate(classes):
        if c in truth:
            assert comps[f"recall_{c}"] == pytest.approx(want["recall"][k], abs=1e-12)
        for j, p in enumerate([*classes, "missing"]):
            assert comps.get(f"cm_{c}__{p}", 0.0) == want["cm"][k, j]


def test_accuracy_tasks_use_plain_accuracy(tmp_path):
    task = _task("classification/chest-xray-pneumonia")
    truth = ["normal"] * 3 + ["pneumonia"] * 7
    predicted = ["normal", "pneumonia", None, *["pneumonia"] * 6, "normal"]
    block = evaluate(tmp_path, task, truth, predicted)
    want = oracle(truth, predicted, ["normal", "pneumonia"])
    assert block.partial == pytest.approx(want["accuracy"]) == pytest.approx(0.7)
    assert block.components["balanced_accuracy"] == pytest.approx(want["balanced_accuracy"])


def test_equal_to_sklearn_on_a_held_out_split():
    """Real predictions of a real classifier: nearest centroids on scikit-learn's bundled digits, held out."""
    datasets = pytest.importorskip("sklearn.datasets")
    digits = datasets.load_digits()
    x, y = digits.data, digits.target
    rng = np.random.default_rng(0)
    order = rng.permutation(len(y))
    train, test = order[:900], order[900:]
    keep = np.isin(y[train], np.arange(8))  # classes 8 and 9 unseen in training: always wrong on test
    centroids = np.stack([x[train][keep & (y[train] == d)].mean(0) for d in range(8)])
    pred = np.argmin(((x[test][:, None, :] - centroids[None]) ** 2).sum(-1), axis=1)
    classes = [str(d) for d in range(10)]
    truth = [str(v) for v in y[test]]
    predicted: list[str | None] = [str(v) for v in pred]
    predicted[::17] = [None] * len(predicted[::17])
    matrix = confusion(truth, predicted, classes)
    got = scores_from_confusion(matrix)
    want = oracle(truth, predicted, classes)
    assert got["balanced_accuracy"] == pytest.approx(want["balanced_accuracy"], abs=1e-12)
    assert got["accuracy"] == pytest.approx(want["accuracy"], abs=1e-12)
    assert got["macro_f1"] == pytest.approx(want["macro_f1"], abs=1e-12)
    assert 0.5 < got["balanced_accuracy"] < 0.85  # a real, imperfect classifier
    np.testing.assert_array_equal(matrix, want["cm"][:10])
