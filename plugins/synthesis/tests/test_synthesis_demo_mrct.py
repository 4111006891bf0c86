"""synthesis/demo-mrct reads nilearn's bundled MNI152 files itself rather than through `nilearn.datasets` (whose
import costs ~1.7 CPU-s a staging): its maps must be nilearn's own, value for value."""

from __future__ import annotations

import numpy as np
import pytest
from automedbench_synthesis.data import mni


@pytest.mark.slow  # imports nilearn.datasets (scikit-learn) and resamples the 1 mm template twice: ~8 CPU-s
@pytest.mark.parametrize("resolution", [2, 3])
def test_template_maps_are_nilearns(resolution, tmp_path, monkeypatch):
    monkeypatch.setenv("NILEARN_DATA", str(tmp_path))  # nothing lands under ~
    from nilearn.datasets import (
        load_mni152_brain_mask,
        load_mni152_gm_template,
        load_mni152_template,
        load_mni152_wm_template,
    )

    theirs = {"t1": load_mni152_template(resolution=resolution), "gm": load_mni152_gm_template(resolution=resolution),
              "wm": load_mni152_wm_template(resolution=resolution),
              "brain": load_mni152_brain_mask(resolution=resolution)}
    ours, voxel = mni.template_maps.__wrapped__(resolution)
    assert voxel == abs(theirs["t1"].affine[0, 0]) == resolution
    for name, image in theirs.items():
        want = np.asarray(image.get_fdata(), dtype=np.float32)
        assert ours[name].dtype == np.float32 and ours[name].shape == want.shape, name
        assert np.array_equal(ours[name], want), (name, float(np.abs(ours[name] - want).max()))


def test_the_template_is_read_without_importing_nilearn():
    """The demo's maps come from the installed nilearn's files, found without running its package."""
    import subprocess
    import sys

    code = ("import sys\nfrom automedbench_synthesis.data import mni\nmaps, voxel = mni.template_maps(2)\n"
            "assert voxel == 2.0 and maps['t1'].shape == (99, 117, 95), (voxel, maps['t1'].shape)\n"
            "assert 0.1 < float(maps['brain'].mean()) < 0.4 and float(maps['t1'].max()) <= 1.0\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('nilearn', 'sklearn')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
