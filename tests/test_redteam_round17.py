"""Round seventeen of the red team: what conformance round 16 relaxed, what round 16 left, hidden answers public
information decides, state shared across trust levels; through the real runner.

- **A public fact that names the answer** (VQA, class 2): the OmniMedVQA and MMMU stagers published the release's
  `modality_type` / `img_type` in `question.json` as `modality`, and OmniMedVQA's source set ("Chest CT Scan") as
  `body_system`. A "modality recognition" question is answered by that field: an agent matching each option's
  text against the record's other fields (no image read, no model) scored accuracy 1.0 on a 40-question
  OmniMedVQA layout of modality questions over blank images, rating A, through the real runner. The original
  stages no OmniMedVQA or MMMU record (its question.json gives modality/organ for some of its own five sets), so
  both now reach the private answer record only, where the breakdowns read them; the attacker is at chance.
  SLAKE's and MedFrameQA's `modality` stay public: those are among the original's sets whose question.json
  carries modality/organ (upstream-automedbench.md, the VQA file contract).
- **The sub-collection that answers the instrument questions** (VQA, class 2, same class): the Kvasir-VQA stager
  published each row's `source` ("hyper-kvasir" or "kvasir-instrument"); every kvasir-instrument image shows an
  instrument, so "Are there any instruments in the image?" was answered by the field. On a 40-question layout
  (instrument questions, one blank image), an agent answering "Yes" exactly for kvasir-instrument rows scored
  accuracy 1.0, rating A, through the real runner; the field is no longer published (the original stages no
  Kvasir-VQA) and the agent is at the yes/no base rate.
- **A class told apart by its colour mode** (detection, class 1, round 14's classification class): the detection
  stagers published each image in its own mode (grey PNG for a grey source, RGB for a colour one), so a download
  whose images of one finding were saved in another mode than the rest (a grey radiograph exported as RGB by one
  site's converter) told the class by the PNG header. On a BCCD layout of 72 grey-content smears, one cell each at
  a visible position, WBC images stored as grey JPEGs and RBC images as RGB ones, an agent that found the cell by
  thresholding and named its class by the PNG mode scored mAP 1.0, rating A, through the real runner. Every case
  of a staging is now published in one mode (RGB when any source image is colour, grey otherwise): the agent is
  at a guess. Each image keeps its own size: the boxes are in its pixel frame, as the original publishes them
  (meta.json's width and height); resizing would change every answer's coordinates.

Held (code read unless noted; no test kept): what conformance round 16 relaxed. Detection's unscored box is a
box scored 1.0 (an agent could always send equal scores; ties by case id, then box order, rank no better than
its own scores would); at most 20 000 boxes and 8 MiB a file, so millions of unscored boxes or a flood of
VinDr class names are refused or bounded; a non-string, empty or blank name is still an unknown class.
FeTA's float map: NaN/Inf voxels are refused before rounding, rounded values outside the labels are refused
before the bincount, the scorer rounds the same map the checker admitted. Enhancement's all-cases rule only
lowers an incomplete submission's rating. The demo's noise and variant seeds are the staging's secret (the task
file's `seed` is replaced). VQA's `raw_fallback=true` grades the raw output as a second guess (a yes/no
question answered "no" with raw "yes" scores 1 either way): the original's rule, off by default, opt-in and a
score-changing option. Left: SLAKE's and MedFrameQA's public `modality` (the original's question.json carries
modality/organ "for some" of its sets; which ones the reference does not say field by field); the resampling
trace of classification's one size (round 16); a detection download whose findings come at another bit depth
(16-bit sources are min-max scaled: a pixel-statistics trace, not a header).
"""

from __future__ import annotations

import io
import json

import attrs
import numpy as np
import pytest
from automedbench.testing import load_task, run_steps, stage_from_folder
from PIL import Image

MODALITIES = ("CT", "MRI", "X-Ray", "Ultrasound")
SETS = {"Chest CT Scan": "CT", "Brain Tumor MRI": "MRI", "Knee X-Ray": "X-Ray", "Thyroid Ultrasound": "Ultrasound"}


def answering(rule: str) -> str:
    """An agent step that reads only each question.json (`q`) and answers with `rule`, code setting `label` and
    `text` from it: no image read, no model."""
    return f"""
import os, json
data, out = os.environ['DATA_DIR'], os.path.join(os.environ['WORKSPACE_DIR'], 'outputs')
for case in sorted(os.listdir(data)):
    path = os.path.join(data, case, 'question.json')
    if not os.path.isfile(path):
        continue
    q = json.load(open(path))
{rule}
    os.makedirs(os.path.join(out, case), exist_ok=True)
    record = {{"question_id": case, "predicted_label": label, "predicted_answer": text, "raw_model_output": text,
              "model_name": "fields", "runtime_s": 0.1}}
    json.dump(record, open(os.path.join(out, case, 'answer.json'), 'w'))
print('answered')
"""


# the option whose text a field other than the question and options names
BY_FIELDS = answering("""
    told = ' '.join(str(v) for k, v in q.items() if k not in ('question', 'options', 'image_paths')).casefold()
    label = next((k for k, v in sorted(q['options'].items()) if v.casefold() in told), 'A')
    text = q['options'][label]""")


def omnimed_modality_layout(root, per_set: int = 10):
    """An OmniMedVQA download of "Modality Recognition" questions only, over one blank image: the pixels tell
    nothing, the options come in a rotating order, each set is one modality (as the release's sets are)."""
    base = root / "OmniMedVQA"
    buffer = io.BytesIO()
    Image.new("L", (32, 32), 90).save(buffer, format="PNG")
    for s, (name, modality) in enumerate(SETS.items()):
        records = []
        for i in range(per_set):
            image = f"Images/{name}/img_{i}.png"
            (base / image).parent.mkdir(parents=True, exist_ok=True)
            (base / image).write_bytes(buffer.getvalue())
            shift = (s + i) % len(MODALITIES)
            order = MODALITIES[shift:] + MODALITIES[:shift]
            records.append({"dataset": name, "question_id": f"{name}_{i}", "question_type": "Modality Recognition",
                            "question": "What imaging modality was used to take this image?",
                            "gt_answer": modality, "image_path": image, "modality_type": modality,
                            **{f"option_{letter}": text for letter, text in zip("ABCD", order, strict=True)}})
        folder = base / "QA_information" / "Open-access"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{name}.json").write_text(json.dumps(records))
    return root


def test_a_public_fact_never_names_the_answer_to_a_modality_question(tmp_path):
    """Before: `modality` and the source set in each public question.json; the field-matching agent answered all
    40 modality questions right (accuracy 1.0, rating A). Now neither is published (the private record keeps both
    for the breakdowns) and the agent is at chance (a quarter, four options)."""
    track, task = load_task("vqa/omnimedvqa")
    task = attrs.evolve(task, params={**task.params, "sample": None}, case_count=40)  # all 40 (else refused as short)
    root = tmp_path / "root"
    staged = stage_from_folder(track, task, root, omnimed_modality_layout(tmp_path / "download"))
    assert len(staged.case_ids) == 40
    for qid in staged.case_ids:
        public = json.loads((staged.public / qid / "question.json").read_text())
        private = json.loads((staged.private / qid / "answer.json").read_text())
        assert "modality" not in public and "body_system" not in public, public
        assert SETS[private["body_system"]] == private["modality"] == private["answer_text"]
    result, _ = run_steps(task.id, [("python", BY_FIELDS)], out=tmp_path / "runs", data_root=root,
                          warm_evaluator=False, workspace_quota_mb=64)
    assert result.state == "scored", result.error
    assert result.task.partial <= 0.45 and result.aggregate.rating not in ("A", "B"), result.task.partial
    comps = result.task.components
    assert comps["modality=CT"] <= 0.6 and "body_system=Chest CT Scan" in comps, comps  # breakdowns kept


# ------------------------------------------------------------------ the sub-collection that answers (class 2)

BY_SOURCE = answering("""
    label, text = '', 'Yes' if 'instrument' in str(q.get('source', '')) else 'No'""")


def kvasir_instrument_layout(root, count: int = 40):
    """Kvasir-VQA's parquet: the instrument question on one blank image per row; the kvasir-instrument rows
    answer Yes, the hyper-kvasir ones No (as in the release, where every kvasir-instrument image shows one)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    buffer = io.BytesIO()
    Image.new("RGB", (32, 32), (120, 60, 60)).save(buffer, format="PNG")
    rows = [{"image": {"bytes": buffer.getvalue(), "path": f"img{i}.jpg"},
             "source": "kvasir-instrument" if i % 2 else "hyper-kvasir",
             "question": "Are there any instruments in the image?", "answer": "Yes" if i % 2 else "No",
             "img_id": f"img{i}"} for i in range(count)]
    (root / "data").mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), root / "data" / "raw-00000-of-00001.parquet")
    return root


def test_the_sub_collection_never_answers_the_instrument_question(tmp_path):
    """Before: `source` in each public question.json; the agent answering Yes for kvasir-instrument rows scored
    accuracy 1.0, rating A. Now the field is gone and the agent answers No everywhere: the base rate, 0.5."""
    pytest.importorskip("pyarrow")
    track, task = load_task("vqa/kvasir-vqa")
    task = attrs.evolve(task, params={**task.params, "sample": None}, case_count=40)  # all 40 (else refused as short)
    root = tmp_path / "root"
    staged = stage_from_folder(track, task, root, kvasir_instrument_layout(tmp_path / "download"))
    assert len(staged.case_ids) == 40
    assert not any("source" in json.loads((staged.public / q / "question.json").read_text())
                   for q in staged.case_ids)
    result, _ = run_steps(task.id, [("python", BY_SOURCE)], out=tmp_path / "runs", data_root=root,
                          warm_evaluator=False, workspace_quota_mb=64)
    assert result.state == "scored", result.error
    assert result.task.partial <= 0.55, result.task.partial


# ------------------------------------------------------------------ a class told apart by its colour mode (class 1)

# finds the bright cell by a threshold (honest detection), names its class by the PNG's mode alone
BY_MODE = """
import json, os
import numpy as np
from PIL import Image
data, out = os.environ['DATA_DIR'], os.path.join(os.environ['WORKSPACE_DIR'], 'outputs')
modes = set()
for case in sorted(os.listdir(data)):
    path = os.path.join(data, case, 'image.png')
    if not os.path.isfile(path):
        continue
    with Image.open(path) as image:
        mode = image.mode
        ys, xs = np.nonzero(np.asarray(image.convert('L')) > 150)
    modes.add(mode)
    box = {'class': 'WBC' if mode == 'L' else 'RBC', 'score': 0.9,
           'x1': float(xs.min()), 'y1': float(ys.min()), 'x2': float(xs.max() + 1), 'y2': float(ys.max() + 1)}
    os.makedirs(os.path.join(out, case), exist_ok=True)
    open(os.path.join(out, case, 'prediction.json'), 'w').write(json.dumps({'boxes': [box]}))
print('modes', sorted(modes))
"""


def bccd_by_mode(root, count: int = 72, rgb: str = "RBC"):
    """BCCD's VOC layout: grey-content smears with one bright 12x12 cell each at a position of its own; the `rgb`
    class's images are RGB JPEGs of the same grey pixels, the others grey JPEGs."""
    base = root / "BCCD"
    for folder in ("JPEGImages", "Annotations", "ImageSets/Main"):
        (base / folder).mkdir(parents=True, exist_ok=True)
    stems = []
    for k in range(count):
        stem, name = f"BloodImage_{k:05d}", ("WBC", "RBC")[k % 2]
        x, y = 4 + (k * 7) % 44, 4 + (k * 5) % 28
        pixels = np.full((48, 64), 60, dtype=np.uint8)
        pixels[y:y + 12, x:x + 12] = 230
        image = Image.fromarray(pixels)
        (image.convert("RGB") if name == rgb else image).save(base / "JPEGImages" / f"{stem}.jpg", quality=95)
        (base / "Annotations" / f"{stem}.xml").write_text(
            f"<annotation><filename>{stem}.jpg</filename><object><name>{name}</name><bndbox><xmin>{x + 1}</xmin>"
            f"<ymin>{y + 1}</ymin><xmax>{x + 12}</xmax><ymax>{y + 12}</ymax></bndbox></object></annotation>")
        stems.append(stem)
    (base / "ImageSets" / "Main" / "test.txt").write_text("\n".join(stems) + "\n")
    return root


def test_a_class_the_download_stores_in_another_colour_mode_is_not_told_apart_by_the_png_header(tmp_path):
    """Before: WBC cases published as grey PNGs, RBC cases as RGB; the mode-reading agent scored mAP 1.0, rating
    A. Now every case is RGB (a source image is colour) and the agent names one class for all: what guessing one
    class for every well-placed box scores."""
    track, task = load_task("detection/bccd")
    root = tmp_path / "root"
    staged = stage_from_folder(track, task, root, bccd_by_mode(tmp_path / "download"))
    modes = set()
    for case in staged.case_ids:
        with Image.open(staged.public / case / "image.png") as image:
            modes.add(image.mode)
    assert modes == {"RGB"}, modes
    result, _ = run_steps(task.id, [("python", BY_MODE)], out=tmp_path / "runs", data_root=root,
                          warm_evaluator=False, workspace_quota_mb=64)
    assert result.state == "scored", result.error
    # one class named for all: what a localiser guessing one class scores (0.25-0.30 by the staging's case order)
    assert result.task.partial <= 0.4 and result.aggregate.rating != "A", result.task.partial


def test_the_colour_check_reads_a_hostile_download_through_check_image(tmp_path):
    """The mode is read from every drawn image's header before any is decoded, after `check_image`: a file that is
    no image is its one-line reason ("unreadable image header"), not the stager wrapper's generic one."""
    from automedbench.api import UserError

    track, task = load_task("detection/bccd")
    download = bccd_by_mode(tmp_path / "download", rgb="")  # all grey: every header is read
    (download / "BCCD" / "JPEGImages" / "BloodImage_00005.jpg").write_bytes(b"not a JPEG at all")
    with pytest.raises(UserError, match=r"BloodImage_00005\.jpg: unreadable image header"):
        stage_from_folder(track, task, tmp_path / "root", download)
