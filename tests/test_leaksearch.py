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


def test_text_leaks_are_found_whatever_the_whitespace_encoding_or_invalid_bytes(tmp_path):
    """The word screen (a file is read as text only when it holds a needle's longest word) misses nothing:
    Unicode whitespace between the words, non-ASCII words, a needle holding a replacement character that
    only an invalid byte in the file decodes to; a file with the word but not the text is no finding."""
    readable = tmp_path / "pkg"
    readable.mkdir()
    words = "Consolidation in the right lower lobe, appearance suggestive of pneumonia; no effusion."
    (readable / "spaced.txt").write_text(words.replace(" ", "\u2003\n\x1c "), encoding="utf-8")
    accented = "Épanchement pleural droit modéré, cardiomégalie, pas de pneumothorax visible ce jour."
    (readable / "fr.json").write_text('{"r": "' + accented + '"}', encoding="utf-8")
    (readable / "bad.md").write_bytes(b"Stable hyperinfl\xffation of the chest compared with the prior study of May.")
    (readable / "word_only.py").write_text("suggestive = 'pneumonia;' + 'Consolidation'\n")
    texts = {"spaced": words, "fr": accented, "bad": "Stable hyperinfl\ufffdation of the chest compared with the "
             "prior study of May.", "lone": "abc\ud800 lone surrogate in a reference that is long enough, yes"}
    leaks = find_reference_leaks({}, [tmp_path], texts=texts)
    found = sorted((leak.reference, leak.source.rsplit("/", 1)[-1], leak.how) for leak in leaks)
    assert found == [("bad", "bad.md", "same text"), ("fr", "fr.json", "same text"),
                     ("spaced", "spaced.txt", "same text")]
    assert all(leak.source == str(tmp_path / "pkg" / leak.source.rsplit("/", 1)[-1]) for leak in leaks)


def test_needles_sharing_a_screen_word_are_each_found_once_in_the_files_that_hold_them(tmp_path):
    """Needles whose longest words coincide or hold one another (a report demo's twelve texts screen on two
    words, `consolidation` inside `consolidation.`) are screened once per distinct word and shortest first:
    every needle is still found in each file holding it (plain, gzip with an upper-case suffix), in none that
    holds only the shorter word, the longer one or neither."""
    texts = {f"n{i}": f"Dense consolidation{tail} seen at the {side} base on this film, number {i} of the set."
             for i, (tail, side) in enumerate([("", "left"), ("", "right"), (".", "left"), (".", "right")])}
    readable = tmp_path / "pkg"
    readable.mkdir()
    for name, text in texts.items():
        (readable / f"{name}.txt").write_text(f"header\n{text}\n")
    (readable / "n3.TXT.GZ").write_bytes(gzip.compress(texts["n3"].encode()))
    (readable / "short_word.md").write_text("consolidation only, and nothing else from any reference text")
    (readable / "long_word.md").write_text("consolidation. only: a sentence that is no needle at all")
    (readable / "neither.md").write_text("an unrelated package's documentation " * 5)
    leaks = find_reference_leaks({}, [tmp_path], texts=texts)
    found = sorted((leak.reference, leak.source.rsplit("/", 1)[-1]) for leak in leaks)
    assert found == [("n0", "n0.txt"), ("n1", "n1.txt"), ("n2", "n2.txt"), ("n3", "n3.TXT.GZ"), ("n3", "n3.txt")]
    assert all(leak.how == "same text" for leak in leaks)


def test_mirrored_and_flipped_remapped_copies_are_found_for_every_reference(tmp_path):
    """Each flip of a monotone-remapped copy is found, for several references of one shape (the rank
    arrays a candidate shares across references and flips)."""
    references = {f"r{i}": smooth_image(10 + i, (96, 96)) for i in range(3)}
    for i, flip in enumerate((np.s_[:, ::-1], np.s_[::-1, :], np.s_[:, :])):
        reference = references[f"r{i}"]
        remapped = np.clip((reference - reference.min()) / np.ptp(reference) * 320 - 30, 0, 255)
        Image.fromarray(remapped[flip].astype(np.uint8)).save(tmp_path / f"copy{i}.png")
    leaks = find_reference_leaks(references, [tmp_path])
    assert sorted((leak.reference, leak.source.rsplit("/", 1)[-1]) for leak in leaks) == [
        ("r0", "copy0.png"), ("r1", "copy1.png"), ("r2", "copy2.png")]
