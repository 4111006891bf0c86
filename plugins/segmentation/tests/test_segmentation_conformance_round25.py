"""The fourteen segmentation release tasks against the original's checker and scorer (round 25).

The original (`eval_seg`), restated here in `original_*`: organ + lesion tasks (`kidney`, `liver`, `pancreas`
configs, no `task_type`) check `lesion.nii.gz` for values exactly {0, 1} and the input's shape, and score both
masks binarised at > 0.5 (both empty 1, one empty 0); Task = 0.5 · mean lesion Dice over the cases whose reference
has a lesion voxel (0 with none) + 0.5 · mean organ Dice. Label-map tasks (`task_type: multiclass`, FeTA's config:
`tissue_labels` 1-7, `t2w.nii.gz` -> `dseg.nii.gz`) round the map (`np.rint`), accept it when the rounded values
lie in {0} ∪ labels and the shape is the input's, and take the macro mean over labels of each label's mean Dice
over the cases. The release tasks the original has no config for are its multi-class rule with each task file's
labels and file names (README: "follow the track's existing rules").

Fuzzed for this round on 100 generated cohorts per task (1-4 cases; uint8/int16/int32/uint16/int64/float32/
float64 masks, scaled int16 storage, -0.0 background, empty, shifted, noisy and wrong-structure maps, missing
cases, a missing organ file, extra files, a plane too many, an out-of-range label, NaN, a 4-D (x, y, z, 1) map,
soft maps): per-case Dice and the cohort Task equal to the original's on every task (max abs difference 0);
validity equal except the documented departures (a missing `organ.nii.gz`, soft maps outside FeTA), grade equal
except the documented ones (rated on the Task, not the lesion medal; F without positive evidence; PANTHER's tumour
Dice; the `present_dice` cap). No change was needed: the test pins the agreement for each release task.
"""

from __future__ import annotations

from pathlib import Path

import attrs
import numpy as np
import pytest
from automedbench.testing import load_task
from automedbench_segmentation import contract, io, metric
from test_segmentation_conformance_round18 import original_dice  # the original's binary Dice, restated there

SHAPE = (10, 9, 6)
AFFINE = np.diag([0.9, 0.9, 1.5, 1.0])
# release id -> our task (full-release-tasks.md)
RELEASE = {
    "kidney-seg-task": "kidney", "pancreas-seg-task": "pancreas", "pancreas-oar-seg-task": "pancreas-oar",
    "liver-seg-task": "liver", "aeropath-seg-task": "aeropath", "tsg-multiorgan-seg-task": "totalsegmentator",
    "colon-seg-task": "colon", "hepaticvessel-seg-task": "hepaticvessel", "spleen-seg-task": "spleen",
    "heart-seg-task": "heart", "prostate-seg-task": "prostate", "feta-seg-task": "feta",
    "panther-t1-seg-task": "panther-t1", "panther-t2-seg-task": "panther-t2",
}
# the original's FeTA config (`feta-seg-task/config.yaml`): its file names and label ids
ORIGINAL_FETA = {"input": "t2w.nii.gz", "output": "dseg.nii.gz", "labels": [1, 2, 3, 4, 5, 6, 7]}
DTYPES = (np.uint8, np.int16, np.int32, np.uint16, np.float32, np.float64)


def original_binary_valid(pred: np.ndarray) -> bool:
    return pred.shape == SHAPE and set(np.unique(pred).tolist()) <= {0.0, 1.0}


def original_multiclass_valid(pred: np.ndarray, labels: list[int]) -> bool:
    if not np.isfinite(pred).all():  # NaN casts to a huge negative integer there: no label
        return False
    return pred.shape == SHAPE and set(np.unique(np.rint(pred).astype(np.int64)).tolist()) <= {0, *labels}


def original_binary_task(cases: list[dict[str, np.ndarray]]) -> tuple[list[tuple[float, float]], float]:
    per = [(original_dice(c["pred"]["organ.nii.gz"], c["ref"]["organ.nii.gz"]),
            original_dice(c["pred"]["lesion.nii.gz"], c["ref"]["lesion.nii.gz"])) for c in cases]
    lesion = [d for (_, d), c in zip(per, cases, strict=True) if (c["ref"]["lesion.nii.gz"] > 0.5).any()]
    task = 0.5 * (float(np.mean(lesion)) if lesion else 0.0) + 0.5 * float(np.mean([o for o, _ in per]))
    return per, task


def original_multiclass_task(cases: list[dict[str, np.ndarray]], name: str,
                             labels: list[int]) -> tuple[list[dict[int, float]], dict[int, float]]:
    per = []
    for c in cases:
        pred, ref = np.rint(c["pred"][name]).astype(np.int32), np.rint(c["ref"][name]).astype(np.int32)
        per.append({k: original_dice((pred == k).astype(np.uint8), (ref == k).astype(np.uint8)) for k in labels})
    return per, {k: float(np.mean([p[k] for p in per])) for k in labels}


def _blob(rng: np.random.Generator) -> np.ndarray:
    mask = np.zeros(SHAPE, np.uint8)
    lo = [int(rng.integers(0, s - 3)) for s in SHAPE]
    hi = [a + int(rng.integers(2, 5)) for a in lo]
    mask[lo[0]:hi[0], lo[1]:hi[1], lo[2]:hi[2]] = 1
    return mask


def _references(rng: np.random.Generator, task, labels: list[int]) -> dict[str, np.ndarray]:
    if task.params["kind"] == "organ_lesion":
        organ = _blob(rng)
        lesion = organ & _blob(rng) if rng.random() < 0.8 else np.zeros(SHAPE, np.uint8)
        return {"organ.nii.gz": organ | lesion, "lesion.nii.gz": lesion}
    ref = np.zeros(SHAPE, np.uint8)
    for k in labels:
        if k == labels[0] or rng.random() < 0.8:  # every map holds its first label, as the stagers require
            ref[_blob(rng) > 0] = k
    return {task.output_files[0]: ref}


def _prediction(rng: np.random.Generator, ref: np.ndarray, labels: list[int], way: str) -> np.ndarray:
    if way == "perfect":
        pred = ref.copy()
    elif way == "empty":
        pred = np.zeros_like(ref)
    elif way == "shifted":
        pred = np.roll(ref, int(rng.integers(-2, 3)), axis=int(rng.integers(3)))
    elif way == "other structures":
        pred = np.where(rng.random(SHAPE) < 0.1, rng.choice([0, *labels], size=SHAPE), 0).astype(np.uint8)
    else:  # noisy
        flip = rng.random(SHAPE) < rng.choice([0.02, 0.1, 0.4])
        pred = np.where(flip, rng.choice([0, *labels], size=SHAPE), ref).astype(np.uint8)
    return pred.astype(DTYPES[int(rng.integers(len(DTYPES)))])


def _cohort(tmp: Path, task, rng: np.random.Generator, soft: bool) -> tuple[list[str], list[dict]]:
    labels = _labels(task)
    ids = [f"c{k}" for k in range(int(rng.integers(1, 5)))]
    cases = []
    for case_id in ids:
        for name in task.input_files:
            io.save(tmp / "public" / case_id / name, np.zeros(SHAPE, np.float32), AFFINE)
        refs = _references(rng, task, labels)
        way = str(rng.choice(["perfect", "noisy", "noisy", "shifted", "empty", "other structures"]))
        preds = {name: _prediction(rng, ref, labels, way) for name, ref in refs.items()}
        if soft:  # FeTA: a float map with resampling noise, read rounded by both
            preds = {n: (p + rng.uniform(-0.45, 0.45, SHAPE)).astype(np.float32) for n, p in preds.items()}
        for name in refs:
            io.save(tmp / "private" / case_id / name, refs[name], AFFINE)
            io.save(tmp / "out" / case_id / name, preds[name], AFFINE)
        (tmp / "out" / case_id / "notes.txt").write_text("an extra file is not read")
        cases.append({"ref": refs, "pred": preds})
    return ids, cases


def _labels(task) -> list[int]:
    return sorted(int(k) for k in task.params["labels"]) if task.params["kind"] == "multilabel" else [1]


def _task(short: str):
    task = load_task(f"segmentation/{short}")[1]
    # Dice only: the surface components (MONAI) are round 15's subject
    return attrs.evolve(task, params={**task.params, "surface_metrics": False})


def _ours(task, tmp: Path, ids: list[str]):
    cache = io.CaseCache()
    scores = []
    for case_id in ids:
        cache.begin(case_id)
        out = tmp / "out" / case_id
        verdict = contract.check_case(task, case_id, out, tmp / "public" / case_id, cache)
        assert verdict.valid, verdict.reasons
        score = metric.score_multilabel if task.params["kind"] == "multilabel" else metric.score_organ_lesion
        scores.append(score(task, case_id, out, tmp / "private" / case_id, cache))
    return scores, metric.aggregate(task, scores, ids, tmp / "private")


def test_every_release_task_is_staged_by_a_task_of_ours():
    """Each release id of the track names an installed task, with the original's files and labels for FeTA."""
    for short in RELEASE.values():
        assert load_task(f"segmentation/{short}")[1].track == "segmentation"
    feta = load_task("segmentation/feta")[1]
    assert feta.input_files == [ORIGINAL_FETA["input"]] and feta.output_files == [ORIGINAL_FETA["output"]]
    assert _labels(feta) == ORIGINAL_FETA["labels"]
    for short in ("kidney", "liver", "pancreas"):
        assert load_task(f"segmentation/{short}")[1].output_files == ["organ.nii.gz", "lesion.nii.gz"]


@pytest.mark.parametrize("release_id", sorted(RELEASE))
def test_generated_submissions_score_as_the_original(tmp_path, release_id):
    """Random legal cohorts (dtypes, empty, shifted, noisy, wrong-structure maps, an extra file): per-case Dice and
    the Task equal the original's; for PANTHER the Task is the tumour label's mean Dice (README), the macro mean
    a component."""
    short = RELEASE[release_id]
    task = _task(short)
    labels = _labels(task)
    rng = np.random.default_rng(sorted(RELEASE).index(release_id))
    worst = 0.0
    for k in range(6):
        tmp = tmp_path / str(k)
        ids, cases = _cohort(tmp, task, rng, soft=short == "feta" and k % 2 == 1)
        scores, block = _ours(task, tmp, ids)
        if task.params["kind"] == "organ_lesion":
            per, expected = original_binary_task(cases)
            for (organ, lesion), score in zip(per, scores, strict=True):
                worst = max(worst, abs(organ - score.values["organ_dice"]), abs(lesion - score.values["lesion_dice"]))
        else:
            name = task.output_files[0]
            per, per_label = original_multiclass_task(cases, name, labels)
            for dice, score in zip(per, scores, strict=True):
                worst = max(worst, *(abs(dice[j] - score.values[f"dice_{j}"]) for j in labels))
            macro = float(np.mean(list(per_label.values())))
            worst = max(worst, abs(macro - block.components["macro_dice"]))
            primary = task.params.get("primary_label")
            expected = per_label[int(primary)] if primary is not None else macro
        worst = max(worst, abs(expected - block.value), abs(expected - block.partial))
    assert worst < 1e-12


@pytest.mark.parametrize(("short", "way"), [
    ("kidney", "a plane too many"), ("kidney", "value 2"), ("kidney", "NaN"), ("kidney", "-0.0 background"),
    ("feta", "a plane too many"), ("feta", "rounds to 8"), ("feta", "rounds to -1"), ("feta", "NaN"),
    ("feta", "-0.4 background"), ("totalsegmentator", "label 15"), ("prostate", "label 3"),
    ("hepaticvessel", "a plane too many"),
])
def test_edge_outputs_are_valid_where_the_original_accepts_them(tmp_path, short, way):
    """Outputs the original's checker decides on: shape, values outside the labels, NaN, signed zeros and values
    that round to a label (FeTA) are valid here exactly when valid there."""
    task = _task(short)
    labels = _labels(task)
    name = task.output_files[-1]  # the lesion mask of an organ + lesion task
    ref = _blob(np.random.default_rng(0)) * labels[-1]
    pred = {"a plane too many": np.zeros((*SHAPE[:2], SHAPE[2] + 1), np.uint8),
            "value 2": (ref * 2).astype(np.int16),
            "NaN": np.where(ref > 0, np.nan, 0).astype(np.float32),
            "-0.0 background": np.where(ref > 0, 1.0, -0.0).astype(np.float32),
            "rounds to 8": np.where(ref > 0, 7.6, 0).astype(np.float32),
            "rounds to -1": np.where(ref > 0, 7, -0.6).astype(np.float32),
            "-0.4 background": np.where(ref > 0, 7.3, -0.4).astype(np.float64),
            "label 15": (ref > 0).astype(np.int16) * 15,
            "label 3": (ref > 0).astype(np.int16) * 3}[way]
    for input_name in task.input_files:
        io.save(tmp_path / "public" / "c0" / input_name, np.zeros(SHAPE, np.float32), AFFINE)
    for output in task.output_files:  # the organ mask (binary tasks) a valid one, so the lesion mask decides
        io.save(tmp_path / "out" / "c0" / output, pred if output == name else ref.astype(np.uint8), AFFINE)
    if task.params["kind"] == "organ_lesion":
        expected = original_binary_valid(pred)
    elif task.params.get("round_labels"):
        expected = original_multiclass_valid(pred, labels)
    else:  # no original checker: the multi-class rule on integral maps (soft maps refused here, README)
        expected = original_multiclass_valid(pred, labels) and bool(np.all(pred == np.rint(pred)))
    verdict = contract.check_case(task, "c0", tmp_path / "out" / "c0", tmp_path / "public" / "c0")
    assert verdict.valid == expected, (way, verdict.reasons)
