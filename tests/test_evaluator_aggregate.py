"""A track's aggregate step crashing on what a submission led it to compute ends the evaluation with a zero
metric naming the error (the run scored), like a case whose scoring failed — never a harness failure."""

from __future__ import annotations

from automedbench.evaluator import evaluate
from automedbench.freeze import freeze
from automedbench.plugins import registry
from automedbench.testing import ensure_staged, register_toy_track

TOY = "toy/vowels"


class _Crashing:
    """A track whose aggregate raises on its input, as a track bug reachable only through odd scores would."""

    def __init__(self, track):
        self._track = track

    def __getattr__(self, name):
        return getattr(self._track, name)

    def evaluation(self, task, staged, options):
        inner = self._track.evaluation(task, staged, options)

        class Wrapped(type(inner)):
            def aggregate(self, scores, case_ids):
                raise ValueError("odd scores " + "x" * 2000)

        inner.__class__ = Wrapped
        return inner


def _submission(tmp_path, staged):
    outputs = tmp_path / "outputs"
    outputs.mkdir()
    return freeze(outputs, tmp_path / "submission", submitted=True)


def test_an_aggregate_crash_is_a_zero_metric_naming_it(tmp_path):
    register_toy_track()
    track, task = registry().task(TOY)
    staged = ensure_staged(track, task, tmp_path / "data")
    manifest = _submission(tmp_path, staged)
    honest = evaluate(track, task, staged, tmp_path / "submission", manifest)
    assert not honest.metric.name.startswith("aggregate error")
    crashed = evaluate(_Crashing(track), task, staged, tmp_path / "submission", manifest)
    assert crashed.metric.name.startswith("aggregate error: ValueError: odd scores")
    assert len(crashed.metric.name) <= 500
    assert (crashed.metric.strict, crashed.metric.partial) == (0.0, 0.0)
    assert [c.case_id for c in crashed.cases] == [c.case_id for c in honest.cases]
