"""Stage the real tasks from the download layouts the user already has (read as untrusted input).

- `msd-pancreas-ctsr`: MSD `Task07_Pancreas/imagesTs/pancreas_*.nii.gz` first, then `imagesTr` (macOS `._*`
  resource forks in the archive are skipped);
- `ctorg-ctsr`: CT-ORG `OrganSegmentations/volume-<n>.nii.gz` (labels are not used);
- `totalsegmentator-ctsr`: TotalSegmentator v2 `s<nnnn>/ct.nii.gz`;
- `synthrad2025-mrct`: SynthRAD2025 Task 1 `Task1/HN/<patient>/{mr,ct,mask}.mha` (or `.nii.gz`).
Volumes are taken in sorted order, spread evenly over the download (the release's choice is unknown);
a volume with fewer than `min_slices` axial slices is passed over. The CT-SR input is the deterministic
z degradation (no randomness enters, so no seed is needed); the target is the CT as int16 HU. Case ids
are neutral (`MSDPSR_0001`...); the source file names go to private/cases.json only. Re-staging an
unchanged download (same files, sizes, times, task parameters) is a no-op.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

import numpy as np
from automedbench.api import StagedData, TaskSpec, UserError

from .readers import read_volume
from .store import existing, staging

LAYOUTS = {
    "msd": "Task07_Pancreas/imagesTs/pancreas_NNN.nii.gz (or imagesTr/)",
    "ctorg": "OrganSegmentations/volume-N.nii.gz",
    "totalsegmentator": "sNNNN/ct.nii.gz",
    "synthrad": "Task1/HN/<patient>/mr.mha, ct.mha and mask.mha (or .nii.gz)",
}


def _visible(path: Path) -> bool:
    return not any(part.startswith(".") for part in path.parts[-3:])


def _number(path: Path) -> tuple[int, str]:
    found = re.findall(r"\d+", path.name) or re.findall(r"\d+", path.parent.name)
    return (int(found[-1]) if found else -1, str(path))


def find_sources(task: TaskSpec, source: Path) -> list[Path] | list[dict[str, Path]]:
    layout = task.params["layout"]
    if layout == "msd":
        found = []
        for split in ("imagesTs", "imagesTr"):
            found += sorted((p for p in source.rglob(f"{split}/*.nii.gz") if _visible(p)
                             and not p.name.startswith("._")), key=_number)
        return found
    if layout == "ctorg":
        return sorted((p for p in source.rglob("volume-*.nii*") if _visible(p)), key=_number)
    if layout == "totalsegmentator":
        return sorted((p for p in source.rglob("ct.nii.gz")
                       if _visible(p) and re.fullmatch(r"s\d{4}", p.parent.name)), key=_number)
    region = task.params.get("region", "HN")
    cases = []
    for folder in sorted(p for p in source.rglob(f"{region}/*") if p.is_dir() and _visible(p)):
        files = {}
        for role in ("mr", "ct", "mask"):
            match = [folder / f"{role}{ext}" for ext in (".mha", ".nii.gz", ".nii")
                     if (folder / f"{role}{ext}").is_file()]
            if match:
                files[role] = match[0]
        if len(files) == 3:
            cases.append(files)
        elif files:
            gone = sorted({"mr", "ct", "mask"} - set(files))
            raise UserError(f"{folder}: SynthRAD2025 case incomplete; missing {', '.join(gone)}")
    return cases


def _key(task: TaskSpec, source: Path, found: list[Any]) -> dict[str, Any]:
    digest = hashlib.sha256()
    for item in found:
        for path in (item.values() if isinstance(item, dict) else [item]):
            info = path.stat()
            digest.update(f"{path.relative_to(source)}\0{info.st_size}\0{info.st_mtime_ns}\n".encode())
    return {"source": str(source.resolve()), "files": digest.hexdigest(), "params": task.params,
            "n": task.case_count}


def _spread(items: list[Any], count: int) -> list[Any]:
    """`count` items spread evenly over the sorted list, then the rest in order (fallbacks for skipped ones)."""
    if len(items) <= count:
        return list(items)
    picks = sorted(set(np.linspace(0, len(items) - 1, count).round().astype(int).tolist()))
    return [items[i] for i in picks] + [item for i, item in enumerate(items) if i not in set(picks)]


def stage_source(task: TaskSpec, dest: Path, source: Path) -> StagedData:
    layout = task.params["layout"]
    found = find_sources(task, source)
    if not found:
        raise UserError(f"{source}: no {task.id.split('/')[1]} volumes found (expected {LAYOUTS[layout]})")
    key = _key(task, source, found)
    done = existing(dest, key)
    if done is not None:
        return done
    min_slices = int(task.params.get("min_slices", 1))
    skipped: list[str] = []
    with staging(task, dest) as job:
        for item in _spread(found, task.case_count):
            if len(job.case_ids) == task.case_count:
                break
            case_id = f"{task.params['case_prefix']}_{len(job.case_ids) + 1:04d}"
            if isinstance(item, dict):
                ct, affine = read_volume(item["ct"])
                mr, mr_affine = read_volume(item["mr"])
                mask, _ = read_volume(item["mask"])
                if not (ct.shape == mr.shape == mask.shape):
                    raise UserError(f"{item['ct'].parent}: mr {mr.shape}, ct {ct.shape} and mask {mask.shape} differ")
                if ct.shape[2] < min_slices:
                    skipped.append(item["ct"].parent.name)
                    continue
                job.add(case_id, ct, mr_affine, {"source": item["ct"].parent.name}, mr=mr, mask=mask)
            else:
                ct, affine = read_volume(item)
                if ct.ndim != 3 or ct.shape[2] < min_slices:
                    skipped.append(item.name)
                    continue
                job.add(case_id, ct, affine, {"source": str(item.relative_to(source))})
        if len(job.case_ids) < task.case_count:
            raise UserError(f"{source}: only {len(job.case_ids)} usable volume(s), {task.id} needs {task.case_count}"
                            + (f" ({len(skipped)} with fewer than {min_slices} slices passed over)" if skipped else ""))
        return job.commit(key=key, skipped=skipped)
