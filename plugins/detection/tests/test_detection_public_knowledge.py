"""Public-knowledge attackers against a staged detection task (issue 35): programs that read only what an agent
can (the task file, the staged public folder) and the dataset's public annotation files and split file (as
anyone can fetch them), never an image's pixels.

On main the images were drawn with the task file's seed and cased in a seeded order: replaying that draw gave
every case its boxes (mAP 1.0). Now the draw and the ids are the staging secret's: both attackers score mAP
near 0, as boxes placed blindly do."""

from __future__ import annotations

import json
import random

import attrs
import detection_layouts as layouts
from automedbench.testing import evaluate_outputs, load_task, stage_from_folder

TASK = "detection/bccd"


def public_boxes(download) -> dict[str, list[dict]]:
    """Image stem -> its annotated boxes, from the public VOC XML files."""
    from xml.etree import ElementTree

    found = {}
    for xml in sorted((download / "BCCD" / "Annotations").glob("*.xml")):
        boxes = []
        for obj in ElementTree.parse(xml).getroot().iter("object"):
            box = obj.find("bndbox")
            x1, y1, x2, y2 = (float(box.findtext(k)) for k in ("xmin", "ymin", "xmax", "ymax"))
            boxes.append({"class": obj.findtext("name"), "score": 1.0, "x1": x1 - 1, "y1": y1 - 1, "x2": x2, "y2": y2})
        found[xml.stem] = boxes
    return found


# Enough cases that chance stays far below the bound: the fixture's boxes take one of 12 grid cells, so a
# guessed image's boxes match about one case in 12 by position alone (plus the one in 60 guessed right). With
# 12 cases drawn from 14 the attacker's partial mAP was 0.0-0.25 over 12 secret stagings and reached 0.305
# (rated B) in one: a test failing by chance, not a leak. With 40 cases 0.3 needs ~12 chance hits (expected 3.4).
CASES, SPLIT = 40, 60


def test_public_annotation_attackers_score_as_blind_boxes(tmp_path):
    download = layouts.voc(tmp_path / "download", count=SPLIT + 4, split=SPLIT, varied=True)
    split = (download / "BCCD" / "ImageSets" / "Main" / "test.txt").read_text().split()
    boxes = public_boxes(download)
    track, task = load_task(TASK)
    staged = stage_from_folder(track, attrs.evolve(task, case_count=CASES), tmp_path / "root", download)
    cases = sorted(staged.case_ids)
    old = sorted(random.Random(42).sample(sorted(split), CASES))  # main's draw with the task file's seed
    random.Random(43).shuffle(old)  # and its case order
    scores = {}
    for name, stems in {"main's seeded draw and order": old, "case i is the split file's i-th image": split}.items():
        dest = tmp_path / name.split()[0]
        for case, stem in zip(cases, stems, strict=False):
            (dest / case).mkdir(parents=True, exist_ok=True)
            (dest / case / "prediction.json").write_text(json.dumps({"boxes": boxes[stem]}) + "\n")
        result = evaluate_outputs(TASK, submission=dest, data_root=tmp_path / "root",
                                  work=tmp_path / f"eval-{len(scores)}")
        scores[name] = (result.task.partial, result.aggregate.rating)
    assert all(value < 0.3 and rating not in ("A", "B") for value, rating in scores.values()), scores
