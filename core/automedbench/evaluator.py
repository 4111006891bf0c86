"""The evaluator: scores a frozen submission against private references in a separate process.

It reads only the frozen submission, the staged public inputs and `private/`; it imports the harness
and the track plugin (trusted code) and never imports or executes anything the agent wrote.
Run as `python -I -m automedbench.evaluator REQUEST.json` so that no PYTHONPATH, user site or working
directory the agent might have shaped can inject modules.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from attrs import Factory, define

from . import __version__
from .errors import InfrastructureError
from .records import CaseVerdict, Evaluation, MetricBlock, SubmissionManifest
from .serialize import from_dict, read_json, write_json
from .track import CaseScore, StagedData, Track


@define
class EvalRequest:
    task_id: str
    submission: str
    public: str
    private: str
    case_ids: list[str]
    manifest: str
    out: str
    options: dict[str, str] = Factory(dict)
    # plugin name -> module import name, for plugins the harness added in code (see Registry.added_modules)
    plugins: dict[str, str] = Factory(dict)
    check_only: bool = False  # the contract check alone (a pilot's output), no scoring against private/


def evaluate(track: Track, task, staged: StagedData, submission: Path, manifest: SubmissionManifest,
             options: dict[str, str] | None = None, check_only: bool = False) -> Evaluation:
    """Check every expected case, score the valid ones one at a time (memory bounded by one case).

    `check_only`: the contract check alone, no metric (how the runner checks a one-case pilot)."""
    started = time.monotonic()
    scoring = None if check_only else track.evaluation(task, staged, dict(options or {}))
    rejected: dict[str, str] = {f.path: f.rejected for f in manifest.files if f.rejected}
    expected = set(staged.case_ids)
    verdicts: list[CaseVerdict] = []
    scores: list[CaseScore | None] = []
    for case_id in staged.case_ids:
        case_dir = submission / case_id
        bad = {p: r for p, r in rejected.items() if p.split("/", 1)[0] == case_id}
        present = (case_dir.is_dir() and any(case_dir.iterdir())) or bool(bad)
        if not present:
            verdicts.append(CaseVerdict(case_id, False, False, ["no outputs for this case"]))
            scores.append(None)
            continue
        if bad:
            reasons = [f"{p}: rejected at freeze ({r})" for p, r in sorted(bad.items())]
            verdicts.append(CaseVerdict(case_id, True, False, reasons))
            scores.append(None)
            continue
        try:
            verdict = track.check_case(task, case_id, case_dir, staged.public / case_id)
        except Exception as exc:  # a checker crash on odd input is a verdict, not a harness failure
            verdict = CaseVerdict(case_id, True, False, [f"checker error: {type(exc).__name__}: {exc}"])
        verdicts.append(verdict)
        if not verdict.valid or scoring is None:
            scores.append(None)
            continue
        try:
            scores.append(scoring.score_case(case_id, case_dir))
        except Exception as exc:
            verdict.valid = False
            verdict.reasons.append(f"scoring error: {type(exc).__name__}: {exc}")
            scores.append(None)
    extra = sorted(
        p.relative_to(submission).as_posix()
        for p in (submission.iterdir() if submission.is_dir() else [])
        if p.name not in expected and p.name != "MANIFEST.json"
    )
    extra += sorted(p for p in rejected if p.split("/", 1)[0] not in expected)
    metric = MetricBlock("contract check only", 0.0, 0.0) if scoring is None else scoring.aggregate(
        scores, staged.case_ids)
    return Evaluation(
        task_id=task.id,
        expected_cases=len(staged.case_ids),
        present_cases=sum(v.present for v in verdicts),
        valid_cases=sum(v.valid for v in verdicts),
        cases=verdicts,
        metric=metric,
        extra_files=extra,
        duration_s=round(time.monotonic() - started, 3),
        evaluator_version=__version__,
    )


def run_isolated(task_id: str, staged: StagedData, submission: Path, manifest_path: Path, out: Path,
                 timeout_s: float = 3600, options: dict[str, str] | None = None,
                 backend: str = "process", check_only: bool = False) -> Evaluation:
    """Spawn the evaluator process with a scrubbed environment and read back its verdict.

    `backend="docker"` runs it in a network-less, read-only container instead (the docker sandbox asks
    for that); the default is a local subprocess.
    """
    submission, manifest_path, out = submission.resolve(), manifest_path.resolve(), out.resolve()
    staged = StagedData(staged.root.resolve(), staged.public.resolve(), staged.private.resolve(), staged.case_ids)
    from .plugins import registry

    request = EvalRequest(task_id, str(submission), str(staged.public), str(staged.private), staged.case_ids,
                          str(manifest_path), str(out), dict(options or {}), dict(registry().added_modules),
                          check_only)
    req_path = out.parent / "eval_request.json"
    write_json(req_path, request)
    return registry().create("evaluator", backend)(request, timeout_s)


def evaluate_in_process(request: EvalRequest, timeout_s: float) -> Evaluation:
    """The built-in evaluator backend: a `python -I` subprocess with a scrubbed environment."""
    out = Path(request.out)
    req_path = out.parent / "eval_request.json"
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE",
                                                         "HOME", "TZ")}
    try:
        proc = subprocess.run([sys.executable, "-I", "-m", "automedbench.evaluator", str(req_path)],
                              capture_output=True, text=True, env=env, cwd=out.parent, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise InfrastructureError(f"evaluator timed out after {timeout_s:.0f} s") from None
    if proc.returncode != 0 or not out.exists():
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        raise InfrastructureError("evaluator failed: " + " | ".join(tail))
    return read_json(out, Evaluation)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -I -m automedbench.evaluator REQUEST.json", file=sys.stderr)
        return 2
    from .plugins import registry

    request = from_dict(json.loads(Path(args[0]).read_text()), EvalRequest)
    for name, module in request.plugins.items():
        registry().add_plugin(importlib.import_module(module), name=name)
    track, task = registry().task(request.task_id)
    staged = StagedData(Path(request.public).parent, Path(request.public), Path(request.private),
                        request.case_ids)
    manifest = read_json(Path(request.manifest), SubmissionManifest)
    result = evaluate(track, task, staged, Path(request.submission), manifest, request.options,
                      request.check_only)
    write_json(Path(request.out), result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
