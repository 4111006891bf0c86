"""The metric against scikit-image, a hand-written SSIM and hand-computed cases; the fold's completion adjustment."""

from __future__ import annotations

import math

import numpy as np
import pytest
from automedbench.api import CaseScore
from automedbench_synthesis.metric import DATA_RANGE, axial_ssim, errors, fold


def hand_ssim(a: np.ndarray, b: np.ndarray, r: float, win: int = 7) -> float:
    """SSIM written out: uniform win x win means, sample (co)variances, K1 0.01, K2 0.03, border cropped."""
    from scipy.ndimage import uniform_filter

    a, b = a.astype(np.float64), b.astype(np.float64)
    n = win * win
    mu_a, mu_b = uniform_filter(a, win), uniform_filter(b, win)
    cov = n / (n - 1)
    va = cov * (uniform_filter(a * a, win) - mu_a ** 2)
    vb = cov * (uniform_filter(b * b, win) - mu_b ** 2)
    vab = cov * (uniform_filter(a * b, win) - mu_a * mu_b)
    c1, c2 = (0.01 * r) ** 2, (0.03 * r) ** 2
    s = ((2 * mu_a * mu_b + c1) * (2 * vab + c2)) / ((mu_a ** 2 + mu_b ** 2 + c1) * (va + vb + c2))
    p = (win - 1) // 2
    return float(s[p:-p, p:-p].mean())


def volumes(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    ref = rng.normal(0, 300, (40, 36, 9)).cumsum(axis=0)  # structure, and values beyond the clip window
    return ref, ref + rng.normal(0, 400, ref.shape)


def test_axial_ssim_equals_scikit_image_and_a_hand_written_ssim():
    from skimage.metrics import structural_similarity

    ref, pred = volumes()
    ours = axial_ssim(ref, pred)["ssim"]
    rc, pc = np.clip(ref, -1024, 3071), np.clip(pred, -1024, 3071)
    sk = np.mean([structural_similarity(rc[:, :, k], pc[:, :, k], data_range=4095) for k in range(9)])
    hand = np.mean([hand_ssim(rc[:, :, k], pc[:, :, k], 4095.0) for k in range(9)])
    assert ours == pytest.approx(sk, abs=1e-12) and ours == pytest.approx(hand, abs=1e-7)
    assert 0.2 < ours < 0.99


def test_constant_planes_give_the_luminance_term_by_hand():
    ref, pred = np.full((16, 16, 3), 100.0), np.full((16, 16, 3), 300.0)
    c1 = (0.01 * DATA_RANGE) ** 2
    expected = (2 * 100 * 300 + c1) / (100 ** 2 + 300 ** 2 + c1)  # zero variances: the structure term is 1
    assert axial_ssim(ref, pred)["ssim"] == pytest.approx(expected, abs=1e-12)
    # clipping: -5000 and -1024 are the same after the HU window
    assert axial_ssim(np.full((16, 16, 2), -1024.0), np.full((16, 16, 2), -5000.0))["ssim"] == 1.0


def test_mask_rules_all_ones_mask_equals_unmasked_and_sparse_planes_are_skipped():
    ref, pred = volumes(1)
    ones = np.ones(ref.shape, dtype=np.uint8)
    assert axial_ssim(ref, pred, ones)["ssim"] == pytest.approx(axial_ssim(ref, pred)["ssim"], abs=1e-12)
    mask = np.zeros(ref.shape, dtype=np.uint8)
    mask[10:30, 8:28, 2] = 1  # only plane 2 has >= 16 mask voxels
    mask[10:13, 8:13, 5] = 1  # 15 voxels: skipped
    from skimage.metrics import structural_similarity

    rc, pc = np.clip(ref, -1024, 3071), np.clip(pred, -1024, 3071)
    _, smap = structural_similarity(rc[:, :, 2], pc[:, :, 2], data_range=4095, full=True)
    out = axial_ssim(ref, pred, mask)
    assert out["ssim"] == pytest.approx(float(smap[10:30, 8:28].mean()), abs=1e-12)
    assert out["ssim_full_plane"] == pytest.approx(structural_similarity(rc[:, :, 2], pc[:, :, 2], data_range=4095))
    assert axial_ssim(np.zeros((6, 40, 3)), np.zeros((6, 40, 3)))["ssim"] is None  # planes under 7 px: none scored


def test_errors_by_hand():
    ref = np.zeros((4, 4, 2))
    pred = ref.copy()
    pred[0, 0, 0] = 4095.0  # one voxel off by the full range, unclipped
    e = errors(ref, pred)
    assert e["mae_hu"] == pytest.approx(4095 / 32) and e["rmse_hu"] == pytest.approx(4095 / math.sqrt(32))
    assert e["psnr"] == pytest.approx(10 * math.log10(4095 ** 2 / ((3071 ** 2) / 32)))  # clipped to 3071
    mask = np.zeros(ref.shape)
    mask[1:, 1:, :] = 1  # the bad voxel outside the mask: no error inside it
    assert errors(ref, pred, mask)["mae_hu"] == 0.0 and errors(ref, pred, mask)["psnr"] is None
    assert errors(ref, ref)["psnr"] is None  # perfect: left out of the mean


def test_fold_is_completion_adjusted_and_reports_the_gain_over_the_input():
    ids = ["a", "b", "c", "d"]
    scores = [CaseScore("a", {"ssim": 0.9}), None, CaseScore("c", {"ssim": 0.8}), None]
    block = fold(scores, ids, {"a": 0.7, "b": 0.7, "c": 0.7, "d": 0.7})
    assert block.partial == pytest.approx(0.85 * 2 / 4) and block.strict == 0.0
    assert block.components["ssim_identity_mean"] == pytest.approx(0.7)
    assert block.components["gain_over_input"] == pytest.approx(0.425 - 0.7)
    full = fold([CaseScore(i, {"ssim": 1.2 if i == "a" else 0.95}) for i in ids], ids, {})
    assert full.partial == full.strict == pytest.approx(min(1.0, (1.2 + 3 * 0.95) / 4))  # clipped to [0, 1]
    assert fold([CaseScore("a", {"ssim": -0.5})], ["a"], {}).partial == 0.0


def _random_pair(rng, shape, fortran):
    """A reference with structure and values beyond the HU window, a prediction near it, some planes equal."""
    ref = rng.normal(300, 900, shape).cumsum(axis=0).astype(np.float32)
    pred = (ref + rng.normal(0, 250, shape)).astype(np.float32)
    pred[:, :, ::3] = ref[:, :, ::3]  # planes equal to the reference's (CT-SR's kept slices)
    if fortran:  # how nibabel hands volumes over
        ref, pred = np.asfortranarray(ref), np.asfortranarray(pred)
    return ref, pred


def _reference_errors(ref, pred, mask, with_sklearn: bool) -> dict[str, float]:
    """The same three numbers from the libraries, on the voxels inside the mask (all without one)."""
    from skimage.metrics import mean_squared_error, peak_signal_noise_ratio

    roi = mask > 0 if mask is not None and mask.any() else np.ones(ref.shape, dtype=bool)
    r, p = ref[roi].astype(np.float64), pred[roi].astype(np.float64)
    psnr = peak_signal_noise_ratio(np.clip(r, -1024, 3071), np.clip(p, -1024, 3071), data_range=DATA_RANGE)
    if not with_sklearn:
        return {"rmse_hu": math.sqrt(mean_squared_error(r, p)), "psnr": psnr}
    from sklearn.metrics import mean_absolute_error, root_mean_squared_error

    return {"mae_hu": mean_absolute_error(r, p), "rmse_hu": root_mean_squared_error(r, p), "psnr": psnr}


def _check_errors_against_libraries(with_sklearn: bool) -> None:
    rng = np.random.default_rng(11)
    for trial in range(40):
        ref, pred = _random_pair(rng, tuple(int(n) for n in rng.integers(2, 30, 3)), fortran=trial % 4 < 2)
        mask = (rng.random(ref.shape) > 0.5).astype(np.uint8) if trial % 2 else None
        ours = errors(ref, pred, mask)
        for name, value in _reference_errors(ref, pred, mask, with_sklearn).items():
            # the sums run in memory order, the libraries' in C order: equal to the last printed digit
            assert ours[name] == pytest.approx(float(value), rel=1e-13, abs=0), (trial, name)
            assert f"{ours[name]:.12g}" == f"{float(value):.12g}", (trial, name)


def test_errors_equal_scikit_image_on_random_volumes():
    """RMSE (the root of scikit-image's MSE) and PSNR as scikit-image computes it on the clipped volumes, inside a
    mask and without one, C- and Fortran-ordered volumes (nibabel hands over the latter)."""
    _check_errors_against_libraries(with_sklearn=False)


@pytest.mark.slow  # importing sklearn.metrics takes 3-4 CPU-s (25 s wall on a loaded 2-core machine)
def test_errors_equal_scikit_learn_and_scikit_image_on_random_volumes():
    """MAE and RMSE as scikit-learn computes them, PSNR as scikit-image does."""
    pytest.importorskip("sklearn")
    _check_errors_against_libraries(with_sklearn=True)


def test_errors_skip_clipping_only_when_nothing_is_clipped():
    """The shortcut (no clipped copy when both volumes lie inside the HU window) gives the clipped value when one
    voxel leaves the window on either side, including through a stale reference range."""
    ref = np.zeros((4, 4, 2), dtype=np.float32)
    pred = ref.copy()
    pred[1, 1, 1] = 5000.0  # beyond 3071: PSNR sees 3071
    psnr = 10 * math.log10(4095 ** 2 / (3071 ** 2 / 32))
    assert errors(ref, pred)["psnr"] == pytest.approx(psnr)
    assert errors(ref, pred, reference_range=(0.0, 0.0))["psnr"] == pytest.approx(psnr)
    assert errors(pred, ref, reference_range=(0.0, 5000.0))["psnr"] == pytest.approx(psnr)


@pytest.mark.parametrize("fortran", [False, True])
def test_axial_ssim_is_scikit_image_bit_for_bit_with_and_without_kept_terms(fortran):
    """Every plane's value equal (==) to scikit-image's, planes equal to the reference's included (they skip the
    filtering), masked or not, terms kept for reuse or made plane by plane."""
    from automedbench_synthesis.axialssim import AxialSSIM
    from skimage.metrics import structural_similarity

    rng = np.random.default_rng(5)
    for trial in range(12):
        ref, pred = _random_pair(rng, (int(rng.integers(7, 40)), int(rng.integers(7, 40)), 7), fortran)
        mask = (rng.random(ref.shape) > 0.3).astype(np.uint8) if trial % 2 else None
        rc, pc = (np.clip(np.asarray(v, dtype=np.float64), -1024, 3071) for v in (ref, pred))
        full, masked = [], []
        for k in range(ref.shape[2]):
            value, smap = structural_similarity(rc[:, :, k], pc[:, :, k], data_range=4095, full=True)
            full.append(value)
            if mask is not None:
                inside = np.zeros(ref.shape[:2], dtype=bool)
                inside[3:-3, 3:-3] = mask[3:-3, 3:-3, k] > 0
                if np.count_nonzero(mask[:, :, k]) >= 16:
                    masked.append(smap[inside].mean() if inside.any() else value)
        kept, made = AxialSSIM(ref, mask, -1024, 3071, keep=True), AxialSSIM(ref, mask, -1024, 3071)
        for ssim in (kept, made):
            out = ssim(pred)
            planes = [full[k] for k in ssim.planes]
            assert out["ssim_full_plane"] == float(np.mean(planes))
            assert out["ssim"] == (float(np.mean(masked)) if mask is not None else float(np.mean(full)))
        assert kept(ref)["ssim"] == 1.0  # every plane equal: exactly scikit-image's 1.0


@pytest.mark.parametrize("dtype", ["<i2", ">f4", "<f8", "<f2", "<u2"])
def test_axial_ssim_is_scikit_image_bit_for_bit_for_any_voxel_type(dtype):
    """Volumes of other voxel types (what an output or a target may hold: integers, half, double, big-endian) give
    scikit-image's value (==) on the same voxels converted to float64, then clipped (its order), prediction and
    reference alike, in either memory order; a plane equal to the reference's only after clipping scores 1.0."""
    from automedbench_synthesis.axialssim import AxialSSIM
    from skimage.metrics import structural_similarity

    rng = np.random.default_rng(11)
    info = np.iinfo(dtype) if np.dtype(dtype).kind in "iu" else np.finfo(dtype)
    lo, hi = max(float(info.min), -5000.0), min(float(info.max), 5000.0)
    for fortran in (False, True):
        ref, pred = (np.clip(v, lo, hi).astype(dtype) for v in _random_pair(rng, (23, 17, 6), fortran))
        if fortran:
            ref, pred = np.asfortranarray(ref), np.asfortranarray(pred)
        rc, pc = (np.clip(np.asarray(v, dtype=np.float64), -1024, 3071) for v in (ref, pred))
        expected = float(np.mean([structural_similarity(rc[:, :, k], pc[:, :, k], data_range=4095)
                                  for k in range(ref.shape[2])]))
        for keep in (True, False):
            assert AxialSSIM(ref, None, -1024, 3071, keep=keep)(pred)["ssim_full_plane"] == expected
    if np.dtype(dtype).kind != "u":  # beyond the window on both sides, differently: equal once clipped
        below = np.full((9, 8, 1), -3000, dtype=dtype)
        assert AxialSSIM(below, None, -1024, 3071)(np.full((9, 8, 1), -2000, dtype=dtype))["ssim"] == 1.0


def test_a_warm_evaluation_decodes_each_output_once_and_rereads_a_changed_reference(tmp_path, monkeypatch):
    """The checker's decode serves the scorer; the staged target is decoded once per file version (a restaged
    file is read again, never served stale); the input-copy fact matches np.array_equal."""
    import nibabel as nib
    from automedbench.api import StagedData
    from automedbench_synthesis import contract, refcache
    from automedbench_synthesis.metric import SynthesisEvaluation
    from automedbench_synthesis.track import SynthesisTrack

    task = next(t for t in SynthesisTrack().tasks() if t.id == "synthesis/demo")
    rng = np.random.default_rng(2)
    affine = np.diag([0.8, 0.8, 1.0, 1.0])
    root, cases = tmp_path / "task", ["c1", "c2"]
    volumes = {}
    for case in cases:
        target = np.rint(rng.normal(0, 400, (24, 20, 9))).astype(np.int16)
        low = target.astype(np.float32)
        low[:, :, 1::2] += 7.0
        volumes[case] = (target, low)
        for sub, name, data in (("private", "target.nii.gz", target), ("public", "ct.nii.gz", low)):
            (root / sub / case).mkdir(parents=True, exist_ok=True)
            nib.save(nib.Nifti1Image(data, affine), str(root / sub / case / name))
        out = tmp_path / "sub" / case
        out.mkdir(parents=True)
        prediction = low if case == "c1" else low + np.float32(1.0)  # c1 submits its input unchanged
        nib.save(nib.Nifti1Image(prediction, affine), str(out / "sct.nii.gz"))
    staged = StagedData(root, root / "public", root / "private", cases)
    refcache.clear()
    decoded, loaded = [], []
    monkeypatch.setattr(contract, "parse_nifti", lambda *a, real=contract.parse_nifti: decoded.append(1) or real(*a))
    import automedbench_synthesis.data.store as store

    monkeypatch.setattr(store, "load_private", lambda *a, real=store.load_private: loaded.append(a[1]) or real(*a))
    track = SynthesisTrack()

    def evaluate():
        evaluation = SynthesisEvaluation(task, staged)
        rows = []
        for case in cases:
            assert track.check_case(task, case, tmp_path / "sub" / case, root / "public" / case).valid
            rows.append(evaluation.score_case(case, tmp_path / "sub" / case).values)
        return rows

    first = evaluate()
    assert len(decoded) == 2 and loaded == cases  # one decode per output, one read per target
    assert [r["same_as_input"] for r in first] == [True, False]
    assert evaluate() == first and len(decoded) == 4 and loaded == cases  # warm: the targets are not read again
    target, _ = volumes["c2"]
    nib.save(nib.Nifti1Image((target + 50).astype(np.int16), affine), str(root / "private" / "c2" / "target.nii.gz"))
    again = evaluate()
    assert loaded == [*cases, "c2"] and again[0] == first[0] and again[1] != first[1]


def test_the_input_copy_fact_is_array_equal_whatever_the_layout_or_the_sign_of_zero():
    from automedbench_synthesis.refcache import Voxels

    rng = np.random.default_rng(4)
    volume = rng.normal(0, 100, (30, 20, 12)).astype(np.float32)
    volume[0, 0, 0] = 0.0
    seen = Voxels.of(volume)
    negative_zero = volume.copy()
    negative_zero[0, 0, 0] = -0.0
    one_off = volume.copy()
    one_off[17, 3, 5] += 1.0  # (almost surely) not one of the sampled voxels: the digest decides
    for other, expected in ((np.asfortranarray(volume), True), (negative_zero, True), (one_off, False),
                            (volume[:, :, :11], False), (volume + 1, False)):
        assert seen.equal(other) is expected == bool(np.array_equal(volume, other))
