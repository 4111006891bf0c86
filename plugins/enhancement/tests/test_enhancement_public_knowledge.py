"""Public-knowledge attackers against a staged low-dose CT task (issue 35): programs that read only what an
agent can (the task file, the package source, the staged inputs), never a reference.

On main the noise added to case i was the documented model drawn with the task file's seed + i: an agent that
recomputed it and subtracted it scored SSIM 1.0 (rating A). Now the noise is the staging secret's: subtracting
any field a public seed gives, even the best of many tried per case, scores below the noisy input itself."""

from __future__ import annotations

import sys
from pathlib import Path

import attrs
import numpy as np
import pytest
from automedbench.testing import evaluate_outputs, load_task, stage_from_folder

sys.path.insert(0, str(Path(__file__).parent))
import release_layouts as layouts  # a helper module beside the tests (tests/ is not a package)

pytest.importorskip("skimage")

TASK = "enhancement/lidc-idri-denoising"
OLD_SEED = 20261205  # the seed main's task file published
TRIED = 12  # public seeds tried per case by the searching attacker


def subtract(task, low: np.ndarray, seed: int) -> np.ndarray:
    from automedbench_enhancement.data import degrade

    noise = degrade.nps_noise(low.shape, float(task.params["sigma_hu"]), seed, degrade.body_mask(low))
    return low - noise


def roughness(image: np.ndarray) -> float:
    """High-frequency energy: what subtracting the right noise field removes (no reference needed)."""
    return float(np.mean(np.diff(image, axis=0) ** 2) + np.mean(np.diff(image, axis=1) ** 2))


def attack(task, public: Path, dest: Path, search: bool) -> Path:
    for i, case in enumerate(sorted(p.name for p in public.iterdir() if p.is_dir())):
        low = np.load(public / case / "input.npy").astype(np.float64)
        seeds = [OLD_SEED + k for k in range(TRIED)] if search else [OLD_SEED + i]
        best = min((subtract(task, low, seed) for seed in seeds), key=roughness)
        (dest / case).mkdir(parents=True, exist_ok=True)
        np.save(dest / case / "enhanced.npy", best.astype(np.float32))
    return dest


@pytest.mark.slow  # stages and scores eight 512x512 slices three times, and tries 12 noise fields per case (~1 min)
def test_recomputing_the_noise_from_a_public_seed_scores_below_the_input(tmp_path):
    layouts.write_lidc(tmp_path / "download", 8)
    track, task = load_task(TASK)
    small = attrs.evolve(task, case_count=8)
    staged = stage_from_folder(track, small, tmp_path / "root", tmp_path / "download")
    identity = evaluate_outputs(TASK, baseline="identity", data_root=tmp_path / "root",
                                work=tmp_path / "identity").task.partial
    for search in (False, True):
        submission = attack(small, staged.public, tmp_path / f"attack-{search}", search)
        result = evaluate_outputs(TASK, submission=submission, data_root=tmp_path / "root",
                                  work=tmp_path / f"eval-{search}")
        assert result.task.components["valid_cases"] == 8
        assert result.task.partial < identity, (search, result.task.partial, identity)
        assert result.aggregate.rating not in ("A", "B")
