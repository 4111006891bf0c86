"""Ratings a trivial or gaming submission cannot earn (issue 22): every track names its trivial baselines as
data (`Track.trivial_baselines`), every one is run on every generated demo and must rate below B, and every
real task's declared bands are checked against the same baselines computed on the track's generated demo."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest
from automedbench.plugins import registry
from automedbench.scoring import positive_cases, rate
from automedbench.testing import evaluate_outputs

# Every demo's every trivial baseline evaluated (~70 evaluations): a minute or more even on one warm evaluator.
pytestmark = pytest.mark.slow

REG = registry()
# One evaluator kept warm for all of them where the campaign built-in offers it (the verdicts are the cold
# path's, tests/test_warm_evaluator.py): the cold one would start an interpreter, the track and report_gen's
# METEOR JVM for each evaluation.
BACKEND = "warm" if "warm" in REG.components["evaluator"] else "process"
TRACKS = sorted({t.split("/", 1)[0] for t in REG.tasks()} - {"toy"})
DEMOS = sorted(t for t in REG.tasks() if t.split("/", 1)[1].startswith("demo") and not t.startswith("toy/"))


def _trivial(task_id: str) -> list[str]:
    return sorted(REG.task(task_id)[0].trivial_baselines())


@pytest.fixture(scope="module")
def results(tmp_path_factory, amb_data_root):
    """(task id, baseline) -> Result, each baseline evaluated once per demo. The demos are the session's
    (`amb_data_root`: under xdist copies of one staging the workers share, which the run page test's runs have
    made by now in the slow tier), not the worker's AUTOMEDBENCH_DATA folder, where this file generated all twelve
    again in a fresh clone (BENCHMARKS.md, "The slow tier mapped")."""
    cache: dict[tuple[str, str], object] = {}
    root = amb_data_root
    work = tmp_path_factory.mktemp("trivial-work")

    def get(task_id: str, name: str):
        if (task_id, name) not in cache:
            cache[task_id, name] = evaluate_outputs(task_id, baseline=name, data_root=root,
                                                    work=Path(work) / task_id.replace("/", "_") / name, backend=BACKEND,
                                                    registry=REG)
        return cache[task_id, name]

    return get


@pytest.mark.parametrize("track_name", TRACKS)
def test_every_track_offers_perfect_empty_constant_and_its_trivial_baselines(track_name):
    track = REG.track(track_name)
    offered = track.baselines()
    assert {"perfect", "empty", "constant"} <= set(offered)
    trivial = track.trivial_baselines()
    assert {"empty", "constant"} <= set(trivial) and set(trivial) <= set(offered)
    assert "perfect" not in trivial


@pytest.mark.parametrize(("task_id", "name"), [(t, b) for t in DEMOS for b in _trivial(t)])
def test_no_trivial_baseline_reaches_b_on_a_demo(results, task_id, name):
    result = results(task_id, name)
    assert result.aggregate.rating not in ("A", "B"), (task_id, name, result.task and result.task.value,
                                                      result.aggregate.rating_reason)


@pytest.mark.parametrize("task_id", DEMOS)
def test_the_perfect_baseline_still_rates_a(results, task_id):
    assert results(task_id, "perfect").aggregate.rating == "A"


REAL = sorted(t for t in REG.tasks() if not REG.task(t)[1].demo and not t.startswith("toy/"))


# Params that change how a real task is scored (not staged): laid over its demo so the demo's generated data is
# scored by the real task's metric (PathCap's nlg-3 on the whole text, its own minimum length).
SCORING_PARAMS = {"report_gen": ("metric_kind", "scored_section", "min_chars", "min_letters")}


@pytest.mark.parametrize("task_id", REAL)
def test_real_task_bands_hold_the_trivial_baselines_below_b(results, amb_data_root, tmp_path, task_id):
    """A real task's bands (and the track's rating cap) applied to each trivial baseline measured on the track's
    generated demo of the same kind, scored by the real task's metric: none reaches B."""
    track, task = REG.task(task_id)
    demo = _demo_for(task_id)
    _, demo_task = REG.task(demo)
    overlay = {k: task.params[k] for k in SCORING_PARAMS.get(track.name, ()) if k in task.params}
    for name in sorted(track.trivial_baselines()):
        result = results(demo, name)
        metric, evaluation = result.task, _evaluation_of(result)
        if overlay:
            evaluation = _score_in_process(track, attrs.evolve(demo_task, params={**demo_task.params, **overlay}),
                                           name, tmp_path / name, amb_data_root)
            metric = evaluation.metric
        letter, reason = rate(evaluation, metric, track.rating_thresholds(task, metric), False,
                              positive_cases(track, demo_task, evaluation), track.rating_cap(task, metric))
        assert letter not in ("A", "B"), (task_id, demo, name, metric.name, metric.value, reason)


def _score_in_process(track, task, name: str, dest: Path, data_root: Path):
    """The baseline written and scored by the track's own checker and metric, in this process (trusted data)."""
    from automedbench.records import Evaluation
    from automedbench.testing import stage_task

    staged = stage_task(task.id, data_root)
    track.write_baseline(task, name, staged, dest)
    evaluation = track.evaluation(task, staged, {})
    verdicts, scores = [], []
    for case in staged.case_ids:
        verdict = track.check_case(task, case, dest / case, staged.public / case)
        verdicts.append(verdict)
        scores.append(evaluation.score_case(case, dest / case) if verdict.valid else None)
    metric = evaluation.aggregate(scores, list(staged.case_ids))
    return Evaluation(task.id, len(verdicts), sum(v.present for v in verdicts), sum(v.valid for v in verdicts),
                      verdicts, metric)


def _demo_for(task_id: str) -> str:
    """The generated demo closest to a real task: same track, same kind (enhancement: LDCT or SR)."""
    track_name, name = task_id.split("/", 1)
    demos = [d for d in DEMOS if d.startswith(track_name + "/")]
    if track_name == "enhancement":
        return next(d for d in demos if ("sr" in name) == d.endswith("-sr"))
    if track_name == "segmentation":
        _, task = REG.task(task_id)
        labels = task.output_files
        if "labels.nii.gz" in labels:
            return "segmentation/demo-multilabel"
    return f"{track_name}/demo"


def _evaluation_of(result):
    from automedbench.records import Evaluation

    cases = result.cases
    return Evaluation(result.header.task, len(cases), sum(c.present for c in cases), sum(c.valid for c in cases),
                      cases, result.task)
