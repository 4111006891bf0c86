"""Evaluator processes (cold and the warm service) start under their limits through `prlimit`, not a preexec
function (evaluator.limited_command): the same limits, without forking the harness process."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from automedbench import evaluator
from automedbench_campaign import evalservice

REPORT = ("import json, resource as r; print(json.dumps([r.getrlimit(getattr(r, n)) for n in "
          "('RLIMIT_AS', 'RLIMIT_CPU', 'RLIMIT_FSIZE', 'RLIMIT_CORE')]))")
needs_prlimit = pytest.mark.skipif(evaluator.limited_command([])[1] is not None, reason="no util-linux prlimit")


def expected() -> list[list[int]]:
    space = evaluator.EVAL_MEMORY_MB << 20
    return [[space, space], [evaluator.EVAL_CPU_S, evaluator.EVAL_CPU_S + 60],
            [evaluator.EVAL_FILE_BYTES, evaluator.EVAL_FILE_BYTES], [0, 0]]


@needs_prlimit
def test_a_cold_evaluator_command_runs_under_every_limit(monkeypatch):
    monkeypatch.setattr(evaluator, "EVAL_MEMORY_MB", 3000)  # read when the command is made, as tests set it
    argv, preexec = evaluator.limited_command([sys.executable, "-I", "-S", "-c", REPORT])
    assert preexec is None
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == expected()


def test_without_prlimit_the_preexec_function_sets_them(monkeypatch):
    monkeypatch.setattr(evaluator.shutil, "which", lambda *a, **kw: None)
    argv, preexec = evaluator.limited_command(["python", "x"])
    assert argv == ["python", "x"] and preexec is evaluator.evaluator_limits


@needs_prlimit
def test_the_warm_service_process_runs_under_every_limit():
    svc = evalservice.EvalService(max_requests=1)
    try:
        svc._start(evaluator.evaluator_path([]))
        exe = Path(f"/proc/{svc.proc.pid}/exe")
        for _ in range(600):  # until prlimit has set the limits and exec'd the interpreter
            if exe.resolve() == Path(sys.executable).resolve():
                break
            time.sleep(0.05)
        limits = {}
        for line in Path(f"/proc/{svc.proc.pid}/limits").read_text().splitlines()[1:]:
            name, soft, hard = line[:26].strip(), *line[26:].split()[:2]
            limits[name] = [-1 if v == "unlimited" else int(v) for v in (soft, hard)]
        got = [limits["Max address space"], limits["Max cpu time"], limits["Max file size"],
               limits["Max core file size"]]
        assert got == expected()
    finally:
        svc.kill()
