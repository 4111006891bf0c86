"""Task files, brief rendering and plugin loading."""

from __future__ import annotations

import types
from pathlib import Path

import pytest
import yaml
from automedbench.brief import render_brief
from automedbench.errors import UserError
from automedbench.hookspecs import hookimpl
from automedbench.plugins import Registry
from automedbench.taskfile import load_task_file, parse_task

DEMO_YAML = Path(__file__).parents[1] / "plugins/segmentation/automedbench_segmentation/tasks/demo.yaml"


def demo_data() -> dict:
    return yaml.safe_load(DEMO_YAML.read_text())


def test_demo_task_file_parses():
    spec = load_task_file(DEMO_YAML)
    assert spec.id == "segmentation/demo" and spec.case_count == 5 and set(spec.tiers) == {"lite", "standard", "pro"}


@pytest.mark.parametrize("field", ["time_limit_s", "output_files", "rating"])
def test_missing_field_is_named(field):
    data = demo_data()
    del data[field]
    with pytest.raises(UserError, match=f"missing field\\(s\\) {field}"):
        parse_task(data, "x.yaml")


def test_unknown_field_and_bad_values():
    data = demo_data()
    data["colour"] = "blue"
    with pytest.raises(UserError, match="unknown field\\(s\\) colour"):
        parse_task(data, "x.yaml")
    data = demo_data()
    data["case_count"] = "many"
    with pytest.raises(UserError, match="case_count"):
        parse_task(data, "x.yaml")
    data = demo_data()
    data["tiers"]["ultra"] = {}
    with pytest.raises(UserError, match="tiers"):
        parse_task(data, "x.yaml")


def test_brief_per_tier(reg):
    track, task = reg.task("segmentation/demo")
    args = {"data_dir": "/data/public", "workspace_dir": "/workspace", "case_ids": ["case_000", "case_001"]}
    lite = render_brief(task, "lite", track.template_dir(), **args)
    std = render_brief(task, "standard", track.template_dir(), **args)
    pro = render_brief(task, "pro", track.template_dir(), **args)
    assert "classical HU-threshold segmenter" in lite and "Skill hint — S2" in lite and "Skill hint — S3" in lite
    assert "requirements.txt" in lite
    assert "Skill hint — S1" in std and "Skill hint — S2" not in std and "nnU-Net v2" in std
    assert "Skill hint" not in pro and "Renal cell carcinoma" in pro and "summary plots" in pro
    assert "plan.png" in std and "plan.png" not in lite
    for text in (lite, std, pro):
        assert "{{" not in text and "/workspace/outputs/<case_id>/" in text


def test_unfilled_placeholder_is_an_error(reg, tmp_path):
    _track, task = reg.task("segmentation/demo")
    (tmp_path / "task.md.j2").write_text("Case {{ no_such_variable }}\n")
    with pytest.raises(UserError, match="no_such_variable"):
        render_brief(task, "lite", tmp_path, data_dir="/d", workspace_dir="/w", case_ids=["a"])


def test_one_broken_plugin_does_not_break_the_rest(monkeypatch):
    good = types.ModuleType("good_plugin")

    @hookimpl
    def automedbench_register_agents(register):
        register("good-agent", object, "fine")

    good.automedbench_register_agents = automedbench_register_agents

    bad = types.ModuleType("bad_plugin")

    @hookimpl
    def automedbench_register_agents_bad(register):
        raise RuntimeError("boom")

    bad.automedbench_register_agents = automedbench_register_agents_bad

    class EP:
        def __init__(self, name, target):
            self.name, self._target = name, target
            self.dist = types.SimpleNamespace(name=f"dist-{name}", version="9")

        def load(self):
            if isinstance(self._target, Exception):
                raise self._target
            return self._target

    eps = [EP("unimportable", ImportError("No module named 'xyz'")), EP("bad", bad), EP("good", good)]
    monkeypatch.setattr("automedbench.plugins.md.entry_points", lambda group: eps)
    reg = Registry()
    reg.load_entry_points()
    assert "good-agent" in reg.components["agent"]
    assert reg.components["agent"]["good-agent"].distribution == "dist-good"
    errors = {p.plugin: p.error for p in reg.problems}
    assert "No module named" in errors["unimportable"] and "boom" in errors["bad"]


def test_duplicate_names_keep_the_first(reg):
    comp = reg.get("agent", "reference")
    assert comp.plugin == "builtins" and comp.distribution == "automedbench"


@pytest.mark.parametrize("content,needle", [(None, "no such file"), (b"id: [unclosed", "not valid YAML"),
                                            (b"\xff\xfe bad", "not UTF-8")])
def test_yaml_files_fail_in_one_line(tmp_path, content, needle):
    from automedbench.yamlfile import read_yaml

    path = tmp_path / "x.yaml"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(UserError, match=f"task file {path}: {needle}"):
        load_task_file(path)
    with pytest.raises(UserError, match=f"price file {path}: {needle}"):
        read_yaml(path, "price file")


def _packaged_track(tmp_path: Path):
    """A PackagedTrack over a copy of the segmentation demo's task file, plus whatever files a test adds."""
    from automedbench.track import PackagedTrack

    (tmp_path / "tasks").mkdir()
    data = demo_data()
    data["id"], data["track"] = "lazy/demo", "lazy"
    (tmp_path / "tasks" / "demo.yaml").write_text(yaml.safe_dump(data))

    class Lazy(PackagedTrack):
        name = "lazy"
        root = tmp_path

        def check_case(self, *args, **kwargs):  # never called: only task files are read here
            raise AssertionError("not used")

    return Lazy, data


def test_a_task_looked_up_by_id_reads_its_own_file_alone(tmp_path):
    """A run asks for one task: a broken sibling file does not stop it (and is not read), the listing still
    reports it; a file whose name is not its id is found by the listing."""
    Lazy, data = _packaged_track(tmp_path)
    (tmp_path / "tasks" / "broken.yaml").write_text("id: [unclosed")
    data["id"] = "lazy/other-name"
    (tmp_path / "tasks" / "renamed.yaml").write_text(yaml.safe_dump(data))
    track = Lazy()
    assert track.task("lazy/demo").id == "lazy/demo"
    assert track._tasks is None  # the listing was never read
    # the listing reports it beside the sound ones (polish5: it raised, hiding every task of the track)
    assert {t.id for t in track.tasks()} == {"lazy/demo", "lazy/other-name"}
    (problem,) = track.task_file_problems()
    assert "broken.yaml" in problem, problem
    (tmp_path / "tasks" / "broken.yaml").unlink()
    assert Lazy().task("lazy/other-name").id == "lazy/other-name"  # the full listing's answer
    with pytest.raises(UserError, match="no lazy task 'lazy/nope'"):
        Lazy().task("lazy/nope")
    for odd in ("lazy/../demo", "lazy/.demo", "lazy/", "other/demo"):
        with pytest.raises(UserError):
            Lazy().task(odd)


def test_plugin_name_and_version_read_from_the_metadata_headers_match_the_full_parse():
    """The registry reads Name and Version from the metadata's header lines: the same as the e-mail parse of
    the whole file, for every distribution installed here (editable or not, a README as description or not)."""
    import importlib.metadata as md

    from automedbench.plugins import _name_and_version

    checked = 0
    for dist in md.distributions():
        meta = dist.metadata
        if meta is None or meta["Name"] is None:
            continue
        assert _name_and_version(dist) == (meta["Name"], meta["Version"] or "?"), dist
        checked += 1
    assert checked > 50
