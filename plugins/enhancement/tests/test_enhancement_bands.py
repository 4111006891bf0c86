"""Rating bands: the original's construction, and the recompute command agrees with the demo task file."""

from __future__ import annotations

import pytest
from automedbench.testing import stage_task
from automedbench_enhancement import baselines
from automedbench_enhancement.track import EnhancementTrack


def test_bands_from_the_best_classical_baseline():
    table = {"identity": {"ssim": 0.8, "psnr": 30.0}, "nlm": {"ssim": 0.95, "psnr": 40.0}}
    assert baselines.bands(table) == {"good": 0.97, "okay": 0.93, "floor": 0.9, "min_valid": 1.0}
    assert baselines.bands({"x": {"ssim": 0.99, "psnr": 0.0}})["good"] == 1.0  # capped: perfect still rates A


def test_recompute_command_reproduces_the_demo_sr_bands(amb_data_root, capsys):
    stage_task("enhancement/demo-sr", amb_data_root)
    assert baselines.main(["enhancement/demo-sr", "--data-root", str(amb_data_root)]) == 0
    out = capsys.readouterr().out
    task = next(t for t in EnhancementTrack().tasks() if t.id == "enhancement/demo-sr")
    line = next(x for x in out.splitlines() if x.startswith("rating:"))
    # each staging draws its own secret variant of the crops: the bands agree within about 0.01
    measured = dict(part.split(": ") for part in line[len("rating: {"):-1].split(", "))
    assert float(measured["good"]) == pytest.approx(task.rating.good, abs=0.015)
    assert float(measured["floor"]) == pytest.approx(task.rating.floor, abs=0.015)
    assert out.index("identity") < out.index("bicubic") < out.index("zero-filled")  # sorted by SSIM


def test_recompute_command_refuses_an_unknown_or_unstaged_task(tmp_path, capsys):
    assert baselines.main(["enhancement/nope", "--data-root", str(tmp_path)]) == 2
    assert "no enhancement task" in capsys.readouterr().err
    assert baselines.main(["enhancement/ldct", "--data-root", str(tmp_path)]) == 2
    assert "not staged" in capsys.readouterr().err


@pytest.mark.parametrize("task_id", ["enhancement/ldct", "enhancement/mri-sr"])
def test_real_tasks_carry_the_originals_published_bands(task_id):
    task = next(t for t in EnhancementTrack().tasks() if t.id == task_id)
    anchor = {"enhancement/ldct": 0.9663, "enhancement/mri-sr": 0.6132}[task_id]
    assert (task.rating.good, task.rating.okay, task.rating.floor) == pytest.approx(
        (anchor + 0.02, anchor - 0.02, anchor - 0.05))
    assert task.rating.min_valid == 1.0 and task.task_score == "partial"
