"""Runs that cannot produce a trusted score say so: `unverified` in result.json, the terminal and every report.

A run without filesystem isolation (local-plain) can read the references, the block device and the harness's
own code; a tripwire that cannot arm sees nothing. Such runs are marked, and leaderboards and code analyses
leave them out unless `--include-unverified`. Everything here goes through the real runner.
"""

from __future__ import annotations

import sysconfig
from pathlib import Path

import pytest
from automedbench.cli import main
from automedbench.runfolder import RunFolder
from automedbench.runner import UNVERIFIED_PLAIN, Run, RunOptions
from automedbench.sandboxes.local import bwrap_path
from automedbench.testing import StepsAgent
from click.testing import CliRunner
from review_steps import DEMO, register_steps


def _run(reg, out: Path, data_root: Path, sandbox: str, steps=None, **options):
    register_steps(reg)
    runner = Run(RunOptions(DEMO, "lite", StepsAgent.name, sandbox=sandbox, out=out, data_root=data_root,
                            agent_options={"steps": steps or [["bash", "echo honest"]]}, workspace_quota_mb=0,
                            require_isolation=False, **options), reg)
    seen: list[dict] = []
    runner.progress = seen.append
    return runner.execute(), runner.run_dir, seen


@pytest.fixture(scope="module")
def two_runs(reg, data_root, tmp_path_factory):
    """One honest run on local-plain and one on local (bubblewrap), in one folder."""
    if bwrap_path() is None:
        pytest.skip("bubblewrap (bwrap) not usable here")
    out = tmp_path_factory.mktemp("unverified")
    plain = _run(reg, out, data_root, "local-plain")
    isolated = _run(reg, out, data_root, "local")
    return out, plain, isolated


def test_plain_runs_are_unverified_in_the_record_and_the_terminal(two_runs):
    _, (plain, plain_dir, seen), (isolated, _, _) = two_runs
    assert not plain.isolation.verified and UNVERIFIED_PLAIN in plain.isolation.unverified
    assert '"verified": false' in (plain_dir / "result.json").read_text()
    assert any(e["kind"] == "warning" and e["text"].startswith("UNVERIFIED") for e in seen)
    assert isolated.isolation.verified and isolated.isolation.unverified == []
    shown = CliRunner().invoke(main, ["show", str(plain_dir)])
    assert shown.exit_code == 0 and "UNVERIFIED" in shown.output and "no filesystem isolation" in shown.output


def test_leaderboard_and_codes_leave_unverified_runs_out(two_runs):
    out, (_, plain_dir, _), (_, local_dir, _) = two_runs
    board = CliRunner().invoke(main, ["leaderboard", str(out), "--json", str(out.parent / "board.json")])
    assert board.exit_code == 0, board.output
    import json

    data = json.loads((out.parent / "board.json").read_text())
    assert data["runs_used"] == 1 and data["excluded"].get("unverified") == 1, data
    assert "--include-unverified" in board.output
    both = CliRunner().invoke(main, ["leaderboard", str(out), "--include-unverified", "--json",
                                     str(out.parent / "all.json")])
    assert json.loads((out.parent / "all.json").read_text())["runs_used"] == 2, both.output
    codes = CliRunner().invoke(main, ["codes", str(out), "--dry-run"])
    assert codes.exit_code == 0, codes.output
    assert f"{plain_dir.name}: " in codes.output and "left out (unverified" in codes.output
    assert f"{local_dir.name}: " in codes.output


def test_a_tripwire_that_cannot_arm_makes_a_plain_run_unverified(reg, data_root, tmp_path, monkeypatch):
    """Inotify watches exhausted (by another run's process, say): nothing would see a read of the references."""
    from automedbench import tripwire

    def starved(self, root, max_paths=16384):
        self.unwatched += 1
        return 0

    monkeypatch.setattr(tripwire.Tripwire, "watch_tree", starved)
    plain, _, _ = _run(reg, tmp_path, data_root, "local-plain")
    assert any(r.startswith("the tripwire could not arm") for r in plain.isolation.unverified)
    if bwrap_path() is not None:  # with the references not mounted, the decoy tripwire is a detector only
        isolated, _, _ = _run(reg, tmp_path, data_root, "local")
        assert isolated.isolation.verified
        assert any("inotify watch limit" in g for g in isolated.isolation.gaps)


def test_the_harness_environment_is_read_only_to_a_plain_call(reg, data_root, tmp_path):
    """On local-plain the agent could write the harness's site-packages and its cached modules (code the
    evaluator, and every later run, imports); the run only said so afterwards. Now each call's mount namespace
    has everything but the workspace read-only: both writes fail, nothing changes, nothing needs saying."""
    import py_compile

    from automedbench import evaluator

    probe = Path(sysconfig.get_paths()["purelib"]) / "zz_amb_unverified_probe.py"
    cached = Path(py_compile.compile(evaluator.__file__, doraise=True))  # what an import would write
    before = cached.read_bytes()
    try:
        plain, run_dir, _ = _run(reg, tmp_path, data_root, "local-plain",
                                 steps=[["bash", f"echo 'x = 1' > {probe}"],
                                        ["bash", f"cp '{cached}' '{cached}.new' && mv '{cached}.new' '{cached}'"]])
    finally:
        existed = probe.exists()
        probe.unlink(missing_ok=True)
    assert not existed and cached.read_bytes() == before
    calls = [e for e in RunFolder(run_dir).events() if e.get("type") == "tool" and e.get("name") == "execute_code"]
    assert [c["exit_code"] for c in calls] == [1, 1] and all("Read-only file system" in c["stderr"] for c in calls)
    assert not any("Python environment changed" in r for r in plain.isolation.unverified), plain.isolation.unverified


def test_added_cached_modules_and_temporary_files_are_not_changes():
    """The harness compiles modules it imports for the first time: a new .pyc (or a compiler's temporary
    file) is not a change; a .pyc present before and after with other bytes is."""
    from automedbench.evaluator import snapshot_changes

    pyc = "/site/pkg/__pycache__/m.cpython-311.pyc"
    before = {"/site/pkg": (1, 1, 1), "/site/pkg/__pycache__": (1, 1, 2), pyc: (10, 1, 3)}
    added = {**before, "/site/pkg/__pycache__": (1, 2, 2), "/site/pkg/__pycache__/n.cpython-311.pyc": (5, 2, 4),
             "/site/pkg/__pycache__/n.cpython-311.pyc.140012": (5, 2, 5)}
    assert snapshot_changes(before, added) == []
    assert snapshot_changes(before, {**before, pyc: (10, 2, 6)}) == [pyc]
    assert snapshot_changes(before, {**before, "/site/pkg/m.py": (3, 2, 7)}) == ["/site/pkg/m.py"]
    # equal snapshots (the fast path) and a removed file (which counts)
    assert snapshot_changes(before, dict(before)) == []
    assert snapshot_changes({**before, "/site/pkg/m.py": (3, 1, 7)}, before) == ["/site/pkg/m.py"]


def test_frozen_files_changed_after_the_freeze_are_rejected(staged, tmp_path):
    """The evaluator scores only bytes the manifest vouches for: a changed or added file rejects its case."""
    from automedbench.evaluator import evaluate, frozen_changes
    from automedbench.freeze import freeze
    from automedbench.plugins import registry

    outputs = tmp_path / "outputs"
    for case in staged.case_ids[:2]:
        (outputs / case).mkdir(parents=True)
        for ref in (staged.private / case).iterdir():
            (outputs / case / ref.name).write_bytes(b"not a volume")
    manifest = freeze(outputs, tmp_path / "submission", submitted=True)
    assert frozen_changes(tmp_path / "submission", manifest) == []
    first, second = staged.case_ids[:2]
    victim = next((tmp_path / "submission" / first).iterdir())
    victim.write_bytes(b"changed")
    (tmp_path / "submission" / second / "added.txt").write_text("late")
    changed = frozen_changes(tmp_path / "submission", manifest)
    assert sorted(changed) == sorted([f"{first}/{victim.name}", f"{second}/added.txt"])
    track, task = registry().task(DEMO)
    result = evaluate(track, task, staged, tmp_path / "submission", manifest)
    reasons = {c.case_id: " ".join(c.reasons) for c in result.cases}
    assert "changed after the freeze" in reasons[first] and "changed after the freeze" in reasons[second]
    assert sorted(result.tampered) == sorted(changed)


def test_a_file_rewritten_at_its_size_with_its_mtime_reset_is_a_change(tmp_path):
    """An agent running as the harness's user rewrites a module the evaluator imports, same size, and sets its
    mtime back: the kernel's ctime still moves (it cannot be set), so the snapshot sees it (missed before:
    size, mtime and inode were equal)."""
    import os
    import time

    from automedbench.evaluator import environment_snapshot, snapshot_changes

    module = tmp_path / "site" / "pkg" / "m.py"
    module.parent.mkdir(parents=True)
    module.write_text("SCORE = 0\n")
    info = module.stat()
    before = environment_snapshot([str(tmp_path / "site")])
    time.sleep(0.02)
    with open(module, "r+") as handle:  # in place: the inode stays
        handle.write("SCORE = 1\n")
    os.utime(module, ns=(info.st_atime_ns, info.st_mtime_ns))
    after = os.stat(module)
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (info.st_size, info.st_mtime_ns, info.st_ino)
    assert snapshot_changes(before, environment_snapshot([str(tmp_path / "site")])) == [str(module)]


def test_a_first_pycache_folder_in_a_package_is_no_change(tmp_path):
    """The harness imports a module for the first time during the run (a track's solution) and writes its
    bytecode: the package folder gains `__pycache__/` (its mtime moves). Not a change (it was one on CI, once
    bytecode writing was on); a new module beside it still is."""
    from automedbench.evaluator import environment_snapshot, snapshot_changes

    package = tmp_path / "site" / "pkg"
    package.mkdir(parents=True)
    (package / "m.py").write_text("X = 1\n")
    before = environment_snapshot([str(tmp_path / "site")])
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "m.cpython-311.pyc").write_bytes(b"\x00" * 16)
    assert snapshot_changes(before, environment_snapshot([str(tmp_path / "site")])) == []
    (package / "n.py").write_text("Y = 2\n")
    assert snapshot_changes(before, environment_snapshot([str(tmp_path / "site")])) == [str(package / "n.py")]


def test_another_interpreters_site_packages_inside_an_import_folder_is_left_out_unless_imported(tmp_path):
    """The base interpreter's `site-packages` sits inside its standard library (an import folder): no import
    reaches it there, and walking it was 51 000 of a snapshot's 125 000 entries. A change in it is no change;
    a change beside it (the standard library's own modules), or in a site-packages that is an import folder
    itself (the venv's), still is."""
    from automedbench.evaluator import environment_snapshot, snapshot_changes

    stdlib = tmp_path / "lib" / "python3"
    (stdlib / "site-packages" / "other").mkdir(parents=True)
    (stdlib / "os2.py").write_text("X = 1\n")
    venv = tmp_path / "venv" / "site-packages"
    venv.mkdir(parents=True)
    paths = [str(stdlib), str(venv)]
    before = environment_snapshot(paths)
    assert not any("site-packages/other" in p for p in before) and str(venv) in before
    (stdlib / "site-packages" / "other" / "m.py").write_text("SCORE = 1\n")
    assert snapshot_changes(before, environment_snapshot(paths)) == []
    (venv / "m.py").write_text("SCORE = 1\n")
    (stdlib / "os2.py").write_text("X = 2\n")
    assert snapshot_changes(before, environment_snapshot(paths)) == [str(stdlib / "os2.py"), str(venv / "m.py")]
    # the same folder named as an import folder itself is walked
    both = environment_snapshot([*paths, str(stdlib / "site-packages")])
    assert str(stdlib / "site-packages" / "other" / "m.py") in both


def test_an_import_folder_inside_another_is_walked_once(tmp_path, monkeypatch):
    """A checkout on the import path holds the venv's site-packages and the editable packages' folders, each an
    import folder too: the snapshot stats every path once, by its whole path or from its folder's descriptor (it
    walked each nested one twice: 146 000 lstat calls for 77 000 entries in a test session's run, 0.9 CPU-s a
    snapshot), with the same entries as before."""
    import os

    from automedbench import evaluator

    root = tmp_path / "checkout"
    inner = root / ".venv" / "lib" / "site-packages"
    for folder in (root / "core" / "pkg", inner / "lib1", inner / "lib2"):
        folder.mkdir(parents=True)
        (folder / "m.py").write_text("X = 1\n")
    paths = [str(root), str(inner), str(root / "core")]
    seen: list[str] = []
    real, real_at = os.lstat, os.stat

    def counting(path, *args, **kwargs):
        seen.append(os.fspath(path))
        return real(path, *args, **kwargs)

    def counting_at(path, *args, dir_fd=None, **kwargs):  # an entry stat'ed from its folder's descriptor
        folder = os.readlink(f"/proc/self/fd/{dir_fd}") if dir_fd is not None else ""
        seen.append(os.path.join(folder, os.fspath(path)))
        return real_at(path, *args, dir_fd=dir_fd, **kwargs)

    monkeypatch.setattr(evaluator.os, "lstat", counting)
    monkeypatch.setattr(evaluator.os, "stat", counting_at)
    snapshot = evaluator.environment_snapshot(paths)
    walked = [p for p in seen if p.startswith(str(root))]
    assert len(walked) == len(set(walked)) == len([p for p in snapshot if p.startswith(str(root))])
    assert {str(inner / "lib2" / "m.py"), str(root / "core" / "pkg" / "m.py")} <= set(snapshot)
    separately = {}
    for path in paths:  # each import folder walked on its own: the union is the same snapshot
        separately.update(evaluator.environment_snapshot([path]))
    assert {p: v for p, v in snapshot.items() if p.startswith(str(root))} == \
        {p: v for p, v in separately.items() if p.startswith(str(root))}


def test_the_harness_writing_its_own_folders_below_an_import_folder_is_no_environment_change(tmp_path):
    """A checkout on the import path holds the harness's state folders (another run's grading cache), data and
    runs: a concurrent harness writing there during the agent phase marked a plain run unverified (CI met it).
    Those folders are skipped, unless one is or holds an import folder; a change anywhere else still shows."""
    from automedbench.evaluator import environment_snapshot, snapshot_changes

    root = tmp_path / "checkout"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("x = 1\n")
    state = root / ".state" / "gw0"
    state.mkdir(parents=True)
    skip = [str(state), str(root / ".data")]
    before = environment_snapshot([str(root)], skip=skip)
    (state / "grade_cache.jsonl").write_text("{}\n")
    assert snapshot_changes(before, environment_snapshot([str(root)], skip=skip)) == []
    assert snapshot_changes(before, environment_snapshot([str(root)])) != []  # not skipped: seen
    (root / "pkg" / "__init__.py").write_text("x = 2\n")
    assert snapshot_changes(before, environment_snapshot([str(root)], skip=skip)) == [str(root / "pkg" / "__init__.py")]
    # a skip folder that is (or holds) an import folder is walked all the same
    assert str(root / "pkg" / "__init__.py") in environment_snapshot([str(root)], skip=[str(root)])
    assert str(root / "pkg" / "__init__.py") in environment_snapshot([str(root / "pkg")], skip=[str(root)])


def test_a_checkouts_version_control_store_is_no_environment_change(tmp_path):
    """A checkout on the import path (pytest puts its root there) holds `.git`, where a commit or fetch in another
    worktree of the same repository writes during any run: that marked a plain run unverified (seen while helpers
    committed beside the suite). Nothing imports from it; a change beside it still shows."""
    from automedbench.evaluator import environment_snapshot, snapshot_changes

    root = tmp_path / "checkout"
    (root / ".git" / "objects" / "01").mkdir(parents=True)
    (root / "pkg").mkdir()
    (root / "pkg" / "__init__.py").write_text("x = 1\n")
    before = environment_snapshot([str(root)])
    assert not any(".git" in p for p in before) and str(root / "pkg" / "__init__.py") in before
    (root / ".git" / "objects" / "01" / "abc").write_bytes(b"blob")
    assert snapshot_changes(before, environment_snapshot([str(root)])) == []
    (root / "pkg" / "__init__.py").write_text("x = 2\n")
    assert snapshot_changes(before, environment_snapshot([str(root)])) == [str(root / "pkg" / "__init__.py")]
    # a `.git` deeper than an import folder's own children (inside a package) is walked as before
    (root / "pkg" / ".git").mkdir()
    assert str(root / "pkg" / ".git") in environment_snapshot([str(root)])
