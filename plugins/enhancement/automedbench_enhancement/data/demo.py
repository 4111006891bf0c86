"""The two demo tasks, generated in code from real images that ship in pip packages (deterministic, seconds).

demo-ldct: the 512² CT slices of pydicom / pydicom-data (an abdomen from a TCIA case, two heads from the
NEMA WG04 set), in HU clipped to [-1024, 3071], each also mirrored, plus CT-like noise (sigma ~100 HU,
the level at which classical baselines spread as on the real task).
demo-sr: 720x512 crops of pydicom-data's 1024² shoulder MR (NEMA WG04 `MR2_UNCR`), intensities divided
by the image's 99.5th percentile and clipped to [0, 1]; the 360x256 input is the k-space centre.
nilearn's MNI152 template is not used: its 1 mm slices (at most 233x197) are smaller than the output grid.
Those images are readable in every sandbox, so each reference is `secret_variant` of its source (warp,
intensity map, added structures) drawn from the staging's secret seed: the shipped file is not the answer.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from automedbench.api import StagedData, TaskSpec, secret_variant

from . import degrade
from .store import staging

HU_CLIP = (-1024.0, 3071.0)
VARIANT = 7001  # the secret variant's stream of the staging seed (the noise uses seed + i)
SR_JITTER_PX = 3.0  # demo-sr's references: fine detail moved by up to 3 px over ~3 px (`refguard.jitter`)


def read_dicom(name: str) -> tuple[np.ndarray, float]:
    """(modality values with the rescale applied, pixel size in mm) of a DICOM file shipped with pydicom(-data)."""
    import pydicom
    from pydicom.data import get_testdata_file

    path = get_testdata_file(name)
    if path is None:
        raise FileNotFoundError(f"{name} is not installed (pip install pydicom-data)")
    ds = pydicom.dcmread(path)
    values = ds.pixel_array.astype(np.float64) * float(getattr(ds, "RescaleSlope", 1) or 1) + float(
        getattr(ds, "RescaleIntercept", 0) or 0)
    return values, float(ds.PixelSpacing[0])


def stage_demo(task: TaskSpec, dest: Path) -> StagedData:
    make = _ldct_cases if task.params["kind"] == "ldct" else _sr_cases
    with staging(task, dest) as job:
        for case_id, low, ref, info, source in make(task):
            job.add(case_id, low, ref, info, source)
        return job.commit(generator="demo-v2")


def _ldct_cases(task: TaskSpec):
    params, seed = task.params, int(task.params["seed"])
    slices = [read_dicom(name) for name in params["sources"]]
    for i in range(task.case_count):
        which, mirrored = i % len(slices), (i // len(slices)) % 2 == 1
        hu, pixel_mm = slices[which]
        ref = np.clip(hu, *HU_CLIP)
        if mirrored:
            ref = ref[:, ::-1]
        # the shipped slice is readable in the sandbox: the reference is a secret variant of it
        ref = np.clip(secret_variant(ref, [seed, VARIANT, i], fill=HU_CLIP[0], pivot=HU_CLIP[0],
                                     blobs={"count": (4, 8), "radius_px": (5.0, 22.0), "contrast": (40.0, 120.0),
                                            "where": degrade.body_mask(ref)}), *HU_CLIP)
        low = degrade.low_dose(ref, params, seed + i, pixel_mm)
        yield (f"ldct_{i + 1:03d}", low, ref, {"pixel_spacing_mm": pixel_mm},
               {"source": params["sources"][which], "mirrored": mirrored, "noise_seed": seed + i})


def _sr_cases(task: TaskSpec):
    params = task.params
    image, pixel_mm = read_dicom(params["source"])
    seed = int(params.get("seed", 20261203))
    scaled = np.clip(image / np.percentile(image, 99.5), 0.0, 1.0)
    h, w = params["output_shape"]
    for i in range(task.case_count):
        top, left = params["crops"][i % len(params["crops"])]
        hr = scaled[top:top + h, left:left + w]
        if (i // len(params["crops"])) % 2 == 1:
            hr = hr[:, ::-1]
        # the shipped image is readable in the sandbox: the reference is a secret variant of the crop
        # jittered too: the input holds only the low band, so the warp and blobs alone left the shipped crop's
        # fine detail registrable onto it (rated A with no super-resolution; tests/test_redteam_round28.py)
        hr = np.clip(secret_variant(hr, [seed, VARIANT, i], fill=0.0, offset=0.02,
                                    blobs={"count": (4, 8), "radius_px": (4.0, 16.0), "contrast": (0.05, 0.15),
                                           "where": hr > 0.1}, jitter_px=SR_JITTER_PX), 0.0, 1.0)
        lr = np.clip(degrade.kspace_down(hr), 0.0, 1.0)
        yield (f"sr_{i + 1:03d}", lr, hr, {"pixel_spacing_mm": pixel_mm * 2},
               {"source": params["source"], "crop": [top, left], "mirrored": (i // len(params["crops"])) % 2 == 1})
