"""Red-team round 6: trivial submissions on release task layouts (staged from small files written in the
download's own layout, as the tracks' stager tests do), scored by `automedbench evaluate`.

Each test states what the trivial submission was rated before the fix."""

from __future__ import annotations

import json

import nibabel as nib
import numpy as np
from automedbench.cli import main
from click.testing import CliRunner

SHAPE = (12, 12, 8)
TOTALSEG = ["spleen", "kidney_right", "kidney_left", "gallbladder", "liver", "stomach", "pancreas",
            "adrenal_gland_right", "adrenal_gland_left", "esophagus", "aorta", "inferior_vena_cava",
            "portal_vein_and_splenic_vein", "duodenum"]
# A chest CT whose field of view ends at the upper abdomen (the liver dome, the spleen's tip, the fundus): the
# kidneys, adrenals, gallbladder, pancreas, portal vein and duodenum are below it, their masks empty.
THORAX = {"liver": (slice(0, 6), slice(0, 6), slice(0, 2)), "spleen": (slice(7, 10), slice(0, 3), slice(0, 2)),
          "stomach": (slice(7, 11), slice(4, 8), slice(0, 2)), "esophagus": (slice(5, 7), slice(8, 10), slice(2, 8)),
          "aorta": (slice(8, 10), slice(8, 10), slice(0, 8)),
          "inferior_vena_cava": (slice(2, 4), slice(8, 10), slice(0, 3))}


def _nii(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    nib.save(nib.Nifti1Image(data, np.diag([1.5, 1.5, 3.0, 1.0])), str(path))


def write_totalsegmentator_thorax(root, n: int) -> None:
    """`n` test-split subjects in TotalSegmentator v2's layout (ct.nii.gz, segmentations/<class>.nii.gz, meta.csv)."""
    rows = ["image_id;age;gender;institute;study_type;split"]
    for i in range(n):
        image_id = f"s{i:04d}"
        _nii(root / image_id / "ct.nii.gz",
             np.random.default_rng(i).integers(-1000, 400, SHAPE).astype(np.int16))
        for name in TOTALSEG:
            mask = np.zeros(SHAPE, np.uint8)
            if name in THORAX:
                mask[THORAX[name]] = 1
            _nii(root / image_id / "segmentations" / f"{name}.nii.gz", mask)
        rows.append(f"{image_id};60;m;A;ct thorax;test")
    (root / "meta.csv").write_text("\n".join(rows) + "\n")


def evaluate(data_root, task: str, baseline: str, out) -> dict:
    result = CliRunner().invoke(main, ["evaluate", "--task", task, "--baseline", baseline, "--data-root",
                                       str(data_root), "--out", str(out)])
    assert result.exit_code == 0, result.output
    return json.loads((out / "result.json").read_text())


def test_labels_absent_from_the_field_of_view_do_not_rate_a_blind_label_map(tmp_path):
    """Macro Dice scores a label absent from both sides 1 (the release's rule, kept). On TotalSegmentator chest
    CTs whose field of view ends at the upper abdomen, 8 of the 14 labels are absent, so `constant` (label 1
    everywhere) scored 0.58 and was rated B without segmenting anything. Now the Dice on the structures the
    references contain (a component) must reach the okay band too: the Task stays, the rating was held at C.
    Since red team round 37 a case shows positive evidence only above the all-ones mask's Dice on it, and
    `constant` is that mask for label 1: no case does, so the rating is F (tests/test_caps_omissions.py keeps the
    component's hold)."""
    download = tmp_path / "Totalsegmentator_dataset_v201"
    write_totalsegmentator_thorax(download, 20)
    root = tmp_path / "data"
    staged = CliRunner().invoke(main, ["stage", "segmentation/totalsegmentator", "--from", str(download),
                                       "--data-root", str(root)])
    assert staged.exit_code == 0, staged.output
    blind = evaluate(root, "segmentation/totalsegmentator", "constant", tmp_path / "constant")
    assert blind["task"]["strict"] > 0.5  # the Task is the release's value, unchanged
    assert blind["aggregate"]["rating"] == "F", blind["aggregate"]["rating_reason"]
    assert blind["task"]["components"]["present_dice"] < 0.1
    assert "positive metric evidence" in blind["aggregate"]["rating_reason"]
    perfect = evaluate(root, "segmentation/totalsegmentator", "perfect", tmp_path / "perfect")
    assert perfect["aggregate"]["rating"] == "A" and perfect["task"]["components"]["present_dice"] == 1.0
