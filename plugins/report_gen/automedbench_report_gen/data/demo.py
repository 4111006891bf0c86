"""The generated demo: findings painted on the one real chest radiograph that ships in pydicom-data
(`RG1_UNCI.dcm`, NEMA WG04 CR chest, MONOCHROME1, multiple bilateral round nodules), inside hand-drawn
lung outlines measured on this image. Reference reports come from our own sentence templates, so every
report follows from the pixels. Which case id holds which of the CASES below is drawn from the staging's
secret seed: this file, readable in the sandbox, never says which study has which findings. Deterministic
for one seed and offline (about a second for the 12 studies).

Geometry (512 rows x 482 columns after resizing; image left = patient right):
lungs are the polygons below, the heart an ellipse at (265, 318) with radii (80, 58), the trachea near x 236."""

from __future__ import annotations

import io
from functools import lru_cache
from pathlib import Path

import attrs
import numpy as np
from automedbench.api import StagedData, TaskSpec, staging_area
from PIL import Image, ImageDraw

from .wording import REFERENCE, Findings, report, sentence_keys

HEIGHT, WIDTH = 512, 482
LUNG_POLYGONS: dict[str, list[tuple[int, int]]] = {
    "right": [(130, 45), (95, 58), (68, 100), (52, 160), (44, 240), (42, 320), (46, 385), (75, 372), (115, 356),
              (155, 350), (185, 338), (195, 290), (192, 220), (186, 150), (178, 90), (160, 52)],
    "left": [(300, 45), (340, 52), (378, 85), (408, 140), (426, 220), (436, 300), (444, 400), (415, 390),
             (380, 375), (350, 360), (338, 320), (318, 280), (298, 235), (288, 175), (285, 110), (288, 65)],
}
HEART = (265.0, 318.0, 80.0, 58.0)  # centre x, centre y, radius x, radius y
HEART_ENLARGED = (275.0, 322.0, 112.0, 70.0)
CONSOLIDATION_CENTRE = {"right": (112.0, 232.0), "left": (372.0, 246.0)}
TRACHEA_X, CARINA_Y = 236, 172
EFFUSION_HEIGHT = {"small": 40, "moderate": 80}
PTX_WIDTH = 22
VIEW_NAMES = ["PA", "PA expiratory"]
VARIANT = 7002  # the staging seed's stream for the case order

# The 12 studies: every finding shows in fewer than half of them, in each location.
CASES: list[Findings] = [
    Findings(),
    Findings(cardiomegaly=True),
    Findings(effusion="right", effusion_size="moderate", views=2),
    Findings(pneumothorax="left", views=2),  # small: visible on the expiratory view only
    Findings(ett=True, consolidation="right"),
    Findings(cardiomegaly=True, effusion="bilateral"),
    Findings(consolidation="left", views=2),
    Findings(pneumothorax="right", ett=True),
    Findings(cardiomegaly=True, effusion="left", effusion_size="moderate", views=2),
    Findings(views=2),
    Findings(ett=True),
    Findings(consolidation="right", effusion="right"),
]
# Findings visible only on a later view of a multi-view study (case index -> labels).
LATER_VIEW_ONLY: dict[int, list[str]] = {3: ["Pneumothorax"]}


@lru_cache(maxsize=1)
def base_image() -> np.ndarray:
    """The bundled radiograph as float32 in [0, 1]: inverted (MONOCHROME1), windowed 0.5-99.5 %, resized."""
    import pydicom
    from pydicom.data import get_testdata_file

    path = get_testdata_file("RG1_UNCI.dcm")
    if path is None:
        from automedbench.api import UserError

        raise UserError("the demo needs pydicom-data (pip install pydicom-data) for its chest radiograph")
    pixels = pydicom.dcmread(path).pixel_array.astype(np.float32)
    pixels = pixels.max() - pixels
    lo, hi = np.percentile(pixels, [0.5, 99.5])
    scaled = np.clip((pixels - lo) / (hi - lo), 0, 1)
    small = Image.fromarray((scaled * 65535).astype(np.uint16)).resize((WIDTH, HEIGHT), Image.BILINEAR)
    return np.asarray(small, dtype=np.float32) / 65535.0


@lru_cache(maxsize=1)
def soft_tissue_level() -> float:
    """The density of the normal cardiac silhouette: what fluid and an enlarged heart look like here."""
    return float(np.median(base_image()[_ellipse(*HEART)]))


@lru_cache(maxsize=4)
def lung_mask(side: str) -> np.ndarray:
    canvas = Image.new("L", (WIDTH, HEIGHT), 0)
    ImageDraw.Draw(canvas).polygon(LUNG_POLYGONS[side], fill=1)
    return np.asarray(canvas, dtype=bool)


def _ellipse(cx: float, cy: float, rx: float, ry: float) -> np.ndarray:
    yy, xx = np.mgrid[0:HEIGHT, 0:WIDTH]
    return ((xx - cx) / rx) ** 2 + ((yy - cy) / ry) ** 2 <= 1.0


def _soft(mask: np.ndarray, sigma: float) -> np.ndarray:
    from scipy.ndimage import gaussian_filter

    return gaussian_filter(mask.astype(np.float32), sigma)


def paint_effusion(image: np.ndarray, side: str, size: str) -> None:
    """Fluid in the dependent lung: a density rising towards the base with a meniscus climbing laterally."""
    lung = lung_mask(side)
    rows, cols = np.nonzero(lung)
    bottom = rows.max()
    medial, lateral = (cols.max(), cols.min()) if side == "right" else (cols.min(), cols.max())
    yy, xx = np.mgrid[0:HEIGHT, 0:WIDTH]
    t = np.clip((xx - medial) / (lateral - medial), 0, 1)
    top = bottom - EFFUSION_HEIGHT[size] - 22 * t ** 2
    depth = np.clip((yy - top) / 26.0, 0, 1) * _soft(lung & (yy > top - 4), 2.0)
    image[:] = image * (1 - 0.85 * depth) + soft_tissue_level() * 0.85 * depth


def paint_cardiomegaly(image: np.ndarray) -> None:
    """A wider cardiac silhouette: the enlarged ellipse takes the density of the normal heart."""
    silhouette = _soft(_ellipse(*HEART_ENLARGED), 2.5)
    blended = image * (1 - 0.7 * silhouette) + 0.7 * silhouette * 0.9 * soft_tissue_level()
    image[:] = np.maximum(image, blended)


def paint_consolidation(image: np.ndarray, side: str, rng: np.random.Generator) -> None:
    """A textured cluster of overlapping blobs in the mid zone, confined to the lung."""
    from scipy.ndimage import gaussian_filter

    cx, cy = CONSOLIDATION_CENTRE[side]
    yy, xx = np.mgrid[0:HEIGHT, 0:WIDTH]
    blob = np.zeros((HEIGHT, WIDTH), np.float32)
    for _ in range(7):
        bx, by = cx + rng.normal(0, 12), cy + rng.normal(0, 12)
        r = rng.uniform(12, 20)
        blob += np.exp(-(((xx - bx) ** 2 + (yy - by) ** 2) / (2 * r ** 2)))
    texture = 0.75 + 0.25 * gaussian_filter(rng.standard_normal((HEIGHT, WIDTH)).astype(np.float32), 2.0) * 3
    image += 0.32 * np.clip(blob, 0, 1) * np.clip(texture, 0.4, 1.2) * _soft(lung_mask(side), 1.5)


def paint_pneumothorax(image: np.ndarray, side: str, width: float = PTX_WIDTH) -> None:
    """Air along the lateral and apical chest wall: no lung markings, darker, a thin visceral pleural line."""
    from scipy.ndimage import distance_transform_edt, gaussian_filter

    lung = lung_mask(side)
    distance = distance_transform_edt(lung)
    cols = np.nonzero(lung)[1]
    mid = (cols.min() + cols.max()) / 2
    yy, xx = np.mgrid[0:HEIGHT, 0:WIDTH]
    outer = (xx < mid) if side == "right" else (xx > mid)
    band = lung & (distance < width) & outer & (yy < 300)
    smooth = gaussian_filter(image, 10.0) - 0.10
    soft = _soft(band, 1.0)
    image[:] = image * (1 - soft) + smooth * soft
    line = lung & (np.abs(distance - width) < 1.1) & outer & (yy < 300)
    image += 0.22 * _soft(line, 0.6)


def paint_ett(image: np.ndarray) -> None:
    """An endotracheal tube: a thin radio-opaque line down the trachea ending above the carina."""
    tube = np.zeros((HEIGHT, WIDTH), bool)
    tube[0:CARINA_Y - 30, TRACHEA_X - 1:TRACHEA_X + 2] = True
    image += 0.45 * _soft(tube, 0.7)


def render(findings: Findings, view: int, seed: int, index: int, later_only: list[str]) -> np.ndarray:
    rng = np.random.default_rng([seed, index, view])
    image = base_image().copy()
    if findings.cardiomegaly:
        paint_cardiomegaly(image)
    if findings.effusion:
        for side in (("right", "left") if findings.effusion == "bilateral" else (findings.effusion,)):
            paint_effusion(image, side, findings.effusion_size)
    if findings.consolidation:
        paint_consolidation(image, findings.consolidation, np.random.default_rng([seed, index]))
    if findings.pneumothorax and (view > 0 or "Pneumothorax" not in later_only):
        paint_pneumothorax(image, findings.pneumothorax)
    if findings.ett:
        paint_ett(image)
    if view == 1:  # the second exposure: a little darker and flatter (rescaled away by any percentile window)
        image = 0.9 * image + 0.03
    image = image + rng.normal(0, 0.012, image.shape).astype(np.float32)
    return np.clip(image, 0, 1)


def png_bytes(image: np.ndarray) -> bytes:
    """Stored, not compressed: every view has one file size. Compressed, each finding changed how well its
    painted region packed, and a study's file sizes named its findings: matched to the sizes of the generator's
    own renders (one study per case), they scored up to 0.775 (rated B) without an image opened, against 0.66-0.70
    for the best trivial baseline (tests/test_redteam_round38.py)."""
    buffer = io.BytesIO()
    Image.fromarray((image * 255 + 0.5).astype(np.uint8), mode="L").save(buffer, format="PNG", compress_level=0)
    return buffer.getvalue()


def case_id(index: int) -> str:
    return f"CXR{index + 1:04d}"


def reference_choices(seed: int, index: int) -> list[int]:
    """Which wording variant each FINDINGS sentence of CASES[index] takes in its reference report."""
    return list(cohort_choices(seed)[index])


@lru_cache(maxsize=4)
def cohort_choices(seed: int) -> tuple[tuple[int, ...], ...]:
    """Every sentence kind takes its second wording in half of the studies that use it (the odd one out
    drawn), which half drawn from the seed: no study's wording can be predicted, and the cohort's mix of
    wordings is the same on every staging. Drawn per sentence (a coin each) some stagings worded most
    sentences the other way and the reference method, which writes one wording, fell below its A."""
    rng = np.random.default_rng([seed, 5000])
    uses: dict[str, list[tuple[int, int]]] = {}
    for index, findings in enumerate(CASES):
        for slot, (key, _) in enumerate(sentence_keys(findings)):
            uses.setdefault(key, []).append((index, slot))
    choices = [[0] * len(sentence_keys(findings)) for findings in CASES]
    for key in sorted(uses):
        spots = uses[key]
        flags = [k % 2 for k in range(len(spots))]
        if len(spots) % 2:
            flags[-1] = int(rng.integers(0, 2))
        for at, flag in zip(rng.permutation(len(spots)), flags, strict=True):
            index, slot = spots[int(at)]
            choices[index][slot] = flag
    return tuple(tuple(row) for row in choices)


def stage_demo(task: TaskSpec, dest: Path) -> StagedData:
    from .layout import finish, write_study

    seed = int(task.params.get("seed", 20261203))
    with staging_area(dest) as area:
        ids = []
        # which study gets which findings is drawn from the staging's secret seed: CASES (readable in the
        # sandbox) says what the twelve studies hold, never which case id holds what
        order = [int(i) for i in np.random.default_rng([seed, VARIANT]).permutation(len(CASES))]
        for index, source in enumerate(order):
            findings = CASES[source]
            cid = case_id(index)
            later = LATER_VIEW_ONLY.get(source, [])
            images = [png_bytes(render(findings, v, seed, source, later)) for v in range(findings.views)]
            facts = {"later_view_only": later, "findings": attrs.asdict(findings)}
            write_study(area.root, cid, [(f"{v + 1:02d}.png", data) for v, data in enumerate(images)],
                        report(findings, REFERENCE, reference_choices(seed, source)), facts,
                        VIEW_NAMES[:findings.views])
            ids.append(cid)
        return finish(area, ids, task.params)
