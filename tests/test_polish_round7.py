"""Polish round 7. The VQA release stagers staged however many questions a short (truncated or partial) download
held, silently: a PathVQA with one of its three test shards staged its rows where the card says 500, a SLAKE whose
test.json was cut short staged what was left of 1,061. Now each refuses in one line, naming the shards the
download's own file names count that are not there, and stages nothing, as every other track's stagers do."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from automedbench.testing import load_task, run_cli
from PIL import Image

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

HELD = 4  # questions in each short download below


def _png(seed: int) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray((np.random.default_rng(seed).random((16, 16)) * 255).astype(np.uint8), "L").save(buffer, "PNG")
    return buffer.getvalue()


def _parquet(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)


def _open_rows() -> list[dict]:
    return [{"image": {"bytes": _png(i), "path": f"{i}.png"}, "question": f"Is there a lesion in {i}?",
             "answer": "yes"} for i in range(HELD)]


def _images(folder: Path, names: list[str]) -> None:
    for k, name in enumerate(names):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(_png(k))


def pathvqa(root: Path) -> None:  # the first of three test shards
    _parquet(root / "data" / "test-00000-of-00003.parquet", _open_rows())


def vqa_rad(root: Path) -> None:  # its one shard, cut short
    _parquet(root / "data" / "test-00000-of-00001-0a1b2c3d.parquet", _open_rows())


def medframeqa(root: Path) -> None:
    rows = [{"question_id": f"v{i}", "question": f"Which frame ({i})?", "options": ["one", "two", "three"],
             "answer": "A", "image": [{"bytes": _png(i), "path": None}]} for i in range(HELD)]
    _parquet(root / "data" / "test-00001-of-00002.parquet", rows)


def kvasir(root: Path) -> None:
    _parquet(root / "data" / "raw-00000-of-00002.parquet", _open_rows())


def slake(root: Path) -> None:
    records = [{"qid": i, "img_name": f"xmlab{i}/source.jpg", "question": f"Which organ ({i})?", "answer": "liver",
                "q_lang": "en"} for i in range(HELD)]
    _images(root / "imgs", [r["img_name"] for r in records])
    (root / "test.json").write_text(json.dumps(records))


def medxpertqa(root: Path) -> None:
    options = {k: f"diagnosis {k}" for k in "ABCDE"}
    lines = [json.dumps({"id": f"MM-{i}", "question": "Diagnosis?", "options": options, "label": "A",
                         "images": [f"MM-{i}.png"]}) for i in range(HELD)]
    _images(root / "images", [f"MM-{i}.png" for i in range(HELD)])
    (root / "MM").mkdir()
    (root / "MM" / "dev.jsonl").write_text(lines[0] + "\n")
    (root / "MM" / "test.jsonl").write_text("\n".join(lines[1:]) + "\n")


def omnimedvqa(root: Path) -> None:
    records = [{"question_id": i, "question_type": "Disease Diagnosis", "question": "Which disease?", "gt_answer": "a",
                "option_A": "a", "option_B": "b", "image_path": f"Images/Set/{i}.png"} for i in range(HELD)]
    _images(root, [r["image_path"] for r in records])
    (root / "QA_information" / "Open-access").mkdir(parents=True)
    (root / "QA_information" / "Open-access" / "Set.json").write_text(json.dumps(records))


def pmcvqa(root: Path) -> None:
    _images(root / "images", [f"f{i}.jpg" for i in range(HELD)])
    with (root / "test_clean.csv").open("w", newline="") as table:
        writer = csv.writer(table)
        writer.writerow(["Figure_path", "Question", "Answer", "Choice A", "Choice B", "Answer_label"])
        writer.writerows([f"f{i}.jpg", "Which?", "a", "A: a", "B: b", "A"] for i in range(HELD))


def mmmu(root: Path) -> None:
    from automedbench_vqa.data.release_sets import MMMU_MEDICAL

    for n, subject in enumerate(MMMU_MEDICAL):
        rows = [{"id": f"validation_{subject}_{i}", "question": "Which?", "options": "['a', 'b']", "answer": "A",
                 "image_1": {"bytes": _png(i), "path": None}, "question_type": "multiple-choice"}
                for i in range(1 if n < HELD else 0)]  # the last subject's shard empty
        _parquet(root / subject / "validation-00000-of-00001.parquet", rows)


SHORT: dict[str, tuple[Callable[[Path], None], list[str]]] = {  # task -> (short download, missing shards named)
    "vqa/pathvqa": (pathvqa, ["data/test-00001-of-00003.parquet", "data/test-00002-of-00003.parquet"]),
    "vqa/vqa-rad": (vqa_rad, []),
    "vqa/medframeqa": (medframeqa, ["data/test-00000-of-00002.parquet"]),
    "vqa/kvasir-vqa": (kvasir, ["data/raw-00001-of-00002.parquet"]),
    "vqa/slake": (slake, []),
    "vqa/medxpertqa-mm": (medxpertqa, []),
    "vqa/omnimedvqa": (omnimedvqa, []),
    "vqa/pmc-vqa": (pmcvqa, []),
    "vqa/mmmu-medical": (mmmu, []),
}


@pytest.mark.parametrize("task_id", sorted(SHORT))
def test_every_vqa_release_stager_refuses_a_short_download(tmp_path, task_id):
    """Before: exit 0, 4 questions staged for a task whose card says hundreds, nothing said."""
    write, missing = SHORT[task_id]
    download, data = tmp_path / "download", tmp_path / "data"
    download.mkdir()
    write(download)
    _, task = load_task(task_id)
    needed = task.params["sample"] if task.params.get("sample") is not None else task.case_count
    done = run_cli("stage", task_id, "--from", str(download), "--data-root", str(data))
    assert done.exit_code != 0, done.output
    (line,) = done.stderr.strip().splitlines()
    assert f"only {HELD} questions, {task_id} needs {needed}" in line, line
    assert line.endswith("a truncated or partial download?"), line
    if missing:
        assert f"; {len(missing)} file(s) its names count are missing ({', '.join(missing)})" in line, line
    else:
        assert "missing" not in line, line
    assert not list(data.rglob("question.json")) and not list(data.rglob("manifest.json"))  # nothing staged


def test_the_missing_shards_are_those_the_names_count(tmp_path):
    """Shards of two splits, one complete, and a hash tail: only the absent indices of the short one are named."""
    from automedbench_vqa.data.short import shard_gaps

    names = ["data/train-00000-of-00002-ab12.parquet", "data/train-00001-of-00002-cd34.parquet",
             "data/test-00000-of-00004.parquet", "data/test-00003-of-00004.parquet", "data/extra.parquet"]
    assert shard_gaps([tmp_path / n for n in names], tmp_path) == [
        "data/test-00001-of-00004.parquet", "data/test-00002-of-00004.parquet"]


def test_stage_help_says_a_short_download_is_refused_by_every_track():
    """Every track's release stagers refuse a short download now (VQA the last); `stage --help` says it once."""
    said = " ".join(run_cli("stage", "--help").stdout.split())
    assert "A download holding fewer usable cases than the task stages" in said, said
    assert "is refused in one line saying what it lacks, and nothing is staged" in said, said


def _openi_download(root: Path, with_findings: int, without: int = 0) -> None:
    """Open-i's extracted NLMCXR_reports + NLMCXR_png: one XML per study, one PNG each; `without` studies have
    no FINDINGS (not staged, as R2Gen's split)."""
    (root / "ecgen-radiology").mkdir(parents=True)
    (root / "png").mkdir()
    for k in range(1, with_findings + without + 1):
        (root / "png" / f"CXR{k}_IM-{k}-1001.png").write_bytes(_png(k))
        findings = (f'<AbstractText Label="FINDINGS">The heart size is normal. The lungs are clear {k}.</AbstractText>'
                    if k <= with_findings else "")
        (root / "ecgen-radiology" / f"{k}.xml").write_text(
            f'<eCitation><Abstract>{findings}<AbstractText Label="IMPRESSION">Normal.</AbstractText></Abstract>'
            f'<parentImage id="CXR{k}_IM-{k}-1001"/></eCitation>')


def _sources(staged) -> set[str]:
    return {json.loads((staged.private / case / "facts.json").read_text())["source_id"] for case in staged.case_ids}


def test_iu_xray_from_open_i_stages_the_task_s_count_drawn_from_the_secret(tmp_path):
    """Open-i has no split: before, every study with findings was staged (~3,300 for a card saying 590). Now the
    task's count is drawn from those by the staging's secret, a fresh draw each staging, never the XML order."""
    import attrs
    from automedbench.testing import stage_from_folder

    _openi_download(tmp_path / "download", with_findings=12, without=3)
    track, task = load_task("report_gen/iu-xray")
    task = attrs.evolve(task, case_count=5)
    drawn = [_sources(stage_from_folder(track, task, tmp_path / f"data{k}", tmp_path / "download"))
             for k in range(4)]
    assert all(len(d) == 5 and d <= {str(k) for k in range(1, 13)} for d in drawn), drawn
    assert len({frozenset(d) for d in drawn}) > 1, drawn  # drawn anew, not the same five each time
    assert any(d != {"1", "2", "3", "4", "5"} for d in drawn), drawn  # not the first in the download's order


@pytest.mark.slow  # stages 600 Open-i studies through the CLI: ~4 CPU-s, but ~18 s of the staging's fsyncs
def test_iu_xray_from_open_i_stages_590_through_the_cli(tmp_path):
    """The release's IU X-ray test set is R2Gen's test split, 590 studies (the card's case_count); before, an
    Open-i download of 600 studies with findings staged all 600."""
    _openi_download(tmp_path / "download", with_findings=600)
    done = run_cli("stage", "report_gen/iu-xray", "--from", str(tmp_path / "download"), "--data-root",
                   str(tmp_path / "data"))
    assert done.exit_code == 0, done.output
    assert "staged 590 case(s) of report_gen/iu-xray" in " ".join(done.stdout.split()), done.stdout
