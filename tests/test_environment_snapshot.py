"""What the local-plain runs' environment snapshot holds, entry by entry, on a tree built for it: every import
folder's entries by lstat, without the children no import reaches, the skipped folders or what links point to.
(The walk stats each entry from its folder's descriptor since round 18 of the test time work; the entries and
their values are the ones a stat by whole path gives.)"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from automedbench.evaluator import environment_snapshot


def _tree(root: Path) -> tuple[list[str], list[str]]:
    """An import folder with another inside it, children no import reaches, links, a skipped state folder and a
    skipped folder holding an import folder; (import folders, skipped folders)."""
    for rel in ("pkg/__init__.py", "pkg/m.py", "pkg/__pycache__/m.cpython-311.pyc", "site-packages/x.py",
                ".git/HEAD", "inner/n.py", "inner/site-packages/y.py", "deep/site-packages/z.py", "state/key",
                "holds/lib/c.py", "holds/other.txt"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(rel)
    (root / "link-dir").symlink_to(root / "pkg")
    (root / "dangling").symlink_to(root / "nowhere")
    return [str(root), str(root / "inner"), str(root / "holds" / "lib")], [str(root / "state"), str(root / "holds")]


def _lstat_entry(path: str) -> tuple[int, ...]:
    info = os.lstat(path)
    if Path(path).is_dir() and not Path(path).is_symlink():
        return (info.st_ino,)
    return (info.st_size, info.st_mtime_ns, info.st_ino, info.st_ctime_ns)


def test_the_snapshot_holds_every_reachable_entry_with_its_lstat(tmp_path):
    root = (tmp_path / "site").resolve()
    paths, skip = _tree(root)
    found = environment_snapshot(paths, skip=skip)
    ours = {p: v for p, v in found.items() if p == str(root) or p.startswith(str(root) + os.sep)}
    expected = [str(root), *(str(root / rel) for rel in (
        "pkg", "pkg/__init__.py", "pkg/m.py", "pkg/__pycache__", "pkg/__pycache__/m.cpython-311.pyc",
        "inner", "inner/n.py", "deep", "deep/site-packages", "deep/site-packages/z.py",
        # a skipped folder that holds an import folder is walked; a plain one is not recorded at all
        "holds", "holds/lib", "holds/lib/c.py", "holds/other.txt", "link-dir", "dangling"))]
    assert sorted(ours) == sorted(expected)
    assert ours == {p: _lstat_entry(p) for p in expected}  # a link's own lstat: never what it points to
    assert os.path.realpath(sys.executable) in found and sys.executable in found


def test_a_changed_file_and_a_replaced_folder_show(tmp_path):
    root = (tmp_path / "site").resolve()
    paths, skip = _tree(root)
    before = environment_snapshot(paths, skip=skip)
    (root / "pkg" / "m.py").write_text("pkg/m.pX")  # same size
    os.utime(root / "pkg" / "m.py", ns=(before[str(root / "pkg" / "m.py")][1],) * 2)  # mtime set back
    (root / "inner").rename(root / "inner-old")
    (root / "inner").mkdir()
    (root / "inner" / "n.py").write_text("inner/n.py")
    after = environment_snapshot(paths, skip=skip)
    changed = {p for p in set(before) | set(after) if before.get(p) != after.get(p)}
    assert {str(root / "pkg" / "m.py"), str(root / "inner"), str(root / "inner" / "n.py")} <= changed


def test_the_walk_stops_near_its_bound(tmp_path):
    root = (tmp_path / "site").resolve()
    for k in range(30):
        (root / f"d{k}").mkdir(parents=True)
        for j in range(5):
            (root / f"d{k}" / f"f{j}").write_text("x")
    assert len(environment_snapshot([str(root)])) > 150
    # past the bound at most one folder's entries: the root's 30 folders, or one folder's 5 files
    assert 10 <= len(environment_snapshot([str(root)], max_entries=10)) <= 10 + 30
