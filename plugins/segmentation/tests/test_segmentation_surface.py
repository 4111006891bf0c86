"""HD95 / surface Dice: the bounding-box crop must not change MONAI's values; hand-computed cases."""

from __future__ import annotations

import numpy as np
import pytest
from automedbench_segmentation import surface

# MONAI and torch load inside the tests (through this autouse fixture), not at collection: importing
# them costs ~7 s, which every `pytest -k …` would otherwise pay.
pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")  # MONAI deprecation inside its own code


@pytest.fixture(autouse=True)
def _needs_monai():
    pytest.importorskip("monai.metrics")


def _full_monai(pred, ref, spacing, tol):
    import torch
    from monai.metrics import compute_hausdorff_distance, compute_surface_dice

    tp = torch.from_numpy(np.stack([~pred, pred])[None].astype(np.float32))
    tg = torch.from_numpy(np.stack([~ref, ref])[None].astype(np.float32))
    hd = float(compute_hausdorff_distance(tp, tg, percentile=95, spacing=spacing)[0, 0])
    nsd = float(compute_surface_dice(tp, tg, class_thresholds=[tol], spacing=spacing)[0, 0])
    return hd, nsd


def test_crop_does_not_change_monai_values():
    shape = (40, 36, 30)
    grid = np.indices(shape)
    ref = ((grid[0] - 20) ** 2 + (grid[1] - 18) ** 2 + (grid[2] - 15) ** 2) <= 49
    pred = ((grid[0] - 22) ** 2 + (grid[1] - 18) ** 2 + (grid[2] - 14) ** 2) <= 36
    spacing = (0.8, 0.8, 2.5)
    ours = surface.surface_metrics(pred, ref, spacing, tolerance_mm=2.0)
    hd, nsd = _full_monai(pred, ref, list(spacing), 2.0)
    assert ours["hd95_mm"] == pytest.approx(hd) and ours["surface_dice"] == pytest.approx(nsd)
    assert 0 < ours["surface_dice"] < 1 and ours["hd95_mm"] > 0


def test_hand_computed_single_voxels():
    pred = np.zeros((10, 10, 10), bool)
    ref = np.zeros((10, 10, 10), bool)
    ref[2, 2, 2] = True
    pred[2, 2, 5] = True  # 3 voxels apart along the last axis, spacing 2 mm there -> 6 mm
    out = surface.surface_metrics(pred, ref, (1.0, 1.0, 2.0), tolerance_mm=5.0)
    assert out["hd95_mm"] == pytest.approx(6.0)
    assert out["surface_dice"] == 0.0
    assert surface.surface_metrics(pred, ref, (1.0, 1.0, 2.0), tolerance_mm=6.5)["surface_dice"] == 1.0


def test_empty_masks_follow_monai():
    """One side empty: surface Dice 0 (MONAI's), HD95 undefined; both empty: both undefined."""
    empty = np.zeros((5, 5, 5), bool)
    full = np.ones((5, 5, 5), bool)
    assert surface.surface_metrics(empty, full, (1, 1, 1)) == {"hd95_mm": None, "surface_dice": 0.0}
    assert surface.surface_metrics(empty, empty, (1, 1, 1)) == {"hd95_mm": None, "surface_dice": None}


def test_monai_loads_without_transformers_and_leaves_it_importable():
    """A fresh process (an evaluator's) loads the surface metrics without importing Hugging Face transformers,
    which MONAI's eager import would pull in for a network no metric uses (2.9 of its 7.1 CPU-s); the metrics are
    the same as with it, and transformers still imports afterwards (report_gen's scorers share warm evaluators)."""
    import json
    import subprocess
    import sys

    code = (
        "import json, sys\nimport numpy as np\nfrom automedbench_segmentation import surface\n"
        "assert surface.unavailable() == '', surface.unavailable()\n"
        "hidden = 'transformers' not in sys.modules and not any(m.startswith('transformers.') for m in sys.modules)\n"
        "grid = np.indices((40, 36, 30))\n"
        "ref = ((grid[0] - 20) ** 2 + (grid[1] - 18) ** 2 + (grid[2] - 15) ** 2) <= 49\n"
        "pred = ((grid[0] - 22) ** 2 + (grid[1] - 18) ** 2 + (grid[2] - 14) ** 2) <= 36\n"
        "values = surface.surface_metrics(pred, ref, (0.8, 0.8, 2.5), tolerance_mm=2.0)\n"
        "from transformers import BertConfig\n"
        "print(json.dumps({'hidden': hidden, 'values': values, 'bert': BertConfig().model_type}))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert found["hidden"], "importing MONAI's metrics imported transformers"
    assert found["bert"] == "bert"
    grid = np.indices((40, 36, 30))
    ref = ((grid[0] - 20) ** 2 + (grid[1] - 18) ** 2 + (grid[2] - 15) ** 2) <= 49
    pred = ((grid[0] - 22) ** 2 + (grid[1] - 18) ** 2 + (grid[2] - 14) ** 2) <= 36
    hd, nsd = _full_monai(pred, ref, [0.8, 0.8, 2.5], 2.0)  # this process: MONAI imported with transformers
    assert found["values"] == {"hd95_mm": pytest.approx(hd), "surface_dice": pytest.approx(nsd)}
    assert 0 < found["values"]["surface_dice"] < 1


def test_surface_distances_declare_their_unit(tmp_path):
    """The cohort's HD95 components are lengths: the block says "mm" for each (the terminal and pages print it beside
    the value) and nothing for Dice or surface Dice, which are fractions."""
    import attrs
    from automedbench.api import CaseScore
    from automedbench.testing import load_task
    from automedbench_segmentation import metric

    task = load_task("segmentation/kidney")[1]
    task = attrs.evolve(task, params={**task.params, "surface_metrics": True})
    score = CaseScore("c0", {"organ_dice": 0.9, "lesion_dice": 0.5, "lesion_positive": True,
                             "organ_hd95_mm": 3.5, "organ_surface_dice": 0.8,
                             "lesion_hd95_mm": 7.25, "lesion_surface_dice": 0.4})
    block = metric.aggregate(task, [score], ["c0"], tmp_path)
    assert block.components["lesion_hd95_mm"] == pytest.approx(7.25)
    assert block.units == {"organ_hd95_mm": "mm", "lesion_hd95_mm": "mm"}
