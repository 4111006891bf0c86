"""A run's own overhead: recorded in result.json with the process's start-up, no heavy libraries loaded into the
harness process for a demo's scripted agent or its scoring, one track's task files read for a lookup, and no
polling while a tool call runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

import pytest
from automedbench.plugins import registry
from automedbench.runner import Run, RunOptions
from automedbench.testing import register_toy_track, stage_task

TOY = "toy/vowels"


def test_result_json_records_the_start_up_and_the_harness_cpu_of_a_one_off_run(tmp_path):
    """A fresh `automedbench run` records its process's start-up (wall, process start to run start) and the
    harness's own CPU with it; a later run of the same process has no start-up of its own."""
    data = tmp_path / "data"
    stage_task(TOY, data)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    proc = subprocess.run([sys.executable, "-m", "automedbench.cli", "run", "--task", TOY, "--agent", "reference",
                           "--quiet", "--out", str(tmp_path / "runs"), "--data-root", str(data)],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr
    runtime = json.loads(next((tmp_path / "runs").glob("*/result.json")).read_text())["runtime"]
    # the interpreter and the imports come before the run: more than nothing, less than the whole run
    assert 0.01 < runtime["startup_s"] < runtime["wall_s"] + runtime["startup_s"]
    assert 0.01 < runtime["harness_cpu_s"] < 30
    assert "CPU-s" in proc.stdout  # the summary says it too

    register_toy_track()
    options = dict(out=tmp_path / "again", data_root=data, warm_evaluator=False)
    first = Run(RunOptions(TOY, "lite", "reference", **options), registry()).execute()
    second = Run(RunOptions(TOY, "lite", "reference", **options), registry()).execute()
    assert second.runtime.startup_s == 0.0 and second.runtime.harness_cpu_s > 0
    assert first.runtime.harness_cpu_s > 0  # this test process's first run may already be long past


HEAVY = ("numpy", "scipy", "nibabel", "skimage", "torch", "sklearn", "pydicom")
PROBE = textwrap.dedent("""
    import sys
    from automedbench.plugins import registry
    track, task = registry().task(sys.argv[1])
    assert track.reference_solution(task, "lite", "/data/public", "/workspace").steps
    track.positive_case(task, {"case_id": "x", "valid": True})
    print(" ".join(sorted({m.split(".")[0] for m in sys.modules} & set(sys.argv[2:]))))
""")


def test_no_demo_loads_numeric_libraries_into_the_harness_for_its_scripted_agent_or_its_evidence():
    """What the harness process itself does for a demo run -- look the task up, build the scripted reference
    agent's steps, read S5's positive evidence from a per-case row -- imports none of the numeric stack (the
    segmentation demos loaded nibabel, SciPy and pydicom for two thresholds and a label list: half of a one-off
    run's own CPU). Each demo in a fresh process, all at once."""
    reg = registry()
    demos = sorted(t for t in reg.tasks() if reg.task(t)[1].demo)
    assert len(demos) >= 10, demos
    procs = {t: subprocess.Popen([sys.executable, "-c", PROBE, t, *HEAVY], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True) for t in demos}
    loaded = {}
    for task_id, proc in procs.items():
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err
        loaded[task_id] = out.split()
    assert not any(loaded.values()), loaded


def test_a_task_lookup_reads_only_its_own_tracks_task_files(monkeypatch):
    """`registry().task(id)` loads the track its id names, not every track's YAML files; an unknown id still gets
    the full scan's suggestions."""
    from automedbench.errors import UserError

    reg = registry()
    loaded: list[str] = []
    real = reg.track

    def track(name):
        loaded.append(name)
        return real(name)

    monkeypatch.setattr(reg, "track", track)
    _, task = reg.task("segmentation/demo")
    assert task.id == "segmentation/demo" and set(loaded) == {"segmentation"}
    with pytest.raises(UserError, match="did you mean"):
        reg.task("segmentation/dem")
    assert len(set(loaded)) > 1


def test_a_tool_call_is_waited_for_without_polling(monkeypatch):
    """The sandbox sleeps on the call's pidfd: no wake-up every 50 ms for the whole call (Popen.wait with a
    timeout polls with sleeps); the timeout still ends a call that outlives it."""
    from automedbench import sandboxcall

    if not hasattr(os, "pidfd_open"):
        pytest.skip("no pidfd on this platform: Popen.wait is used")
    slept: list[float] = []
    monkeypatch.setattr(time, "sleep", lambda s, real=time.sleep: slept.append(s) or real(s))
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.6)"])
    started = time.monotonic()
    sandboxcall.wait_for(proc, 30)
    assert proc.returncode == 0 and time.monotonic() - started >= 0.5 and slept == []
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    with pytest.raises(subprocess.TimeoutExpired):
        sandboxcall.wait_for(proc, 0.3)
    proc.kill()
    proc.wait()
