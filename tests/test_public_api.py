"""Plugins in this repository import the core only through `automedbench.api` (and `automedbench.testing`)."""

from __future__ import annotations

import ast
from pathlib import Path

import automedbench.api as api

ROOT = Path(__file__).resolve().parents[1]
# A track's code imports the core through the public API only; its tests may add the test helpers.
ALLOWED = {"automedbench.api"}
ALLOWED_IN_TESTS = {"automedbench.api", "automedbench.testing"}


def _core_imports(path: Path, allowed: set[str] = ALLOWED) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        for name in names:
            if (name == "automedbench" or name.startswith("automedbench.")) and name not in allowed:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {name}")
    return found


def test_plugins_import_only_the_public_api():
    """Production code never imports the test helpers (`stage_task` is public API); tests may."""
    # not a venv's or a non-editable pip build's copies (build/lib: ignored by git, possibly stale)
    sources = [p for p in (ROOT / "plugins").rglob("*.py") if not {".venv", "build"} & set(p.parts)]
    assert sources, "no plugin sources found"
    offending = [hit for path in sources for hit in _core_imports(
        path, ALLOWED_IN_TESTS if "tests" in path.relative_to(ROOT).parts else ALLOWED)]
    assert offending == []


def test_the_checker_sees_an_internal_import(tmp_path):
    bad = ROOT / "plugins" / "_probe_internal_import.py"
    bad.write_text("from automedbench.runner import run\n", encoding="utf-8")
    try:
        assert _core_imports(bad) == ["plugins/_probe_internal_import.py:1: automedbench.runner"]
    finally:
        bad.unlink()


def test_every_public_name_resolves():
    assert len(api.__all__) == len(set(api.__all__))
    for name in api.__all__:
        assert getattr(api, name) is not None, name
    assert issubclass(api.PackagedTrack, api.Track)
