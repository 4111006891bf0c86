"""Stage a real dataset's official download into `public/` (inputs) and `private/` (references).

Cases are tried in the staging's secret order (`area.secret`, never the download's numbering) and the
first `case_count` that meet the task's rule are taken (organ + lesion tasks: a non-empty tumour; PanTS
organs at risk: every structure file and a non-empty pancreas; FeTA: an image and a label map;
TotalSegmentator: a test-split subject with every class file and a non-empty liver; AeroPath: a non-empty
airway; PANTHER: a non-empty tumour, its `.mha` files converted to NIfTI first). Staged cases get ids drawn
from the secret (`kidney_<8 hex digits>` ...), so neither the brief nor the folder order names or numbers
the public source case; `private/manifest.json` maps them back. Every input volume is written again from
its voxels (same values, shape and affine; the source's header text fields and extensions dropped; gzip
of our own), so no published file matches the download's by hash. A new staging is built in an
`automedbench.api.staging_area` and swapped in only when complete; each staging draws anew.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nibabel as nib
import numpy as np
from automedbench.api import StagedData, TaskSpec, UserError, check_image, inside, staging_area
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from .. import io
from ..labels import task_labels
from . import layouts
from .layouts import SourceCase

MANIFEST = "manifest.json"
AFFINE_TOL_MM = 1e-2


def load_label_volume(path: Path) -> np.ndarray:
    """An integer label volume as uint8; refuses fractional, negative or > 255 values."""
    data = np.asanyarray(nib.load(str(check_image(path))).dataobj)  # header checked before the voxels
    if data.dtype.kind == "f":
        rounded = np.rint(data)
        if not np.array_equal(rounded, data):
            raise ValueError(f"{path.name}: non-integer label values")
        data = rounded
    lo, hi = (data.min(), data.max()) if data.size else (0, 0)
    if lo < 0 or hi > 255:
        raise ValueError(f"{path.name}: label values outside 0..255 (min {lo}, max {hi})")
    return data.astype(np.uint8, copy=False)


def _union(paths: list[Path]) -> np.ndarray:
    out = None
    for path in paths:
        mask = load_label_volume(path) > 0
        out = mask if out is None else out | mask
    assert out is not None
    return out


def build_references(task: TaskSpec, case: SourceCase, shape: tuple[int, ...]
                     ) -> tuple[dict[str, np.ndarray], dict[str, Any], str]:
    """(output name -> reference volume, case facts, why the case does not qualify or '')."""
    params, stager = task.params, task.params["stager"]
    if params["kind"] == "organ_lesion":
        if stager == "pants":
            organ = _union([case.references[n] for n in params["organ_structures"]])
            lesion = _union([case.references[n] for n in params["lesion_structures"]])
            organ |= lesion
        else:  # one label map: 1 organ, 2 lesion
            labels = load_label_volume(case.references["labels"])
            if labels.shape == shape and labels.max(initial=0) > 2:
                return {}, {}, f"labels {sorted(set(np.unique(labels).tolist()) - {0, 1, 2})} beyond 0-2"
            organ, lesion = labels > 0, labels == 2
        if organ.shape != shape:
            return {}, {}, f"reference shape {organ.shape} != image shape {shape}"
        if not lesion.any():
            return {}, {}, "no tumour"
        refs = {"organ.nii.gz": organ.astype(np.uint8), "lesion.nii.gz": lesion.astype(np.uint8)}
        return refs, {"lesion_present": True}, ""
    allowed = task_labels(task)
    if "structures" in params:  # one binary file per structure (PanTS, TotalSegmentator), painted in label order
        label_map = np.zeros(shape, dtype=np.uint8)
        structures = {int(k): names for k, names in params["structures"].items()}
        for k in sorted(allowed):
            mask = _union([case.references[n] for n in structures[k]])
            if mask.shape != shape:
                return {}, {}, f"reference shape {mask.shape} != image shape {shape}"
            label_map[mask] = k
    else:
        label_map = load_label_volume(case.references["labels"])
        if label_map.shape != shape:
            return {}, {}, f"reference shape {label_map.shape} != image shape {shape}"
        if params.get("binarise"):  # e.g. AeroPath airways: any nonzero value is the one foreground label
            label_map = (label_map > 0).astype(np.uint8) * min(allowed)
        if label_map.max(initial=0) > max(allowed):
            return {}, {}, f"label values above {max(allowed)}"
    required = params.get("required_label", min(allowed) if "structures" in params else None)
    if required is not None and not (label_map == int(required)).any():
        return {}, {}, f"empty {allowed[int(required)]}"
    present = [k for k in sorted(allowed) if np.any(label_map == k)]
    facts: dict[str, Any] = {"labels_present": present}
    if stager == "pants_multilabel":
        facts["lesion_present"] = 2 in present
    return {task.output_files[0]: label_map}, facts, ""


def _grid_problem(image: nib.Nifti1Image, case: SourceCase) -> str:
    """A reference stored on another voxel grid than its image would be scored against the wrong voxels."""
    for path in case.references.values():
        header = nib.load(str(path))  # header only
        if tuple(header.shape[:3]) == tuple(image.shape[:3]) and not np.allclose(header.affine, image.affine,
                                                                               atol=AFFINE_TOL_MM):
            return f"{path.name}: affine differs from the image's"
    return ""


def _stat(path: Path) -> list[int]:
    st = path.stat()
    return [st.st_size, st.st_mtime_ns]


def _task_digest(task: TaskSpec) -> str:
    keys = {"params": task.params, "inputs": task.input_files, "outputs": task.output_files, "n": task.case_count}
    return hashlib.sha256(json.dumps(keys, sort_keys=True, default=str).encode()).hexdigest()


# the gzip header's time of every published volume (2000-01-01, the engine's published file time). With 0, a
# source nibabel wrote and gzip packed at level 6 with no time was byte for byte what would be published, so it went
# out at level 9 (the header's XFL byte says so): how the download stored a volume, told apart from the rest
# (tests/test_redteam_round30.py). With this time only a volume this function wrote can match.
GZIP_MTIME = 946_684_800


SLAB = 1 << 24  # voxels checked at once by `content_dtype` (its temporaries stay ~100 MB for any volume)


def _all(data: np.ndarray, test: Callable[[np.ndarray], np.ndarray]) -> bool:
    flat = data.reshape(-1)
    return all(bool(test(flat[at:at + SLAB]).all()) for at in range(0, flat.size, SLAB))


def content_dtype(data: np.ndarray) -> np.dtype:
    """The dtype a volume's values need, not the one the download stored them in: whole numbers in the smallest of
    uint8, int16, int32 that holds them, other values float32 when it holds them exactly, else float64. Kept as
    stored, the dtype said how each case was stored: int16 and float32 volumes of the same values in one download
    (two sites, two converters) went out int16 and float32 (tests/test_polish4.py). Lossless."""
    if data.dtype.kind not in "biuf" or data.size == 0:
        return data.dtype
    if data.dtype.kind in "biu" or _all(data, lambda part: np.isfinite(part) & (part == np.round(part))):
        low, high = data.min(), data.max()
        for kind in (np.uint8, np.int16, np.int32):
            if np.iinfo(kind).min <= low and high <= np.iinfo(kind).max:
                return np.dtype(kind)
        if data.dtype.kind in "biu":  # beyond int32: as stored (float32 compared equal to 2**53 + 1 after numpy's
            return data.dtype  # float64 promotion and rounded it; tests/test_review28.py)
    for kind in (np.float32, np.float64):
        if _all(data, lambda part, kind=kind: (part.astype(kind) == part) | np.isnan(part)):  # NaN stays NaN
            return np.dtype(kind)
    return data.dtype


def publish_volume(source: Path, target: Path) -> None:
    """`source` (a NIfTI of the download, or one converted from it) written to `target` again from its voxels:
    the same values, shape and affine, in the dtype they need (`content_dtype`), none of the source's header text
    (descrip, aux_file, intent_name), extensions or gzip stream, so the published bytes never match the
    download's."""
    image = nib.load(str(source))
    data = np.asanyarray(image.dataobj)
    dtype = content_dtype(data)
    data = data.astype(dtype, copy=False)
    out = nib.Nifti1Image(data, image.affine, dtype=dtype)  # named: nibabel refuses int64 data otherwise
    out.header.set_xyzt_units(*image.header.get_xyzt_units())
    raw = out.to_bytes()
    size = Path(source).stat().st_size
    for level in (6, 9):
        packed = gzip.compress(raw, compresslevel=level, mtime=GZIP_MTIME)
        if len(packed) != size or packed != Path(source).read_bytes():
            break
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(packed)


def _skipped_summary(skipped: list[tuple[str, str]]) -> str:
    counts: dict[str, int] = {}
    for _, reason in skipped:
        counts[reason] = counts.get(reason, 0) + 1
    top = sorted(counts.items(), key=lambda kv: -kv[1])[:3]
    return "; ".join(f"{n} x {reason}" for reason, n in top)


def _qualify(task: TaskSpec, case: SourceCase):
    """(image header, references, facts, '') for a usable case, or a reason it is skipped."""
    try:
        image = nib.load(str(check_image(case.image)))  # a header declaring more voxels than memory: refused
        if image.ndim != 3:
            return image, {}, {}, f"image is {image.ndim}-D, expected 3-D"
        reason = _grid_problem(image, case)
        if reason:
            return image, {}, {}, reason
        return (image, *build_references(task, case, tuple(image.shape)))
    except (ValueError, OSError, nib.filebasedimages.ImageFileError) as exc:
        return None, {}, {}, f"unreadable ({exc})"


def _write_case(task: TaskSpec, case: SourceCase, case_id: str, image, refs: dict[str, np.ndarray],
                incoming: Path, origin: SourceCase | None = None) -> dict[str, Any]:
    """Write the image again from its voxels (`publish_volume`), save the references on its grid; the manifest
    entry. `origin` is the download's own case when `case` holds files converted from it (PANTHER `.mha`):
    the manifest records the download's files."""
    target = incoming / "public" / case_id / task.input_files[0]
    publish_volume(case.image, target)
    staged_files = {f"public/{case_id}/{task.input_files[0]}": target.stat().st_size}
    for name, path in case.inputs.items():  # further channels (MSD Prostate's ADC beside its T2)
        publish_volume(path, target.parent / name)
        staged_files[f"public/{case_id}/{name}"] = (target.parent / name).stat().st_size
    for name, volume in refs.items():
        path = incoming / "private" / case_id / name
        io.save(path, volume, image.affine)
        staged_files[f"private/{case_id}/{name}"] = path.stat().st_size
    origin = origin or case
    sources = [origin.image, *origin.references.values()]
    return {"case_id": case_id, "source_id": case.source_id,
            "source_files": {str(p.resolve()): _stat(p) for p in sources}, "staged_files": staged_files}


def _readable(task: TaskSpec, case: SourceCase, scratch: Path) -> SourceCase:
    """The case as NIfTI files: PANTHER's `.mha` are converted into `scratch`, MSD volumes are read through
    the untrusted-download layer into `scratch` (channels split), everything else is as found."""
    if case.problem:
        return case
    if task.params["stager"] == "msd":
        from .msd import read_case

        try:
            return read_case(task, case, scratch)
        except ValueError as exc:
            return SourceCase(case.source_id, case.image, case.references, str(exc))
    if task.params["stager"] != "panther":
        return case
    from .panther import convert_case

    try:
        return convert_case(case, scratch)
    except ValueError as exc:
        return SourceCase(case.source_id, case.image, case.references, str(exc))


def _in_download(source: Path, case: SourceCase) -> None:
    """Refuse (one line) a case file that is not under the download folder or reaches it through a symlink."""
    for path in [case.image, *case.references.values()]:
        try:
            relative = Path(path).relative_to(source)
        except ValueError:
            raise UserError(f"{source}: case {case.source_id} names {path}, outside the download; refused") from None
        inside(source, str(relative), f"{source}: case {case.source_id}")


def stage_real(task: TaskSpec, dest: Path, source: Path, console: Console | None = None) -> StagedData:
    params = task.params
    found = layouts.finder(params["stager"], params)(source)
    selected: list[dict[str, Any]] = []
    skipped: list[tuple[str, str]] = []
    scanned: list[str] = []
    facts: dict[str, dict[str, Any]] = {}
    prefix = params.get("case_prefix", task.id.split("/", 1)[1])
    console = console or Console(stderr=True)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with staging_area(dest) as area:
        incoming = area.root
        cases = area.secret.shuffled(found, "cases")  # tried in a secret order: which cases is secret too
        ids = area.secret.id_stream(str(prefix))
        with Progress(*columns, console=console, transient=True) as bar:
            job = bar.add_task(f"staging {task.id}", total=task.case_count)
            for case in cases:
                if len(selected) == task.case_count:
                    break
                scanned.append(case.source_id)
                bar.update(job, description=f"staging {task.id}: {case.source_id}")
                if case.problem:
                    skipped.append((case.source_id, case.problem))
                    continue
                _in_download(source, case)
                readable = _readable(task, case, incoming / ".converted")
                if readable.problem:
                    skipped.append((case.source_id, readable.problem))
                    continue
                image, refs, case_facts, reason = _qualify(task, readable)
                if reason:
                    skipped.append((case.source_id, reason))
                    continue
                case_id = next(ids)
                selected.append(_write_case(task, readable, case_id, image, refs, incoming, case))
                facts[case_id] = case_facts
                bar.advance(job)
        if len(selected) < task.case_count:
            why = f" (skipped: {_skipped_summary(skipped)})" if skipped else ""
            raise UserError(f"{source}: only {len(selected)} of the {task.case_count} cases {task.id} needs "
                            f"qualify among {len(cases)} found — rule: {params.get('selection', 'all')}{why}")
        shutil.rmtree(incoming / ".converted", ignore_errors=True)
        io.write_case_facts(incoming / "private", facts)
        manifest = {"task": task.id, "task_digest": _task_digest(task), "stager": params["stager"],
                    "source": str(source.resolve()), "selection": params.get("selection", ""),
                    "scanned": sorted(scanned), "skipped": [{"source_id": s, "reason": r} for s, r in skipped],
                    "cases": selected}
        (incoming / "private" / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
        return area.commit([c["case_id"] for c in selected])

