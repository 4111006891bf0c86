"""Demo stagings shared between data roots (`staging.share_demos`, what the test kit's `amb_data_root` does under
pytest-xdist): a demo is generated once, under the shared root's lock, and every registered root gets a whole copy
of it: same files, modes, times, stamp and secret. Roots not registered, and forced stagings, generate their own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import attrs
import pytest
from automedbench import staging
from automedbench.engine import registry

TASK = "toy/vowels"


def files_of(root: Path) -> dict[str, tuple[bytes, int, int]]:
    return {str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mode, p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def shares(monkeypatch):
    monkeypatch.setattr(staging, "_demo_shares", {})


def test_registered_roots_get_copies_of_one_staging(tmp_path, shares, monkeypatch):
    track, task = registry().task(TASK)
    calls = []
    real = type(track).stage
    monkeypatch.setattr(type(track), "stage", lambda self, *a, **k: calls.append(a[0].id) or real(self, *a, **k))
    shared, a, b, alone = (tmp_path / name for name in ("shared", "a", "b", "alone"))
    staging.share_demos(a, shared)
    staging.share_demos(b, shared)
    got_a, got_b = staging.ensure(track, task, a), staging.ensure(track, task, b)
    assert calls == [TASK]  # generated once, under the shared root
    assert got_a.case_ids == got_b.case_ids and got_a.root == staging.task_dir(a, task)
    original = files_of(staging.task_dir(shared, task))
    assert files_of(got_a.root) == files_of(got_b.root) == original  # bytes, modes and times
    assert "private/staging.secret" in original and "staging.json" in original
    assert not list(a.rglob(".*copy-*")) and staging.ensure(track, task, a).case_ids == got_a.case_ids
    assert calls == [TASK]  # found staged: no copy, no staging
    # a root nobody registered generates its own (a fresh secret); so does a forced staging of a registered one
    secret = "private/staging.secret"
    shared_secret = original[secret][0]
    own = files_of(staging.ensure(track, task, alone).root)[secret][0]
    forced = files_of(staging.stage(track, task, a, force=True).root)[secret][0]
    assert calls == [TASK, TASK, TASK]
    assert len({shared_secret, own, forced}) == 3
    assert files_of(got_b.root) == original  # b's copy is its own: a's re-staging left it alone


def test_two_processes_share_one_staging(tmp_path):
    """Two processes that need the demo at once: one stages it, the other waits and copies it."""
    code = ("import sys\nfrom pathlib import Path\nfrom automedbench import staging\n"
            "from automedbench.engine import registry\n"
            f"track, task = registry().task({TASK!r})\nroot = Path(sys.argv[1])\n"
            "staging.share_demos(root, Path(sys.argv[2]))\nstaging.ensure(track, task, root)\n")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path / name), str(tmp_path / "shared")],
                              stderr=subprocess.PIPE, text=True) for name in ("w0", "w1")]
    for proc in procs:
        assert proc.wait(timeout=120) == 0, proc.stderr.read()
    task = registry().task(TASK)[1]
    copies = [files_of(staging.task_dir(tmp_path / name, task)) for name in ("w0", "w1")]
    assert copies[0] == copies[1] == files_of(staging.task_dir(tmp_path / "shared", task))


def test_a_changed_spec_is_staged_where_asked_never_shared(tmp_path, shares):
    """A task spec other than the installed one (a test's smaller cohort) must not become the shared staging
    every other root would copy."""
    track, task = registry().task(TASK)
    smaller = attrs.evolve(task, case_count=2)
    shared, a, b = tmp_path / "shared", tmp_path / "a", tmp_path / "b"
    staging.share_demos(a, shared)
    staging.share_demos(b, shared)
    assert staging.ensure(track, smaller, a).root == staging.task_dir(a, task)  # staged there, by itself
    assert not staging.task_dir(shared, task).exists()
    assert staging.ensure(track, task, b).case_ids and staging.task_dir(shared, task).exists()


SESSION_TEST = '''
import os
from pathlib import Path

from automedbench import staging
from automedbench.engine import registry


def test_stage(amb_data_root):
    track, task = registry().task("toy/vowels")
    secret = staging.ensure(track, task, amb_data_root).root / "private" / "staging.secret"
    Path(os.environ["SECRET_OUT"]).write_bytes(secret.read_bytes())
'''


def _pytest_session(folder: Path, name: str, shared: Path | None) -> bytes:
    """One pytest session (no xdist) over SESSION_TEST: the staging secret of its `amb_data_root`'s toy demo."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST_", "AUTOMEDBENCH_TEST_DEMOS", "AUTOMEDBENCH_XDIST"))}
    env.update(AUTOMEDBENCH_DATA=str(folder / f"data-{name}"), AUTOMEDBENCH_STATE=str(folder / f"state-{name}"),
               SECRET_OUT=str(folder / f"secret-{name}"))
    if shared is not None:
        env["AUTOMEDBENCH_TEST_DEMOS"] = str(shared)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                           "--rootdir", str(folder), "--basetemp", str(folder / f"tmp-{name}"),
                           str(folder / "test_session.py")], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return (folder / f"secret-{name}").read_bytes()


def test_a_test_runs_sessions_share_the_demos_it_names(tmp_path):
    """scripts/test.sh names one folder for both tiers (AUTOMEDBENCH_TEST_DEMOS): the second session copies the
    demo the first staged (same secret), where sessions without it each generate their own."""
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["automedbench.testing"]\n')
    (tmp_path / "test_session.py").write_text(SESSION_TEST)
    shared = tmp_path / "demos"
    first, second = (_pytest_session(tmp_path, name, shared) for name in ("fast", "slow"))
    task = registry().task(TASK)[1]
    assert first == second == (staging.task_dir(shared, task) / "private" / "staging.secret").read_bytes()
    alone = _pytest_session(tmp_path, "alone", None)
    assert alone != first
    script = (Path(__file__).parent.parent / "scripts" / "test.sh").read_text()
    assert "export AUTOMEDBENCH_TEST_DEMOS=$work/demos" in script  # both tiers' sessions name the same folder
