"""The demo's lesion classifier (agent code: written into the sandbox by the scripted reference).

Colour and texture rules read from the pixels only: segment the lesion against the skin colour of the
image border, then measure its base colour, bright specks, blue-grey veil, pale centre and purple
tone. Like a checkpoint, it answers with its own abbreviations (`ID2LABEL`); the caller maps them onto
the task's canonical class names. Usage: python3 classify_lesions.py DATA_DIR OUT_DIR [CASE ...]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
from PIL import Image
from scipy import ndimage

ID2LABEL = {0: "akiec", 1: "bcc", 2: "bkl", 3: "df", 4: "mel", 5: "nv", 6: "vasc"}


def features(rgb: np.ndarray) -> dict[str, float]:
    """Lesion measurements of one uint8 RGB image."""
    img = rgb.astype(np.float64) / 255.0
    frame = np.concatenate([img[:8].reshape(-1, 3), img[-8:].reshape(-1, 3),
                            img[:, :8].reshape(-1, 3), img[:, -8:].reshape(-1, 3)])
    skin = np.median(frame, axis=0)
    smooth = ndimage.gaussian_filter(img, (2.5, 2.5, 0))
    lesion = np.linalg.norm(smooth - skin, axis=-1) > 0.12
    lesion = ndimage.binary_opening(lesion, iterations=2)
    labels, n = ndimage.label(lesion)
    if n == 0:
        return {"area": 0.0}
    sizes = ndimage.sum(lesion, labels, range(1, n + 1))
    mask = ndimage.binary_fill_holes(labels == int(np.argmax(sizes)) + 1)
    cy, cx = ndimage.center_of_mass(mask)
    radius = np.sqrt(mask.sum() / np.pi)
    yy, xx = np.mgrid[0:img.shape[0], 0:img.shape[1]]
    dist = np.hypot(yy - cy, xx - cx) / radius
    px = img[mask]
    lum = img.mean(axis=-1)
    blue = (img[..., 2] > img[..., 0] + 0.06) & mask
    base = np.median(px, axis=0)
    bright = (img.min(axis=-1) > base.min() + 0.25) & (lum > 0.7) & mask & (dist < 0.8)
    inner, ring = mask & (dist < 0.3), mask & (dist > 0.7) & (dist < 0.95)
    return {"area": float(mask.sum()), "r": float(base[0]), "g": float(base[1]), "b": float(base[2]),
            "lum": float(base.mean()), "blue": float(blue.sum() / mask.sum()),
            "bright": float(bright.sum() / mask.sum()),
            "pale_centre": float(np.median(lum[inner]) - np.median(lum[ring])) if inner.any() and ring.any() else 0.0}


def predict(rgb: np.ndarray) -> tuple[int, dict[str, float]]:
    """(class index into ID2LABEL, the features it was read from)."""
    f = features(rgb)
    if f["area"] == 0:
        return 5, f
    if f["blue"] > 0.03 or f["lum"] < 0.25:
        return 4, f
    if f["pale_centre"] > 0.15:
        return 3, f
    if f["b"] - f["g"] > 0.09:
        return 6, f
    if f["bright"] > 0.002 and f["lum"] > 0.44:
        return (0 if f["r"] - f["g"] > 0.3 else 2), f
    return (1 if f["lum"] > 0.58 else 5), f


def main(data_dir: str, out_dir: str, cases: list[str], label_map: dict[str, str]) -> None:
    for case in cases or sorted(p.name for p in Path(data_dir).iterdir() if p.is_dir()):
        rgb = np.asarray(Image.open(Path(data_dir) / case / "image.jpg").convert("RGB"))
        index, _ = predict(rgb)
        target = Path(out_dir) / case
        target.mkdir(parents=True, exist_ok=True)
        label = label_map.get(ID2LABEL[index], ID2LABEL[index])
        (target / "prediction.json").write_text(json.dumps({"label": label}) + "\n")


if __name__ == "__main__":
    mapping = json.loads(Path(sys.argv[3]).read_text()) if len(sys.argv) > 3 and sys.argv[3].endswith(".json") else {}
    rest = sys.argv[4:] if mapping else sys.argv[3:]
    main(sys.argv[1], sys.argv[2], rest, mapping)
