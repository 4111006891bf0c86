"""Search every file a sandbox can read for a task's private references (the demo conformance check).

A reference an agent can find or rebuild from readable files gives a score without the task. Checked per
reference: (1) exact match: a readable file with the same bytes as a private file; (2) the same text:
a long reference text inside a readable text file (plain or gzip); (3) correlation: a readable image
(DICOM, PNG/JPEG/TIFF, .npy), as is, mirrored, resized to the reference's grid or slid over at its own
scale, whose Pearson correlation with the reference reaches `min_corr` (by default 0.9, or the task's own
input's correlation when that is higher: no readable file may be closer to the answer than the input
the agent is given; the public input itself is then not a finding). Bounded: at most `max_files` files
walked, images up to `max_image_bytes`.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from attrs import define

IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp", ".gif", ".pgm", ".npy", ".dcm"}
TEXT_SUFFIXES = {".txt", ".json", ".jsonl", ".csv", ".tsv", ".xml", ".md", ".rst", ".py", ".yaml", ".yml"}
GRID_PX = 128  # the long side of the reference when compared whole (warps of a few pixels still count)
SCREEN_PX = 64  # the long side of the reference in the sliding (crop) search


@define
class Leak:
    reference: str
    source: str
    how: str
    value: float


def sandbox_readable_roots(public: Path) -> list[Path]:
    """What every sandbox reads besides system files: the public folder and the sandbox Python's prefixes
    (site-packages with every package's data, the interpreter's standard library)."""
    roots = [public, Path(sys.prefix), Path(sys.base_prefix)]
    unique: list[Path] = []
    for root in roots:
        root = root.resolve()
        if root.exists() and not any(root == u or u in root.parents for u in unique):
            unique = [u for u in unique if root not in u.parents] + [root]
    return unique


def walk_files(roots: list[Path], max_files: int) -> Iterator[tuple[Path, int]]:
    """(path, size) of every regular file below the roots (links neither followed nor listed), at most
    `max_files`."""
    for path, size in _walk_paths(roots, max_files):
        yield Path(path), size


def _walk_paths(roots: list[Path], max_files: int) -> Iterator[tuple[str, int]]:
    """`walk_files` with the paths as strings (a `Path` per file costs more than the walk itself); each is
    the string `str(Path(...))` of it would be: a normalised root joined with entry names."""
    seen = 0
    stack = [str(root) for root in reversed(roots)]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                elif entry.is_file(follow_symlinks=False):
                    seen += 1
                    if seen > max_files:
                        return
                    yield entry.path, entry.stat(follow_symlinks=False).st_size
            except OSError:
                continue


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _is_dicom(path: Path) -> bool:
    try:
        with path.open("rb") as handle:
            head = handle.read(132)
    except OSError:
        return False
    return head[128:132] == b"DICM"


def load_image(path: Path) -> np.ndarray | None:
    """A readable file as a 2-D float image (colour averaged; the middle slice of a stack), or None."""
    try:
        if path.suffix.lower() == ".npy":
            array = np.load(path, allow_pickle=False, mmap_mode="r")
        elif path.suffix.lower() == ".dcm" or _is_dicom(path):
            from pydicom.pixels import pixel_array

            array = pixel_array(str(path), index=0, raw=True)  # the first frame; no colour conversion
        else:
            from PIL import Image

            with Image.open(path) as image:
                image.draft("L", (4096, 4096))
                array = np.asarray(image.convert("F"))
    except Exception:  # an unreadable or unsupported file is simply not a candidate
        return None
    array = np.asarray(array)
    if array.dtype.kind not in "uifb" or array.ndim < 2:
        return None
    while array.ndim > 2:
        array = array.mean(axis=-1) if array.shape[-1] in (3, 4) else array[array.shape[0] // 2]
    if min(array.shape) < 16:
        return None
    return np.asarray(array, dtype=np.float64)


def _centred(a: np.ndarray) -> tuple[np.ndarray, float]:
    """One side of a Pearson correlation prepared once (a reference's): its centred values and their sum of
    squares."""
    a = a.ravel() - a.mean()
    return a, (a * a).sum()


def _pearson_centred(a: tuple[np.ndarray, float], b: np.ndarray) -> float:
    (a, squares), b = a, b.ravel() - b.mean()
    norm = float(np.sqrt(squares * (b * b).sum()))
    return float((a * b).sum() / norm) if norm > 0 else 0.0


def _ranks(a: np.ndarray) -> np.ndarray:
    """Dense ranks (ties share one): a monotone remap of the values leaves them unchanged."""
    _, inverse = np.unique(a.ravel(), return_inverse=True)
    return inverse.reshape(a.shape).astype(np.float64)


def _window_sums(image: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    table = np.pad(image.cumsum(0).cumsum(1), ((1, 0), (1, 0)))
    m, n = shape
    return table[m:, n:] - table[:-m, n:] - table[m:, :-n] + table[:-m, :-n]


def match_template(image: np.ndarray, template: np.ndarray) -> np.ndarray:
    """Normalised cross-correlation of `template` at every position inside `image` (numpy FFT)."""
    m, n = template.shape
    t = template - template.mean()
    spectrum = np.fft.rfft2(image) * np.conj(np.fft.rfft2(t, s=image.shape))
    numerator = np.fft.irfft2(spectrum, s=image.shape)[:image.shape[0] - m + 1, :image.shape[1] - n + 1]
    sums, squares = _window_sums(image, (m, n)), _window_sums(image * image, (m, n))
    variance = np.maximum(squares - sums * sums / (m * n), 0.0)
    denominator = np.sqrt(variance * float((t * t).sum()))
    return np.where(denominator > 1e-12, numerator / np.where(denominator > 1e-12, denominator, 1.0), 0.0)


def _resize(image: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Box-filtered resampling (PIL, in C): what the comparison needs, at a fraction of a Gaussian's cost."""
    from PIL import Image

    out = Image.fromarray(np.ascontiguousarray(image, dtype=np.float32), mode="F").resize(
        (int(shape[1]), int(shape[0])), Image.Resampling.BOX)
    return np.asarray(out, dtype=np.float64)


def _shrink(image: np.ndarray, long_side: int) -> np.ndarray:
    factor = min(1.0, long_side / max(image.shape))
    return _resize(image, tuple(max(4, round(n * factor)) for n in image.shape))


@define
class _Target:
    """A reference prepared once: its grid-sized and crop-search-sized copies."""

    whole: tuple[np.ndarray, float]  # centred (`_centred`): the same arithmetic as `_pearson`, done once
    whole_ranks: tuple[np.ndarray, float]
    whole_shape: tuple[int, int]
    crop: np.ndarray
    factor: float
    shape: tuple[int, int]


def _target(reference: np.ndarray) -> _Target:
    crop, whole = _shrink(reference, SCREEN_PX), _shrink(reference, GRID_PX)
    return _Target(_centred(whole), _centred(_ranks(whole)), whole.shape, crop, crop.shape[0] / reference.shape[0],
                   reference.shape)


def _correlate(target: _Target, candidate: np.ndarray, memo: dict[tuple, np.ndarray]) -> float:
    def resized(shape: tuple[int, ...]) -> np.ndarray:  # once per candidate and shape (flips come after)
        if shape not in memo:
            memo[shape] = _resize(candidate, shape)
        return memo[shape]

    best = -1.0
    whole = resized(target.whole_shape)
    ranks_key = ("ranks", *whole.shape)
    if ranks_key not in memo:  # dense ranks depend on the values only: a flip's ranks are the ranks flipped
        memo[ranks_key] = _ranks(whole)
    ranks = memo[ranks_key]
    # Pearson, or Spearman when higher: a monotone remap of the shipped values (a window, a clip, the rescale
    # from stored values to HU) does not hide a copy
    for cand, cand_ranks in ((whole, ranks), (whole[:, ::-1], ranks[:, ::-1]), (whole[::-1, :], ranks[::-1, :])):
        best = max(best, _pearson_centred(target.whole, cand), _pearson_centred(target.whole_ranks, cand_ranks))
    if candidate.shape[0] > target.shape[0] or candidate.shape[1] > target.shape[1]:
        small = resized(tuple(max(4, round(n * target.factor)) for n in candidate.shape))
        if small.shape[0] >= target.crop.shape[0] and small.shape[1] >= target.crop.shape[1]:
            for cand in (small, small[:, ::-1], small[::-1, :]):
                best = max(best, float(match_template(cand, target.crop).max()))
    return best


def best_correlation(reference: np.ndarray, candidate: np.ndarray) -> float:
    """The highest correlation of the candidate (as is, mirrored or flipped) with the reference, on a
    grid of GRID_PX: resized to the reference's grid, and slid over at the reference's own scale when it
    is larger (a crop)."""
    return _correlate(_target(np.asarray(reference, np.float64)), np.asarray(candidate, np.float64), {})


def find_reference_leaks(images: dict[str, np.ndarray], roots: list[Path], *, private_files: list[Path] = (),
                         texts: dict[str, str] | None = None, inputs: dict[str, np.ndarray] | None = None,
                         min_corr: float = 0.9, max_files: int = 400_000,
                         max_image_bytes: int = 48 << 20, max_text_bytes: int = 4 << 20) -> list[Leak]:
    """Every way a file under `roots` gives away a reference (see the module docstring); [] when none.

    `images`: name -> 2-D reference array; `texts`: name -> reference text (checked when 60+ characters);
    `private_files`: the private files whose bytes must appear nowhere; `inputs`: name -> the task's own
    input for that reference (a readable file must correlate less than it does, or than `min_corr`)."""
    leaks: list[Leak] = []
    hashes = {}
    for path in private_files:
        if path.is_file() and path.stat().st_size >= 64:
            hashes.setdefault((path.stat().st_size, _sha256(path)), str(path))
    needles = {name: " ".join(t.split()) for name, t in (texts or {}).items() if len(" ".join(t.split())) >= 60}
    floors = {name: best_correlation(np.asarray(images[name], np.float64), np.asarray(x, np.float64))
              for name, x in (inputs or {}).items() if name in images}
    limits = {name: max(min_corr, floors.get(name, -1.0) + 1e-6) for name in images}
    targets = {name: _target(np.asarray(image, np.float64)) for name, image in images.items()}
    sizes = {size for size, _ in hashes}
    tokens = _needle_tokens(needles)
    screens = _screens(tokens)
    for name_, size in _walk_paths(roots, max_files):
        if size in sizes:
            found = hashes.get((size, _sha256(Path(name_))))
            if found:
                leaks.append(Leak(found, name_, "same bytes", 1.0))
        suffix = _suffix(name_)
        if needles and size <= max_text_bytes and (suffix in TEXT_SUFFIXES or suffix == ".gz"):
            leaks += [Leak(name, name_, "same text", 1.0) for name in _texts_in(name_, suffix, needles, tokens,
                                                                               screens, max_text_bytes)]
        if images and size <= max_image_bytes and (suffix in IMAGE_SUFFIXES or (not suffix and _is_dicom(Path(name_)))):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                candidate = load_image(Path(name_))
            if candidate is None:
                continue
            memo: dict[tuple, np.ndarray] = {}
            for name, target in targets.items():
                value = _correlate(target, candidate, memo)
                if value >= limits[name]:
                    leaks.append(Leak(name, name_, f"correlation {value:.3f}", value))
    return leaks


def _suffix(path: str) -> str:
    """`Path(path).suffix.lower()` without building a Path (a dot-file or a trailing dot has none)."""
    name = path.rsplit("/", 1)[-1]
    i = name.rfind(".")
    return name[i:].lower() if 0 < i < len(name) - 1 else ""


def _needle_tokens(needles: dict[str, str]) -> dict[str, bytes | None]:
    """Each needle's longest word as UTF-8 (None when it cannot screen: a lone surrogate or a replacement
    character). A file whose whitespace-normalised text holds a needle holds each of its words as is (a word
    has no whitespace, so it lies inside one of the file's words), hence its bytes: a file without the word's
    bytes is skipped unread-as-text."""
    tokens: dict[str, bytes | None] = {}
    for name, needle in needles.items():
        word = max(needle.split(), key=len)
        try:
            tokens[name] = None if "\ufffd" in word else word.encode("utf-8")
        except UnicodeEncodeError:
            tokens[name] = None
    return tokens


def _screens(tokens: dict[str, bytes | None]) -> tuple[bytes, ...]:
    """The distinct tokens, shortest first (the order `_tokens_present` searches them in)."""
    return tuple(sorted({t for t in tokens.values() if t is not None}, key=len))


def _tokens_present(raw: bytes, screens: tuple[bytes, ...]) -> set[bytes]:
    """The tokens (`_screens`) found in `raw`, each searched for once: a token holding a shorter one that is
    absent is absent too, unsearched. (Needles share words: a report demo's 12 reference texts screen on 2
    distinct tokens, one inside the other; searching each needle's token in each of the ~55 000 readable text
    files was 5.3 of the search's 8.6 CPU-s.)"""
    present: set[bytes] = set()
    absent: list[bytes] = []
    for token in screens:
        if not any(shorter in token for shorter in absent) and token in raw:
            present.add(token)
        else:
            absent.append(token)
    return present


def _texts_in(path: str, suffix: str, needles: dict[str, str], tokens: dict[str, bytes | None],
              screens: tuple[bytes, ...], max_text_bytes: int) -> list[str]:
    """The needles the file's whitespace-normalised text (a .gz, by its `suffix`, decompressed) holds, in
    `needles`' order. The path stays a string: a `Path` per file cost as much as the reads here."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
        raw = gzip.decompress(raw)[:max_text_bytes] if suffix == ".gz" else raw
    except (OSError, EOFError, gzip.BadGzipFile, ValueError):
        raw = b""
    present = _tokens_present(raw, screens)
    wanted = [name for name, token in tokens.items() if token is None or token in present]
    if not wanted:
        return []
    try:
        text = " ".join(raw.decode("utf-8", "replace").split())
    except ValueError:
        text = ""
    return [name for name in wanted if needles[name] in text]
