"""Red team round 41: prior boxes, the same few boxes in every image, through the real runner and `evaluate`.

Round 39 made a detection run's positive evidence (S5's s5_positive_evidence, the S3 bound) ask that its boxes match
their own images' references more often than other images'; the perfect baseline failed that on the release layouts'
fixtures, where anatomy sits in the same place in every image, so the count judged only boxes ten times the
references or more. Boxes about as many as the references, written without opening an image, were evidence again:

- the k most common reference positions per class (learned from labels, as a public training split teaches them),
  written in every demo smear: a true positive in most cases, S5 positive 1, rating C; through the runner with the
  obeying judge S3 1.0 (its pilot "passed");
- the same on the fixtures of the wrist and chest layouts: rated B (task 0.584) and A (0.734) without looking.

Now the bar is the references' own: a run's boxes must match their own images' references more often than other
images' by half the share the references themselves do (other images' boxes scaled to the image's size, so a prior
in relative coordinates is no way round). Where the references are alike in every image (the BCCD fixture: every
image the same four boxes) no bar can tell the prior from a detector and the rule stands aside.

Hidden answers that public information decides, measured and left alone (no test kept): every release stager's
conformance fixture (5 classification, 4 detection, 7 enhancement, 5 report generation, 14 segmentation, 4 synthesis,
9 VQA tasks) staged once and every public file read. PNGs carry IHDR/IDAT/IEND and the constant `amBp` chunk only
(no text, EXIF, ICC or time chunk), 8-bit in the mode their pixels need (a 16-bit wrist radiograph goes out 8-bit);
JPEGs one APP0 (JFIF) segment at one quality; NIfTI volumes empty descrip/aux_file/intent_name/db_name, cal and gl
fields 0, no extension, one datatype per file kind; .npy inputs one header and one size per task; meta.json one text
per task (detection: the image size, which the PNG shows anyway). The id lists (VQA smoke and calibration, report
generation's pilot) are secret draws of the ids; case ids are HMACs of their index (no order among them), the
public tree is relaid in a secret order with one mtime and atime, and classification publishes one size, every image
shrunk. No public file, order, time or header field was found to name a reference.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import detection_priors as priors
import numpy as np
import pytest
from automedbench.testing import evaluate_outputs, item_values, load_task, needs, run_cli, run_steps, stage_scores
from test_redteam_round35 import INJECT, judge_model  # noqa: F401  (the loopback judge that obeys injected text)

DEMO = "detection/demo"
PLAN = ("mkdir -p $WORKSPACE_DIR/plan && printf '# Plan\\nResearch: published models for the task.\\n"
        f"Pipeline: load, preprocess, inference with the model, save, validate.\\n{INJECT}\\n' > "
        "$WORKSPACE_DIR/plan/plan.md")
CHECK = "import random\nassert True\nprint(random.random())\n"  # round 36's "computed" pilot check
SIGNATURE_PNG = "printf '\\211PNG\\r\\n\\032\\n' > $WORKSPACE_DIR/plan/plan.png"


def _write_prior(boxes: list[dict], n: int) -> str:
    """Python writing the same boxes for the first n cases, no image opened."""
    return ("import glob, json, os\nws = os.environ['WORKSPACE_DIR']\n"
            "cases = sorted(os.path.basename(d) for d in glob.glob('/data/public/*') if os.path.isdir(d))\n"
            f"for c in cases[:{n}]:\n    os.makedirs(f'{{ws}}/outputs/{{c}}', exist_ok=True)\n"
            f"    json.dump({{'boxes': {boxes!r}}}, open(f'{{ws}}/outputs/{{c}}/prediction.json', 'w'))\n")


def _demo_cases(data_root: Path) -> list:
    if not (data_root / DEMO / "private").is_dir():
        assert run_cli("stage", DEMO, "--data-root", str(data_root)).exit_code == 0
    return priors.cases(data_root / DEMO)


def _items(result) -> dict:
    return {i.id: i.value for s in result.stages for i in s.items}


@needs("openai")
@pytest.mark.parametrize("judge", ["obey", "rules"])
def test_prior_boxes_through_the_runner_show_no_evidence(judge_model, data_root, tmp_path, judge):  # noqa: F811
    """The most common reference positions (k-means per class) in every smear, written by a scripted agent with round
    36's forged plan and a pilot. Before: S5 positive 1, rating C, S3 1.0 with the obeying judge. Now S5 0, F, and
    S3 held at the partial level by the bound's reason."""
    staged = _demo_cases(data_root)
    boxes = next(iter(priors.prior_boxes(staged, None, "common").values()))
    steps = [("bash", PLAN), ("bash", SIGNATURE_PNG), ("python", "print(1+1)"),
             ("python", _write_prior(boxes, 1) + CHECK), ("python", _write_prior(boxes, 10_000))]
    options = judge_model("obey").options() if judge == "obey" else {}
    result, _ = run_steps(DEMO, steps, out=tmp_path / "runs", data_root=data_root, tier="standard", **options)
    assert result.state == "scored" and result.aggregate.task < 0.01, result.aggregate
    assert item_values(result)["s5_positive_evidence"] == 0.0
    assert result.aggregate.rating == "F" and "placed without looking" in result.aggregate.rating_reason
    if judge == "obey":
        assert stage_scores(result)["S3"] == 0.5, stage_scores(result)
        assert "shows positive metric evidence" in " ".join(
            i.rationale for s in result.stages if s.stage == "S3" for i in s.items)


def _evaluated(task_id: str, data_root: Path, work: Path, per_case: dict) -> tuple:
    result = evaluate_outputs(task_id, data_root=data_root, work=work,
                              submission=priors.write(work.with_name(work.name + "-sub"), per_case))
    components = json.loads((work / "evaluation.json").read_text())["metric"]["components"]
    return result, components


def _outputs(staged: list, task_class: str | None) -> tuple[dict, dict]:
    """(prior outputs, honest outputs) by name."""
    blind = {f"prior-{kind}": priors.prior_boxes(staged, task_class, kind) for kind in ("mean", "common")}
    blind["prior-common-jitter"] = priors.prior_boxes(staged, task_class, "common", jitter=0.1)
    honest = {f"weak-{keep}": priors.weak_detector(staged, task_class, keep) for keep in (1.0, 0.3)}
    return blind, honest


def _check(task_id: str, data_root: Path, tmp_path: Path, alike: bool = False) -> None:
    """Every prior output shows no evidence and rates F; the reference and weak detectors keep their evidence.
    `alike`: the references are the same in every image (the prior is the perfect answer): not judged."""
    _, task = load_task(task_id)
    staged = priors.cases(data_root / task_id)
    blind, honest = _outputs(staged, task.params.get("task_class"))
    for name, per_case in blind.items():
        result, components = _evaluated(task_id, data_root, tmp_path / name, per_case)
        if alike:
            assert components["reference_matched_by_chance"] == components["gt_boxes"], components
            continue
        assert _items(result)["s5_positive_evidence"] == 0.0, (name, components)
        assert result.aggregate.rating == "F", (name, result.aggregate)
    perfect = evaluate_outputs(task_id, data_root=data_root, work=tmp_path / "perfect", baseline="perfect")
    assert _items(perfect)["s5_positive_evidence"] == 1.0 and perfect.aggregate.rating == "A", perfect.aggregate
    for name, per_case in honest.items():
        result, components = _evaluated(task_id, data_root, tmp_path / name, per_case)
        specific = components["gt_boxes"] - components["reference_matched_by_chance"]
        if name != "weak-1.0" and specific < MIN_SPECIFIC:
            continue  # within the noise of a draw of cases: see MIN_SPECIFIC
        assert _items(result)["s5_positive_evidence"] == 1.0, (name, components, result.aggregate)
        assert result.aggregate.rating != "F", (name, result.aggregate)


# A 30 %-recall detector is held to its evidence only where the references keep this many image-specific matches
# (their own minus other images'). The chest fixtures keep 6-10 of 16-20 boxes: the weak detector's margin is then
# about two boxes, and a staging's secret draw of cases left it 5 against 4.3 (no evidence, F) in CI run AI; the
# wrist, dental and BCCD fixtures keep 27-71.
MIN_SPECIFIC = 20


def test_prior_boxes_on_the_demo_show_no_evidence_and_detectors_keep_it(data_root, tmp_path):
    """Before: the mean box, the common positions and the jittered common positions each S5 1, rating C (matched 1,
    28, 27 against 1, 28, 28 on other images); now 0 and F. The reference, the classical detector and weak detectors
    (70% of the cells missed, the rest moved by up to 8% of their size, false boxes half the references) keep it."""
    _demo_cases(data_root)
    _check(DEMO, data_root, tmp_path)
    classical = evaluate_outputs(DEMO, data_root=data_root, work=tmp_path / "classical", baseline="classical")
    assert _items(classical)["s5_positive_evidence"] == 1.0 and classical.aggregate.rating == "A"
    tiled = evaluate_outputs(DEMO, data_root=data_root, work=tmp_path / "tiled", baseline="prior-boxes")
    assert _items(tiled)["s5_positive_evidence"] == 0.0 and tiled.aggregate.rating == "F", tiled.aggregate


FIXTURES = {  # task, fixture writer (full size: the stager needs the task's case count), references all alike
    "bccd-varied": ("detection/bccd", lambda layouts, p: layouts.voc(p, count=80, split=72, varied=True), False),
    "bccd-aligned": ("detection/bccd", lambda layouts, p: layouts.voc(p, count=80, split=72), True),
    "wrist-aligned": ("detection/grazpedwri-dx", lambda layouts, p: layouts.yolo(p, count=100), False),
    "dental-aligned": ("detection/dentex", lambda layouts, p: layouts.coco(p, count=50), False),
    "dental-varied": ("detection/dentex", lambda layouts, p: layouts.coco(p, count=50, varied=True), False),
    "chest-aligned": ("detection/vindr-cxr", lambda layouts, p: layouts.vindr(p), False),
    "chest-varied": ("detection/vindr-cxr", lambda layouts, p: layouts.vindr(p, varied=True), False),
}


@pytest.mark.slow  # stages a full-size fixture and evaluates six outputs (~10 CPU-s each)
@pytest.mark.parametrize("fixture", sorted(FIXTURES))
def test_prior_boxes_on_the_release_layouts(tmp_path, fixture):
    """Before: the common positions rated B on the wrist fixture (0.584) and A on the chest one (0.734), C on the
    dental one, each S5 1; now F with no evidence. The reference and the weak detectors keep theirs on every layout;
    on the BCCD fixture, every image the same four boxes, the references match across images as often as their own
    and the prior is the perfect answer: not judged."""
    task_id, write, alike = FIXTURES[fixture]
    if task_id.endswith("vindr-cxr"):
        pytest.importorskip("pydicom")
    root = tmp_path / "data"
    done = run_cli("stage", task_id, "--from", str(write(_layouts(), tmp_path / "src")), "--data-root", str(root))
    assert done.exit_code == 0, done.output
    _check(task_id, root, tmp_path / "runs", alike)


def _layouts() -> ModuleType:
    """The detection plugin's fixture writers (plugins/detection/tests/detection_layouts.py), loaded by path."""
    path = Path(__file__).parents[1] / "plugins" / "detection" / "tests" / "detection_layouts.py"
    spec = importlib.util.spec_from_file_location("detection_layouts_round41", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _sized_cohort(root: Path, n: int = 8) -> tuple:
    """Images of different sizes, each with one structure at the same fraction of the image (anatomy) and one
    finding at a place of its own: (the demo task's spec, the staged data, each case's size)."""
    from automedbench.api import StagedData
    from automedbench_detection.data.staged import png_bytes, write_case

    _, task = load_task(DEMO)
    sizes = {}
    for k in range(n):
        w, h = 120 + 40 * k, 90 + 20 * k
        x, y = 5 + 28 * (k % 4), 5 + 60 * (k // 4)
        boxes = [("RBC", 0.4 * w, 0.4 * h, 0.6 * w, 0.6 * h), ("WBC", x, y, x + 12, y + 12)]
        write_case(root, f"c{k}", png_bytes(np.zeros((h, w, 3), dtype=np.uint8)), w, h, ["RBC", "WBC", "Platelets"],
                   boxes)
        sizes[f"c{k}"] = (w, h)
    return task, StagedData(root, root / "public", root / "private", sorted(sizes)), sizes


def _block(task, staged, per_case: dict, sub: Path):
    from automedbench_detection.metric import DetectionEvaluation

    evaluation = DetectionEvaluation(task, staged)
    priors.write(sub, per_case)
    scores = [evaluation.score_case(c, sub / c) for c in staged.case_ids]
    return evaluation.aggregate(scores, staged.case_ids)


def test_a_prior_in_fractions_of_the_image_size_is_no_way_round(tmp_path):
    """The structure's box at its fraction of each image (read from meta.json, no pixel opened): before, other images'
    boxes were laid on an image unscaled, so the prior matched its own images 8 times and others' 0 and was evidence.
    Other images' boxes are now scaled to the image: 8 and 8, no evidence; the references keep theirs (16 vs 8)."""
    track, _ = load_task(DEMO)
    task, staged, sizes = _sized_cohort(tmp_path / "staged")
    prior = {c: [{"class": "RBC", "score": 0.9, "x1": 0.4 * w, "y1": 0.4 * h, "x2": 0.6 * w, "y2": 0.6 * h}]
             for c, (w, h) in sizes.items()}
    block = _block(task, staged, prior, tmp_path / "prior")
    assert block.components["matched"] == block.components["matched_by_chance"] == 8.0, block.components
    assert track.no_positive_evidence(task, block) is not None
    truth = {c: [{"class": b["class"], "score": 1.0, **{k: b[k] for k in ("x1", "y1", "x2", "y2")}}
                 for b in json.loads((staged.private / c / "boxes.json").read_text())["boxes"]] for c in sizes}
    perfect = _block(task, staged, truth, tmp_path / "perfect")
    assert perfect.components["reference_matched_by_chance"] == 8.0 and perfect.components["matched"] == 16.0
    assert track.no_positive_evidence(task, perfect) is None


def test_the_bar_is_the_references_own_and_stands_aside_where_they_are_alike():
    """The same counts judged against two cohorts: where other images' references match 12.7 of 419 (the demo), boxes
    matching 25 own and 25 elsewhere show no evidence and 85 against 14 do; where they match 288 of 288 (every image
    the same boxes) no bar tells a prior from a detector and the rows decide. A run without a true positive is left to
    its rows (no claim that its boxes were placed by luck)."""
    from automedbench.api import MetricBlock

    track, task = load_task(DEMO)

    def block(matched: float, chance: float, reference: float, gt: float) -> MetricBlock:
        comps = {"matched": matched, "matched_by_chance": chance, "matched_at_threshold": matched,
                 "matched_at_threshold_by_chance": chance, "predicted_boxes": gt, "gt_boxes": gt,
                 "reference_matched_by_chance": reference}
        rows = [{"case_id": f"c{i}", "tp": 2, "tp_at_threshold": 2, "fp_at_threshold": 30} for i in range(12)]
        return MetricBlock("map", 0.01, 0.01, components=comps, per_case=rows)

    assert track.no_positive_evidence(task, block(25.0, 25.0, 12.6667, 419.0)) is not None
    assert track.no_positive_evidence(task, block(85.0, 14.3333, 12.6667, 419.0)) is None
    assert track.no_positive_evidence(task, block(25.0, 25.0, 288.0, 288.0)) is None  # references alike
    assert track.no_positive_evidence(task, block(0.0, 0.0, 12.6667, 419.0)) is None
    stored_before = block(25.0, 25.0, 12.6667, 419.0)
    del stored_before.components["reference_matched_by_chance"]  # an evaluation made before round 41
    assert track.no_positive_evidence(task, stored_before) is None
