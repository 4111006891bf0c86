"""The five classification release tasks against the release's scorer, each on its own staged layout (round 25).

The release (`eval_cls`, tracks-full-research §3.1-§3.3), restated as `release_value`: one scorer for every task;
what differs per task is the class list (the skin lesion's seven snake-case names and its abbreviations, which
fail; the brain tumour's four, CRC's nine three-letter codes, PCam's and Kermany's two) and the headline metric
(`balanced_accuracy` for the skin lesion, `accuracy` for the four others). A label is its class when equal to a
canonical name up to case and surrounding spaces; `predictions.csv` (`patient_id,label`, later rows overwrite)
answers ahead of `<id>/prediction.json`; a missing or unusable answer is wrong in its true class and stays in
the denominator.

Fuzzed for this round on 100 generated submissions per task, each task staged by its own stager from a download
layout built in code (CSV, JSON and both; case and space variants, abbreviations, near names such as "NORM mucosa" or
"no_tumor", unknown names, numbers, duplicate CSV rows, missing cases, extra files): the partial Task equal to the
release's value on every task (max abs difference 0), each case valid exactly when the release reads a class
from it. No change was needed: the test pins the agreement per release task, through the real stager,
freeze and evaluation.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import attrs
import classification_layouts as layouts
import pytest
from automedbench.testing import evaluate_staged, load_task
from automedbench_classification import contract
from automedbench_classification.data.staged import read_label

# release id -> (our task, its download written in code, cases staged)
RELEASE = {
    "skin-lesion-cls-task": ("skin-lesion", lambda p: layouts.ham10000(p, zipped=False), 40),
    "braintumor-cls-task": ("brain-tumour-mri", lambda p: layouts.brain_tumour(p, per_class=10), 40),
    "crc-histology-cls-task": ("crc-histology", lambda p: layouts.crc(p, per_class=5), 45),
    "patchcamelyon-cls-task": ("patchcamelyon", lambda p: layouts.pcam(p, count=60), 40),
    "chest-xray-pneumonia-cls-task": ("chest-xray-pneumonia", lambda p: layouts.kermany(p, per_class=20), 40),
}
METRIC = {"skin-lesion-cls-task": "balanced_accuracy"}  # the four others: accuracy (§3.2)


def release_class(raw: object, classes: list[str]) -> str | None:
    """The class the release reads from one raw answer, or None (no class: the case is wrong)."""
    if not isinstance(raw, str):
        return None
    wanted = raw.strip().lower()
    return next((c for c in classes if c.lower() == wanted), None)


def release_value(truth: dict[str, str], answers: dict[str, str | None], metric: str) -> float:
    right = {c: answers.get(c) == t for c, t in truth.items()}
    if metric == "accuracy":
        return sum(right.values()) / len(truth)
    recalls = [sum(right[c] for c in truth if truth[c] == label) / sum(t == label for t in truth.values())
               for label in set(truth.values())]
    return sum(recalls) / len(recalls)


def _spelling(rng: random.Random, label: str, classes: list[str], abbreviations: dict[str, str]) -> object:
    """A raw answer for a case whose true class is `label`: right, wrong, or no class, in many spellings."""
    guess = label if rng.random() < 0.6 else rng.choice(classes)
    way = rng.randrange(10)
    if way == 0:
        return guess.upper()
    if way == 1:
        return f"  {guess.title()} "
    if way == 2:  # the checkpoint's abbreviation (skin lesion) or the dataset's folder name: no class
        short = {v: k for k, v in abbreviations.items()}.get(guess)
        return short or {"notumor": "no_tumor", "norm": "NORM mucosa"}.get(guess, guess.replace("_", " ") + "s")
    if way == 3:
        return classes.index(guess)  # a class index: a number, no class
    if way == 4:
        return "unknown"
    return guess


def _submission(rng: random.Random, folder: Path, truth: dict[str, str], classes: list[str],
                abbreviations: dict[str, str]) -> dict[str, str | None]:
    """Writes a submission; returns the class the release reads for each case."""
    folder.mkdir(parents=True)
    via = rng.choice(["csv", "json", "both"])
    ids = [c for c in truth if rng.random() > 0.1]  # about one case in ten left out
    raw = {c: _spelling(rng, truth[c], classes, abbreviations) for c in ids}
    read: dict[str, str | None] = {}
    if via in ("json", "both"):
        for case_id in ids:
            (folder / case_id).mkdir()
            doc = {"label": raw[case_id], "probabilities": {"x": 0.7}}
            (folder / case_id / contract.PREDICTION_FILE).write_text(json.dumps(doc), "utf-8")
            read[case_id] = release_class(raw[case_id], classes)
    if via in ("csv", "both"):
        rows = ["patient_id,label,confidence"]
        for case_id in ids:
            if rng.random() < 0.15:  # a row the later one overwrites
                rows.append(f"{case_id},{rng.choice(classes)},0.5")
            text = raw[case_id] if isinstance(raw[case_id], str) else str(raw[case_id])
            rows.append(f"{case_id},{text},0.9")
            read[case_id] = release_class(text, classes)
        (folder / contract.CSV_FILE).write_text("\n".join(rows) + "\n", "utf-8")
    (folder / "notes.txt").write_text("an extra file is not read")
    return read


@pytest.mark.parametrize("release_id", sorted(RELEASE))
def test_generated_submissions_score_as_the_release(tmp_path, release_id):
    short, download, count = RELEASE[release_id]
    if short == "patchcamelyon":
        pytest.importorskip("h5py")
    track, task = load_task(f"classification/{short}")
    task = attrs.evolve(task, case_count=count)
    staged = track.stage(task, tmp_path / "data", download(tmp_path / "download"))
    truth = {c: read_label(staged.private / c) for c in staged.case_ids}
    classes, abbreviations = contract.task_labels(task.params)
    assert task.params["score_metric"] == METRIC.get(release_id, "accuracy")
    rng = random.Random(release_id)
    for n in range(12):
        read = _submission(rng, tmp_path / f"out{n}", truth, classes, abbreviations)
        result = evaluate_staged(track, task, staged, tmp_path / f"out{n}", tmp_path / f"work{n}")
        assert result.metric.partial == pytest.approx(release_value(truth, read, task.params["score_metric"]),
                                                      abs=1e-12)
        valid = {v.case_id: v.valid for v in result.cases}
        assert valid == {c: read.get(c) is not None for c in truth}
