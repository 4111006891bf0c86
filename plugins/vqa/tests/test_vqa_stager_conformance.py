"""Every VQA stager passes the stager conformance check (`automedbench.testing.check_stager`) on a small
download in its dataset's layout: a fresh secret per staging (published ids never the dataset's, no row or
record order predicts an answer), images re-encoded, nothing but regular files published, the perfect
baseline exactly 1.0, and hostile downloads (links, FIFOs, damaged files) refused in one line."""

from __future__ import annotations

import json
import zipfile

import pytest
from automedbench.testing import assert_stager_conforms, sampled
from test_vqa_release_sets import write_kvasir, write_mmmu, write_omnimed, write_parquet, write_pmc
from test_vqa_stagers import jpeg, png

pytest.importorskip("pyarrow")

WORDS = ["liver", "spleen", "kidney", "gland", "stroma", "colon", "lung", "heart", "bone", "skin", "brain",
         "nerve", "vessel", "muscle", "fat"]


def open_parquet(src, n=30):
    """PathVQA / VQA-RAD: data/test-*.parquet with an open answer per question, each its own word."""
    rows = [{"image": {"bytes": png(7 * i), "path": f"{i}.png"}, "question": f"What is shown in {i}?",
             "answer": WORDS[i % len(WORDS)]} for i in range(n)]
    write_parquet(src / "data" / "test-00000-of-00001.parquet", rows)
    write_parquet(src / "data" / "train-00000-of-00001.parquet", rows[:2])
    return src


def slake(src, n=30):
    records = [{"qid": 100 + i, "img_name": f"xmlab{i}/source.jpg", "question": f"Which organ is it ({i})?",
                "answer": WORDS[i % len(WORDS)], "q_lang": "en", "answer_type": "OPEN", "location": "Abdomen",
                "modality": "CT", "content_type": "Organ"} for i in range(n)]
    src.mkdir(parents=True)
    (src / "test.json").write_text(json.dumps(records))
    for i in range(n):
        (src / "imgs" / f"xmlab{i}").mkdir(parents=True)
        (src / "imgs" / f"xmlab{i}" / "source.jpg").write_bytes(jpeg(8 * i))
    return src


def medframeqa(src, n=30):
    rows = [{"question_id": f"vid{i}_q", "system": "Digestive", "organ": "Liver", "modality": "CT",
             "question": f"Which frame shows it ({i})?", "options": [f"{k}. frame {k}" for k in "ABCDE"],
             "image": [{"bytes": jpeg(5 * i + f), "path": None} for f in range(2)], "answer": "ABCDE"[(i * 3) % 5]}
            for i in range(n)]
    write_parquet(src / "data" / "test-00000-of-00001.parquet", rows)
    return src


def medxpertqa(src, n=30):
    options = {k: f"diagnosis {k}" for k in "ABCDE"}
    (src / "MM").mkdir(parents=True)
    records = [{"id": f"MM-{i}", "question": f"Diagnosis {i}?", "options": options, "label": "ABCDE"[(i * 2) % 5],
                "images": [f"MM-{i}-a.jpeg"], "medical_task": "Diagnosis", "body_system": "Skin",
                "question_type": "Reasoning"} for i in range(n)]
    (src / "MM" / "dev.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records[:5]))
    (src / "MM" / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records[5:]))
    with zipfile.ZipFile(src / "images.zip", "w") as archive:
        for i in range(n):
            archive.writestr(f"images/MM-{i}-a.jpeg", jpeg(3 * i))
    return src


def _written(write, *args):
    def build(src):
        write(src, *args)
        return src
    return build


# task -> (fixture download writer, params changed for the small fixture)
FIXTURES = {
    "vqa/pathvqa": (open_parquet, {"sample": 24}),
    "vqa/slake": (slake, {"sample": None}),
    "vqa/medframeqa": (medframeqa, {"sample": 24}),
    "vqa/medxpertqa-mm": (medxpertqa, {"sample": None}),
    "vqa/kvasir-vqa": (_written(write_kvasir, 32), {"sample": 24}),
    "vqa/omnimedvqa": (_written(write_omnimed, 14), {"sample": 24}),
    "vqa/pmc-vqa": (_written(write_pmc, 30), {"sample": 24}),
    "vqa/mmmu-medical": (_written(write_mmmu, 6), {"sample": None}),
    "vqa/vqa-rad": (open_parquet, {"sample": None}),
}


@pytest.mark.parametrize("task_id", sampled(list(FIXTURES), keep=8))
def test_stager_conformance(tmp_path, task_id):
    write, params = FIXTURES[task_id]
    # at least 6 questions in each fixture: a download holding fewer than the task stages is refused as short
    assert_stager_conforms(task_id, write(tmp_path / "download"), tmp_path / "work", case_count=6,
                           params={"smoke": 2, "calibration": 3, **params})
