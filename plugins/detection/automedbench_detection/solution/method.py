"""Classical blood-cell detector (colour thresholds + watershed): the scripted reference's "model".

Agent code: copied into the sandbox workspace and run there, standalone (numpy, scipy, scikit-image,
Pillow). Usage: python3 detect_cells.py DATA_DIR OUT_DIR [CASE ...]

- White cells and platelets: purple pixels (blue well above red), closed, split by size into WBC
  (large) and platelets (small).
- Red cells: red pixels (red well above green, not purple), holes filled, split into touching cells by
  a watershed on the distance transform seeded at its local maxima; one box per region, scored by how
  round and full it is.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
from PIL import Image
from scipy import ndimage as ndi
from skimage.feature import peak_local_max
from skimage.measure import label, regionprops
from skimage.morphology import disk
from skimage.segmentation import watershed

WBC_MIN_AREA = 1200
PLATELET_AREA = (15, 260)
RBC_MIN_AREA = 150


def _box(region, cls: str, score: float) -> dict:
    r1, c1, r2, c2 = region.bbox  # half-open pixel bounds = continuous corners
    return {"class": cls, "score": round(float(np.clip(score, 0.01, 1.0)), 4),
            "x1": float(c1), "y1": float(r1), "x2": float(c2), "y2": float(r2)}


def detect(rgb: np.ndarray) -> list[dict]:
    img = rgb.astype(np.float64) / 255.0
    red, green, blue = img[..., 0], img[..., 1], img[..., 2]
    purple = ndi.binary_closing(blue - red > 0.04, structure=disk(3))
    boxes = []
    for region in regionprops(label(purple)):
        if region.area >= WBC_MIN_AREA:
            boxes.append(_box(region, "WBC", 0.6 + 0.4 * region.solidity))
        elif PLATELET_AREA[0] <= region.area <= PLATELET_AREA[1]:
            boxes.append(_box(region, "Platelets", 0.5 + 0.5 * region.solidity))
    grown = ndi.binary_dilation(purple, iterations=2)
    cells = ndi.binary_fill_holes((red - green > 0.16) & ~grown)
    cells = ndi.binary_opening(cells, structure=disk(2))
    parts = label(cells)
    cells &= (np.bincount(parts.ravel()) >= RBC_MIN_AREA)[parts]  # drop specks
    distance = ndi.distance_transform_edt(cells)
    peaks = peak_local_max(distance, min_distance=9, threshold_abs=8.0, labels=label(cells), exclude_border=False)
    markers = np.zeros(distance.shape, dtype=np.int32)
    markers[tuple(peaks.T)] = np.arange(1, len(peaks) + 1)
    regions = watershed(-distance, markers, mask=cells)
    for region in regionprops(regions, intensity_image=distance):
        if region.area < RBC_MIN_AREA:
            continue
        r1, c1, r2, c2 = region.bbox
        fill = region.area / max(1.0, (r2 - r1) * (c2 - c1))  # a disc fills pi/4 of its box
        score = 0.5 * region.solidity + 0.5 * min(1.0, fill / 0.785)
        boxes.append(_box(region, "RBC", score))
    return boxes


def main(argv: list[str]) -> int:
    data, out = Path(argv[0]), Path(argv[1])
    cases = argv[2:] or sorted(p.name for p in data.iterdir() if (p / "image.png").is_file())
    for case in cases:
        rgb = np.asarray(Image.open(data / case / "image.png").convert("RGB"))
        boxes = detect(rgb)
        target = out / case
        target.mkdir(parents=True, exist_ok=True)
        tmp = target / "prediction.json.tmp"
        tmp.write_text(json.dumps({"boxes": boxes}))
        tmp.replace(target / "prediction.json")
        print(case, len(boxes), "boxes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
