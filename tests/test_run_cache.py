"""tests/conftest.py's segmentation-demo runs (`run_agent`) and the test kit's `amb_run`, which the tracks' tests and
the run page test use, are one cache over one data root: a worker that takes files of both makes a run once."""

from __future__ import annotations

DEMO = "segmentation/demo"  # tests/conftest.py's (not imported: each plugin's tests have a conftest module too)


def test_run_agent_and_amb_run_are_one_cache_over_one_data_root(run_agent, amb_run, data_root, amb_data_root):
    assert data_root == amb_data_root
    result, run_dir = run_agent("noop")
    cached, cached_dir = amb_run(DEMO, "noop", "lite")
    assert cached is result and cached_dir == run_dir  # the cached record itself, not an equal second run


def test_asking_for_the_evaluator_a_run_takes_anyway_is_the_same_run(amb_run):
    """A file that names the warm evaluator where it is the default (enhancement's runs) and one that takes the
    default (the UX legend cases) share the run; naming the other evaluator is another run."""
    from automedbench.options import RunOptions, warm_wanted
    from automedbench.testing import warm_evaluator_installed

    default = warm_wanted(RunOptions(DEMO), warm_evaluator_installed())
    result, run_dir = amb_run(DEMO, "noop")
    assert amb_run(DEMO, "noop", warm_evaluator=default)[0] is result
    other, other_dir = amb_run(DEMO, "noop", warm_evaluator=not default)
    assert other is not result and other_dir != run_dir and other.state == result.state
