"""The demos: real CT/MR images from pip packages, deterministic, the declared shapes and noise level."""

from __future__ import annotations

import attrs
import numpy as np
import pytest
from automedbench.testing import stage_task
from automedbench_enhancement.data import degrade, demo


@pytest.fixture(scope="module")
def ldct(amb_data_root):
    return stage_task("enhancement/demo-ldct", amb_data_root)


@pytest.fixture(scope="module")
def sr(amb_data_root):
    return stage_task("enhancement/demo-sr", amb_data_root)


def test_ldct_demo_is_real_ct_with_100_hu_noise(ldct):
    assert ldct.case_ids == [f"ldct_{i:03d}" for i in range(1, 7)]
    noise = []
    for case in ldct.case_ids:
        low = np.load(ldct.public / case / "input.npy")
        ref = np.load(ldct.private / case / "reference.npy")
        assert low.shape == ref.shape == (512, 512) and low.dtype == ref.dtype == np.float32
        assert ref.min() >= -1024 and ref.max() > 1000  # HU with bone
        noise.append(float((low - ref)[ref > -500].std()))
    assert 85 < np.mean(noise) < 115
    assert not any(p.name == "reference.npy" for p in ldct.public.rglob("*"))
    # case 4 comes from case 1's slice mirrored, but each reference is its own secret variant of the slice
    r1, r4 = (np.load(ldct.private / c / "reference.npy") for c in ("ldct_001", "ldct_004"))
    assert not np.array_equal(r1[:, ::-1], r4) and np.corrcoef(r1[:, ::-1].ravel(), r4.ravel())[0, 1] > 0.5
    shipped = np.clip(demo.read_dicom("explicit_VR-UN.dcm")[0], *demo.HU_CLIP)
    assert np.abs(r1 - shipped).mean() > 30  # HU: not the shipped slice


def test_sr_demo_is_kspace_truncation_of_real_mr(sr):
    assert len(sr.case_ids) == 4
    for case in sr.case_ids:
        low = np.load(sr.public / case / "input.npy")
        ref = np.load(sr.private / case / "reference.npy")
        assert low.shape == (360, 256) and ref.shape == (720, 512)
        assert ref.min() >= 0 and ref.max() <= 1 and ref.std() > 0.05
        assert np.allclose(low, np.clip(degrade.kspace_down(ref.astype(np.float64)), 0, 1), atol=1e-6)


def test_demo_is_deterministic_for_one_seed(tmp_path):
    """Same seed, same bytes. (The harness itself stages every demo with a fresh secret seed, so that the
    generator in the sandbox cannot rebuild references; the staging stamp decides when to stage again.)"""
    from automedbench_enhancement.track import EnhancementTrack

    track = EnhancementTrack()
    task = next(t for t in track.tasks() if t.id == "enhancement/demo-ldct")
    first = track.stage_demo(task, tmp_path / "first")
    fresh = track.stage_demo(task, tmp_path / "fresh")
    for case in first.case_ids:
        assert (fresh.public / case / "input.npy").read_bytes() == (first.public / case / "input.npy").read_bytes()


def test_a_failed_staging_leaves_nothing_half_made(tmp_path):
    from automedbench_enhancement.track import EnhancementTrack

    task = next(t for t in EnhancementTrack().tasks() if t.id == "enhancement/demo-sr")
    broken = attrs.evolve(task, params={**task.params, "source": "no_such_file.dcm"})
    with pytest.raises(Exception, match="no_such_file"):
        demo.stage_demo(broken, tmp_path / "t")
    assert not (tmp_path / "t" / "public").exists() and not (tmp_path / "t" / ".incoming").exists()


def test_sinogram_noise_mode_is_correlated_ct_noise():
    """Poisson noise in a radon sinogram, reconstructed with the ramp filter: zero-mean, scales with 1/sqrt(I0)."""
    yy, xx = np.mgrid[:96, :96]
    hu = np.where((yy - 47.5) ** 2 + (xx - 47.5) ** 2 < 35 ** 2, 40.0, -1000.0)
    strong = degrade.sinogram_noise(hu, 1.0, 1e4, 90, seed=1)
    weak = degrade.sinogram_noise(hu, 1.0, 4e4, 90, seed=1)
    body = hu > 0
    assert abs(strong[body].mean()) < 0.2 * strong[body].std()
    assert strong[body].std() / weak[body].std() == pytest.approx(2.0, rel=0.25)
    low = degrade.low_dose(hu, {"noise": "sinogram", "i0": 1e4, "views": 90}, 1, 1.0)
    assert np.allclose(low - hu, strong)


def test_nps_noise_has_the_declared_level_and_a_ramp_spectrum():
    noise = degrade.nps_noise((256, 256), 100.0, seed=3)
    assert noise.std() == pytest.approx(100.0, rel=1e-6)
    power = np.abs(np.fft.fft2(noise)) ** 2
    f = np.hypot(np.fft.fftfreq(256)[:, None], np.fft.fftfreq(256)[None, :])
    low_band, mid_band = power[(f > 0.02) & (f < 0.05)].mean(), power[(f > 0.12) & (f < 0.18)].mean()
    assert power[0, 0] < 1e-6 * power.mean() and mid_band > 3 * low_band  # ramp: no DC, rising with frequency
    assert power[f > 0.36].max() == pytest.approx(0.0, abs=1e-12)  # Hann roll-off to zero past the cut
