"""The four detection release tasks against the original scorer, each with its own class list (round 25).

The original (`eval_det2d/det2d_scorer.py::score_all`, restated as `original_map` in round 18's test) is one scorer
for every task: class names compared stripped and lower-cased, images in the order of the case ids, mAP@0.5 over
the classes. What differs per task is the class list (BCCD's three cells, DENTEX's four diagnoses, two of them two
words, GRAZPEDWRI-DX's eight findings) and VinDr-CXR, whose config scores every box as one class (README,
"detection mAP classes": its per-name wildcard is read as that single class).

Fuzzed for this round on 150 generated cohorts per task (1-6 images, 0-5 references each, predictions spelled in
any case and with spaces around, scores in tenths (ties) or six decimals, duplicated boxes, boxes without a score,
empty and missing predictions, extra files beside `prediction.json`), scored by the track's evaluation and by the
original's `score_all`: mAP equal on every task (max abs difference 1.4e-15), once the documented departure is left
out (a predicted class no reference holds, which the original averages in as AP 0). No change was needed: the
test pins the agreement per release task, through the track's checker and evaluation on a layout built in code.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from automedbench.api import StagedData
from automedbench.testing import load_task
from automedbench_detection.metric import DetectionEvaluation
from test_detection_conformance_round18 import original_map  # the original's mAP, restated there

WIDTH, HEIGHT = 200, 160
RELEASE = {"bccd-det-task": "bccd", "dentex-det-task": "dentex", "grazpedwri-det-task": "grazpedwri-dx",
           "vindr-cxr-det-task": "vindr-cxr"}


def _box(rng: random.Random) -> list[float]:
    x, y = rng.uniform(0, WIDTH - 20), rng.uniform(0, HEIGHT - 20)
    return [x, y, min(WIDTH, x + rng.uniform(5, 60)), min(HEIGHT, y + rng.uniform(5, 60))]


def _near(rng: random.Random, box: list[float], spread: float) -> list[float]:
    x1, y1, x2, y2 = (v + rng.uniform(-spread, spread) for v in box)
    x1, y1 = max(0.0, min(x1, x2 - 1)), max(0.0, min(y1, y2 - 1))
    return [x1, y1, min(float(WIDTH), max(x2, x1 + 1)), min(float(HEIGHT), max(y2, y1 + 1))]


def _spell(rng: random.Random, name: str) -> str:
    return rng.choice([name, name.lower(), name.upper(), f" {name} ", f"{name.lower()}  "])


def _cohort(tmp: Path, classes: list[str], rng: random.Random):
    """A layout built in code: (case ids, references and predictions per image index, in the original's form)."""
    ids = sorted(f"case_{rng.getrandbits(32):08x}" for _ in range(rng.randint(1, 6)))
    used = rng.sample(classes, rng.randint(1, min(3, len(classes))))
    refs: dict[int, list[tuple]] = {}
    preds: dict[int, list[tuple]] = {}
    for k, case_id in enumerate(ids):
        truth = [(rng.choice(used), _box(rng)) for _ in range(rng.randint(0, 5))]
        refs[k] = truth
        for folder, doc in (("public", {"width": WIDTH, "height": HEIGHT, "classes": classes}),
                            ("private", {"width": WIDTH, "height": HEIGHT, "boxes": [
                                {"class": c, **dict(zip(("x1", "y1", "x2", "y2"), b, strict=True))}
                                for c, b in truth]})):
            (tmp / folder / case_id).mkdir(parents=True)
            (tmp / folder / case_id / ("meta.json" if folder == "public" else "boxes.json")).write_text(json.dumps(doc))
        way = rng.choice(["close", "close", "loose", "ties", "duplicates", "unscored", "empty", "missing"])
        if way == "missing":
            continue
        boxes = []
        if way != "empty":
            for cls, box in truth:
                if rng.random() < 0.8:
                    guess = cls if rng.random() < 0.85 else rng.choice(used)
                    boxes.append((guess, rng.random(), _near(rng, box, 12.0 if way == "loose" else 3.0)))
            boxes += [(rng.choice(used), rng.random(), _box(rng)) for _ in range(rng.randint(0, 3))]
            if way == "ties":
                boxes = [(c, round(s, 1), b) for c, s, b in boxes]
            if way == "unscored":
                boxes = [(c, 1.0, b) for c, _, b in boxes]  # no score in the file: 1.0 on both sides
            if way == "duplicates" and boxes:
                boxes += boxes[: rng.randint(1, len(boxes))]
        preds[k] = boxes
        written = [{"class": _spell(rng, c), **({} if way == "unscored" else {"score": s}),
                    **dict(zip(("x1", "y1", "x2", "y2"), b, strict=True))} for c, s, b in boxes]
        (tmp / "out" / case_id).mkdir(parents=True)
        (tmp / "out" / case_id / "prediction.json").write_text(json.dumps({"boxes": written}))
        (tmp / "out" / case_id / "notes.txt").write_text("an extra file is not read")
    return ids, refs, preds


@pytest.mark.parametrize("release_id", sorted(RELEASE))
def test_generated_cohorts_score_as_the_original(tmp_path, release_id):
    track, task = load_task(f"detection/{RELEASE[release_id]}")
    classes = [str(c) for c in task.params["classes"]]
    single = task.params.get("task_class") is not None  # VinDr-CXR: every box one class
    rng = random.Random(release_id)
    compared = 0
    for n in range(40):
        tmp = tmp_path / str(n)
        ids, refs, preds = _cohort(tmp, classes, rng)
        index = {name: (0 if single else k) for k, name in enumerate(classes)}
        refs_i = {k: [(index[c], b) for c, b in boxes] for k, boxes in refs.items()}
        preds_i = {k: [(index[c], s, b) for c, s, b in boxes] for k, boxes in preds.items()}
        referenced = {c for boxes in refs_i.values() for c, _ in boxes}
        if not referenced or any(c not in referenced for boxes in preds_i.values() for c, _, _ in boxes):
            continue  # no reference at all, or a predicted class without one: the documented departure
        evaluation = DetectionEvaluation(task, StagedData(tmp, tmp / "public", tmp / "private", ids), {})
        scores = []
        for case_id in ids:
            out = tmp / "out" / case_id
            verdict = track.check_case(task, case_id, out, tmp / "public" / case_id)
            present = (out / "prediction.json").exists()
            assert verdict.valid or not present, verdict.reasons
            scores.append(evaluation.score_case(case_id, out) if present else None)
        block = evaluation.aggregate(scores, ids)
        assert block.partial == pytest.approx(original_map(preds_i, refs_i), abs=1e-12)
        assert block.value == (block.partial if all(s is not None for s in scores) else 0.0)
        compared += 1
    assert compared >= 15
