"""Detection outputs for round 41's red team: prior boxes (the same few boxes in every image, learned from the
references as a public training split would teach them) and weak honest detectors (the references with noise
and misses), written as a submission folder for `automedbench evaluate --submission`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np


def cases(task_dir: Path) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(case id, meta.json, the private boxes.json) of every staged case, in case order."""
    out = []
    for case in sorted(p.name for p in (task_dir / "public").iterdir() if p.is_dir()):
        meta = json.loads((task_dir / "public" / case / "meta.json").read_text())
        out.append((case, meta, json.loads((task_dir / "private" / case / "boxes.json").read_text())))
    return out


def _name(box: dict[str, Any], meta: dict[str, Any], task_class: str | None) -> str:
    return task_class or (box["class"] if box["class"] in meta["classes"] else meta["classes"][0])


def _relative(staged: list, task_class: str | None) -> dict[str, np.ndarray]:
    """Every reference box per class, in fractions of its image's size."""
    found: dict[str, list[list[float]]] = {}
    for _, meta, truth in staged:
        w, h = float(truth["width"]), float(truth["height"])
        for b in truth["boxes"]:
            rel = [b["x1"] / w, b["y1"] / h, b["x2"] / w, b["y2"] / h]
            found.setdefault(_name(b, meta, task_class), []).append(rel)
    return {k: np.asarray(v) for k, v in found.items()}


def _kmeans(points: np.ndarray, k: int, rng: np.random.Generator, rounds: int = 20) -> np.ndarray:
    """The k most common positions: Lloyd's k-means on the boxes' corners."""
    centres = points[rng.choice(len(points), size=min(k, len(points)), replace=False)]
    for _ in range(rounds):
        nearest = np.argmin(((points[:, None, :] - centres[None]) ** 2).sum(-1), axis=1)
        centres = np.array([points[nearest == j].mean(0) if np.any(nearest == j) else centres[j]
                            for j in range(len(centres))])
    return centres


def prior_sets(staged: list, task_class: str | None, kind: str, seed: int = 41) -> dict[str, list[tuple]]:
    """Per class the relative boxes written in every image: `mean` (the mean reference box), `common` (the k most
    common positions, k the class's mean count per image), `tiles` (the mean box size tiled over the image)."""
    rng = np.random.default_rng(seed)
    out: dict[str, list[tuple]] = {}
    for name, rel in sorted(_relative(staged, task_class).items()):
        if kind == "mean":
            out[name] = [tuple(rel.mean(0))]
        elif kind == "common":
            k = max(1, round(len(rel) / len(staged)))
            out[name] = [tuple(c) for c in _kmeans(rel, k, rng)]
        else:
            w, h = (rel[:, 2] - rel[:, 0]).mean(), (rel[:, 3] - rel[:, 1]).mean()
            out[name] = [(x, y, x + w, y + h) for y in np.arange(0.0, 1.0 - h + 1e-9, h)
                         for x in np.arange(0.0, 1.0 - w + 1e-9, w)]
    return out


def write(submission: Path, per_case: dict[str, list[dict[str, Any]]]) -> Path:
    for case, boxes in per_case.items():
        (submission / case).mkdir(parents=True, exist_ok=True)
        (submission / case / "prediction.json").write_text(json.dumps({"boxes": boxes}) + "\n")
    return submission


def _box(name: str, score: float, x1: float, y1: float, x2: float, y2: float, w: float, h: float) -> dict[str, Any]:
    x1, x2 = sorted((float(np.clip(x1, 0, w)), float(np.clip(x2, 0, w))))
    y1, y2 = sorted((float(np.clip(y1, 0, h)), float(np.clip(y2, 0, h))))
    return {"class": name, "score": round(score, 4), "x1": x1, "y1": y1, "x2": max(x2, x1 + 1), "y2": max(y2, y1 + 1)}


def prior_boxes(staged: list, task_class: str | None, kind: str, jitter: float = 0.0,
                seed: int = 41) -> dict[str, list[dict[str, Any]]]:
    """The prior set in every image (scaled to its size); `jitter`: each box moved at random by up to that fraction
    of its size, a fresh draw per image (so no two images' sets are the same)."""
    rng = np.random.default_rng(seed)
    sets = prior_sets(staged, task_class, kind, seed)
    out = {}
    for case, meta, _ in staged:
        w, h = float(meta["width"]), float(meta["height"])
        boxes = []
        for name, rel in sets.items():
            for x1, y1, x2, y2 in rel:
                dx, dy = rng.uniform(-jitter, jitter, 2) * ((x2 - x1) * w, (y2 - y1) * h)
                boxes.append(_box(name, 0.6, x1 * w + dx, y1 * h + dy, x2 * w + dx, y2 * h + dy, w, h))
        out[case] = boxes
    return out


def weak_detector(staged: list, task_class: str | None, keep: float, noise: float = 0.08,
                  false_share: float = 0.5, seed: int = 41) -> dict[str, list[dict[str, Any]]]:
    """An honest but weak detector: each reference box found with probability `keep`, its corners moved by up to
    `noise` of its size, scored at random; and false positives (boxes of a found box's size anywhere) a
    `false_share` of the references."""
    rng = np.random.default_rng(seed)
    out = {}
    for case, meta, truth in staged:
        w, h = float(meta["width"]), float(meta["height"])
        boxes = []
        for b in truth["boxes"]:
            bw, bh = b["x2"] - b["x1"], b["y2"] - b["y1"]
            if rng.random() < keep:
                d = rng.uniform(-noise, noise, 4) * (bw, bh, bw, bh)
                boxes.append(_box(_name(b, meta, task_class), float(rng.uniform(0.3, 0.95)), b["x1"] + d[0],
                                  b["y1"] + d[1], b["x2"] + d[2], b["y2"] + d[3], w, h))
            if rng.random() < false_share:
                x, y = rng.uniform(0, max(1.0, w - bw)), rng.uniform(0, max(1.0, h - bh))
                boxes.append(_box(_name(b, meta, task_class), float(rng.uniform(0.05, 0.6)), x, y, x + bw, y + bh,
                                  w, h))
        out[case] = boxes
    return out
