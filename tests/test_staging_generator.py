"""A demo staged by older generator code is staged again: a fix to a demo generator (whose source the sandbox
can read) must reach the demos users staged before it, not wait for a `stage --force` nobody runs."""

from __future__ import annotations

import json

from automedbench import staging
from automedbench.plugins import registry
from automedbench.testing import register_toy_track

TOY = "toy/vowels"


def _toy():
    register_toy_track()
    return registry().task(TOY)


def test_a_demo_stamp_names_its_generator_and_is_reused_while_it_matches(tmp_path):
    track, task = _toy()
    first = staging.ensure(track, task, tmp_path)
    stamp = json.loads((first.root / staging.STAMP).read_text())
    assert stamp["generator"] == staging.generator_digest(track) != ""
    again = staging.ensure(track, task, tmp_path)
    assert staging.digests(task, tmp_path)["private_data"] == stamp["private_sha256"]
    assert again.case_ids == first.case_ids


def test_a_demo_staged_by_other_generator_code_is_staged_anew_once(tmp_path):
    track, task = _toy()
    first = staging.ensure(track, task, tmp_path)
    path = first.root / staging.STAMP
    for recorded in ("0" * 64, None):  # other code; a stamp from before stamps named their generator
        info = json.loads(path.read_text())
        marker = first.root / "private" / "left-by-the-old-staging"
        marker.write_text("x")
        info.pop("generator")
        if recorded:
            info["generator"] = recorded
        path.write_text(json.dumps(info))
        assert staging.stale_demo(path, track)
        staging.ensure(track, task, tmp_path)
        info = json.loads(path.read_text())
        assert info["generator"] == staging.generator_digest(track)
        assert not marker.exists()  # the old staging was replaced as a whole
        assert not staging.stale_demo(path, track)
        assert staging.digests(task, tmp_path)["private_data"] == info["private_sha256"]


def test_the_digest_follows_the_track_source(tmp_path, monkeypatch):
    track, _ = _toy()
    before = staging.generator_digest(track)
    source = tmp_path / "pkg"
    source.mkdir()
    (source / "__init__.py").write_text("")
    (source / "gen.py").write_text("ANSWERS = [1, 2]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    mod = importlib.import_module("pkg.gen")
    fake = type("FakeTrack", (), {"__module__": mod.__name__})()
    one = staging.generator_digest(fake)
    (source / "gen.py").write_text("ANSWERS = [2, 1]\n")
    assert staging.generator_digest(fake) != one
    assert staging.generator_digest(track) == before


def test_a_staging_of_an_older_format_is_staged_anew_when_a_demo_and_refused_when_real(tmp_path):
    """Stagings from before per-staging secrets and uniform file times (issue 35) may order and time their files
    by the answers: a demo is staged again; a real task (a download only the user has) is refused in one line
    that names the command, its data untouched."""
    import pytest
    from automedbench.errors import UserError

    track, task = _toy()
    first = staging.ensure(track, task, tmp_path)
    path = first.root / staging.STAMP
    info = json.loads(path.read_text())
    assert info["format"] == staging.STAGING_FORMAT
    for old in (None, 1, "2", True):  # no format (older stamps), older, and malformed values
        info = json.loads(path.read_text())
        info.pop("format")
        if old is not None:
            info["format"] = old
        path.write_text(json.dumps(info))
        assert staging.stale_demo(path, track)
        staging.ensure(track, task, tmp_path)
        assert json.loads(path.read_text())["format"] == staging.STAGING_FORMAT
    # a real task's staging is read by load() alone (ensure stages demos only): the same stamp, refused
    info = json.loads(path.read_text())
    info.pop("format")
    path.write_text(json.dumps(info))
    before = path.read_bytes()
    with pytest.raises(UserError, match=r"staged by an older AutoMedBench .* automedbench stage toy/vowels --from "
                                        r"PATH --force"):
        staging.load(task, tmp_path)
    assert path.read_bytes() == before and (first.root / "private").is_dir()
