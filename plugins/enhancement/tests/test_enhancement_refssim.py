"""The evaluator's SSIM with the reference's share kept between evaluations: the same bits as scikit-image's,
and never a cached value for a reference or input that is not the one just read."""

from __future__ import annotations

import numpy as np
import pytest
from automedbench_enhancement import metric, refssim


@pytest.fixture(autouse=True)
def empty_cache():
    refssim._CACHE.clear()
    yield
    refssim._CACHE.clear()


@pytest.mark.parametrize(("shape", "lo", "hi", "dtype"), [((256, 384), -1024.0, 3071.0, np.float32),
                                                        ((96, 64), -160.0, 240.0, np.float64),
                                                        ((11, 13), 0.0, 1.0, np.float32)])
def test_values_are_bit_identical_to_the_metrics_ssim(shape, lo, hi, dtype):
    rng = np.random.default_rng(11)
    for _ in range(3):
        ref = rng.uniform(lo - 0.1 * (hi - lo), hi + 0.1 * (hi - lo), shape).astype(dtype)  # some clipped
        pred = (ref + rng.normal(0, 0.05 * (hi - lo), shape)).astype(np.float32)
        scorer = refssim.ReferenceSSIM(ref, lo, hi)
        for other in (pred, ref, np.full(shape, lo), np.zeros(shape, dtype=np.float64)):
            assert scorer(other) == metric.ssim(ref, other, lo, hi)  # equality, not closeness


def test_a_restaged_reference_on_the_same_path_is_recomputed():
    rng = np.random.default_rng(12)
    first, second = rng.random((40, 40)), rng.random((40, 40))
    pred = rng.random((40, 40))
    assert refssim.for_reference("/p/ref.npy", first, 0, 1)(pred) == metric.ssim(first, pred, 0, 1)
    changed = first.copy()
    changed[20, 20] += 1e-9  # one element, barely: still a different reference
    for ref in (second, changed, first):
        assert refssim.for_reference("/p/ref.npy", ref, 0, 1)(pred) == metric.ssim(ref, pred, 0, 1)
    # same values in another dtype are another array as read: not served from the float64 entry
    as32 = first.astype(np.float32)
    assert refssim.for_reference("/p/ref.npy", as32, 0, 1)(pred) == metric.ssim(as32, pred, 0, 1)


def test_the_identity_baseline_is_kept_only_for_the_same_input(monkeypatch):
    rng = np.random.default_rng(13)
    ref, low, other = rng.random((30, 30)), rng.random((30, 30)), rng.random((30, 30))
    expected, expected_other = metric.ssim(ref, low, 0, 1), metric.ssim(ref, other, 0, 1)
    assert refssim.for_reference("/p/ref.npy", ref, 0, 1).of_identity(low) == expected
    calls = []
    original = refssim.ReferenceSSIM.__call__
    monkeypatch.setattr(refssim.ReferenceSSIM, "__call__", lambda self, p: calls.append(1) or original(self, p))
    assert refssim.for_reference("/p/ref.npy", ref.copy(), 0, 1).of_identity(low.copy()) == expected
    assert calls == []  # served from the cache: an equal reference and an equal input
    assert refssim.for_reference("/p/ref.npy", ref, 0, 1).of_identity(other) == expected_other
    assert calls == [1]


def test_the_cache_is_bounded_and_keyed_by_window():
    rng = np.random.default_rng(14)
    ref, pred = rng.uniform(-1024, 3071, (24, 24)), rng.uniform(-1024, 3071, (24, 24))
    full = refssim.for_reference("/p/a.npy", ref, -1024, 3071)(pred)
    soft = refssim.for_reference("/p/a.npy", ref, -160, 240)(pred)
    assert (full, soft) == (metric.ssim(ref, pred, -1024, 3071), metric.ssim(ref, pred, -160, 240))
    for i in range(refssim.MAX_ENTRIES + 5):
        refssim.for_reference(f"/p/{i}.npy", ref, 0, 1)
    assert len(refssim._CACHE) == refssim.MAX_ENTRIES
    assert ("/p/a.npy", -1024.0, 3071.0) not in refssim._CACHE  # the least recently used went first


def test_wrong_shapes_and_tiny_images_are_refused_like_scikit_image():
    ref = np.zeros((20, 20))
    with pytest.raises(ValueError):
        refssim.ReferenceSSIM(ref, 0, 1)(np.zeros((20, 21)))
    with pytest.raises(ValueError):
        refssim.ReferenceSSIM(np.zeros((10, 40)), 0, 1)
    with pytest.raises(ValueError):
        metric.ssim(np.zeros((10, 40)), np.zeros((10, 40)), 0, 1)


def test_the_evaluation_rescores_a_changed_reference_and_input_on_the_same_paths(amb_data_root, tmp_path):
    """Through EnhancementEvaluation, as the warm evaluator calls it: a second evaluation of the same case
    gives the same values; a reference or input rewritten in place (a restaging) is scored afresh."""
    import shutil

    from automedbench.api import StagedData
    from automedbench.testing import stage_task
    from automedbench_enhancement import contract
    from automedbench_enhancement.track import EnhancementTrack

    staged = stage_task("enhancement/demo-sr", amb_data_root)
    shutil.copytree(staged.root, tmp_path / "copy")
    copy = StagedData(tmp_path / "copy", tmp_path / "copy" / "public", tmp_path / "copy" / "private", staged.case_ids)
    task = next(t for t in EnhancementTrack().tasks() if t.id == "enhancement/demo-sr")
    case = copy.case_ids[0]
    ref_file, low_file = copy.private / case / contract.REFERENCE, copy.public / case / contract.INPUT
    ref, low = np.load(ref_file), np.load(low_file)
    out = tmp_path / "sub" / case
    out.mkdir(parents=True)
    rng = np.random.default_rng(15)
    np.save(out / contract.OUTPUT, np.clip(ref + rng.normal(0, 0.05, ref.shape), 0, 1).astype(np.float32))
    pred = np.load(out / contract.OUTPUT)

    def scored() -> dict:
        return metric.EnhancementEvaluation(task, copy).score_case(case, out).values

    first = scored()
    assert scored() == first
    identity = np.repeat(np.repeat(low, 2, axis=0), 2, axis=1)
    assert first["ssim"] == metric.ssim(ref, pred, 0, 1) and first["ssim_identity"] == metric.ssim(ref, identity, 0, 1)
    new_ref = np.clip(ref[::-1] + 0.01, 0, 1).astype(ref.dtype)
    np.save(ref_file, new_ref)
    again = scored()
    assert again["ssim"] == metric.ssim(new_ref, pred, 0, 1) != first["ssim"]
    assert again["ssim_identity"] == metric.ssim(new_ref, identity, 0, 1)
    new_low = np.clip(low * 0.9, 0, 1).astype(low.dtype)
    np.save(low_file, new_low)
    new_identity = np.repeat(np.repeat(new_low, 2, axis=0), 2, axis=1)
    assert scored()["ssim_identity"] == metric.ssim(new_ref, new_identity, 0, 1) != again["ssim_identity"]
