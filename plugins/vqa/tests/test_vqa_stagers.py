"""Stagers on small files written in each dataset's published layout."""

from __future__ import annotations

import io
import json
import re
import zipfile

import attrs
import pytest
from automedbench.api import UserError
from automedbench.testing import load_task
from PIL import Image

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")


def png(value: int, size=(16, 12)) -> bytes:
    buffer = io.BytesIO()
    Image.new("L", size, value).save(buffer, format="PNG")
    return buffer.getvalue()


def jpeg(value: int) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (20, 10), (value, 0, 0)).save(buffer, format="JPEG")
    return buffer.getvalue()


def task(name: str, case_count: int = 1, **params):
    """The task for a small fixture: `case_count` (1 unless given) is the least it must hold without a sample (a
    short download's refusal is tested in tests/test_polish_round7.py)."""
    track, spec = load_task(f"vqa/{name}")
    return track, attrs.evolve(spec, case_count=case_count, params={**spec.params, **params})


def staged_questions(staged):
    return {q: json.loads((staged.public / q / "question.json").read_text()) for q in staged.case_ids}


def gold(staged, qid):
    return json.loads((staged.private / qid / "answer.json").read_text())


def by_source(staged) -> dict[str, str]:
    """The dataset's question id -> the published one (drawn from the staging's secret)."""
    return {gold(staged, q)["source_id"]: q for q in staged.case_ids}


def write_parquet(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)


def test_pathvqa_parquet_secret_sample(tmp_path):
    rows = [{"image": {"bytes": png(i * 20), "path": f"{i}.png"}, "question": f"question {i}?",
             "answer": "yes" if i % 2 else "gland"} for i in range(9)]
    write_parquet(tmp_path / "src" / "data" / "test-00000-of-00001.parquet", rows[:5])
    write_parquet(tmp_path / "src" / "data" / "test-00001-of-00001.parquet", rows[5:])
    write_parquet(tmp_path / "src" / "data" / "train-00000-of-00001.parquet", rows[:1])
    track, spec = task("pathvqa", sample=6, smoke=2, calibration=3)
    staged = track.stage(spec, tmp_path / "a", tmp_path / "src")
    again = track.stage(spec, tmp_path / "b", tmp_path / "src")
    assert len(staged.case_ids) == len(again.case_ids) == 6 and not set(staged.case_ids) & set(again.case_ids)
    assert all(re.fullmatch(r"pathvqa_[0-9a-f]{8}", q) for q in staged.case_ids)
    assert by_source(staged).keys() != by_source(again).keys() or [by_source(staged)[k] for k in sorted(
        by_source(staged))] != sorted(staged.case_ids)  # a secret sample, or at least a secret order
    questions = staged_questions(staged)
    first = staged.case_ids[0]
    index = int(gold(staged, first)["source_id"].split("_")[1])
    q = questions[first]
    assert q["question"] == f"question {index}?" and q["mode"] == "open_ended"
    assert not {"answer", "answer_text", "answer_label", "label"} & set(q)  # no gold field in public
    published = staged.public / first / q["image_paths"][0]
    assert Image.open(published).size == (16, 12) and published.suffix == ".png"
    assert published.read_bytes() not in {png(i * 20) for i in range(9)}  # re-encoded: never the source's bytes
    assert gold(staged, first)["answer_text"] == ("yes" if index % 2 else "gland")
    assert q["question_type"] == "open_form"  # from the wording ("question N?"), never from the gold
    smoke = (staged.public / "smoke_ids.txt").read_text().split()
    calibration = (staged.public / "calibration_ids.txt").read_text().split()
    assert len(smoke) == 2 and len(calibration) == 3 and not set(smoke) & set(calibration)
    assert set(smoke + calibration) <= set(staged.case_ids)


def test_parquet_without_expected_columns(tmp_path):
    write_parquet(tmp_path / "data" / "test-0.parquet", [{"img": b"x", "question": "q"}])
    track, spec = task("vqa-rad")
    with pytest.raises(UserError, match="missing column"):
        track.stage(spec, tmp_path / "out", tmp_path)
    with pytest.raises(UserError, match="no parquet files"):
        track.stage(spec, tmp_path / "out", tmp_path / "data" / "none")


def slake_records():
    return [
        {"qid": 11, "img_name": "xmlab1/source.jpg", "question": "Is this an MRI?", "answer": "Yes", "q_lang": "en",
         "answer_type": "CLOSED", "location": "Abdomen", "modality": "MRI", "content_type": "Modality"},
        {"qid": 12, "img_name": "xmlab1/source.jpg", "question": "这是什么?", "answer": "肝", "q_lang": "zh",
         "answer_type": "OPEN", "location": "Abdomen", "modality": "MRI", "content_type": "Organ"},
        {"qid": 13, "img_name": "xmlab2/source.jpg", "question": "Which organ is abnormal?", "answer": "Liver",
         "q_lang": "en", "answer_type": "OPEN", "location": "Abdomen", "modality": "CT", "content_type": "Abnormality"},
    ]


@pytest.mark.parametrize("packed", [False, True])
def test_slake_english_only_from_folder_or_zip(tmp_path, packed):
    src = tmp_path / "src"
    src.mkdir()
    (src / "test.json").write_text(json.dumps(slake_records(), ensure_ascii=False))
    images = {"xmlab1/source.jpg": jpeg(10), "xmlab2/source.jpg": jpeg(200)}
    if packed:
        with zipfile.ZipFile(src / "imgs.zip", "w") as archive:
            for name, data in images.items():
                archive.writestr(f"imgs/{name}", data)
    else:
        for name, data in images.items():
            (src / "imgs" / name).parent.mkdir(parents=True, exist_ok=True)
            (src / "imgs" / name).write_bytes(data)
    track, spec = task("slake", smoke=1, calibration=1)
    staged = track.stage(spec, tmp_path / "out", src)
    ids = by_source(staged)
    assert sorted(ids) == ["slake_11", "slake_13"] and not {"slake_11", "slake_13"} & set(staged.case_ids)
    q = staged_questions(staged)[ids["slake_13"]]
    assert q["body_system"] == "Abdomen" and q["modality"] == "CT" and q["question_type"] == "open_form"
    assert q["image_paths"] == ["image.png"]  # decoded and written again: the JPEG's pixels, not its bytes
    assert gold(staged, ids["slake_11"])["answer_text"] == "Yes"
    assert gold(staged, ids["slake_11"])["modality"] == "MRI"


def test_slake_missing_image_and_broken_json(tmp_path):
    (tmp_path / "test.json").write_text(json.dumps(slake_records()))
    (tmp_path / "imgs" / "xmlab1").mkdir(parents=True)
    (tmp_path / "imgs" / "xmlab1" / "source.jpg").write_bytes(jpeg(5))
    track, spec = task("slake")
    with pytest.raises(UserError, match=r"question slake_13: image .*xmlab2/source.jpg not found"):
        track.stage(spec, tmp_path / "out", tmp_path)
    (tmp_path / "test.json").write_text(json.dumps(slake_records())[:50])
    with pytest.raises(UserError, match=r"not valid (UTF-8 )?JSON"):
        track.stage(spec, tmp_path / "out", tmp_path)
    (tmp_path / "test.json").write_text(json.dumps(slake_records()))
    (tmp_path / "imgs" / "xmlab2").mkdir(parents=True)
    (tmp_path / "imgs" / "xmlab2" / "source.jpg").write_bytes(jpeg(6))
    (tmp_path / "imgs" / "xmlab1" / "source.jpg").write_bytes(b"not an image")
    with pytest.raises(UserError, match="not a readable image"):
        track.stage(spec, tmp_path / "out", tmp_path)


def test_medframeqa_frames_and_letters(tmp_path):
    rows = [{"question_id": f"vid{i}_q", "system": "Digestive", "organ": "Liver", "keyword": "k", "modality": "CT",
             "video_id": f"vid{i}", "question": f"Which frame {i}?",
             "options": ["A. first", "B. second", "C. third", "D. fourth", "E. fifth"],
             "image": [{"bytes": jpeg(10 * f), "path": None} for f in range(1 + i % 3)],
             "answer": "B" if i % 2 else "third"} for i in range(4)]
    write_parquet(tmp_path / "data" / "test-00000-of-00001.parquet", rows)
    track, spec = task("medframeqa", sample=None, smoke=1, calibration=1)
    staged = track.stage(spec, tmp_path / "out", tmp_path)
    ids = by_source(staged)
    assert sorted(ids) == ["vid0_q", "vid1_q", "vid2_q", "vid3_q"] and "vid0_q" not in staged.case_ids
    q = staged_questions(staged)[ids["vid2_q"]]
    # the options are dealt in a secret order (option_order.py); the gold letter follows its option's text
    assert sorted(q["options"].values()) == sorted(["first", "second", "third", "fourth", "fifth"])
    assert q["mode"] == "multiple_choice"
    assert q["image_paths"] == ["frame_1.png", "frame_2.png", "frame_3.png"]
    for source, text in (("vid1_q", "second"), ("vid0_q", "third")):
        answer = gold(staged, ids[source])
        assert answer["answer_text"] == text == staged_questions(staged)[ids[source]]["options"][answer["answer_label"]]
    assert gold(staged, ids["vid0_q"])["body_system"] == "Digestive"


def test_medxpertqa_jsonl_and_zip(tmp_path):
    src = tmp_path / "src"
    (src / "MM").mkdir(parents=True)
    options = {"A": "Erythema", "B": "Larva migrans", "C": "Cold agglutinin", "D": "Marmorata", "E": "Ab igne"}

    def rec(i):
        return {"id": f"MM-{i}", "question": f"Diagnosis {i}?", "options": options, "label": "C",
                "images": [f"MM-{i}-a.jpeg"] + ([f"MM-{i}-b.png"] if i == 2 else []),
                "medical_task": "Diagnosis", "body_system": "Integumentary", "question_type": "Reasoning"}

    (src / "MM" / "dev.jsonl").write_text(json.dumps(rec(0)) + "\n")
    (src / "MM" / "test.jsonl").write_text("\n".join(json.dumps(rec(i)) for i in (1, 2)) + "\n")
    with zipfile.ZipFile(src / "images.zip", "w") as archive:
        for i in range(3):
            archive.writestr(f"images/MM-{i}-a.jpeg", jpeg(i))
        archive.writestr("images/MM-2-b.png", png(3))
    track, spec = task("medxpertqa-mm", smoke=1, calibration=1)
    staged = track.stage(spec, tmp_path / "out", src)
    ids = by_source(staged)
    assert sorted(ids) == ["MM-0", "MM-1", "MM-2"]
    q = staged_questions(staged)[ids["MM-2"]]
    assert q["split"] == "test" and q["image_paths"] == ["image_1.png", "image_2.png"]
    assert q["question_type"] == "Reasoning" and "label" not in q
    label = next(k for k, v in q["options"].items() if v == "Cold agglutinin")  # dealt in a secret order
    assert sorted(q["options"].values()) == sorted(options.values())
    assert gold(staged, ids["MM-2"]) == {"question_id": ids["MM-2"], "answer_text": "Cold agglutinin",
                                         "answer_label": label, "question_type": "Reasoning",
                                         "body_system": "Integumentary", "modality": "", "source_id": "MM-2"}
    (src / "MM" / "test.jsonl").write_text(json.dumps(rec(1))[:30] + "\n")
    with pytest.raises(UserError, match=r"test.jsonl:1: not (a )?valid (UTF-8 )?JSON"):
        track.stage(spec, tmp_path / "out2", src)
    (src / "MM" / "test.jsonl").write_text(json.dumps({**rec(1), "images": ["MM-9-a.jpeg"]}) + "\n")
    with pytest.raises(UserError, match=r"image MM-9-a\.jpeg not in images\.zip"):
        track.stage(spec, tmp_path / "out3", src)


def test_a_staged_real_layout_task_scores_through_the_evaluator(tmp_path):
    from automedbench.testing import evaluate_outputs, stage_from_folder

    rows = [{"question_id": f"v{i}", "question": f"q{i}?", "options": ["a", "b", "c", "d", "e"],
             "image": [{"bytes": jpeg(i), "path": None}], "answer": "ABCDE"[i % 5], "system": "Nervous",
             "organ": "Brain", "modality": "MRI"} for i in range(6)]
    write_parquet(tmp_path / "src" / "data" / "test-00000-of-00001.parquet", rows)
    track, spec = task("medframeqa", case_count=6, sample=None)
    staged = stage_from_folder(track, spec, tmp_path / "data", tmp_path / "src")
    assert len(staged.case_ids) == 6
    perfect = evaluate_outputs(spec.id, baseline="perfect", data_root=tmp_path / "data", work=tmp_path / "p")
    assert perfect.task.strict == 1.0 and perfect.task.components["body_system=Nervous"] == 1.0
    constant = evaluate_outputs(spec.id, baseline="constant", data_root=tmp_path / "data", work=tmp_path / "c")
    golds = [gold(staged, q)["answer_label"] for q in staged.case_ids]  # dealt letters, not the download's
    assert constant.task.strict == pytest.approx(golds.count("A") / 6)


@pytest.mark.parametrize("name", ["pathvqa", "vqa-rad", "slake", "medframeqa", "medxpertqa-mm"])
def test_briefs_render_for_every_real_task(name):
    from automedbench.testing import load_task, render_task_brief

    _, spec = load_task(f"vqa/{name}")
    for tier in spec.tiers:
        text = render_task_brief(spec.id, tier, case_ids=["q1", "q2"])
        assert "answer.json" in text and "calibration_ids.txt" in text and "{{" not in text


def test_restage_replaces_and_a_failed_restage_keeps_the_old(tmp_path):
    rows = [{"image": {"bytes": png(i), "path": None}, "question": f"q{i}", "answer": "no"} for i in range(8)]
    write_parquet(tmp_path / "src" / "data" / "test-0.parquet", rows)
    track, spec = task("pathvqa", sample=None)
    track.stage(spec, tmp_path / "out", tmp_path / "src")
    _, smaller = task("pathvqa", sample=3)
    staged = track.stage(smaller, tmp_path / "out", tmp_path / "src")
    on_disk = sorted(p.name for p in staged.public.iterdir() if p.is_dir())
    assert on_disk == staged.case_ids and len(on_disk) == 3
    assert sorted(p.name for p in staged.private.iterdir() if p.is_dir()) == on_disk
    rows[5]["image"] = {"bytes": b"garbage", "path": None}
    write_parquet(tmp_path / "src" / "data" / "test-0.parquet", rows)
    with pytest.raises(UserError, match="not a readable image"):
        track.stage(spec, tmp_path / "out", tmp_path / "src")
    assert sorted(p.name for p in staged.public.iterdir() if p.is_dir()) == on_disk


def test_zip_never_guesses_between_same_named_images(tmp_path):
    records = [{**slake_records()[0], "img_name": "xmlab7/source.jpg"}]
    (tmp_path / "test.json").write_text(json.dumps(records))
    with zipfile.ZipFile(tmp_path / "imgs.zip", "w") as archive:
        archive.writestr("imgs/xmlab1/source.jpg", jpeg(1))
        archive.writestr("imgs/xmlab2/source.jpg", jpeg(2))
    track, spec = task("slake")
    with pytest.raises(UserError, match=r"image xmlab7/source\.jpg not in imgs\.zip"):
        track.stage(spec, tmp_path / "out", tmp_path)


@pytest.mark.parametrize("bad", ["/etc/hostname", "../outside.png", "link/x.png"])
def test_parquet_image_paths_never_leave_the_download(tmp_path, bad):
    # a crafted parquet row with no image bytes and a path: absolute, climbing, or through a symlink
    (tmp_path / "outside.png").write_bytes(png(7))
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "link").symlink_to(tmp_path)
    (tmp_path / "x.png").write_bytes(png(8))
    rows = [{"image": {"bytes": None, "path": bad}, "question": "q?", "answer": "yes"}] + [
        {"image": {"bytes": png(i), "path": f"{i}.png"}, "question": f"q {i}?", "answer": "no"} for i in range(3)]
    write_parquet(tmp_path / "src" / "data" / "test-00000-of-00001.parquet", rows)
    track, spec = task("pathvqa", sample=4, smoke=1, calibration=1)
    with pytest.raises(UserError, match=r"leaves the download|symlink"):
        track.stage(spec, tmp_path / "out", tmp_path / "src")
    assert not (tmp_path / "out" / "public").exists()


def test_a_pixel_bomb_in_a_parquet_cell_is_refused_not_published(tmp_path):
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    bomb = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 90000, 90000, 8, 0, 0, 0, 0)) + chunk(
        b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b"")
    rows = [{"image": {"bytes": bomb, "path": "b.png"}, "question": "q?", "answer": "yes"}] + [
        {"image": {"bytes": png(i), "path": f"{i}.png"}, "question": f"q {i}?", "answer": "no"} for i in range(3)]
    write_parquet(tmp_path / "src" / "data" / "test-00000-of-00001.parquet", rows)
    track, spec = task("pathvqa", sample=4, smoke=1, calibration=1)
    with pytest.raises(UserError, match=r"90000x90000|DecompressionBomb"):
        track.stage(spec, tmp_path / "out", tmp_path / "src")
