"""The evaluator: scores a frozen submission against private references in a separate process; and, back in
the harness, the model-graded step that answers what it asked (`grade_evaluation`).

It reads only the frozen submission, the staged public inputs and `private/`; it imports the harness
and the track plugin (trusted code) and never imports or executes anything the agent wrote.
Run as `python -I -S` with an import path the harness sets (see BOOT) so that no PYTHONPATH, user site,
working directory, .pth file or sitecustomize the agent might have shaped can inject modules.

The evaluator has no network and no keys, so a metric that needs a model returns `GradeRequest`s; a plugin
answers them after the evaluation (`automedbench_grade_requests`: automedbench-models asks the grader models,
caches and signs the replies). Null rule: with no plugin to answer, every grade is null with the reason and the
run stays `scored`, as for an unreachable backend (the agent did nothing wrong; the evaluator's facts stand);
the same when the plugin raises.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import math
import numbers
import os
import resource
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

import attrs
from attrs import Factory, define

from . import __version__
from .errors import InfrastructureError, SubmissionError
from .fsutil import open_dir, sha256_file, walk_fd
from .grades import NO_GRADER, Grade, GradeLog, GraderUse
from .pictures import PICTURES_DIR, PictureWriter
from .records import NON_FINITE_COMPONENT, CaseVerdict, Evaluation, MetricBlock, SubmissionManifest, TaskSpec
from .runfolder import RunFolder
from .serialize import from_dict, read_json, write_json
from .track import CaseScore, StagedData, TaskEvaluation, Track
from .wheelrecord import vouched

# Limits of the evaluator process: it reads agent-made files, so a crafted file must end as a rejected case
# or an agent failure, never exhaust the host. Address space leaves room for the track's imports (torch,
# MONAI: about 3 GB of mappings) plus one large case.
EVAL_MEMORY_MB = int(os.environ.get("AUTOMEDBENCH_EVAL_MEMORY_MB", "12288"))
EVAL_CPU_S = 3 * 3600
EVAL_FILE_BYTES = 256 << 20  # evaluation.json and nothing else is written
CASE_TIMEOUT_S = 300.0
PICTURE_TIMEOUT_S = 60.0  # one case's picture
# how a child at a limit dies: the kernel's SIGKILL/SIGXCPU/SIGXFSZ, or a native library failing to allocate under
# the address-space limit (SIGSEGV; SIGABRT from an uncaught allocation failure in C++ code such as ITK's; SIGBUS)
LIMIT_SIGNALS = {signal.SIGKILL: "memory", signal.SIGXCPU: "CPU time", signal.SIGXFSZ: "file size",
                 signal.SIGSEGV: "memory", signal.SIGABRT: "memory", signal.SIGBUS: "memory"}


class CaseTimeout(Exception):
    """One case took longer than CASE_TIMEOUT_S to check and score."""


@contextlib.contextmanager
def _case_deadline(seconds: float):
    """Raise CaseTimeout in this (main) thread after `seconds`; a no-op off the main thread."""
    if threading.current_thread() is not threading.main_thread() or seconds <= 0:
        yield
        return

    def _expired(signum, frame):
        raise CaseTimeout(f"took longer than {seconds:.0f} s")

    previous = signal.signal(signal.SIGALRM, _expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


MAX_EXTRA = 200
# what one case's verdict keeps of the reasons a track gave: a track may quote the agent's file in a reason (VQA
# quoted a 1 MB question_id whole, three bytes a character once escaped), and every reason is stored twice
# (evaluation.json and result.json), so the record stays small whatever the agent wrote
MAX_REASONS = 10
MAX_REASON_CHARS = 500
MAX_GRADE_REQUESTS_PER_CASE = 8  # the model-graded step answers them (`grade_evaluation`)


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
    # draw each case's picture into `pictures/` beside `out` (the run page shows them; never for a pilot check)
    pictures: bool = False


def frozen_changes(submission: Path, manifest: SubmissionManifest, limit: int = 200) -> list[str]:
    """Files of the frozen submission whose bytes differ from the manifest's hash, or that it does not list.

    The freeze wrote them and nothing the agent runs should outlive its calls; a change means something
    did (a process escaped its sandbox), so the evaluator scores only what the manifest vouches for."""
    expected = {f.path: f.sha256 for f in manifest.files if not f.rejected}
    seen: set[str] = set()
    changed: list[str] = []
    root = open_dir(submission)
    if root is None:
        return [] if not expected else ["<the submission folder is gone>"]
    try:
        for rel, dir_fd, name, info in walk_fd(root):
            if dir_fd < 0 or info is None or rel == "MANIFEST.json":
                continue
            seen.add(rel)
            digest = _digest_at(dir_fd, name) if stat.S_ISREG(info.st_mode) else None
            if rel not in expected or digest != expected[rel]:
                changed.append(rel)
    finally:
        os.close(root)
    changed += sorted(set(expected) - seen)
    return changed[:limit]


def _digest_at(dir_fd: int, name: str) -> str | None:
    try:
        return sha256_file(name, dir_fd)
    except OSError:
        return None


def evaluate(track: Track, task, staged: StagedData, submission: Path, manifest: SubmissionManifest,
             options: dict[str, str] | None = None, check_only: bool = False,
             case_timeout_s: float = 0.0, pictures: Path | None = None) -> Evaluation:
    """Check every expected case, score the valid ones one at a time (memory bounded by one case).

    `check_only`: the contract check alone, no metric (how the runner checks a one-case pilot). `pictures`: a
    folder for each case's picture (`TaskEvaluation.case_picture`, drawn right after the case is scored, while
    what scoring loaded is still at hand; a failure there is a note in the index, never a verdict)."""
    started = time.monotonic()
    scoring = None if check_only else track.evaluation(task, staged, dict(options or {}))
    writer = PictureWriter(pictures) if pictures is not None and scoring is not None else None

    def draw(case_id: str, valid: bool, note: str) -> None:
        if writer is None or scoring is None:
            return
        started_cpu = time.process_time()
        try:
            with _case_deadline(min(PICTURE_TIMEOUT_S, case_timeout_s) if case_timeout_s else 0):
                picture = scoring.case_picture(case_id, submission / case_id if valid else None)
            if picture is not None and note:
                picture.caption = (picture.caption + "; " if picture.caption else "") + note
            writer.add(case_id, picture)
        except Exception as exc:  # a picture is never worth a verdict: the index says why it is missing
            writer.add(case_id, None, f"no picture: {type(exc).__name__}: {exc}"[:300])
        writer.cpu_s += time.process_time() - started_cpu

    rejected: dict[str, str] = {f.path: f.rejected for f in manifest.files if f.rejected}
    tampered = frozen_changes(submission, manifest)
    for path in tampered:  # a changed case is rejected as a whole, like a file refused at freeze
        rejected.setdefault(path, "changed after the freeze (does not match the manifest's hash)")
    expected = set(staged.case_ids)
    # a top-level file answering for many cases (frozen copy: written by the harness, no link followed into it)
    shared = {name for name in track.shared_outputs(task) if (submission / name).is_file() or name in rejected}
    # a shared file refused at freeze or changed since answers for no case: every case it might answer is invalid
    shared_bad = {name: rejected[name] for name in shared if name in rejected}
    verdicts: list[CaseVerdict] = []
    scores: list[CaseScore | None] = []
    for case_id in staged.case_ids:
        case_dir = submission / case_id
        bad = {p: r for p, r in rejected.items() if p.split("/", 1)[0] == case_id} | shared_bad
        present = (case_dir.is_dir() and any(case_dir.iterdir())) or bool(bad) or bool(shared)
        if not present:
            verdicts.append(CaseVerdict(case_id, False, False, ["no outputs for this case"]))
            scores.append(None)
            draw(case_id, False, "missing: no outputs for this case")
            continue
        if bad:
            reasons = [f"{p}: rejected at freeze ({r})" for p, r in sorted(bad.items())]
            verdicts.append(CaseVerdict(case_id, True, False, reasons))
            scores.append(None)
            draw(case_id, False, "invalid: " + reasons[0])
            continue
        try:
            with _case_deadline(case_timeout_s):
                verdict = track.check_case(task, case_id, case_dir, staged.public / case_id)
        except Exception as exc:  # a checker crash on odd input is a verdict, not a harness failure
            verdict = CaseVerdict(case_id, True, False, [f"checker error: {type(exc).__name__}: {exc}"[:500]])
        verdict.reasons = bounded_reasons(verdict.reasons)
        verdicts.append(verdict)
        if not verdict.valid or scoring is None:
            scores.append(None)
            draw(case_id, False, "invalid: " + "; ".join(map(str, verdict.reasons[:2])) if not verdict.valid else "")
            continue
        try:
            with _case_deadline(case_timeout_s):
                scores.append(scoring.score_case(case_id, case_dir))
        except Exception as exc:  # MemoryError under the address-space limit lands here too
            verdict.valid = False
            verdict.reasons.append(f"scoring error: {type(exc).__name__}: {exc}"[:500])
            scores.append(None)
        draw(case_id, verdict.valid, "" if verdict.valid else "invalid: " + verdict.reasons[-1])
    extra = sorted(
        p.relative_to(submission).as_posix()
        for p in (submission.iterdir() if submission.is_dir() else [])
        if p.name not in expected and p.name != "MANIFEST.json" and p.name not in shared
    )
    extra += sorted(p for p in rejected if p.split("/", 1)[0] not in expected)
    if len(extra) > MAX_EXTRA:  # the record stays small whatever the agent left in outputs/
        extra = [*extra[:MAX_EXTRA], f"... and {len(extra) - MAX_EXTRA} more"]
    metric = MetricBlock("contract check only", 0.0, 0.0) if scoring is None else finite_metric(_aggregate(
        scoring, scores, staged.case_ids))
    if writer is not None:
        writer.close()
    # a case's requests are stamped with that case's id: one case can never ask for another's grade
    requests = [attrs.evolve(r, case_id=s.case_id) for s in scores if s is not None
                for r in s.requests[:MAX_GRADE_REQUESTS_PER_CASE]]
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
        grade_requests=requests,
        tampered=tampered,
    )


def run_isolated(task_id: str, staged: StagedData, submission: Path, manifest_path: Path, out: Path,
                 timeout_s: float = 3600, options: dict[str, str] | None = None,
                 backend: str = "process", check_only: bool = False, pictures: bool = False) -> Evaluation:
    """Spawn the evaluator process with a scrubbed environment and read back its verdict.

    `backend="docker"` runs it in a network-less, read-only container instead (the docker sandbox asks
    for that); the default is a local subprocess.
    """
    submission, manifest_path, out = submission.resolve(), manifest_path.resolve(), out.resolve()
    staged = StagedData(staged.root.resolve(), staged.public.resolve(), staged.private.resolve(), staged.case_ids)
    from .plugins import registry

    request = EvalRequest(task_id, str(submission), str(staged.public), str(staged.private), staged.case_ids,
                          str(manifest_path), str(out), dict(options or {}), dict(registry().added_modules),
                          check_only, pictures and not check_only)
    req_path = out.parent / "eval_request.json"
    write_json(req_path, request)
    return registry().create("evaluator", backend)(request, timeout_s)


# Started with `python -I -S -c BOOT PATH_JSON REQUEST`: no site module, so no .pth file (the editable
# installs' finders, or one an agent wrote) and no sitecustomize runs; the import path is the harness's list.
BOOT = ("import sys, json; sys.path[:] = json.loads(sys.argv.pop(1)); import runpy; "
        "runpy.run_module('automedbench.evaluator', run_name='__main__', alter_sys=True)")


def _top_package_root(module_name: str) -> str | None:
    top = sys.modules.get(module_name.split(".", 1)[0])
    origin = getattr(top, "__file__", None) or next(iter(getattr(top, "__path__", None) or []), None)
    if not origin:
        return None
    path = Path(origin).resolve()
    return str(path.parent.parent if path.name == "__init__.py" else path.parent)


def evaluator_path(exclude: list[Path]) -> list[str]:
    """The evaluator's sys.path: the harness's absolute import folders and the folder of every plugin
    package it loaded (editable installs reach theirs through .pth finders the evaluator does not run),
    minus anything below `exclude` (run folder, data) and the working directory."""
    from .plugins import registry

    found: list[str] = []
    names = [getattr(m, "__name__", "") for m in registry().pm.get_plugins()] + ["automedbench"]
    roots = [_top_package_root(name) for name in names if name]
    for entry in [*sys.path, *roots]:
        if not entry or not os.path.isabs(entry) or not os.path.isdir(entry):
            continue  # "" (the working directory) and the editable finders' path hooks
        resolved = Path(entry).resolve()
        if any(resolved == e or e in resolved.parents for e in exclude):
            continue
        if str(resolved) not in found:
            found.append(str(resolved))
    return found


def environment_snapshot(paths: list[str], max_entries: int = 400_000,
                         skip: Collection[str] = ()) -> dict[str, tuple[int, ...]]:
    """(size, mtime, inode, ctime) of every file and (inode,) of every folder below the evaluator's import path
    and of the interpreter. A file's ctime is set by the kernel on every write and cannot be set back (a
    rewrite at the same size with its mtime reset still shows). A folder's size and times move with its
    entries, which are listed themselves: the harness writing a first `__pycache__` into a package folder
    (a module it imports for the first time during the run) is then no change, a folder replaced still is.

    Taken before and after the agent phase of a run without filesystem isolation: the agent runs as the
    harness's user there and could rewrite the code the evaluator imports; a difference marks the run
    unverified (stat only: a third of a CPU-second for a full ML environment, 67 000 entries; past
    `max_entries` at most one folder's entries more).

    A `site-packages` (or `dist-packages`) folder directly inside an import folder is left out unless it is an
    import folder itself: no import reaches it through its parent (the name is no identifier, and the evaluator
    runs without `site`), yet the base interpreter's, inside its standard library, held 51 000 of a snapshot's
    125 000 entries. So is a checkout's `.git` (`.hg`, `.svn`): no identifier either, and written by any commit.

    Folders in `skip` (resolved paths: the harness's state folders, data root and runs folder) are not walked:
    harness processes write there during any run (another run's grading cache, its staging), no import reads
    them, and a checkout on the import path holds them all (a concurrent run's write marked this one unverified)."""
    found: dict[str, tuple[int, ...]] = {}
    roots = set(paths)
    # never a folder that is an import folder or holds one (`--out .` inside a checkout on the path); the roots
    # resolved once, not once per skipped folder (a host's few hundred state folders made it 0.1 CPU-s a snapshot)
    real_roots = [os.path.realpath(root) for root in roots] if skip else []
    skipped = {s for s in map(os.path.realpath, skip)
               if not any(r == s or r.startswith(s.rstrip(os.sep) + os.sep) for r in real_roots)}
    # (path, its lstat when taken already, from its folder's descriptor as the folder was listed)
    stack: list[tuple[str, os.stat_result | None]] = [
        (path, None) for path in (*paths, sys.executable, os.path.realpath(sys.executable))]
    while stack and len(found) < max_entries:
        path, info = stack.pop()
        if info is None:  # a root (an import folder inside another, the venv in a checkout: once)
            if path in skipped or path in found:
                continue
            try:
                info = os.lstat(path)
            except OSError:
                continue
            found[path] = _entry(info)
        if stat.S_ISDIR(info.st_mode):
            _list_into(found, stack, path, top=path in roots, roots=roots, skipped=skipped)
    return found


def _entry(info: os.stat_result) -> tuple[int, ...]:
    """What a snapshot keeps of one lstat: (inode,) of a folder, (size, mtime, inode, ctime) of anything else."""
    if stat.S_ISDIR(info.st_mode):
        return (info.st_ino,)
    return (info.st_size, info.st_mtime_ns, info.st_ino, info.st_ctime_ns)


def _list_into(found: dict[str, tuple[int, ...]], stack: list, folder: str, *, top: bool, roots: Collection[str],
               skipped: Collection[str]) -> None:
    """Record every entry of `folder` not seen or skipped yet, and stack its subfolders. Each entry is stat'ed
    relative to the folder's descriptor (`fstatat`), not by its whole path from `/` again: ~30 % less CPU for a
    snapshot of a full ML environment (67 000 entries, two a run on local-plain), same values."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return
    prefix = folder if folder.endswith(os.sep) else folder + os.sep
    try:
        with os.scandir(fd) as entries:
            for entry in entries:
                path = prefix + entry.name
                if (top and path not in roots and entry.name in UNIMPORTED_CHILDREN) or path in skipped \
                        or path in found:
                    continue
                try:
                    info = os.stat(entry.name, dir_fd=fd, follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISDIR(info.st_mode):  # as `_entry`, inline: one call fewer for each of ~67 000 entries
                    found[path] = (info.st_ino,)
                    stack.append((path, info))
                else:
                    found[path] = (info.st_size, info.st_mtime_ns, info.st_ino, info.st_ctime_ns)
    except OSError:
        pass
    finally:
        os.close(fd)


# inside an import folder: another interpreter's packages, and a checkout's version-control store (a commit or a
# fetch in another worktree of the repository writes there during any run; no import reads it)
UNIMPORTED_CHILDREN = ("site-packages", "dist-packages", ".git", ".hg", ".svn")


def snapshot_changes(before: dict[str, tuple[int, ...]], after: dict[str, tuple[int, ...]]) -> list[str]:
    """Paths added, removed or changed between two environment snapshots.

    In __pycache__ folders only a .pyc present in both and changed counts: the harness itself adds one for each
    module it imports first (and Python's temporary files come and go), but Python loads a .pyc whose header
    matches its source without reading the source, so a rewritten one is rewritten code.

    A file whose ctime alone moved (size, mtime and inode kept) is what another venv linking the same inode from
    uv's cache leaves (a concurrent install on the machine), as well as a rewrite with its mtime set back: it counts
    unless its content hashes to what its wheel's unchanged RECORD says (`wheelrecord.vouched`)."""
    if before == after:  # the usual case, compared in C: 0.05 s for a 115 000-entry environment, not 0.2 s
        return []

    def counts(path: str) -> bool:
        if "__pycache__" not in path:
            return True
        return path.endswith(".pyc") and path in before and path in after
    changed = [k for k in set(before) | set(after) if before.get(k) != after.get(k) and counts(k)]
    relinked = [k for k in changed if len(before.get(k, ())) == 4 and len(after.get(k, ())) == 4
                and before[k][:3] == after[k][:3]]
    excused = vouched(relinked, after, lambda path: before.get(path) == after.get(path)) if relinked else set()
    return sorted(k for k in changed if k not in excused)


# glibc's allocator in the evaluator: arrays up to 64 MB come from the heap and freed memory is kept up to 128 MB,
# instead of a fresh mmap (and a page fault per 4 KB page) for every image-sized temporary: a scorer's float64
# images of one case are reused from one case to the next (LDCT demo, warm: 45 000 page faults and a quarter of
# the evaluation's CPU before). Memory stays bounded by the address-space limit as before.
MALLOC_TUNABLES = "glibc.malloc.mmap_threshold=67108864:glibc.malloc.trim_threshold=134217728"


def evaluator_env() -> dict[str, str]:
    """The evaluator's scrubbed environment: a few harmless variables of the harness's, nothing else, and the
    allocator's settings (MALLOC_TUNABLES)."""
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE",
                                                        "HOME", "TZ", "AUTOMEDBENCH_EVAL_MEMORY_MB")}
    return {**env, "GLIBC_TUNABLES": MALLOC_TUNABLES}


def request_exclude(request: EvalRequest) -> list[Path]:
    """Folders the evaluator's import path must not reach into for this request: run folder and data."""
    return [Path(request.out).resolve().parent, Path(request.submission).resolve().parent,
            Path(request.public).resolve().parent]


def bounded_reasons(reasons: list[Any]) -> list[str]:
    """A verdict's reasons as the record keeps them: the first MAX_REASONS, each cut to MAX_REASON_CHARS, and how
    many more there were (a track's reason may quote whatever the agent wrote)."""
    kept = [str(r)[:MAX_REASON_CHARS] for r in reasons[:MAX_REASONS]]
    if len(reasons) > MAX_REASONS:
        kept.append(f"... and {len(reasons) - MAX_REASONS} more")
    return kept


def _aggregate(scoring: TaskEvaluation, scores: list[CaseScore | None], case_ids: list[str]) -> MetricBlock:
    """The track's aggregate over the case scores. Its inputs come from the submission, so a crash there ends
    like a case whose scoring failed (a zero metric naming the error, the run scored), never as a harness
    failure a retry would repeat."""
    try:
        return scoring.aggregate(scores, case_ids)
    except Exception as exc:  # MemoryError under the address-space limit lands here too
        return MetricBlock(f"aggregate error: {type(exc).__name__}: {exc}"[:500], 0.0, 0.0)


def finite_metric(metric: MetricBlock) -> MetricBlock:
    """The metric with every number JSON cannot hold (NaN, an infinity) written as null, a Task value as 0, and how
    many there were in the component `non_finite_numbers`. The evaluation record is written strictly, and a track's
    arithmetic on agent values can leave one (a float128 output past float64's range made `out_max` infinite):
    the agent's bytes must never fail that write, whatever track made the number."""
    found = 0

    def finite(value: Any) -> Any:
        nonlocal found
        if isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral) and not math.isfinite(value):
            found += 1
            return None
        if isinstance(value, dict):
            return {k: finite(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [finite(v) for v in value]
        return value

    components, per_case = finite(metric.components), finite(metric.per_case)
    strict, partial = (finite(v) for v in (metric.strict, metric.partial))
    strict, partial = 0.0 if strict is None else strict, 0.0 if partial is None else partial
    if not found:
        return metric
    return attrs.evolve(metric, strict=strict, partial=partial, per_case=per_case,
                        components={**components, NON_FINITE_COMPONENT: float(found)},
                        counts=[*metric.counts, NON_FINITE_COMPONENT])


def failed_evaluation(task_id: str, staged: StagedData, manifest: SubmissionManifest, reason: str) -> Evaluation:
    """The record of a submission the evaluator could not finish (it hit a limit on it): every case invalid and a
    zero Task naming why. The agent's failure scores 0 like an aggregate that crashed; a missing Task would be a
    null that leaderboards leave out of the means, so failing the evaluator would hide a weak run."""
    submitted = {f.path.split("/", 1)[0] for f in manifest.files}
    note = f"not scored: {reason}"[:500]
    cases = [CaseVerdict(c, c in submitted, False, [note]) for c in staged.case_ids]
    return Evaluation(task_id, len(cases), sum(v.present for v in cases), 0, cases,
                      MetricBlock(f"evaluator failed on the submission: {reason}"[:500], 0.0, 0.0), error=reason)


GRADES_FILE = RunFolder.GRADES


def grade_evaluation(reg: Any, track: Any, task: TaskSpec, evaluation: Evaluation, options: dict[str, str],
                     folder: Path, trusted: bool = True) -> Evaluation:
    """Answer the evaluation's grade requests, record them in `folder/grades.json`, fold them into the metric
    through `track.apply_grades`, and store the graded evaluation as `folder/evaluation.json` (what rejudge
    and the code detectors read). An evaluation without requests comes back unchanged, nothing written.
    `trusted`: False for an unverified run, whose grades use no cache a verified run reads."""
    requests = evaluation.grade_requests
    if not requests:
        return evaluation
    t0 = time.monotonic()
    why = NO_GRADER
    try:
        log = reg.pm.hook.automedbench_grade_requests(requests=requests, options=options, registry=reg,
                                                      trusted=trusted)
    except Exception as exc:  # a grading plugin's bug (on agent text, say): null grades, never a harness failure
        log, why = None, f"the grading plugin failed: {type(exc).__name__}: {str(exc)[:200]}"
    if log is None:
        counts = Counter(r.grader for r in requests)
        log = GradeLog([GraderUse(g, "", "", requests=n, failed=n, error=why) for g, n in counts.items()],
                       [Grade(r.case_id, r.grader, r.tag, error=why) for r in requests])
    log.duration_s = round(time.monotonic() - t0, 3)
    metric = track.apply_grades(task, evaluation.metric, log.grades)
    if log.components:
        metric = attrs.evolve(metric, components={**metric.components, **log.components})
    graded = attrs.evolve(evaluation, metric=metric)
    names = RunFolder(folder)
    write_json(names.grades, log)
    write_json(names.evaluation, graded)
    return graded


def evaluate_in_process(request: EvalRequest, timeout_s: float) -> Evaluation:
    """The built-in evaluator backend: a `python -I -S` subprocess with a scrubbed environment and a set path."""
    out = Path(request.out)
    req_path = out.parent / "eval_request.json"
    path = evaluator_path(request_exclude(request))
    argv, preexec = limited_command([sys.executable, "-I", "-S", "-c", BOOT, json.dumps(path), str(req_path)])
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, env=evaluator_env(), cwd=out.parent,
                              timeout=timeout_s, preexec_fn=preexec)
    except subprocess.TimeoutExpired:
        # only trusted code runs there, over the agent's files: a stall is the submission's doing
        raise SubmissionError(f"the evaluator did not finish this submission within {timeout_s:.0f} s") from None
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
    failure = submission_failure(-proc.returncode if proc.returncode < 0 else 0, tail) if proc.returncode else None
    if failure:
        raise SubmissionError(failure)
    if proc.returncode != 0 or not out.exists():
        raise InfrastructureError("evaluator failed: " + " | ".join(tail))
    return read_json(out, Evaluation)


def submission_failure(signal_number: int, tail: list[str]) -> str | None:
    """Why an evaluator that exited non-zero failed on the submission (a limit it hit), or None for anything else."""
    if signal_number in LIMIT_SIGNALS:
        return f"the evaluator was stopped at its {LIMIT_SIGNALS[signal_number]} limit on this submission"
    if any("MemoryError" in line for line in tail):
        return f"the evaluator ran out of memory ({EVAL_MEMORY_MB} MB) on this submission"
    return None


def limited_command(argv: list[str]) -> tuple[list[str], Callable[[], None] | None]:
    """An evaluator's argv under `evaluator_limits`, and the preexec function still needed for them: util-linux
    `prlimit` sets them and execs where it is installed, so the harness vforks instead of forking itself (the
    page tables of a harness holding torch and MONAI: ~35 CPU-ms a start; sandboxes/limitshell.py); else
    argv as it is with evaluator_limits."""
    found = shutil.which("prlimit", path="/usr/bin:/bin")
    if found is None:
        return argv, evaluator_limits
    space = [f"--as={EVAL_MEMORY_MB << 20}"] if EVAL_MEMORY_MB > 0 else []
    return [found, *space, f"--cpu={EVAL_CPU_S}:{EVAL_CPU_S + 60}", f"--fsize={EVAL_FILE_BYTES}", "--core=0", "--",
            *argv], None


def evaluator_limits() -> None:
    """Memory (address space), CPU-time and file-size limits, set in the child before it execs."""
    if EVAL_MEMORY_MB > 0:
        limit = EVAL_MEMORY_MB << 20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    resource.setrlimit(resource.RLIMIT_CPU, (EVAL_CPU_S, EVAL_CPU_S + 60))
    resource.setrlimit(resource.RLIMIT_FSIZE, (EVAL_FILE_BYTES, EVAL_FILE_BYTES))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -I -m automedbench.evaluator REQUEST.json", file=sys.stderr)
        return 2
    serve_request(from_dict(json.loads(Path(args[0]).read_text()), EvalRequest))
    return 0


def serve_request(request: EvalRequest) -> None:
    """Evaluate one request and write its evaluation.json (the cold process does it once, the warm service
    once per request)."""
    from .plugins import registry

    for name, module in request.plugins.items():
        registry().add_plugin(importlib.import_module(module), name=name)
    track, task = registry().task(request.task_id)
    staged = StagedData(Path(request.public).parent, Path(request.public), Path(request.private),
                        request.case_ids)
    manifest = read_json(Path(request.manifest), SubmissionManifest)
    pictures = Path(request.out).parent / PICTURES_DIR if request.pictures and not request.check_only else None
    result = evaluate(track, task, staged, Path(request.submission), manifest, request.options,
                      request.check_only, case_timeout_s=CASE_TIMEOUT_S, pictures=pictures)
    write_json(Path(request.out), result)


if __name__ == "__main__":
    raise SystemExit(main())
