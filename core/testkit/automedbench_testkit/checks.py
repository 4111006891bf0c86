"""What a track's tests check beyond a run: `validate-task`'s checks, the demo's reference-leak search,
and a track's solution scripts loaded as modules."""

from __future__ import annotations

import hashlib
import importlib.util
import io
import json
import types
from importlib import resources
from pathlib import Path
from typing import Any

from .leaksearch import TEXT_SUFFIXES, find_reference_leaks, load_image, sandbox_readable_roots


def check_track(task_id: str, data_root: Path) -> tuple[bool, str]:
    """What `automedbench validate-task` checks (task file, staging, briefs per tier, rubric, baselines).

    Returns (passed, the report it printed) so a plugin's own tests can assert on both."""
    from automedbench.engine import registry
    from rich.console import Console

    from .validation import validate

    buffer = io.StringIO()
    console = Console(file=buffer, width=200, no_color=True, highlight=False)
    ok = validate(registry(), task_id, data_root, console)
    return ok, buffer.getvalue()


def check_download(task_id: str, source: Path, data_root: Path) -> str:
    """Stage `task_id` from a download copy `source` with the command line a user runs (`automedbench stage T
    --from SOURCE`, in a fresh process), then check it as `validate-task` does: AssertionError (with the report)
    unless staging succeeds, every check passes and the perfect baseline scores 1.0 / A. The report, for more
    assertions (the trivial baselines' values)."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "automedbench.cli", "stage", task_id, "--from", str(source),
                           "--data-root", str(data_root)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    ok, report = check_track(task_id, data_root)
    assert ok, report
    assert "perfect baseline scores 1.0 / A" in report and "FAIL" not in report, report
    return report


def load_solution_script(package: str, name: str) -> types.ModuleType:
    """A track's `solution/<name>.py` (package data of `<package>.solution`) loaded as a fresh module, as the
    scripted agent's sandbox would run it, so a test can call its functions."""
    path = resources.files(f"{package}.solution").joinpath(f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"{package}_solution_{name}_under_test", str(path))
    if spec is None or spec.loader is None:
        raise ImportError(f"no solution script {name}.py in {package}.solution")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.stat().st_size <= 256 << 20 else ""


def _strings(value: Any) -> list[str]:
    """Every string inside a parsed JSON value."""
    found, stack = [], [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack += list(item.values())
        elif isinstance(item, list):
            stack += item
        elif isinstance(item, str):
            found.append(item)
    return found


def reference_leaks(task_id: str, data_root: Path, *, roots: list[Path] | None = None,
                    max_files: int = 400_000) -> list[Any]:
    """The demo conformance check every track's demo must pass (an empty list): stage the task, then search
    every file a sandbox can read (the public folder, the sandbox Python's site-packages and package
    data, the task's read-only assets; or `roots`) for each private reference: the same bytes, the same
    long text, or an image that correlates with a reference more than the case's own public input does
    (`leaksearch`)."""
    from automedbench.engine import ensure_staged, registry

    track, task = registry().task(task_id)
    staged = ensure_staged(track, task, data_root)
    images, inputs, texts, files = {}, {}, {}, []
    given_inputs: dict[str, set[str]] = {}
    for path in sorted(p for p in staged.private.rglob("*") if p.is_file() and not p.is_symlink()):
        case_public = staged.public / path.relative_to(staged.private).parts[0]
        if case_public.is_dir() and case_public.name not in given_inputs:
            given_inputs[case_public.name] = {_digest(q) for q in case_public.rglob("*")
                                              if q.is_file() and not q.is_symlink()}
        if _digest(path) in given_inputs.get(case_public.name, set()):
            continue  # the harness's trusted copy of an input the agent is given (a scoring mask): no secret
        files.append(path)
        name = path.relative_to(staged.private).as_posix()
        image = load_image(path) if path.stat().st_size <= 48 << 20 else None
        if image is not None:
            images[name] = image
            for candidate in sorted(case_public.rglob("*")) if case_public.is_dir() else []:
                given = load_image(candidate) if candidate.is_file() else None
                if given is not None:
                    inputs[name] = given
                    break
        elif path.suffix.lower() in TEXT_SUFFIXES and path.stat().st_size <= 1 << 20:
            text = path.read_text("utf-8", "replace")
            try:
                values = json.loads(text)
            except ValueError:
                texts[name] = text
                continue
            for item in _strings(values):
                texts[f"{name}:{len(texts)}"] = item
    if roots is None:
        track, task = registry().task(task_id)
        assets = track.assets(task)  # mounted in the sandbox (an editable install keeps them outside sys.prefix)
        roots = sandbox_readable_roots(staged.public) + ([Path(assets).resolve()] if assets is not None else [])
    return find_reference_leaks(images, roots, private_files=files, texts=texts, inputs=inputs, max_files=max_files)
