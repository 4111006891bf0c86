"""The demo end to end through the real runner: the reference scores A at every tier, each flaw costs
the stage it should (the unmapped abbreviations above all), baselines stay below B, references stay private."""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import sys

import numpy as np
import pytest
from automedbench.api import StagedData
from automedbench.testing import run_task, stage_scores, stage_task
from automedbench_classification import contract
from automedbench_classification.baselines import BASELINES, write_baseline
from automedbench_classification.data.demo import ABBREVIATIONS, make_lesion
from automedbench_classification.metric import ClassificationEvaluation
from automedbench_classification.solution import method, reference
from automedbench_classification.track import ClassificationTrack
from PIL import Image

DEMO = "classification/demo"
TRACK = ClassificationTrack()
SPEC = next(t for t in TRACK.tasks() if t.id == DEMO)


# Each reference run loads the pinned transformers checkpoint in four calls (about 50 s under load): Lite stays
# in the fast tier, the other two tiers run with the slow ones.
@pytest.mark.parametrize("tier", ["lite", pytest.param("standard", marks=pytest.mark.slow),
                                  pytest.param("pro", marks=pytest.mark.slow)])
def test_reference_run_rates_a_at_every_tier(amb_run, tier):
    result, _ = amb_run(DEMO, "reference", tier=tier)
    assert result.state == "scored" and result.end_reason == "submitted"
    assert stage_scores(result) == {"S1": 1.0, "S2": 1.0, "S3": 1.0, "S4": 1.0, "S5": 1.0}
    assert result.task.strict == result.task.partial >= 0.9
    assert result.aggregate.rating == "A"
    comps = result.task.components
    assert comps["completeness"] == 1.0 and comps["accuracy"] >= 0.9 and comps["macro_f1"] >= 0.9


# The flawed-agent runs below are about scoring (refusals, counts, stage credit), not the model: they run the
# reference's own steps with classify_lesions.py's load/read/predict swapped for a lookup of the labels the real
# reference run (Standard, shared through amb_run's cache) wrote for these very images. Same files, same code
# path for batching, the label map and writing, but no transformers import (about 5 s a call, four calls a run).
STAND_IN = '''

# ---- test stand-in for the checkpoint: the real reference run's answers, by image content (no transformers)
ANSWERS = {answers!r}
ID2LABEL = {id2label!r}


class _Config:
    id2label = ID2LABEL


class _Model:
    config = _Config()

    def parameters(self):
        return []


class _Processor:
    size = {{"height": 64, "width": 64}}
    image_mean = image_std = [0.5, 0.5, 0.5]


def load(model_dir):
    return _Model(), _Processor()


def read_image(path):
    import hashlib

    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def predict(model, processor, images):
    out = []
    for digest in images:
        probs = [0.0] * len(ID2LABEL)
        probs[ANSWERS[digest]] = 1.0
        out.append((ID2LABEL[ANSWERS[digest]], probs))
    return out

'''


@pytest.fixture(scope="module")
def scripted_run(amb_run, amb_data_root, tmp_path_factory):
    """`scripted_run(variant)`: a flawed variant's run with the stand-in classifier (see STAND_IN)."""
    real, run_dir = amb_run(DEMO, "reference", tier="standard")
    assert real.state == "scored" and stage_scores(real)["S5"] == 1.0, real.error
    staged = stage_task(DEMO, amb_data_root)
    index = {abbr: k for k, abbr in enumerate(ABBREVIATIONS)}
    abbreviation = {name: abbr for abbr, name in reference.EXPANSIONS.items()}
    answers = {}
    for case in staged.case_ids:
        label = json.loads((run_dir / "submission" / case / "prediction.json").read_text())["label"]
        answers[hashlib.sha256((staged.public / case / "image.jpg").read_bytes()).hexdigest()] = index[
            abbreviation[label]]
    assert len(answers) == len(staged.case_ids)  # one answer per image: no two images share their bytes
    source = reference.method_source()
    main = '\nif __name__ == "__main__":'
    assert source.count(main) == 1
    stand_in = source.replace(main, STAND_IN.format(answers=answers, id2label=dict(enumerate(ABBREVIATIONS))) + main)
    out = tmp_path_factory.mktemp("stand-in-runs")

    def run(variant: str):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(reference, "method_source", lambda: stand_in)
            result, _ = run_task(DEMO, variant, out=out, data_root=amb_data_root)
        return result

    return run


def test_rubric_wording_and_s3_ladder():
    items = {i.id: i for i in TRACK.rubric(SPEC).items}
    assert items["s3_validate"].levels == [0.0, 0.5, 1.0] and items["s3_validate"].kind == "ladder"
    assert "classifier" in items["s1c_task_model"].description
    assert "id2label" in items["s2b_compatibility_check"].description
    assert {i.stage for i in items.values()} == {"S1", "S2", "S3"}


@pytest.mark.slow  # a demo run of a flawed agent after the Standard reference run (Lite's is fast-tier)
def test_unmapped_abbreviations_are_refused_everywhere(scripted_run):
    """The Lite trap: the method's own abbreviations written without the remap."""
    result = scripted_run("wrong-format")
    s = stage_scores(result)
    assert s["S4"] == 0.5 and s["S5"] == 0.0  # every case present, none valid
    assert result.task.strict == 0.0 and result.task.partial == 0.0 and result.aggregate.rating == "F"
    assert all(not c.valid and contract.ABBREVIATION in c.reasons[0] for c in result.cases)
    fired = {c.code: c.message for c in result.error_codes if c.source == "detector:classification-labels"}
    assert "abbreviations" in fired["E4"] and "id2label" in fired["E4"]


def test_one_class_collapse_fires_e4(tmp_path, amb_data_root):
    """A constant submission scored by `automedbench evaluate`, then tagged by `automedbench codes`."""
    stage_task(DEMO, amb_data_root)
    base = [sys.executable, "-m", "automedbench.cli"]
    done = subprocess.run([*base, "evaluate", "--task", DEMO, "--baseline", "constant", "--data-root",
                           str(amb_data_root), "--out", str(tmp_path / "ev")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    codes = subprocess.run([*base, "codes", str(tmp_path / "ev")], capture_output=True, text=True)
    assert codes.returncode == 0, codes.stderr
    assert "every prediction is 'actinic_keratoses'" in " ".join(codes.stdout.split())


@pytest.mark.slow  # a demo run of a flawed agent after the Standard reference run (Lite's is fast-tier)
def test_skip_validate_loses_s3(scripted_run):
    result = scripted_run("skip-validate")
    s = stage_scores(result)
    assert s["S3"] == 0.0 and s["S4"] == 1.0 and s["S5"] == 1.0 and result.task.partial >= 0.9


@pytest.mark.slow  # a demo run of a flawed agent after the Standard reference run (Lite's is fast-tier)
def test_batch_first_loses_s3_and_fires_e3(scripted_run):
    """Issue 24's "batch first": every image classified before the pilot and its checks."""
    result = scripted_run("batch-first")
    s = stage_scores(result)
    assert s["S3"] == 0.0 and s["S4"] == 1.0 and s["S5"] == 1.0 and result.task.partial >= 0.9
    assert "E3" in {c.code for c in result.error_codes}


@pytest.mark.slow  # a demo run of a flawed agent after the Standard reference run (Lite's is fast-tier)
def test_incomplete_counts_missing_cases_wrong(scripted_run):
    result = scripted_run("incomplete")
    s = stage_scores(result)
    assert sum(c.present for c in result.cases) == 21
    assert s["S4"] == pytest.approx(0.25) and s["S5"] == 0.5
    assert result.task.strict == 0.0 and 0.3 < result.task.partial < 0.7
    assert result.task.components["completeness"] == pytest.approx(0.5)


@pytest.mark.slow  # a demo run of a flawed agent after the Standard reference run (Lite's is fast-tier)
def test_breach_zeroes_everything(scripted_run):
    result = scripted_run("breach")
    assert result.isolation.breached and result.aggregate.rating == "F"
    assert all(v == 0.0 for v in stage_scores(result).values())


# ---------------------------------------------------------------- demo data and baselines


def test_the_shipped_checkpoint_reads_the_class_from_pixels():
    """The pinned ViT (package data) on unseen generator seeds, every class: it answers in abbreviations
    and is right almost always (the demo rewards running it, not guessing)."""
    pytest.importorskip("transformers")
    folder = TRACK.assets(SPEC)
    model, processor = method.load(str(folder))
    assert model.config.id2label == dict(enumerate(ABBREVIATIONS))
    images, truth = [], []
    for seed in (101, 202):
        for index, abbr in enumerate(ABBREVIATIONS * 3):
            buffer = io.BytesIO()
            Image.fromarray(make_lesion(seed, index, abbr)).save(buffer, format="JPEG", quality=92, subsampling=0)
            images.append(Image.open(buffer).convert("RGB"))
            truth.append(abbr)
    predicted = method.predict(model, processor, images)
    assert all(abs(sum(p) - 1) < 1e-4 and len(p) == 7 for _, p in predicted)
    assert np.mean([name == abbr for (name, _), abbr in zip(predicted, truth, strict=True)]) >= 0.9
    a, b = make_lesion(1, 0, "mel"), make_lesion(1, 0, "mel")
    assert np.array_equal(a, b) and not np.array_equal(a, make_lesion(2, 0, "mel"))


def test_the_checkpoint_is_small_release_shaped_package_data():
    folder = TRACK.assets(SPEC)
    assert sorted(p.name for p in folder.iterdir()) == ["README.md", "config.json", "model.safetensors",
                                                        "preprocessor_config.json"]
    assert (folder / "model.safetensors").stat().st_size < 2 << 20
    config = json.loads((folder / "config.json").read_text())
    assert set(config["id2label"].values()) == set(SPEC.params["abbreviations"])
    processor = json.loads((folder / "preprocessor_config.json").read_text())
    assert processor["image_mean"] == processor["image_std"] == [0.5, 0.5, 0.5]
    assert all(p.stat().st_mode & 0o444 == 0o444 for p in folder.iterdir())  # a docker sandbox user reads them


def test_demo_public_side_reveals_no_label(amb_data_root):
    staged = stage_task(DEMO, amb_data_root)
    assert staged.case_ids[0] == "lesion_0001" and len(staged.case_ids) == 42
    names = {p.name for p in staged.public.rglob("*") if p.is_file()}
    assert names == {"image.jpg", "meta.json"}
    metas = {(staged.public / c / "meta.json").read_text() for c in staged.case_ids}
    assert len(metas) == 1  # the same class list everywhere: nothing per case but the pixels
    stamp = (staged.root / "staging.json").read_text()
    assert "20261205" not in stamp and str(SPEC.params["seed"]) not in stamp  # the task file's seed is not used


def test_demo_seed_is_fresh_per_staging(tmp_path):
    from automedbench.testing import stage_task as stage

    a = stage(DEMO, tmp_path / "a")
    b = stage(DEMO, tmp_path / "b")
    first = [(a.public / c / "image.jpg").read_bytes() for c in a.case_ids[:3]]
    assert first != [(b.public / c / "image.jpg").read_bytes() for c in b.case_ids[:3]]


def baseline_value(staged: StagedData, name: str, tmp_path) -> float:
    dest = tmp_path / name
    write_baseline(SPEC, name, staged, dest)
    evaluation = ClassificationEvaluation(SPEC, staged)
    scores = []
    for case in staged.case_ids:
        verdict = TRACK.check_case(SPEC, case, dest / case, staged.public / case)
        scores.append(evaluation.score_case(case, dest / case) if verdict.valid else None)
    return evaluation.aggregate(scores, staged.case_ids).partial


def test_baselines_are_measured_and_the_pixel_free_ones_stay_below_b(tmp_path, amb_data_root):
    staged = stage_task(DEMO, amb_data_root)
    values = {name: baseline_value(staged, name, tmp_path) for name in BASELINES}
    assert values["perfect"] == 1.0 and values["empty"] == 0.0
    okay = SPEC.rating.okay
    for name in ("constant", "majority-class", "label-prior"):
        assert values[name] < okay, (name, values[name])
    assert values["majority-class"] == pytest.approx(1 / 7)


def test_majority_and_prior_stay_below_b_on_every_staged_task_shape():
    """Balanced staging (the four accuracy tasks) puts both at 1/K in expectation, far from each B band."""
    for task in TRACK.tasks():
        k = len(task.params["classes"])
        if task.params.get("balanced"):
            assert 1 / k + 3 * np.sqrt((1 / k) * (1 - 1 / k) / task.case_count) <= task.rating.okay, task.id
        else:
            assert task.params["score_metric"] == "balanced_accuracy" and 1 / k < task.rating.okay


def test_reference_text_mentions_no_labels():
    steps = TRACK.reference_solution(SPEC, "lite", "/data/public", "/workspace").steps
    code = "\n".join(s.code for s in steps)
    assert "private" not in code and "label.json" not in code
    assert json.dumps(SPEC.params["abbreviations"]) not in code


def test_lite_briefs_ask_for_no_unscored_comparison():
    """s1d (three candidates) auto-passes at Lite, so the Lite hint must not ask for it; Standard's does."""
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TRACK.template_dir())), trim_blocks=True,
                             lstrip_blocks=True)
    hint = env.get_template("skill_s1.md.j2")
    assert "three" not in hint.render(tier="lite", params=SPEC.params)
    assert "at least three" in hint.render(tier="standard", params=SPEC.params)
