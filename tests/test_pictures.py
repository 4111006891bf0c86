"""Case pictures (automedbench.pictures) and the evidence the run page links to: the renderer's size budget, the
default picture's bounded readers, the evaluator drawing them (a failing or hostile picture is a note, never a
verdict), the scripts kept from the workspace (never through a link), and the rules judge naming files and cases."""

from __future__ import annotations

import io
import json
import os
import struct
import zlib

import numpy as np
import pytest
from automedbench import pictures
from automedbench.evaluator import evaluate
from automedbench.freeze import freeze
from automedbench.judge import JudgeInput
from automedbench.judges.rules import RulesJudge
from automedbench.pictures import Box, CasePicture, Panel, PictureWriter, default_case_picture, render
from automedbench.plan_artefacts import collect_scripts
from automedbench.plugins import registry
from automedbench.rubric import default_rubric
from automedbench.testing import register_toy_track, stage_task
from automedbench.trace import Trace, workspace_path
from PIL import Image


def png_size(data: bytes) -> tuple[int, int]:
    with Image.open(io.BytesIO(data)) as image:
        assert image.format == "PNG"
        return image.size


def test_a_picture_fits_its_budget_whatever_the_input_size():
    big = np.random.default_rng(0).normal(size=(1500, 2000)).astype(np.float32)
    mask = np.zeros((1500, 2000), np.uint8)
    mask[400:900, 600:1200] = 2
    boxes = [Box(10, 20, 300, 400, "x"), Box(float("nan"), 0, 1, 1), Box(1900, 1400, 5000, 9000, "outside")]
    picture = CasePicture([Panel("in", image=big), Panel("out", image=big, mask=mask, role="output"),
                           Panel("ref", image=big, boxes=boxes, role="reference"), Panel("answer", text="yes")])
    data = render(picture)
    width, height = png_size(data)
    assert len(data) <= pictures.MAX_CASE_BYTES
    assert height <= pictures.THUMB + 16 and width <= 3 * pictures.THUMB + 2 * 6  # the text panel is not drawn
    # thick slices keep their shape: a 40 x 100 slice of 4 mm over 1 mm pixels is drawn 4x as tall as wide
    thick = render(CasePicture([Panel("coronal", image=np.ones((40, 100)), aspect=4.0)]))
    w, h = png_size(thick)
    assert abs((h - 16) / w - 1.6) < 0.05
    assert render(CasePicture([Panel("only text", text="x")])) is None


def test_the_writer_keeps_to_the_run_budget_and_says_what_it_left_out(tmp_path):
    picture = CasePicture([Panel("noise", image=np.random.default_rng(1).integers(0, 255, (256, 256, 3), np.uint8))])
    one = len(render(picture))
    writer = PictureWriter(tmp_path / "pictures", max_bytes=int(one * 2.5))
    for case in ("a", "b", "c", "d"):
        writer.add(case, picture)
    writer.add("e", None, "no picture: ValueError: boom")
    writer.close()
    index = json.loads((tmp_path / "pictures" / "index.json").read_text())
    files = [c["file"] for c in index["cases"]]
    assert files == ["case-0000.png", "case-0001.png", None, None, None]  # two fit in 2.5 pictures' bytes
    assert all("budget" in c["note"] for c in index["cases"][2:4]) and "boom" in index["cases"][4]["note"]
    assert index["bytes"] == sum(p.stat().st_size for p in (tmp_path / "pictures").glob("*.png"))


def _png_header(width: int, height: int) -> bytes:
    """A PNG that declares `width` x `height` pixels and holds almost none (a decompression bomb's header)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b""))


def test_the_default_picture_draws_each_file_by_its_kind_and_reads_within_bounds(tmp_path):
    inputs, outputs, reference = tmp_path / "in", tmp_path / "out", tmp_path / "ref"
    for folder in (inputs, outputs, reference):
        folder.mkdir()
    Image.fromarray(np.full((40, 60, 3), 90, np.uint8)).save(inputs / "image.png")
    np.save(inputs / "volume.npy", np.zeros((8, 30, 20), np.float32))
    (outputs / "answer.json").write_text('{"label": "<b>melanoma</b>"}')
    (reference / "label.txt").write_text("nevus")
    (reference / "huge.png").write_bytes(_png_header(10_000, 8_000))  # declares 8e7 pixels, holds none
    picture = default_case_picture(["image.png", "volume.npy"], ["answer.json", "mask.xyz"], inputs, outputs,
                                   reference)
    kinds = [(p.title, p.image is not None, bool(p.text), p.note[:22]) for p in picture.panels]
    assert kinds == [("input image.png", True, False, ""), ("input volume.npy", True, False, ""),
                     ("output answer.json", False, True, ""), ("output mask.xyz", False, False, "missing"),
                     ("reference huge.png", False, False, "not drawn: UserError: "),  # refused unread
                     ("reference label.txt", False, True, "")]
    assert picture.panels[1].image.shape == (30, 20)  # the middle slice along the thinnest axis
    assert "declares 10000x8000" in picture.panels[4].note and str(tmp_path) not in picture.panels[4].note
    with pytest.raises(Exception, match="declares"):  # refused before decoding; the evaluator notes it
        pictures.file_panel(reference / "huge.png", "reference")
    os.symlink("/etc/passwd", outputs / "linked.txt")
    with pytest.raises(ValueError, match="not a regular file"):
        pictures.file_panel(outputs / "linked.txt", "output")
    missing = default_case_picture(["image.png"], ["answer.json"], inputs, None, tmp_path / "nowhere")
    assert [p.note for p in missing.panels] == ["", "no valid output"]


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    register_toy_track()
    data = tmp_path_factory.mktemp("pictures-data")
    track, task = registry().task("toy/vowels")
    return track, task, stage_task("toy/vowels", data)


def test_the_evaluator_draws_each_case_and_a_failing_picture_is_only_a_note(toy, tmp_path, monkeypatch):
    track, task, staged = toy
    outputs = tmp_path / "outputs"
    track.write_baseline(task, "perfect", staged, outputs)
    (outputs / staged.case_ids[1] / "answer.txt").write_text("many")  # invalid
    for child in (outputs / staged.case_ids[2]).iterdir():  # missing
        child.unlink()
    manifest = freeze(outputs, tmp_path / "submission", submitted=True)
    plain = evaluate(track, task, staged, tmp_path / "submission", manifest)
    drawn = evaluate(track, task, staged, tmp_path / "submission", manifest, pictures=tmp_path / "pictures")
    assert drawn.cases == plain.cases and drawn.metric == plain.metric  # pictures change no verdict
    index = json.loads((tmp_path / "pictures" / "index.json").read_text())
    entries = {e["case_id"]: e for e in index["cases"]}
    assert list(entries) == staged.case_ids
    assert [t["text"] for t in entries[staged.case_ids[0]]["texts"]][1:] == ["1", "1"] or entries[
        staged.case_ids[0]]["texts"][1]["text"] == entries[staged.case_ids[0]]["texts"][2]["text"]
    assert entries[staged.case_ids[1]]["texts"][1]["text"] == "(no valid answer)"
    assert entries[staged.case_ids[1]]["caption"].startswith("invalid:")
    assert entries[staged.case_ids[2]]["caption"].startswith("missing:")
    # a track whose picture fails (or hits a hostile file): noted per case, the evaluation unchanged
    evaluation_class = type(track.evaluation(task, staged, {}))

    def broken(self, case_id, submitted):
        raise MemoryError("picture too big")

    monkeypatch.setattr(evaluation_class, "case_picture", broken)
    failed = evaluate(track, task, staged, tmp_path / "submission", manifest, pictures=tmp_path / "p2")
    assert failed.cases == plain.cases and failed.metric == plain.metric
    notes = [e["note"] for e in json.loads((tmp_path / "p2" / "index.json").read_text())["cases"]]
    assert notes and all(n.startswith("no picture: MemoryError") for n in notes)
    # a pilot's contract check draws nothing
    evaluate(track, task, staged, tmp_path / "submission", manifest, check_only=True, pictures=tmp_path / "p3")
    assert not (tmp_path / "p3").exists()


def test_scripts_are_kept_only_from_inside_the_workspace_and_never_through_a_link(tmp_path):
    workspace, dest = tmp_path / "workspace", tmp_path / "artefacts"
    (workspace / "src").mkdir(parents=True)
    (workspace / "infer.py").write_text("print('infer')")
    (workspace / "src" / "model.py").write_text("print('model')")
    os.symlink("/etc/passwd", workspace / "leak.py")
    os.symlink(tmp_path, workspace / "up")
    (tmp_path / "secret.py").write_text("secret")
    code = ("cd /workspace && python infer.py && python src/model.py && python leak.py && python up/secret.py "
            "&& python ../secret.py && python /data/public/x.py && python /workspace/./infer.py")
    events = [{"type": "start", "workspace_dir": "/workspace"},
              {"type": "tool", "name": "execute_code", "turn": 1, "call_id": "c1", "code": code, "exit_code": 0}]
    kept = collect_scripts(workspace, events, dest)
    assert kept == ["infer.py", "src/model.py"]
    assert (dest / "scripts" / "src" / "model.py").read_text() == "print('model')"
    assert not (dest / "scripts" / "leak.py").exists() and not (dest / "scripts" / "up").exists()
    assert workspace_path("/workspace/a/../b.py") is None and workspace_path("/tmp/x.py") is None
    assert Trace(events).scripts(events[1])[:2] == ["infer.py", "src/model.py"]


def _call(turn: int, code: str, exit_code: int = 0, cases: int = 0, changed: list[str] | None = None) -> dict:
    return {"type": "tool", "name": "execute_code", "turn": turn, "call_id": f"c{turn}", "language": "bash",
            "code": code, "exit_code": exit_code, "stdout": "", "cases_with_outputs": cases,
            "changed_cases": changed or []}


def test_rules_verdicts_name_their_files_and_cases_and_where_a_failure_happened():
    track, task = registry().task("segmentation/demo")
    rubric = [i for i in track.rubric(task).items if i.at_tier("standard") == "graded"]
    events = [{"type": "start", "workspace_dir": "/workspace"},
              _call(1, "pip install nibabel", exit_code=1),
              _call(2, "python3 /workspace/run.py --all", cases=5, changed=[f"case_00{i}" for i in range(5)])]
    inp = JudgeInput(task, "standard", rubric, "# plan\n", None, events)
    verdict = {v.id: v for v in RulesJudge().grade(inp).items}
    assert verdict["s1a_plan_md"].evidence_files == ["plan/plan.md"]
    assert verdict["s1e_plan_png"].value == 0 and verdict["s1e_plan_png"].evidence_files == ["plan/plan.png"]
    s3 = verdict["s3_validate"]  # no pilot: the batch that wrote every case at once is where it failed
    assert s3.value == 0 and s3.evidence_turns == [2] and s3.evidence_cases[:2] == ["case_000", "case_001"]
    assert "run.py" in s3.evidence_files
    assert verdict["s2c_env_ready"].value == 0 and verdict["s2c_env_ready"].evidence_turns == [1]
    assert default_rubric().items  # the generic rubric names the same rules
