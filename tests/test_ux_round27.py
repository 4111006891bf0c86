"""A new track author's first hour, round 27: `new-track`, then a 2-D spleen segmentation written over the generated
demo (a threshold method, a download stager), installed beside the core. A plan naming its method without the
words "model" or "method" lost S1's s1c with "plan does not name a model/method suited to the task" and nothing on
what the rules judge looked for (its patterns live in the core's rubric); the generated rubric.py did not show the
hint at all. The stager conformance check's public-knowledge failure said what a replay scored, not which of
`area.secret`'s draws the stager skipped. `run --agent reference` on the track's real task ended at "covers the
generated demo only" with no next step. A typo in one task file (`workspace_mbs:`) made `validate-task` and `run`
say the track was not installed; a download the stager found nothing in said "staging produced no cases". The
generated track's own tests, run as `../../venv/bin/python -m pytest`, failed (every sandbox call failed to start),
and its demo numbered its cases case_00.. where CONTRIBUTING asks for `area.secret`'s ids."""

from __future__ import annotations

import contextlib
import importlib.util
import itertools
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from automedbench.stagesecret import StagingSecret
from automedbench.testing import assert_stager_conforms, grade_by_rules, run_cli

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "plugins" / "segmentation" / "tests"))
from test_segmentation_stager_conformance import kits  # the KiTS fixture download writer


def _s1c(plan: str, **kwargs) -> tuple[float, str]:
    verdict = grade_by_rules("toy/vowels", "lite", [], plan=plan, **kwargs).items["s1c_task_model"]
    return verdict.value, verdict.rationale


def test_a_failed_s1c_says_which_patterns_the_rules_judge_looked_for():
    """A plan choosing "threshold at 120" names no model or method by those words: the rationale (what `show
    --items` and the run page print) names the patterns and the item whose hints set them."""
    value, rationale = _s1c("# Plan\n1. load image.png\n2. threshold at 120\n3. save mask.png\n")
    assert value == 0.0
    assert r"'\\bmodel\\b'" in rationale and r"'\\bmethod\\b'" in rationale, rationale
    assert "rubric hints of s1c_task_model" in rationale, rationale


def _load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_generated_rubric_sets_s1c_for_its_own_task(tmp_path):
    """`new-track`'s rubric.py names s1c's patterns for its demo (and says in a comment what each generic item
    reads), so a plan stating the demo's method in its own words passes s1c; with the core's generic patterns
    alone the same plan failed it."""
    made = run_cli("new-track", "acme", "--dir", str(tmp_path))
    assert made.exit_code == 0, made.output
    package = tmp_path / "automedbench-acme" / "automedbench_acme"
    source = (package / "rubric.py").read_text()
    assert "s1c_task_model" in source and "plan.md matches one of `patterns`" in source
    rubric = _load(package / "rubric.py", "ux27_acme_rubric").rubric(None)
    plan = "# Plan: count the vowels\n1. load input.txt\n2. count a, e, i, o, u\n3. save answer.txt\n"
    assert _s1c(plan)[0] == 0.0  # the core's generic patterns: "model" or "method" only
    assert _s1c(plan, rubric=rubric)[0] == 1.0


def test_a_public_order_failure_names_the_secret_draw_to_use(tmp_path, monkeypatch):
    """A stager that numbers its cases in the download's order fails the public-knowledge replay; the failure
    now names the draws that fix it (area.secret.case_ids / id_stream, sample / shuffled)."""
    monkeypatch.setattr(StagingSecret, "shuffled", lambda self, items, purpose="order": list(items))
    monkeypatch.setattr(StagingSecret, "id_stream",
                        lambda self, prefix="case", purpose="case ids", sep="_":
                        (f"{prefix}{sep}{i:03d}" for i in itertools.count()))
    with pytest.raises(AssertionError) as failed:
        assert_stager_conforms("segmentation/kidney", kits(tmp_path / "download"), tmp_path / "work", case_count=8,
                               checks=["public-knowledge"])
    message = str(failed.value)
    assert "FAIL public-knowledge: replaying another staging's answers by same case id" in message, message
    assert "area.secret.case_ids(n) or area.secret.id_stream()" in message, message


def test_the_reference_agent_on_a_real_task_says_what_to_do_instead(tmp_path, monkeypatch):
    """`run --agent reference` on a real task: one line, and it names `evaluate --submission` for the author's own
    outputs (before, the line ended at "covers the phantom demos only, not segmentation/kidney")."""
    monkeypatch.setenv("AUTOMEDBENCH_DATA", str(tmp_path / "data"))
    result = run_cli("run", "--task", "segmentation/kidney", "--agent", "reference", "--out", str(tmp_path / "runs"))
    assert result.exit_code == 2
    (line,) = result.stderr.splitlines()
    assert "covers the phantom demos only" in line
    assert "automedbench evaluate --task segmentation/kidney --submission DIR" in line, line
    assert "automedbench plugins" in line


@contextlib.contextmanager
def _toy_copy(tmp_path: Path, name: str, task_yaml: Callable[[str], str], **overrides: Any) -> Iterator[None]:
    """The toy track again as track `name` (a third party's, registered in code), its one task file rewritten by
    `task_yaml`, its methods replaced by `overrides`; removed with its plugin problems afterwards."""
    from automedbench.api import hookimpl
    from automedbench.plugins import registry
    from automedbench.toy.track import ToyTrack

    toy = Path(ToyTrack.root)
    (tmp_path / "tasks").mkdir()
    text = (toy / "tasks" / "vowels.yaml").read_text().replace("toy/vowels", f"{name}/vowels")
    (tmp_path / "tasks" / "vowels.yaml").write_text(task_yaml(text.replace("track: toy", f"track: {name}")))
    shutil.copytree(toy / "templates", tmp_path / "templates")
    track = type(f"{name.capitalize()}Track", (ToyTrack,), {"name": name, "root": tmp_path, **overrides})
    module = ModuleType(f"{name}_plugin")

    @hookimpl
    def automedbench_register_tracks(register) -> None:
        register(name, track, "a third party's track")

    module.automedbench_register_tracks = automedbench_register_tracks  # type: ignore[attr-defined]
    registry().add_plugin(module, name=name, distribution=f"{name}-dist")
    try:
        yield
    finally:
        registry().remove_plugin(name)
        registry().problems[:] = [p for p in registry().problems if p.plugin != name]


def test_a_typo_in_a_task_file_is_not_reported_as_a_track_not_installed(tmp_path, monkeypatch):
    """One task file with an unknown field (`workspace_mbs:`) hides every task of its track: `validate-task` and
    `run` then said "no track 'amb27' is installed (installed: toy); ... pip install -e <its folder>" under the
    plugin-problem line, sending the author to reinstall a track that is installed. Now the error says the track's
    tasks did not load and why."""
    monkeypatch.setenv("AUTOMEDBENCH_DATA", str(tmp_path / "data"))
    with _toy_copy(tmp_path, "amb27", lambda text: text + "workspace_mbs: 256\n"):
        for args in (("validate-task", "amb27/vowels"), ("run", "--task", "amb27/vowels", "--agent", "reference",
                                                         "--out", str(tmp_path / "runs"))):
            result = run_cli(*args)
            assert result.exit_code == 2, result.output
            error = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
            assert len(error) == 1, result.stderr
            assert "the amb27 track is installed but its tasks did not load" in error[0], error
            assert "unknown field(s) workspace_mbs" in error[0] and "no track" not in error[0], error


def test_a_stager_that_stages_nothing_says_what_to_check(tmp_path, monkeypatch):
    """`stage T --from DIR` over a download whose labels folder is empty: the author's stager passes over every
    item and the command said "error: staging produced no cases" (no task, no folder, no next step)."""
    from automedbench.api import staging_area

    def stage_source(self, task, dest, source):  # labels/ beside words/: a word without its label is passed over
        with staging_area(dest) as area:
            kept = [p.stem for p in sorted((source / "words").iterdir()) if (source / "labels" / p.name).exists()]
            return area.commit(kept)

    download = tmp_path / "download"
    (download / "words").mkdir(parents=True)
    (download / "labels").mkdir()
    (download / "words" / "a.txt").write_text("scan\n")
    monkeypatch.setenv("AUTOMEDBENCH_DATA", str(tmp_path / "data"))
    with _toy_copy(tmp_path, "amb27b", lambda text: text.replace("demo: true", "demo: false"),
                   stage_source=stage_source):
        result = run_cli("stage", "amb27b/vowels", "--from", str(download))
        assert result.exit_code == 2, result.output
        (line,) = result.stderr.splitlines()
        assert line.startswith("error: staging produced no cases in ") and "amb27b" in line, line
        assert "check it has the layout the task's `dataset` names" in line, line


def test_a_harness_started_by_a_relative_interpreter_path_runs_its_calls(tmp_path):
    """`../../venv/bin/python -m pytest` in a track's folder (the core's venv beside it): `sys.executable` kept the
    `..` through the track's folder, which a bwrap call does not mount, so every python call of the scripted
    reference failed to start ("bwrap: execvp ...: No such file or directory") and the generated track's own test
    failed at S1 0.0, S3 0.2. Run here as `automedbench run` under such an interpreter path."""
    import json
    import os
    import subprocess

    cwd = tmp_path / "src" / "automedbench-acme"
    cwd.mkdir(parents=True)
    python = os.path.relpath(sys.executable, cwd)
    assert ".." in python
    env = {**os.environ, "AUTOMEDBENCH_DATA": str(tmp_path / "data")}
    done = subprocess.run([python, "-c", "from automedbench.cli import main; main()", "run", "--task", "toy/vowels",
                           "--agent", "reference", "--out", str(tmp_path / "runs")],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    (result,) = (tmp_path / "runs").glob("*/result.json")
    record = json.loads(result.read_text())
    trajectory = (result.parent / "trajectory.jsonl").read_text()
    assert "No such file or directory" not in trajectory
    assert record["aggregate"]["rating"] == "A", record["aggregate"]
    assert all(s["score"] == 1.0 for s in record["stages"]), record["stages"]


def test_the_generated_demo_draws_its_case_ids_from_the_staging_secret(tmp_path, monkeypatch):
    """`new-track`'s demo numbered its cases case_00.. and seeded its words from `params.seed`, and its pilot named
    `case_00`: an author who followed CONTRIBUTING ("every hidden choice comes from area.secret") broke the pilot.
    The generated demo now draws both from `area.secret` and the pilot takes the first case folder; its reference
    run still meets every stage."""
    import importlib
    import json

    from automedbench.plugins import registry

    made = run_cli("new-track", "acme27", "--dir", str(tmp_path))
    assert made.exit_code == 0, made.output
    monkeypatch.syspath_prepend(str(tmp_path / "automedbench-acme27"))
    monkeypatch.setenv("AUTOMEDBENCH_DATA", str(tmp_path / "data"))
    registry().add_plugin(importlib.import_module("automedbench_acme27.plugin"), name="acme27")
    try:
        result = run_cli("run", "--task", "acme27/demo", "--agent", "reference", "--out", str(tmp_path / "runs"))
        assert result.exit_code == 0, result.output
        (stored,) = (tmp_path / "runs").glob("*/result.json")
        record = json.loads(stored.read_text())
        assert all(s["score"] == 1.0 for s in record["stages"]), record["stages"]
        cases = sorted(p.name for p in (tmp_path / "data" / "acme27" / "demo" / "public").iterdir())
        assert len(cases) == 8 and "case_00" not in cases, cases
    finally:
        registry().remove_plugin("acme27")
        registry().problems[:] = [p for p in registry().problems if p.plugin != "acme27"]
