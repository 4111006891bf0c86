"""tests/conftest.py's segmentation-demo runs (`run_agent`) and the test kit's `amb_run`, which the tracks' tests and
the run page test use, are one cache over one data root: a worker that takes files of both makes a run once."""

from __future__ import annotations

DEMO = "segmentation/demo"  # tests/conftest.py's (not imported: each plugin's tests have a conftest module too)


def test_run_agent_and_amb_run_are_one_cache_over_one_data_root(run_agent, amb_run, data_root, amb_data_root):
    assert data_root == amb_data_root
    result, run_dir = run_agent("noop")
    cached, cached_dir = amb_run(DEMO, "noop", "lite")
    assert cached is result and cached_dir == run_dir  # the cached record itself, not an equal second run
