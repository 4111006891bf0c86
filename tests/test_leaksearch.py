"""The leak search behind `automedbench.testing.reference_leaks`: each way a readable file can give a
reference away is found (same bytes, same text in a gzip, a remapped copy, a mirrored crop), and
unrelated files are not."""

from __future__ import annotations

import gzip

import numpy as np
import pytest
from automedbench_testkit.leaksearch import best_correlation, find_reference_leaks, match_template
from PIL import Image


def smooth_image(seed: int, shape=(96, 80)) -> np.ndarray:
    from scipy import ndimage

    return ndimage.gaussian_filter(np.random.default_rng(seed).standard_normal(shape), 3)


def test_normalised_cross_correlation_matches_scikit_image():
    skimage_feature = pytest.importorskip("skimage.feature")
    image = np.random.default_rng(1).random((60, 50))
    template = image[7:30, 11:40] + 0.05 * np.random.default_rng(2).random((23, 29))
    ours, theirs = match_template(image, template), skimage_feature.match_template(image, template)
    assert ours.shape == theirs.shape and np.abs(ours - theirs).max() < 1e-9
    assert np.unravel_index(ours.argmax(), ours.shape) == (7, 11)


def test_each_kind_of_leak_is_found_and_unrelated_files_are_not(tmp_path):
    reference = smooth_image(3, (128, 128))
    big = smooth_image(4, (400, 300))
    crop_reference = big[100:228, 60:188].copy()
    readable = tmp_path / "site-packages" / "pkg" / "data"
    readable.mkdir(parents=True)
    # a window/clip of the reference, stored as 8-bit PNG: a monotone remap (found by rank correlation)
    window = np.clip((reference - reference.min()) / np.ptp(reference) * 300 - 20, 0, 255).astype(np.uint8)
    Image.fromarray(window).save(readable / "window.png")
    np.save(readable / "big.npy", big[:, ::-1])  # the crop's source, mirrored
    np.save(readable / "other.npy", smooth_image(5, (128, 128)))
    private = tmp_path / "private.txt"
    private.write_text("x" * 100)
    (readable / "copy.bin").write_text("x" * 100)
    (readable / "reports.json.gz").write_bytes(gzip.compress(b'{"r": "The heart is enlarged. There is a small '
                                                             b'right pleural effusion. No pneumothorax."}'))
    text = "The heart is enlarged.  There is a small right pleural effusion.\nNo pneumothorax."
    leaks = find_reference_leaks({"a": reference, "crop": crop_reference}, [tmp_path / "site-packages"],
                                 private_files=[private], texts={"report": text})
    found = {(leak.reference, leak.source.rsplit("/", 1)[-1], leak.how.split()[0]) for leak in leaks}
    assert ("a", "window.png", "correlation") in found
    assert ("crop", "big.npy", "correlation") in found
    assert (str(private), "copy.bin", "same") in found
    assert ("report", "reports.json.gz", "same") in found
    assert not any("other.npy" in leak.source for leak in leaks)


def test_a_readable_file_no_closer_than_the_input_is_not_a_leak(tmp_path):
    reference = smooth_image(6, (64, 64))
    noisy = reference + 0.02 * np.random.default_rng(7).standard_normal(reference.shape)
    (tmp_path / "public").mkdir()
    np.save(tmp_path / "public" / "input.npy", noisy)
    assert find_reference_leaks({"a": reference}, [tmp_path], inputs={"a": noisy}) == []
    assert best_correlation(reference, noisy) > 0.9  # would be a finding without the input's floor
