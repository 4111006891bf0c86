"""A third-party track, written in an empty folder outside this repository, pip-installed into a fresh venv
beside the core: listed by `automedbench tasks`, valid by `validate-task`, scored by a scripted reference run,
and its agent image recipe found as installed package data (`automedbench images list`) with no checkout.

tests/test_agent_images.py registers such a track in-process; this is the whole path a track author takes.
Slow: one fresh venv (the core's dependencies from the package index or pip's cache). Skipped, with the
reason, where pip cannot reach a package index.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sysconfig
import textwrap
import time
from pathlib import Path

import pytest
from test_install_tracks import _checkout_copy, _fresh_venv, _pip_argv

pytestmark = pytest.mark.slow  # a fresh venv, two installs, a staged demo, a run: about a minute or more

BUDGET_S = 900  # the whole test: installs included
# pip's words when no index can be reached: the test skips, it does not fail
UNREACHABLE = ("NewConnectionError", "Failed to establish a new connection", "Temporary failure in name resolution",
               "Network is unreachable", "ProxyError")
# ... or when a third-party requirement of the core is on no index reached and in no cache; a distribution of
# this repository or the track itself missing is a failure
MISSING = re.compile(r"No matching distribution found for ([A-Za-z0-9._-]+)")

PYPROJECT = """\
[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "parity-track"
version = "0.1.0"
description = "A third-party AutoMedBench track: is the number even or odd"
requires-python = ">=3.10"
dependencies = ["automedbench"]

[project.entry-points.automedbench]
parity = "parity_track.plugin"

[tool.setuptools.packages.find]
include = ["parity_track*"]

[tool.setuptools.package-data]
parity_track = ["tasks/*.yaml", "templates/*.j2", "docker/*"]
"""

TASK = """\
id: parity/demo
track: parity
title: Even or odd (a third-party demo)
description: Each case folder holds input.txt with one whole number; write even or odd to answer.txt.
modality: text
dataset: generated (parity_track)
license: MIT (generated)
input_files: [input.txt]
output_files: [answer.txt]
case_count: 8
time_limit_s: 300
max_turns: 10
exec_timeout_s: 60
network: false
workspace_mb: 64
demo: true
metric: accuracy
rating: {good: 0.9, okay: 0.75}
tiers:
  lite:
    model: the remainder of a division by two
    requirements: []
"""

BRIEF = """\
## Task
{{ task.description }}

## Data
Each case folder `{{ data_dir }}/<case>/` holds `input.txt`.

## Output contract
For every case write `{{ output_dir }}/<case>/answer.txt`: `even` or `odd`, nothing else.
"""

PLUGIN = '''\
from automedbench.api import Register, hookimpl


@hookimpl
def automedbench_register_tracks(register: Register) -> None:
    from .track import ParityTrack

    register("parity", ParityTrack, "even or odd: a third-party track")
'''

TRACK = '''\
import random
from pathlib import Path

from automedbench.api import (CaseScore, CaseVerdict, MetricBlock, PackagedTrack, ScriptedSolution, ScriptStep,
                              TaskEvaluation, atomic_write_text, staging_area)

ANSWER = "answer.txt"


def read(case_dir):
    path = case_dir / ANSWER
    if path.is_symlink() or not path.is_file():
        return None
    text = path.read_bytes()[:16].decode("ascii", "replace").strip()
    return text if text in ("even", "odd") else None


class ParityEvaluation(TaskEvaluation):
    def score_case(self, case_id, submitted):
        truth = (self.staged.private / case_id / ANSWER).read_text().strip()
        return CaseScore(case_id, {"correct": float(read(submitted) == truth)})

    def aggregate(self, scores, case_ids):
        values = [s.values["correct"] if s is not None else 0.0 for s in scores]
        partial = sum(values) / len(case_ids)
        strict = partial if all(s is not None for s in scores) else 0.0
        return MetricBlock("accuracy", strict, partial,
                           per_case=[{"case_id": c, "correct": v} for c, v in zip(case_ids, values)])


class ParityTrack(PackagedTrack):
    name = "parity"
    root = Path(__file__).parent

    def stage_demo(self, task, dest):
        rng = random.Random(task.params["seed"])
        ids = [f"case_{i}" for i in range(task.case_count)]
        with staging_area(dest) as area:
            for i, case_id in enumerate(ids):  # half even, half odd: a constant answer scores 0.5
                number = 2 * rng.randrange(1000) + i % 2
                atomic_write_text(area.public / case_id / "input.txt", f"{number}\\n", shared=True)
                atomic_write_text(area.private / case_id / ANSWER, ("odd" if number % 2 else "even") + "\\n")
            return area.commit(ids)

    def check_case(self, task, case_id, submitted, public):
        ok = read(submitted) is not None
        return CaseVerdict(case_id, (submitted / ANSWER).exists(), ok, [] if ok else ["write even or odd"])

    def evaluation(self, task, staged, options):
        return ParityEvaluation(task, staged, options)

    def baselines(self):
        return {"perfect": "the references", "empty": "no outputs", "constant": "even for every case"}

    def write_baseline(self, task, name, staged, dest):
        dest.mkdir(parents=True, exist_ok=True)
        for case_id in [] if name == "empty" else staged.case_ids:
            text = "even\\n" if name == "constant" else (staged.private / case_id / ANSWER).read_text()
            atomic_write_text(dest / case_id / ANSWER, text)

    def reference_solution(self, task, tier, data_dir, workspace):
        code = ("import pathlib\\n"
                f"data, out = pathlib.Path({data_dir!r}), pathlib.Path({workspace!r}) / 'outputs'\\n"
                "for case in sorted(p for p in data.iterdir() if p.is_dir()):\\n"
                "    number = int((case / 'input.txt').read_text())\\n"
                "    (out / case.name).mkdir(parents=True, exist_ok=True)\\n"
                "    (out / case.name / 'answer.txt').write_text('odd' if number % 2 else 'even')\\n")
        return ScriptedSolution([ScriptStep("batch", "python", code, say="Answering every case."),
                                 ScriptStep("submit", submit=True, say="Submitting.")])
'''

DOCKERFILE = "ARG BASE=automedbench/agent:default\nFROM ${BASE}\nRUN python3 -c 'print(2 % 2)'\n"


def write_track(folder: Path) -> Path:
    """The track author's whole project, in an empty folder: nothing in this repository is edited."""
    package = folder / "parity_track"
    for sub in ("tasks", "templates", "docker"):
        (package / sub).mkdir(parents=True)
    files = {folder / "pyproject.toml": PYPROJECT, package / "__init__.py": "", package / "plugin.py": PLUGIN,
             package / "track.py": TRACK, package / "tasks" / "demo.yaml": TASK,
             package / "templates" / "task.md.j2": BRIEF, package / "docker" / "Dockerfile": DOCKERFILE}
    for path, text in files.items():
        path.write_text(textwrap.dedent(text))
    return folder


def pip_install(python: Path, args: list[str], cwd: Path, timeout: float) -> None:
    # the venv is empty (no pip of its own): this interpreter's pip installs into it, without bytecode up front
    proc = subprocess.run([*_pip_argv(python), "install", "-q", "--no-compile", *args],
                          cwd=cwd, capture_output=True, text=True, timeout=timeout)
    missing = MISSING.search(proc.stderr)
    ours = missing is not None and missing.group(1).lower().startswith(("automedbench", "parity"))
    if proc.returncode != 0 and not ours and (missing or any(words in proc.stderr for words in UNREACHABLE)):
        pytest.skip("pip cannot reach a package index (or a cached wheel) for the core's dependencies: "
                    + proc.stderr.strip().splitlines()[-1][:200])
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_a_track_from_an_empty_folder_installs_runs_and_ships_its_image(tmp_path):
    started = time.monotonic()

    def left() -> float:
        remaining = BUDGET_S - (time.monotonic() - started)
        assert remaining > 0, f"over the {BUDGET_S} s budget"
        return remaining

    source = write_track(tmp_path / "parity-track")
    clone = _checkout_copy(tmp_path / "clone")
    python = _fresh_venv(tmp_path / "venv")
    # the core (editable from a copy of this checkout) with its docker distribution and the test kit (the
    # author's `validate-task` comes with it), then the track as a user
    # installs it: built into a wheel from its own folder, so its files live in the venv's site-packages (one
    # pip call for both fails on pip 23.2: it looks for the track's `automedbench` on the index, not the -e)
    pip_install(python, ["-e", ".[docker,test]"], cwd=clone, timeout=left())
    pip_install(python, [str(source)], cwd=tmp_path, timeout=left())
    purelib = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  check=True, capture_output=True, text=True).stdout.strip())
    assert purelib != Path(sysconfig.get_paths()["purelib"])  # the fresh venv's, not this one's
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "AUTOMEDBENCH_DATA": str(tmp_path / "data"), "AUTOMEDBENCH_STATE": str(tmp_path / "state"),
           "COLUMNS": "200"}
    env.pop("AUTOMEDBENCH_DOCKERFILES", None)

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(python.parent / "automedbench"), *args], cwd=work, env=env,
                              capture_output=True, text=True, timeout=left())

    listed = cli("tasks")
    assert listed.returncode == 0 and "parity/demo" in listed.stdout, listed.stdout + listed.stderr

    checked = cli("validate-task", "parity/demo")
    assert checked.returncode == 0, checked.stdout[-3000:] + checked.stderr[-2000:]
    assert "valid" in checked.stdout and "perfect baseline scores 1.0 / A" in checked.stdout

    ran = cli("run", "--task", "parity/demo", "--agent", "reference", "--out", str(work / "runs"))
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
    (result_file,) = (work / "runs").glob("*/result.json")
    result = json.loads(result_file.read_text())
    assert result["state"] == "scored" and result["task"]["strict"] == 1.0

    images = cli("images", "list")
    assert images.returncode == 0, images.stderr
    recipes = dict(line.split("  ", 1) for line in images.stdout.splitlines() if "  " in line)
    recipe = Path(recipes["automedbench/agent:parity"])
    # installed package data: in the fresh venv, not in the author's folder nor in any checkout
    assert recipe == purelib / "parity_track" / "docker" and (recipe / "Dockerfile").read_text() == DOCKERFILE
    assert not recipe.is_relative_to(source) and not recipe.is_relative_to(clone)
