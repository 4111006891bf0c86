"""The demo is staged from a fresh secret seed each time: the reference method must hold on every draw.

Seeds found by a scan where the spine's blurred rim (in the kidney HU band) outgrew a tumour-bearing kidney
and was taken as a kidney: lesion Dice 0, organ Dice ~0.4, so the reference drew E3 on some stagings only.
"""

from __future__ import annotations

import numpy as np
import pytest
from automedbench.testing import load_solution_script, load_task
from automedbench_segmentation.data import phantom

RIM_SEEDS = [938271688801978709, 2957604150843690760, 3779861080891881743]


def _dice(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a > 0, b > 0
    return 2.0 * float((a & b).sum()) / max(float(a.sum() + b.sum()), 1.0)


@pytest.mark.parametrize("seed", RIM_SEEDS + [int(s) for s in np.random.default_rng(7).integers(0, 2**62, 3)])
def test_reference_method_finds_both_kidneys_and_the_tumour_on_every_draw(seed):
    method = load_solution_script("automedbench_segmentation", "method")
    for index in range(5):  # any case may carry the tumour: which one has none is drawn per staging
        ct, organ, lesion = phantom.make_case(index, True, seed)
        got_organ, got_lesion = method.segment(ct)
        assert _dice(got_organ, organ) > 0.9, (seed, index)
        assert _dice(got_lesion, lesion) > 0.3, (seed, index)


def test_which_case_is_tumour_free_follows_the_seed_not_the_task_file(tmp_path):
    """The case ids are fixed (case_000...): a task file naming the tumour-free case told the agent whose lesion
    mask to leave empty. The staging's seed draws it now; the task file keeps only the count."""
    import attrs
    from automedbench_segmentation.data.demo import stage_demo
    from automedbench_segmentation.io import read_case_facts

    _, task = load_task("segmentation/demo")
    assert "tumour_free_cases" not in task.params and task.params["tumour_free_count"] == 1
    drawn = set()
    for seed in (11, 12, 13, 14, 15, 16):
        staged = stage_demo(attrs.evolve(task, params={**task.params, "seed": seed}), tmp_path / str(seed))
        free = sorted(c for c, f in read_case_facts(staged.private).items() if not f["lesion_present"])
        assert len(free) == 1, (seed, free)
        drawn.add(free[0])
    assert len(drawn) > 1  # six secrets, one case each: not always the same one
