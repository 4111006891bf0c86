"""Agent image recipes are package data a track ships (`Track.agent_image()`), found without a checkout.

Building an image needs a docker engine; these tests check what `automedbench images build` would build
from: the recipe folders it finds through the registry, an installed third-party track's included.
"""

from __future__ import annotations

import importlib
import sys
import textwrap
from pathlib import Path

import pytest
from automedbench.plugins import Registry, registry
from automedbench_docker import images as docker_images

ROOT = Path(__file__).resolve().parents[1]
TRACKS_WITH_RECIPES = {"detection", "enhancement", "report_gen", "segmentation", "vqa"}


def test_every_track_ships_its_recipe_inside_its_package():
    found = {track.name: track.agent_image() for track in registry().tracks()}
    for name in TRACKS_WITH_RECIPES:
        folder = found[name]
        assert folder is not None and (folder / "Dockerfile").is_file()
        package = importlib.import_module(type(registry().track(name)).__module__.split(".")[0])
        assert folder.resolve().is_relative_to(Path(package.__file__).resolve().parent)  # package data
        assert "FROM ${BASE}" in (folder / "Dockerfile").read_text()


def test_a_track_without_a_recipe_uses_the_default_image():
    from automedbench.testing import register_toy_track

    register_toy_track()
    assert registry().track("toy").agent_image() is None  # a packaged track without docker/Dockerfile
    assert "toy" not in dict(docker_images.tracks_with_images(registry()))


@pytest.fixture
def third_party(tmp_path, monkeypatch):
    """A track package written outside this repository, with its own recipe, importable as `imgtrack`."""
    pkg = tmp_path / "site" / "imgtrack"
    (pkg / "tasks").mkdir(parents=True)
    (pkg / "docker").mkdir()
    (pkg / "docker" / "Dockerfile").write_text("ARG BASE=automedbench/agent:default\nFROM ${BASE}\nRUN true\n")
    (pkg / "__init__.py").write_text("")
    (pkg / "plugin.py").write_text(textwrap.dedent('''
        from pathlib import Path

        from automedbench.api import CaseVerdict, PackagedTrack, Register, hookimpl


        class ImgTrack(PackagedTrack):
            name = "imgtrack"
            root = Path(__file__).parent

            def check_case(self, task, case_id, submitted, public):
                return CaseVerdict(case_id, present=False, valid=False, problem="not scored here")


        @hookimpl
        def automedbench_register_tracks(register: Register) -> None:
            register("imgtrack", ImgTrack, "a third-party track with an agent image")
    '''))
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    yield pkg
    for name in [m for m in sys.modules if m == "imgtrack" or m.startswith("imgtrack.")]:
        del sys.modules[name]


def test_images_build_finds_a_third_party_tracks_recipe(third_party, monkeypatch, tmp_path):
    # no checkout: the harness's own recipes folder does not exist, the tracks' recipes still come in
    monkeypatch.setenv("AUTOMEDBENCH_DOCKERFILES", str(tmp_path / "no-checkout" / "docker"))
    reg = Registry()
    reg.load_entry_points()
    reg.add_plugin(importlib.import_module("imgtrack.plugin"), name="imgtrack")
    found = dict(docker_images.tracks_with_images(reg))
    assert found["imgtrack"] == third_party / "docker"
    assert set(found) >= TRACKS_WITH_RECIPES | {"imgtrack"}


def test_a_recipe_lists_its_own_wheels_for_the_offline_build(tmp_path):
    """`wheels.txt` beside a track's Dockerfile: requirements fetched on the host into the build context
    (comments and blank lines skipped); a recipe without one fetches nothing."""
    (tmp_path / "Dockerfile").write_text("ARG BASE\nFROM ${BASE}\n")
    assert docker_images.track_wheels(tmp_path) == []
    assert docker_images._wheel_filler(None, "3.11", []) is None
    (tmp_path / docker_images.TRACK_WHEELS).write_text("# the model's framework\ntorch==2.13.0  # CPU\n\nfoo>=1\n")
    assert docker_images.track_wheels(tmp_path) == ["torch==2.13.0", "foo>=1"]
    for track in registry().tracks():  # every shipped list pins torch to the CPU build's version, if it names it
        folder = track.agent_image()
        for line in docker_images.track_wheels(folder) if folder is not None else []:
            assert not line.startswith("torch") or line == "torch==2.13.0", (track.name, line)
