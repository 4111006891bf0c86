"""What a task's sandbox needs (`needs` in the task file, `Track.sandbox_needs`): `run`, `sweep` and
`validate-task` refuse a sandbox without it in one line naming the install, `automedbench tasks` shows
which tasks are ready here; a task of a released track that is not installed names its extra; the core's
default positive evidence asks for agreement with the reference; a method with nothing to download earns
S2's model-obtained item once it runs."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml
from automedbench import cli as engine
from automedbench.cli import main
from automedbench.needs import assets_problem, missing_here
from automedbench.plugins import Registry, registry, release_tracks
from automedbench.sandboxes.local import LocalSandbox
from automedbench.testing import item_values, register_toy_track, run_task
from automedbench_testkit.newtrack import write_track
from click.testing import CliRunner

ROOT = Path(__file__).resolve().parents[1]
MISSING = "amb_no_such_module_here"


@pytest.fixture(scope="module")
def needy(tmp_path_factory):
    """A track made by `new-track`, with a second task whose method imports a module nobody has."""
    parent = tmp_path_factory.mktemp("needy")
    dest = write_track("needy", parent)
    demo = yaml.safe_load((dest / "automedbench_needy" / "tasks" / "demo.yaml").read_text())
    demo.update(id="needy/missing", needs={"modules": ["json", MISSING], "install": "automedbench-needy[model]"})
    (dest / "automedbench_needy" / "tasks" / "missing.yaml").write_text(yaml.safe_dump(demo))
    sys.path.insert(0, str(dest))
    import automedbench_needy.plugin as plugin

    registry().add_plugin(plugin, name="needy", distribution="automedbench-needy")
    yield dest
    registry().remove_plugin("needy")  # the next module in this worker sees the installed tracks only
    sys.path.remove(str(dest))


def test_run_refuses_in_one_line_naming_the_install_and_leaves_no_folder(needy, tmp_path):
    out = tmp_path / "runs"
    cli = CliRunner().invoke(main, ["run", "--task", "needy/missing", "--agent", "reference", "--out", str(out),
                                    "--data-root", str(tmp_path / "data")])
    assert cli.exit_code == 2, cli.output
    lines = cli.output.strip().splitlines()
    assert len(lines) == 1 and MISSING in lines[0] and "pip install 'automedbench-needy[model]'" in lines[0]
    assert "json" not in lines[0].split("needs", 1)[1].split("inside")[0]  # only what is missing is named
    assert sys.executable in lines[0]  # where: the local sandbox runs the harness's Python
    assert not out.exists() or not any(out.iterdir())


def test_tasks_shows_which_tasks_are_ready_here_and_validate_task_fails_the_gap(needy, tmp_path):
    cli = CliRunner().invoke(main, ["tasks"], env={"COLUMNS": "200"})
    assert cli.exit_code == 0, cli.output
    assert f"not ready: needy/missing: pip install 'automedbench-needy[model]' (needs {MISSING})" in cli.output
    assert "not ready: needy/demo" not in cli.output
    row = next(line for line in cli.output.splitlines() if "needy/demo" in line)
    assert "yes" in row
    check = CliRunner().invoke(main, ["validate-task", "needy/missing", "--data-root", str(tmp_path / "data")])
    assert check.exit_code == 1
    assert "FAIL the local sandbox's Python has what the task's method needs" in check.output
    assert MISSING in check.output


def test_sweep_refuses_before_any_run(needy, tmp_path):
    pytest.importorskip("automedbench_campaign")
    cli = CliRunner().invoke(main, ["sweep", "--agents", "reference", "--tasks", "needy/missing", "--out",
                                    str(tmp_path / "runs"), "--no-require-isolation"])
    assert cli.exit_code == 2 and MISSING in cli.output and len(cli.output.strip().splitlines()) == 1


def test_the_local_sandbox_answers_for_the_harness_python_and_assets_are_checked(tmp_path):
    missing, where = LocalSandbox().missing_modules(["json", "numpy", MISSING, "os.path"], "any")
    assert missing == [MISSING] and sys.executable in where
    assert missing_here(["not-an.identifier"]) == ["not-an"]

    class Track:
        def __init__(self, folder):
            self.folder = folder

        def assets(self, task):
            return self.folder

    (tmp_path / "a").mkdir()
    assert "empty" in assets_problem(Track(tmp_path / "a"), None)
    (tmp_path / "a" / "model.safetensors").write_bytes(b"version https://git-lfs.github.com/spec/v1\noid sha256:")
    assert "Git LFS pointer" in assets_problem(Track(tmp_path / "a"), None)
    (tmp_path / "a" / "model.safetensors").write_bytes(b"\x00" * 64)
    assert assets_problem(Track(tmp_path / "a"), None) is None
    assert assets_problem(Track(None), None) is None


def test_a_task_file_names_modules_by_import_name(tmp_path):
    from automedbench.errors import UserError
    from automedbench.taskfile import load_task_file

    data = yaml.safe_load((ROOT / "core/automedbench/toy/tasks/vowels.yaml").read_text())
    data["needs"] = {"modules": ["scikit-learn"]}
    (tmp_path / "t.yaml").write_text(yaml.safe_dump(data))
    with pytest.raises(UserError, match="import names, not scikit-learn"):
        load_task_file(tmp_path / "t.yaml")
    data["needs"] = {"modules": ["sklearn"], "install": "x'; rm -rf ~ #"}  # printed to users to copy: a plain line
    (tmp_path / "t.yaml").write_text(yaml.safe_dump(data))
    with pytest.raises(UserError, match=r"needs\.install is a pip requirement line"):
        load_task_file(tmp_path / "t.yaml")


def test_a_task_of_a_released_track_that_is_not_installed_names_its_extra(monkeypatch):
    reg = Registry()
    reg.load_entry_points()
    reg.components["track"].pop("classification", None)
    monkeypatch.setattr(engine, "registry", lambda **_: reg)
    for task in ("classification/demo", "classification/not-yet-released"):
        cli = CliRunner().invoke(main, ["run", "--task", task, "--agent", "reference"])
        assert cli.exit_code == 2
        (line,) = cli.output.strip().splitlines()
        assert "classification track, which is not installed" in line
        assert "pip install 'automedbench[classification]'" in line
    stage = CliRunner().invoke(main, ["stage", "classification/skin-lesion"])
    assert stage.exit_code == 2 and "pip install 'automedbench[classification]'" in stage.output
    listing = CliRunner().invoke(main, ["tasks"], env={"COLUMNS": "200"})
    line = next(x for x in listing.output.splitlines() if x.startswith("not installed: classification/"))
    assert "classification/brain-tumour-mri, " in line and line.endswith(": pip install 'automedbench[classification]'")
    # an installed track's unknown task is still "unknown", with the nearest names
    cli = CliRunner().invoke(main, ["run", "--task", "segmentation/dmeo", "--agent", "reference"])
    assert cli.exit_code == 2 and "unknown task 'segmentation/dmeo'" in cli.output


def test_the_release_table_lists_exactly_the_tracks_and_tasks_this_repository_ships():
    shipped: dict[str, list[str]] = {}
    for path in sorted(ROOT.glob("plugins/*/automedbench_*/tasks/*.yaml")):
        spec = yaml.safe_load(path.read_text())
        shipped.setdefault(spec["track"], []).append(spec["id"].split("/", 1)[1])
    table = release_tracks()
    assert {t: sorted(v["tasks"]) for t, v in table.items()} == {t: sorted(v) for t, v in shipped.items()}
    pyproject = (ROOT / "pyproject.toml").read_text()
    for track, info in table.items():
        assert f"\n{info['extra']} = [" in pyproject  # the root extra it names exists
        folder = next(p for p in ROOT.glob("plugins/*/pyproject.toml") if f'"automedbench_{track}.plugin"' in
                      p.read_text())
        assert f'name = "{info["distribution"]}"' in folder.read_text()


def test_default_positive_evidence_needs_agreement_with_the_reference():
    from automedbench.track import Track

    class Bare(Track):
        name = "bare"
        tasks = stage = template_dir = check_case = None

    track = Bare.__new__(Bare)
    assert not track.positive_case(None, {"case_id": "a", "correct": 0.0})
    assert not track.positive_case(None, {"case_id": "a"})
    assert not track.positive_case(None, {"case_id": "a", "score": float("nan"), "ok": False, "label": "x"})
    assert track.positive_case(None, {"case_id": "a", "correct": 1.0})
    assert track.positive_case(None, {"case_id": "a", "hit": True})


def test_a_method_with_nothing_to_download_earns_model_obtained_only_once_it_runs(tmp_path):
    register_toy_track()
    result, _ = run_task("toy/vowels", "noop", out=tmp_path / "runs", data_root=tmp_path / "data")
    assert item_values(result)["s2a_model_obtained"] == 0.0
    item = next(i for s in result.stages for i in s.items if i.id == "s2a_model_obtained")
    assert "needs no weights" in item.rationale and "needs no weights or download" in item.description


def test_the_docker_sandbox_asks_the_image_its_runs_use(amb_docker):
    from automedbench_docker.sandbox import DockerSandbox

    found = DockerSandbox().missing_modules(["json", "numpy", MISSING], "toy")  # no toy image: the default one
    assert found is not None
    missing, where = found
    assert missing == [MISSING] and "docker image automedbench/agent:" in where


def test_a_removed_plugin_leaves_nothing_behind(tmp_path):
    """A test's own track, added and removed again, is gone from the registry (it leaked into later modules of
    the same worker: the paper-rules check then found its demo's unpinned requirements)."""
    parent = tmp_path / "gone"
    dest = write_track("gone", parent)
    sys.path.insert(0, str(dest))
    try:
        import automedbench_gone.plugin as plugin

        reg = registry()
        reg.add_plugin(plugin, name="gone", distribution="automedbench-gone")
        assert "gone/demo" in reg.tasks()
        reg.remove_plugin("gone")
        assert "gone/demo" not in reg.tasks() and "gone" not in reg.components["track"]
        assert reg.pm.get_plugin("gone") is None
        reg.add_plugin(plugin, name="gone", distribution="automedbench-gone")  # and it can come back
        assert "gone/demo" in reg.tasks()
        reg.remove_plugin("gone")
    finally:
        sys.path.remove(str(dest))
