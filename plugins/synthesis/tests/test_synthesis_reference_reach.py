"""Conformance: no file a sandbox can read gives away the synthesis track's demo references (the same bytes, the
same long text, or an image closer to a reference than the case's own input), whatever the staging's seed."""

from __future__ import annotations

import pytest
from automedbench.testing import reference_leaks

DEMOS = ["synthesis/demo", "synthesis/demo-mrct"]


@pytest.mark.parametrize("task_id", DEMOS)
def test_no_sandbox_readable_file_reveals_a_reference(task_id, amb_data_root):
    assert reference_leaks(task_id, amb_data_root) == []


@pytest.mark.slow  # stages the MRI -> CT demo (four warped MNI152 heads) and builds the template's own head
def test_the_shipped_template_alone_does_not_rebuild_the_mrct_references(amb_data_root):
    """nilearn ships the MNI152 template into the sandbox's Python. Mapped through the demo's own tissue -> HU
    table but without the staging's secret warp and shell thicknesses, it stays far below the B band: the
    reference is out of reach of the shipped template alone."""
    from automedbench.testing import stage_task
    from automedbench_synthesis.data.mni import head_case
    from automedbench_synthesis.data.store import load_private
    from automedbench_synthesis.metric import score_pair
    from automedbench_synthesis.track import SynthesisTrack

    spec = next(t for t in SynthesisTrack().tasks() if t.id == "synthesis/demo-mrct")
    staged = stage_task(spec.id, amb_data_root)
    shape, spacing = tuple(spec.params["shape"]), tuple(spec.params["spacing_mm"])
    atlas = head_case(shape, spacing, seed=0, strength=0.0)[0]  # the template centred, unwarped
    scores = []
    for case in staged.case_ids:
        target, mask, _ = load_private(staged.private, case)
        assert atlas.shape == target.shape
        scores.append(score_pair(target, atlas, mask)["ssim"])
    assert max(scores) < spec.rating.okay - 0.1, scores
