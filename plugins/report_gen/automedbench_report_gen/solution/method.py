"""Pixel-rule chest X-ray reporter for the AutoMedBench report demo (runs in the agent's sandbox).

The demo's studies share one base radiograph, so the cohort median of all views (each windowed to its
1-99 % percentiles) is a finding-free background. Each view's difference from it is read in hand-measured
anatomical zones (482 x 512 grid; image left = patient right); a study's findings are the union over ALL
its views. The findings are then written as standard report sentences.

usage: python3 report_method.py DATA_DIR OUT_DIR [CASE_ID ...] [--limit N] [--first-view-only]
"""

import json
import pathlib
import sys

import numpy as np
from PIL import Image

# (x0, x1, y0, y1) zones and the thresholds on the mean difference inside them
ZONES = {
    "effusion_right": (50, 120, 340, 378), "effusion_right_high": (48, 90, 290, 318),
    "effusion_left": (360, 435, 360, 395), "effusion_left_high": (400, 435, 310, 335),
    "heart_left_border": (340, 372, 280, 320),
    "consolidation_right": (80, 150, 205, 260), "consolidation_left": (340, 405, 215, 275),
    "pneumothorax_right": (48, 66, 110, 270), "pneumothorax_left": (405, 428, 130, 280),
    "trachea": (233, 240, 10, 130),
}
EFFUSION, EFFUSION_MODERATE, HEART, CONSOLIDATION, PNEUMOTHORAX, TUBE = 0.025, 0.05, 0.08, 0.10, -0.025, 0.05


def load(path):
    image = np.asarray(Image.open(path).convert("L"), dtype=np.float32)
    lo, hi = np.percentile(image, [1, 99])
    return (image - lo) / max(hi - lo, 1e-6)


def zone_means(diff):
    return {name: float(diff[y0:y1, x0:x1].mean()) for name, (x0, x1, y0, y1) in ZONES.items()}


def read_findings(views):
    """Findings of one study from the zone means of each of its views (union over views)."""
    f = {"cardiomegaly": False, "effusion": set(), "moderate": False, "consolidation": set(),
         "pneumothorax": set(), "ett": False}
    for z in views:
        f["cardiomegaly"] |= z["heart_left_border"] > HEART
        for side in ("right", "left"):
            if z[f"effusion_{side}"] > EFFUSION:
                f["effusion"].add(side)
                f["moderate"] |= z[f"effusion_{side}_high"] > EFFUSION_MODERATE
            if z[f"consolidation_{side}"] > CONSOLIDATION:
                f["consolidation"].add(side)
            if z[f"pneumothorax_{side}"] < PNEUMOTHORAX:
                f["pneumothorax"].add(side)
        f["ett"] |= z["trachea"] > TUBE
    return f


def write_report(f):
    s = []
    if f["ett"]:
        s.append("An endotracheal tube is in place.")
    s.append("The heart is enlarged." if f["cardiomegaly"] else "The heart size is normal.")
    s.append("Multiple rounded nodules are seen in both lungs, consistent with metastases.")
    for side in sorted(f["consolidation"], reverse=True) or [None]:
        s.append(f"There is consolidation in the {side} mid lung zone." if side else "No focal consolidation.")
    size = "moderate" if f["moderate"] else "small"
    if len(f["effusion"]) == 2:
        s.append(f"There are {size} bilateral pleural effusions.")
    elif f["effusion"]:
        s.append(f"There is a {size} {next(iter(f['effusion']))} pleural effusion.")
    for side in sorted(f["pneumothorax"], reverse=True):
        s.append(f"There is a {side} pneumothorax.")
    if not f["effusion"] and not f["pneumothorax"]:
        s.append("No pleural effusion or pneumothorax.")
    elif not f["pneumothorax"]:
        s.append("No pneumothorax.")
    elif not f["effusion"]:
        s.append("No pleural effusion.")
    acute = f["effusion"] or f["pneumothorax"] or f["consolidation"] or f["cardiomegaly"]
    impression = "Multiple pulmonary nodules, consistent with metastases." + (
        " Acute or interval findings as described above." if acute else "")
    return f"FINDINGS: {' '.join(s)}\n\nIMPRESSION: {impression}\n"


def main(argv):
    first_only = "--first-view-only" in argv
    argv = [a for a in argv if a != "--first-view-only"]
    limit = None
    if "--limit" in argv:
        i = argv.index("--limit")
        limit = int(argv[i + 1])
        argv = argv[:i] + argv[i + 2:]
    data, out, wanted = pathlib.Path(argv[0]), pathlib.Path(argv[1]), argv[2:]
    manifests = {p.parent.name: json.loads(p.read_text()) for p in sorted(data.glob("*/manifest.json"))}
    images = {c: [load(data / c / f) for f in m["image_files"]] for c, m in manifests.items()}
    background = np.median(np.stack([v for views in images.values() for v in views]), axis=0)
    cases = wanted or sorted(manifests)
    if limit is not None:
        cases = cases[:limit]
    for case in cases:
        views = images[case][:1] if first_only else images[case]
        findings = read_findings([zone_means(v - background) for v in views])
        target = out / case / "report.txt"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(write_report(findings))
        print(f"{case}: views_used {len(views)}/{len(manifests[case]['image_files'])} -> {target}")


if __name__ == "__main__":
    main(sys.argv[1:])
