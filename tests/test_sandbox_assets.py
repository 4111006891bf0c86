"""A track's read-only assets (`Track.assets`: a pinned model's weights): mounted read-only at ASSETS_MOUNT
in an isolating sandbox, outside the workspace and away from the references, named in the brief and digested
into the run record; the plain fallback declares that it cannot protect them."""

from __future__ import annotations

from pathlib import Path

import pytest
from automedbench.errors import UserError
from automedbench.sandbox import ASSETS_MOUNT, SandboxSpec
from automedbench.sandboxes.local import LocalSandbox, bwrap_path
from automedbench.testing import register_toy_track, run_task

needs_bwrap = pytest.mark.skipif(bwrap_path() is None, reason="bubblewrap (bwrap) not usable on this machine")


@pytest.fixture()
def layout(tmp_path):
    for sub in ("ws", "public/c1", "private/c1", "assets"):
        (tmp_path / sub).mkdir(parents=True)
    (tmp_path / "assets" / "weights.bin").write_bytes(b"WEIGHTS" * 10)
    return tmp_path


@needs_bwrap
def test_assets_are_readable_but_not_writable_inside_bubblewrap(layout):
    session = LocalSandbox("auto").open(SandboxSpec(layout / "ws", layout / "public", assets=layout / "assets"))
    try:
        assert session.assets_dir == ASSETS_MOUNT
        assert not ASSETS_MOUNT.startswith(session.workspace_dir) and not ASSETS_MOUNT.startswith("/data")
        r = session.execute("bash", 'echo "$ASSETS_DIR"; wc -c < "$ASSETS_DIR/weights.bin"; '
                                    'echo x > "$ASSETS_DIR/new.bin" && echo CREATED; '
                                    'echo x >> "$ASSETS_DIR/weights.bin" && echo APPENDED; '
                                    'rm -f "$ASSETS_DIR/weights.bin" && echo REMOVED; true', 20)
        assert r.stdout.split()[:2] == [ASSETS_MOUNT, "70"], r.stdout + r.stderr
        assert "CREATED" not in r.stdout and "APPENDED" not in r.stdout and "REMOVED" not in r.stdout
        assert "Read-only file system" in r.stderr
        assert sorted(p.name for p in (layout / "assets").iterdir()) == ["weights.bin"]
        assert (layout / "assets" / "weights.bin").read_bytes() == b"WEIGHTS" * 10
        assert (layout / "assets").resolve() in session.bound_sources()
        assert any(ASSETS_MOUNT in p for p in session.protections()[0])
    finally:
        session.close()


def test_plain_sandbox_names_the_host_folder_and_declares_the_gap(layout):
    session = LocalSandbox("none").open(SandboxSpec(layout / "ws", layout / "public", assets=layout / "assets"))
    try:
        assert session.assets_dir == str(layout / "assets")
        r = session.execute("bash", 'echo "$ASSETS_DIR"', 20)
        assert r.stdout.strip() == str(layout / "assets")
        # in place, read-only: the call's mount namespace has everything but the workspace read-only (issue 35)
        assert any("assets" in gap and "read-only" in gap for gap in session.protections()[1])
        wrote = session.execute("bash", 'echo x >> "$ASSETS_DIR/weights.bin"', 20)
        assert wrote.exit_code != 0 and "Read-only" in wrote.stderr
        assert (layout / "assets" / "weights.bin").read_bytes() == b"WEIGHTS" * 10
    finally:
        session.close()


def test_no_assets_no_mount_and_no_variable(layout):
    session = LocalSandbox("none").open(SandboxSpec(layout / "ws", layout / "public"))
    try:
        assert session.assets_dir == ""
        assert session.execute("bash", 'echo "[${ASSETS_DIR:-}]"', 20).stdout.strip() == "[]"
    finally:
        session.close()


def test_docker_mounts_the_assets_read_only():
    pytest.importorskip("docker")
    from automedbench_docker.sandbox import container_config

    spec = SandboxSpec(Path("/tmp/ws"), Path("/tmp/public"), assets=Path("/tmp/assets"))
    config = container_config(spec, "img", cpus=1, pids_limit=64, tmp_mb=64, user=(1, 1))
    mounts = {m["Target"]: m for m in config["mounts"]}
    assert mounts[ASSETS_MOUNT]["Source"] == "/tmp/assets" and mounts[ASSETS_MOUNT]["ReadOnly"] is True
    assert config["environment"]["ASSETS_DIR"] == ASSETS_MOUNT
    bare = container_config(SandboxSpec(Path("/tmp/ws"), Path("/tmp/public")), "img", cpus=1, pids_limit=64,
                            tmp_mb=64, user=(1, 1))
    assert ASSETS_MOUNT not in {m["Target"] for m in bare["mounts"]} and "ASSETS_DIR" not in bare["environment"]


@pytest.fixture()
def toy_with_assets(monkeypatch, tmp_path):
    """The toy track, its tasks shipping `tmp_path/assets` (a folder apart from data and runs)."""
    from automedbench.plugins import registry

    register_toy_track()
    track, _ = registry().task("toy/vowels")
    folder = tmp_path / "assets"
    folder.mkdir()
    (folder / "model.bin").write_bytes(b"\x00\x01weights")
    monkeypatch.setattr(type(track), "assets", lambda self, task: folder)
    return folder


def test_a_run_records_the_assets_digest_and_names_them_in_the_brief(tmp_path, toy_with_assets):
    from automedbench.fsutil import tree_digest

    result, run_dir = run_task("toy/vowels", "reference", out=tmp_path / "runs", data_root=tmp_path / "data")
    assert result.state == "scored", result.error
    assert result.header.hashes["assets"] == tree_digest(toy_with_assets)
    brief = (run_dir / "brief.md").read_text()
    expected = ASSETS_MOUNT if bwrap_path() else str(toy_with_assets)
    assert f"`{expected}`" in brief and "$ASSETS_DIR" in brief
    (toy_with_assets / "model.bin").write_bytes(b"changed")  # a changed asset shows in the next run's record
    again, _ = run_task("toy/vowels", "reference", out=tmp_path / "runs", data_root=tmp_path / "data")
    assert again.header.hashes["assets"] != result.header.hashes["assets"]


def test_assets_inside_the_data_root_are_refused(tmp_path, monkeypatch):
    from automedbench.plugins import registry

    register_toy_track()
    track, _ = registry().task("toy/vowels")
    folder = tmp_path / "data" / "assets"
    folder.mkdir(parents=True)
    (folder / "weights.bin").write_bytes(b"\0" * 16)  # an empty assets folder is refused first (test_sandbox_needs)
    monkeypatch.setattr(type(track), "assets", lambda self, task: folder)
    with pytest.raises(UserError, match="overlap the data root"):
        run_task("toy/vowels", "reference", out=tmp_path / "runs", data_root=tmp_path / "data")
