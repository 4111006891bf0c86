"""Stage the real tasks from the download layouts the user already has (read as untrusted input).

- `msd-pancreas-ctsr`: MSD `Task07_Pancreas/imagesTs/pancreas_*.nii.gz` first, then `imagesTr` (macOS `._*`
  resource forks in the archive are skipped);
- `ctorg-ctsr`: CT-ORG `OrganSegmentations/volume-<n>.nii.gz` (labels are not used);
- `totalsegmentator-ctsr`: TotalSegmentator v2 `s<nnnn>/ct.nii.gz`;
- `synthrad2025-mrct`: SynthRAD2025 Task 1 `Task1/HN/<patient>/{mr,ct,mask}.mha` (or `.nii.gz`).
Volumes are tried in the staging's secret order (`area.secret`; the release's choice is unknown) and the
first `case_count` usable ones are taken; a volume with fewer than `min_slices` axial slices, or one that no
submission could score (the target against itself does not score exactly 1.0: a plane too small for the SSIM
window, an empty mask), is passed over with its reason. The CT-SR input is the deterministic z degradation
(no randomness enters); the target is the CT as int16 HU. Case ids are drawn from the secret
(`MSDPSR_<8 hex digits>`...); the source file names go to private/cases.json only. Each staging draws anew.
"""

from __future__ import annotations

import re
from pathlib import Path

from automedbench.api import StagedData, TaskSpec, UserError

from .readers import read_volume
from .store import Unscorable, staging

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


def stage_source(task: TaskSpec, dest: Path, source: Path) -> StagedData:
    layout = task.params["layout"]
    found = find_sources(task, source)
    if not found:
        raise UserError(f"{source}: no {task.id.split('/')[1]} volumes found (expected {LAYOUTS[layout]})")
    min_slices = int(task.params.get("min_slices", 1))
    skipped: list[str] = []
    with staging(task, dest) as job:
        ids = job.area.secret.id_stream(str(task.params["case_prefix"]))
        # a secret order; MSD's imagesTs (never used to train its segmentation models) still tried first
        first = [f for f in found if not isinstance(f, dict) and "imagesTs" in f.parts]
        rest = [f for f in found if isinstance(f, dict) or "imagesTs" not in f.parts]
        for item in job.area.secret.shuffled(first, "volumes Ts") + job.area.secret.shuffled(rest, "volumes"):
            if len(job.case_ids) == task.case_count:
                break
            try:
                if isinstance(item, dict):
                    ct, _ = read_volume(item["ct"])
                    mr, mr_affine = read_volume(item["mr"])
                    mask, _ = read_volume(item["mask"])
                    if not (ct.shape == mr.shape == mask.shape):
                        raise UserError(f"{item['ct'].parent}: mr {mr.shape}, ct {ct.shape} and mask {mask.shape} "
                                        "differ")
                    if ct.shape[2] < min_slices:
                        skipped.append(f"{item['ct'].parent.name}: fewer than {min_slices} slices")
                        continue
                    job.add(next(ids), ct, mr_affine, {"source": item["ct"].parent.name}, mr=mr, mask=mask)
                else:
                    ct, affine = read_volume(item)
                    if ct.ndim != 3 or ct.shape[2] < min_slices:
                        skipped.append(f"{item.name}: fewer than {min_slices} slices")
                        continue
                    job.add(next(ids), ct, affine, {"source": str(item.relative_to(source))})
            except Unscorable as exc:
                skipped.append(str(exc))
        if len(job.case_ids) < task.case_count:
            raise UserError(f"{source}: only {len(job.case_ids)} usable volume(s), {task.id} needs {task.case_count}"
                            + (f" (passed over: {'; '.join(skipped[:3])})" if skipped else ""))
        return job.commit(skipped=skipped)
