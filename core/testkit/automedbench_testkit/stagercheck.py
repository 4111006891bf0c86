"""The stager conformance check: what every stager must do with its fixture download (`check_stager`).

A track's tests write a small download in the dataset's own layout and call
`check_stager(task, download, work)` (through `automedbench.testing`); each check returns its result and
reason, as the sandbox suite does. What it holds a stager to:

- **secret**: the staging wrote its secret to `private/staging.secret`, no public file holds it, and a real
  task's file carries no seed (a seed there would decide hidden choices anyone can read).
- **published**: `public/` holds folders and regular files with one name each: no symlink, hard link,
  device or FIFO.
- **perfect**: the `perfect` baseline scores exactly 1.0, strict and partial (every staged case can be scored).
- **public-knowledge**: the best a program can do from the task file, the package source and the download
  without looking at the pixels stays at chance. The attacker stages the same download itself (with any
  secret it can guess: the code and the download are public) and submits its own staging's answers mapped
  onto the target's cases by case id, by position in sorted id order (how a folder lists them) and by
  position in write order (the files' mtimes, which `stat` shows): were
  either decided by a public order ("case i is the i-th item in any public order"), both stagings would share
  it and the replay would score as the reference does; for array inputs it also adds its own staging's
  residual (reference - input) to the target's input by position and by id ("the degradation is the one the
  public seed gives": LDCT noise recomputed and subtracted). A replayed answer must score no better than
  halfway from chance (the mean of random assignments of the attacker's answers) to perfect, a replayed
  residual no better than halfway from what a random item's residual gives (the degradation's statistics,
  a bias for instance, which anyone may know) to perfect. A replay past that bar is tried again on
  `CONFIRMATIONS` further stagings and fails the check only when it passes the bar on every one: a public
  order scores so on every staging, while cases coinciding by chance do so on one now and then: two 5-of-6
  draws match 3 or more positions once in 20, and with one confirmation about 1 check in 500 failed so
  (enhancement/ldct's conformance test did); with three, about 1 in 100 000 (a random 8-of-10 draw matches
  5 positions of another about once in a thousand).
- **degradation** (`random_degradation=True`): no case's residual (input - reference) correlates with any
  residual of another staging of the download (the same item's included): the noise is the secret's, not one
  of a set of fields anyone can regenerate from a public seed and try against each input.
- **hostile-links**: for each kind of file in the download (by extension), every file of that kind replaced
  by a hard link (then by a symlink) to a copy outside the download: staging refuses in one line, or did not
  need those files (it also stages with them deleted).
- **hostile-fifo**: a FIFO in place of one file of each kind: refused in one line, never a hang.
- **damaged**: every file of one kind cut to half its size: staging refuses in one line, or stages without
  them and the perfect baseline still scores 1.0 (a case no submission could score is never staged).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
from automedbench.api import StagedData, TaskSpec, Track, UserError
from automedbench.engine import SEED_PARAM, check_published, registry, stage
from automedbench.engine import STAGING_SECRET_FILE as SECRET_FILE

from .sandbox_checks import CheckResult

STAGER_CHECKS: dict[str, str] = {
    "secret": "the staging's secret is in private/staging.secret, in no public file; no seed in a real task file",
    "published": "public/ holds only folders and regular files with one name (no link, device or FIFO)",
    "perfect": "the perfect baseline scores exactly 1.0, strict and partial",
    "public-knowledge": "replaying another staging of the download by case id, sorted or write (mtime) position "
                        "(answers and degradations) stays at chance",
    "degradation": "no random degradation of one staging correlates with any of another staging",
    "hostile-links": "hard links and symlinks in the download are refused in one line or not needed",
    "hostile-fifo": "a FIFO in the download is refused in one line, never a hang",
    "damaged": "damaged files are refused in one line, or skipped with the perfect baseline still 1.0",
}
DEFAULT_CHECKS = tuple(c for c in STAGER_CHECKS if c != "degradation")
PERMUTATIONS = 3
# further stagings a replay past the bar must pass it on too: chance coincidences recur on each with the
# probability they had on the first (about 1 in 20 for 5 of 6 items), a public order on all of them
CONFIRMATIONS = 3
STAGE_TIMEOUT_S = 600
ARRAY_SUFFIXES = (".npy", ".nii", ".nii.gz")


class StagerProbe:
    """One conformance run: the task, the download, a work folder, and the stagings and scores made so far."""

    def __init__(self, track: Track, task: TaskSpec, download: Path, work: Path, reg: Any) -> None:
        self.track, self.task, self.download, self.work, self.reg = track, task, download, work, reg
        self.count = 0
        self.stagings: list[tuple[Path, StagedData]] = []

    def stage(self, source: Path | None = None) -> tuple[Path, StagedData]:
        """A fresh staging of `source` (default: the fixture download) in a data root of its own."""
        self.count += 1
        root = self.work / f"root-{self.count}"
        root.mkdir(parents=True)
        with _alarm(STAGE_TIMEOUT_S):
            staged = stage(self.track, self.task, root, source or self.download)
        return root, staged

    def pair(self) -> tuple[tuple[Path, StagedData], tuple[Path, StagedData]]:
        while len(self.stagings) < 2:
            self.stagings.append(self.stage())
        return self.stagings[0], self.stagings[1]

    def further(self, k: int) -> tuple[Path, StagedData]:
        """The k-th staging of the download beyond the pair (k from 0): another target to confirm a replay on."""
        self.pair()
        while len(self.stagings) < 3 + k:
            self.stagings.append(self.stage())
        return self.stagings[2 + k]

    def baseline(self, name: str, staged: StagedData) -> Path:
        folder = self.work / f"baseline-{self.count}-{name}-{len(list(self.work.iterdir()))}"
        self.track.write_baseline(self.task, name, staged, folder)
        return folder

    def score(self, root: Path, submission: Path) -> tuple[float, float]:
        """(strict, partial) Task of `submission` on the staging under `root`, through the isolated evaluator."""
        from automedbench.engine import EvaluateOptions, evaluate_folder

        backend = "warm" if "warm" in self.reg.components["evaluator"] else "process"
        out = self.work / f"eval-{len(list(self.work.iterdir()))}"
        result = evaluate_folder(self.reg, EvaluateOptions(task=self.task.id, submission=submission, data_root=root,
                                                           work=out, backend=backend))
        metric = result.task
        return (float(metric.strict), float(metric.partial)) if metric is not None else (0.0, 0.0)


@contextlib.contextmanager
def _alarm(seconds: int) -> Iterator[None]:
    """Interrupt a staging that hangs (a FIFO opened by a reader that blocks) after `seconds`, where a
    signal can be used (the main thread); elsewhere, nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def ring(signum: int, frame: Any) -> None:
        raise TimeoutError(f"staging did not finish within {seconds} s (blocked on a FIFO?)")

    previous = signal.signal(signal.SIGALRM, ring)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


# ---------------------------------------------------------------- secret, published files, perfect


def _secret(p: StagerProbe) -> str:
    seeds = sorted(k for k in p.task.params if SEED_PARAM.search(str(k)))
    if seeds and not p.task.demo:
        return f"the task file's params hold {', '.join(seeds)}: hidden choices must come from the staging secret"
    (_, a), (_, b) = p.pair()
    found = []
    for staged in (a, b):
        path = staged.private / SECRET_FILE
        if not path.is_file():
            return f"{path} missing: the staging did not go through staging_area's commit"
        found.append(path.read_text().strip())
    if found[0] == found[1]:
        return "two stagings have the same secret"
    for staged, key in ((a, found[0]), (b, found[1])):
        for path in _files(staged.public):
            if path.stat().st_size < 64 << 20 and key.encode() in path.read_bytes():
                return f"{path} holds the staging secret"
    return ""


def _published(p: StagerProbe) -> str:
    (_, a), _ = p.pair()
    try:
        check_published(a.public)  # what the engine refuses before a swap, checked again on the result
    except UserError as exc:
        return str(exc)
    return ""


def _perfect(p: StagerProbe) -> str:
    (root, a), _ = p.pair()
    strict, partial = p.score(root, p.baseline("perfect", a))
    if strict != 1.0 or partial != 1.0:
        return f"perfect baseline scores strict {strict}, partial {partial} (not exactly 1.0): a staged case " \
               "no submission can score"
    return ""


# ---------------------------------------------------------------- public knowledge: replaying another staging


def _files(root: Path) -> list[Path]:
    return sorted(q for q in root.rglob("*") if q.is_file() and not q.is_symlink())


def remap(answers: Path, mapping: dict[str, str], dest: Path) -> Path:
    """A submission for the target's cases made of the attacker's answers: target case -> attacker case,
    text files rewritten so that the attacker's case id reads as the target's."""
    dest.mkdir(parents=True, exist_ok=True)
    for target, source in mapping.items():
        src = answers / source
        if not src.is_dir():
            continue
        for path in _files(src):
            out = dest / target / path.relative_to(src)
            out.parent.mkdir(parents=True, exist_ok=True)
            data = path.read_bytes()
            if source != target and len(data) < 16 << 20 and path.suffix.lower() in (".json", ".txt", ".csv"):
                with contextlib.suppress(UnicodeDecodeError):
                    data = data.decode("utf-8").replace(source, target).encode("utf-8")
            out.write_bytes(data)
    return dest


def _public_orders(a: StagedData, b: StagedData) -> dict[str, dict[str, str]]:
    """Every public-knowledge assignment of the attacker's cases (b) to the target's (a), by name."""
    return {"same case id": {c: c for c in a.case_ids if c in set(b.case_ids)},
            "same position in sorted ids": dict(zip(sorted(a.case_ids), sorted(b.case_ids), strict=False)),
            "same position in write order (mtime)": dict(zip(_write_order(a), _write_order(b), strict=False))}


# what a stager changes when a replay by that order scores: the check's failure names it, so the author need not
# read this module to learn which of `area.secret`'s draws the stager skipped
REMEDIES = {
    "same case id": "the case ids follow a public order (the download's names or numbering, a counter over a "
                    "public order): name cases with area.secret.case_ids(n) or area.secret.id_stream() and choose "
                    "items with area.secret.sample / area.secret.shuffled",
    "same position in sorted ids": "the items go to the cases in a public order (sorted names, the download's "
                                   "numbering): choose and order them with area.secret.sample / "
                                   "area.secret.shuffled, and name cases with area.secret.case_ids(n)",
    "same position in write order (mtime)": "the public files are written in an order that follows the items: "
                                            "write every case through staging_area(dest) and its commit, in "
                                            "area.secret.shuffled order",
}
RESIDUAL_REMEDY = "draw every random degradation from area.secret.generator(purpose), never a seed of your own"


def _mappings(a: StagedData, b: StagedData) -> dict[str, dict[str, str]]:
    """The public-knowledge assignments of the attacker's cases (b) to the target's (a), each once."""
    found = _public_orders(a, b)
    unique: dict[str, dict[str, str]] = {}
    for name, mapping in found.items():  # one timestamp throughout: write order is sorted order, replayed once
        if mapping and mapping not in unique.values():
            unique[name] = mapping
    return unique


def _write_order(staged: StagedData) -> list[str]:
    """The cases in the order their public files were written, as `stat` shows it to anyone: the earliest
    mtime among each case's files, ties in id order (a stager writing one class after another leaked every
    label). The engine gives every published file one timestamp, so this is the sorted order there; inode
    order, which `stat` shows too, is the engine's secret copy order (`stagearea.relay`)."""
    def first(case: str) -> int:
        folder = staged.public / case
        paths = _files(folder) if folder.is_dir() else [q for q in staged.public.iterdir() if q.name.startswith(case)]
        return min((q.stat().st_mtime_ns for q in paths), default=0)
    return sorted(sorted(staged.case_ids), key=first)


def _chance(p: StagerProbe, root: Path, a: StagedData, b: StagedData, answers: Path) -> float:
    rng = np.random.default_rng(0)
    scores = []
    for k in range(PERMUTATIONS):
        shuffled = list(b.case_ids)
        rng.shuffle(shuffled)
        mapping = dict(zip(a.case_ids, shuffled, strict=False))
        scores.append(p.score(root, remap(answers, mapping, p.work / f"chance-{k}"))[1])
    return float(np.mean(scores))


def _public_knowledge(p: StagerProbe) -> str:
    (root, a), (_, b) = p.pair()
    answers = p.baseline("perfect", b)
    chance = _chance(p, root, a, b, answers)
    if 1.0 - chance < 0.2:
        return f"the fixture cannot tell: a random assignment of another staging's answers already scores " \
               f"{chance:.3f} (make the fixture's items differ)"
    bar = chance + 0.5 * (1.0 - chance)
    problems = []
    for k, (name, mapping) in enumerate(_mappings(a, b).items()):
        _, partial = p.score(root, remap(answers, mapping, p.work / f"replay-{k}-{name[:8]}"))
        if partial > bar:  # a public order, or a few cases coinciding by chance: confirmed on further stagings
            def replay(root_c: Path, c: StagedData, tag: str, name: str = name, k: int = k) -> float:
                again = _public_orders(c, b)[name]
                return p.score(root_c, remap(answers, again, p.work / f"confirm-{k}-{name[:8]}-{tag}"))[1]

            confirmed = _confirmed(p, bar, replay)
            if confirmed:
                problems.append(f"replaying another staging's answers by {name} scores "
                                f"{_scores([partial, *confirmed])} (chance {chance:.3f}, perfect 1.0): "
                                f"{REMEDIES[name]}")
    shuffled = list(b.case_ids)
    np.random.default_rng(1).shuffle(shuffled)
    base = None
    for name, mapping in _mappings(a, b).items():
        submission = _residual_replay(p, a, b, answers, mapping, p.work / f"residual-{name[:8]}")
        if submission is None:
            break  # no array input of the output's shape: no degradation to replay
        if base is None:  # another item's residual: what knowing the degradation's statistics alone gives
            other = _residual_replay(p, a, b, answers, dict(zip(a.case_ids, shuffled, strict=False)),
                                     p.work / "residual-random")
            base = p.score(root, other)[1] if other is not None else 0.0
        _, partial = p.score(root, submission)
        if partial > base + 0.5 * (1.0 - base):  # confirmed on further stagings, as the answers above
            def replay_residual(root_c: Path, c: StagedData, tag: str, name: str = name) -> float:
                again = _residual_replay(p, c, b, answers, _public_orders(c, b)[name],
                                         p.work / f"confirm-res-{name[:8]}-{tag}")
                return p.score(root_c, again)[1] if again is not None else 0.0

            confirmed = _confirmed(p, base + 0.5 * (1.0 - base), replay_residual)
            if confirmed:
                problems.append(f"adding another staging's residual (reference - input) by {name} scores "
                                f"{_scores([partial, *confirmed])} (a random item's residual {base:.3f}): the "
                                f"degradation is not secret: {RESIDUAL_REMEDY}")
    return "; ".join(problems)


def _confirmed(p: StagerProbe, bar: float, replay: Callable[[Path, StagedData, str], float]) -> list[float]:
    """The replay's scores on `CONFIRMATIONS` further stagings when it passes `bar` on every one, else [] (at the
    first it does not: chance rarely coincides again, a public order always does)."""
    scores = []
    for k in range(CONFIRMATIONS):
        root_c, c = p.further(k)
        score = replay(root_c, c, str(k))
        if score <= bar:
            return []
        scores.append(score)
    return scores


def _scores(values: list[float]) -> str:
    """'0.994, 1.000 and 0.997 on 3 stagings'."""
    shown = [f"{v:.3f}" for v in values]
    return f"{', '.join(shown[:-1])} and {shown[-1]} on {len(shown)} stagings"


def _load_array(path: Path) -> tuple[np.ndarray, Any] | None:
    name = path.name.lower()
    if name.endswith(".npy"):
        return np.load(path, allow_pickle=False), None
    if name.endswith((".nii", ".nii.gz")):
        import nibabel as nib

        image = nib.load(str(path))
        return np.asarray(image.dataobj), image
    return None


def _save_like(path: Path, values: np.ndarray, template: Path, header_of: Any) -> None:
    name = template.name.lower()
    path.parent.mkdir(parents=True, exist_ok=True)
    if name.endswith(".npy"):
        np.save(path, values.astype(np.load(template, allow_pickle=False).dtype))
        return
    import nibabel as nib

    image = nib.Nifti1Image(values.astype(np.float32), header_of.affine)
    nib.save(image, str(path))


def _array_files(folder: Path) -> list[Path]:
    return [q for q in _files(folder) if q.name.lower().endswith(ARRAY_SUFFIXES)]


def _residual_replay(p: StagerProbe, a: StagedData, b: StagedData, answers: Path, mapping: dict[str, str],
                     dest: Path) -> Path | None:
    """Target input + (attacker's answer - attacker's input), case by case, for array tasks whose output has
    its input's shape; None when the task has no such input."""
    made = False
    for target, source in mapping.items():
        outputs = _array_files(answers / source) if (answers / source).is_dir() else []
        inputs_b, inputs_a = _array_files(b.public / source), _array_files(a.public / target)
        for out in outputs:
            loaded = _load_array(out)
            if loaded is None:
                continue
            answer, _ = loaded
            if answer.dtype.kind != "f":
                continue  # a label map or an integer volume: no noise to carry over
            match = [(x, y) for x, y in zip(inputs_b, inputs_a, strict=False)
                     if x.name == y.name and (lb := _load_array(x)) is not None and lb[0].shape == answer.shape]
            if not match:
                continue
            in_b, in_a = match[0]
            loaded_a = _load_array(in_a)
            if loaded_a is None or loaded_a[0].shape != answer.shape:
                continue
            residual = answer.astype(np.float64) - _load_array(in_b)[0]  # type: ignore[index]
            _save_like(dest / target / out.relative_to(answers / source), loaded_a[0] + residual, out, loaded_a[1])
            made = True
    return dest if made else None


def _residuals(staged: StagedData) -> dict[str, np.ndarray]:
    """Case -> its input minus its reference (flattened), for cases whose first input array has the shape of
    their first reference array."""
    found = {}
    for case in staged.case_ids:
        refs, inputs = _array_files(staged.private / case), _array_files(staged.public / case)
        if not refs or not inputs:
            continue
        ref, given = _load_array(refs[0]), _load_array(inputs[0])
        if ref is None or given is None or given[0].shape != ref[0].shape:
            continue
        found[case] = (given[0].astype(np.float64) - ref[0].astype(np.float64)).ravel()
    return found


def _degradation(p: StagerProbe) -> str:
    """Every case's random degradation is its own: no residual (input - reference) of one staging correlates
    with any residual of another staging, the same item's included. Noise drawn from a public set of seeds
    (the task file's seed plus an index) and dealt out secretly would repeat a field across stagings."""
    (_, a), (_, b) = p.pair()
    ra, rb = _residuals(a), _residuals(b)
    if not ra or not rb:
        return "no staged input has its reference's shape: nothing to compare"
    flat = [case for case, r in ra.items() if r.std() == 0]
    if flat:
        return f"{flat[0]}: no degradation at all (input equals reference)"
    worst, pair = 0.0, ("", "")
    for case_a, x in ra.items():
        x = (x - x.mean()) / x.std()
        for case_b, y in rb.items():
            if y.std() == 0:
                continue
            corr = abs(float(np.dot(x, (y - y.mean()) / y.std())) / x.size)
            if corr > worst:
                worst, pair = corr, (case_a, case_b)
    return (f"{pair[0]} and {pair[1]} of two stagings carry degradations that correlate {worst:.2f}: the noise "
            "comes from a set anyone can regenerate") if worst > 0.3 else ""


# ---------------------------------------------------------------- hostile downloads


def _groups(download: Path) -> dict[str, list[Path]]:
    """The download's regular files by kind (extension; `.nii.gz` and the like kept whole)."""
    groups: dict[str, list[Path]] = {}
    for path in _files(download):
        suffixes = "".join(path.suffixes[-2:]).lower() if path.suffix.lower() in (".gz", ".bz2", ".xz") else \
            path.suffix.lower()
        groups.setdefault(suffixes or "(none)", []).append(path)
    return groups


def _copy_download(p: StagerProbe, name: str) -> Path:
    dest = p.work / name / "download"
    shutil.copytree(p.download, dest, symlinks=True)
    return dest


def _try_stage(p: StagerProbe, source: Path) -> tuple[str, Any]:
    """("staged", (root, staged)) | ("refused", the one-line message) | ("crashed", what escaped)."""
    try:
        return "staged", p.stage(source)
    except UserError as exc:
        message = str(exc)
        return ("refused", message) if "\n" not in message else ("crashed", f"a refusal of several lines: {message}")
    except TimeoutError as exc:
        return "crashed", str(exc)
    except Exception as exc:
        return "crashed", f"{type(exc).__name__}: {exc}"


def _mutated(p: StagerProbe, tag: str, kind: str, change: Callable[[Path, Path], None]) -> Path:
    copy = _copy_download(p, f"{tag}-{kind.strip('.') or 'none'}")
    outside = copy.parent / "outside"
    outside.mkdir()
    for path in _groups(copy).get(kind, []):
        change(path, outside / f"{len(list(outside.iterdir()))}{path.suffix}")
    return copy


def _hostile_links(p: StagerProbe) -> str:
    def hard(path: Path, moved: Path) -> None:
        path.rename(moved)
        os.link(moved, path)

    def soft(path: Path, moved: Path) -> None:
        path.rename(moved)
        path.symlink_to(moved)

    problems = []
    for kind in _groups(p.download):
        for tag, change in (("hardlink", hard), ("symlink", soft)):
            outcome, detail = _try_stage(p, _mutated(p, tag, kind, change))
            if outcome == "crashed":
                problems.append(f"{kind} files as {tag}s: {detail}")
            elif outcome == "staged":
                removed = _mutated(p, f"{tag}-gone", kind, lambda path, _moved: path.unlink())
                if _try_stage(p, removed)[0] != "staged":
                    problems.append(f"{kind} files as {tag}s were read and staged (without them staging fails)")
    return "; ".join(problems)


def _hostile_fifo(p: StagerProbe) -> str:
    if threading.current_thread() is not threading.main_thread():
        return ""  # no alarm outside the main thread: a hang could not be stopped

    def fifo(path: Path, _moved: Path) -> None:
        if not getattr(fifo, "done", False):
            path.unlink()
            os.mkfifo(path)
            fifo.done = True  # type: ignore[attr-defined]

    problems = []
    for kind in _groups(p.download):
        fifo.done = False  # type: ignore[attr-defined]
        outcome, detail = _try_stage(p, _mutated(p, "fifo", kind, fifo))
        if outcome == "crashed":
            problems.append(f"a FIFO among the {kind} files: {detail}")
    return "; ".join(problems)


def _damaged(p: StagerProbe) -> str:
    def cut(path: Path, _moved: Path) -> None:  # every file of the kind: the staging cannot avoid reading one
        if path.stat().st_size > 1:
            data = path.read_bytes()
            path.write_bytes(data[:len(data) // 2])

    problems = []
    for kind in _groups(p.download):
        outcome, detail = _try_stage(p, _mutated(p, "damaged", kind, cut))
        if outcome == "crashed":
            problems.append(f"a {kind} file cut in half: {detail}")
        elif outcome == "staged":
            root, staged = detail
            strict, _ = p.score(root, p.baseline("perfect", staged))
            if strict != 1.0:
                problems.append(f"a {kind} file cut in half was staged and the perfect baseline scores {strict}")
    return "; ".join(problems)


CHECKS: dict[str, Callable[[StagerProbe], str]] = {
    "secret": _secret, "published": _published, "perfect": _perfect, "public-knowledge": _public_knowledge,
    "degradation": _degradation, "hostile-links": _hostile_links, "hostile-fifo": _hostile_fifo,
    "damaged": _damaged,
}


def check_stager(task: str | TaskSpec, download: Path, work: Path, *, checks: Iterable[str] | None = None,
                 random_degradation: bool = False) -> list[CheckResult]:
    """Run the stager conformance checks (`STAGER_CHECKS`) for `task` (an id, or a `TaskSpec` such as the
    registered one with a smaller `case_count`) on the fixture `download`, in fresh folders under `work`.

    `random_degradation=True` adds the check that an item staged twice gets unrelated inputs (tasks whose
    inputs carry random noise or undersampling). A failing check is a result with its reason."""

    reg = registry()
    spec = task if isinstance(task, TaskSpec) else reg.task(task)[1]
    track = reg.task(spec.id)[0]
    wanted = list(checks) if checks is not None else [*DEFAULT_CHECKS, *(["degradation"] if random_degradation else [])]
    unknown = [c for c in wanted if c not in CHECKS]
    if unknown:
        raise ValueError(f"unknown stager checks {unknown}; known: {sorted(CHECKS)}")
    work.mkdir(parents=True, exist_ok=True)
    probe = StagerProbe(track, spec, Path(download), work, reg)
    results = []
    for check_id in wanted:
        try:
            reason = CHECKS[check_id](probe)
        except Exception as exc:  # a check that cannot run is a failure with its cause
            reason = f"check could not run: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
        results.append(CheckResult(check_id, STAGER_CHECKS[check_id], not reason, reason))
    return results


def assert_stager_conforms(task_id: str, download: Path, work: Path, *, case_count: int | None = None,
                           params: dict[str, Any] | None = None, checks: Iterable[str] | None = None,
                           random_degradation: bool = False) -> None:
    """`check_stager` on the registered task (with `case_count` cases and `params` changed when given, to keep
    fixtures small); an AssertionError listing every failure when any check fails."""
    import attrs

    spec = registry().task(task_id)[1]
    if case_count is not None:
        spec = attrs.evolve(spec, case_count=case_count)
    if params:
        spec = attrs.evolve(spec, params={**spec.params, **params})
    results = check_stager(spec, download, work, checks=checks, random_degradation=random_degradation)
    if not all(r.passed for r in results):
        raise AssertionError(f"{task_id} fails the stager conformance check:\n{stager_report(results)}")


def stager_report(results: list[CheckResult]) -> str:
    """The results as lines, failures first (for an assertion message)."""
    lines = [f"{'ok  ' if r.passed else 'FAIL'} {r.id}: {r.reason or r.description}"
             for r in sorted(results, key=lambda r: r.passed)]
    return "\n".join(lines)
