"""Red team round 30: hidden answers that public information decides, attacked through the real stager and evaluator.

- **How the download stored an image, told by the published PNG** (vqa and report_gen release stagers,
  `reencode_image`): each image was decoded and written again by `png_bytes` at PIL's level 9, in the mode the
  source was stored in, and at level 1 when that gave the source's own bytes. So the published file said how its
  source was stored: (a) a source PIL had written at level 9 went out at level 1, and re-encoding the published
  pixels with the public `png_bytes` gave other bytes for exactly those images; (b) a palette source went out as a
  palette PNG (its colour type and palette in the header), an RGB one as RGB. On a Kvasir-VQA layout built in code
  (60 "Are there any instruments in the image?" questions, one noise picture each) whose "yes" images were stored
  so, an agent reading only the published PNGs answered every question: Task 1.0, rating A, through
  `automedbench evaluate`, against 0.583 (C) for the question prior and for answering "yes" throughout. Now every
  published PNG carries a constant private chunk (`PNG_MARK`: only a file `png_bytes` wrote can match, so the
  level-1 fallback no longer singles out PIL-written sources) and is written in the mode its pixels need
  (`content_mode`: palette to grey or RGB, 1-bit to grey, an opaque alpha dropped, equal channels to one): both
  attacks answer "no" throughout, 0.417 (the share of "no" answers), below the prior.
- **The same class in segmentation's `publish_volume`**: gzip level 6 with no time, level 9 for a source that gave
  the same bytes (a volume nibabel wrote and gzip packed so), which the gzip header's XFL byte shows. The published
  header time is now 2000-01-01 (`GZIP_MTIME`): the same voxels publish the same bytes however they were packed.

Measured and left alone (no test kept):
enhancement/demo-ldct: the shipped slice registered onto the nlm-denoised input (a similarity fit, then TV-L1 optical
flow, a smooth gain about -1024 HU) with the denoised image's low band (Gaussian, 1 px) under it scored Task 0.9751
through `automedbench evaluate` against nlm's 0.9726 on the same staging (both B; soft-tissue SSIM 0.891 against
0.841). With demo-sr's jitter added to the ldct references (3 px over 3 px) the same attack scored 0.9754 against
nlm's 0.9734: the input holds the full band, so the flow recovers the jitter too, and the jitter was not kept.
synthesis/demo-mrct's MR -> CT table is public, and the scripted reference already inverts it (bone HU from the
MR level): nothing an agent reads beyond it. vqa/demo's public body systems and question kinds leave the presence
prior (5 of 6 "yes") where it was. Release tasks all have network access and a `public_source`: the labelled
download itself is the public information there, so only what the published files add was attacked.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path

import attrs
import numpy as np
import pytest
from automedbench.api import png_bytes
from automedbench.testing import evaluate_outputs, load_task, stage_from_folder
from PIL import Image

KVASIR = "vqa/kvasir-vqa"
QUESTIONS = 30


def _kvasir_layout(src: Path, store: str | Callable[[Image.Image, bool], bytes]) -> list[bytes]:
    """A Kvasir-VQA download whose "yes" images are stored one way and the "no" images another (`store`: "level",
    PIL's level 9 against its default 6; "palette", a palette PNG against the same pixels as RGB; or a function of
    the noise picture and the answer giving the stored bytes). Returns the images' bytes."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    rng = np.random.default_rng(30)
    rows, sources = [], []
    for i in range(QUESTIONS):
        yes = bool(rng.integers(2))
        image = Image.fromarray(rng.integers(0, 256, (24, 32, 3), dtype=np.uint8))
        buffer = io.BytesIO()
        if callable(store):
            buffer.write(store(image, yes))
        elif store == "palette":
            palette = image.convert("P")
            (palette if yes else palette.convert("RGB")).save(buffer, format="PNG")
        else:
            image.save(buffer, format="PNG", compress_level=9 if yes else 6)
        sources.append(buffer.getvalue())
        rows.append({"image": {"bytes": buffer.getvalue(), "path": f"cl{i}.jpg"}, "source": "hyper-kvasir",
                     "question": "Are there any instruments in the image?", "answer": "Yes" if yes else "No",
                     "img_id": f"cl{i}"})
    (src / "data").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows), src / "data" / "raw-00000-of-00001.parquet")
    return sources


def _storage_says_yes(data: bytes, store: str) -> bool:
    """What an agent reads from a published image alone: re-encoded by the public `png_bytes`, does it give other
    bytes (the source was one PIL wrote at level 9)? Is it a palette PNG?"""
    with Image.open(io.BytesIO(data)) as image:
        image.load()
        return image.mode == "P" if store == "palette" else png_bytes(image) != data


@pytest.mark.parametrize("store", ["level", "palette"])
def test_how_a_download_stored_its_images_answers_nothing(tmp_path, store):
    """Before: Task 1.0 (A) from the published PNGs alone, both ways. Now below the question prior, and every
    published image shows its source's pixels in bytes and a PNG colour type of no source's choosing."""
    sources = _kvasir_layout(tmp_path / "src", store)
    track, spec = load_task(KVASIR)
    spec = attrs.evolve(spec, params={**spec.params, "sample": None}, case_count=QUESTIONS)
    staged = stage_from_folder(track, spec, tmp_path / "data", tmp_path / "src")
    attack = tmp_path / "attack"
    published = []
    for qid in staged.case_ids:
        data = (staged.public / qid / "image.png").read_bytes()
        published.append(data)
        answer = "yes" if _storage_says_yes(data, store) else "no"
        (attack / qid).mkdir(parents=True)
        (attack / qid / "answer.json").write_text(json.dumps(
            {"question_id": qid, "predicted_label": "", "predicted_answer": answer,
             "raw_model_output": f"Answer: {answer}", "model_name": "storage-reader", "runtime_s": 0.0}))
    result = evaluate_outputs(KVASIR, data_root=tmp_path / "data", work=tmp_path / "eval", submission=attack)
    prior = evaluate_outputs(KVASIR, data_root=tmp_path / "data", work=tmp_path / "prior", baseline="question-prior")
    evaluation = json.loads((tmp_path / "eval" / "evaluation.json").read_text())
    assert evaluation["valid_cases"] == QUESTIONS
    assert result.task.partial <= prior.task.partial, (result.task.partial, prior.task.partial)
    assert not set(published) & set(sources)  # still never the source's bytes
    assert {data[25] for data in published} == {2}  # IHDR colour type: RGB for every image (noise is colour)


def test_content_mode_keeps_the_pixels_and_drops_only_the_storage():
    """A palette with transparency keeps its alpha, an opaque one loses it, equal channels become one, 1-bit becomes
    grey: the pixels a viewer sees are the same."""
    from automedbench.untrusted import content_mode

    rng = np.random.default_rng(3)
    colour = Image.fromarray(rng.integers(0, 256, (8, 9, 3), dtype=np.uint8)).convert("P")
    see_through = colour.copy()
    see_through.info["transparency"] = 0
    grey = np.repeat(rng.integers(0, 256, (8, 9, 1), dtype=np.uint8), 3, axis=2)
    opaque = np.concatenate([grey, np.full((8, 9, 1), 255, np.uint8)], axis=2)
    cases = [(colour, "RGB"), (see_through, "RGBA"), (Image.fromarray(grey), "L"), (Image.fromarray(opaque), "L"),
             (Image.fromarray(grey[..., 0] > 128), "L")]
    for image, mode in cases:
        out = content_mode(image)
        assert out.mode == mode, (image.mode, out.mode)
        assert np.array_equal(np.asarray(out.convert("RGBA")), np.asarray(image.convert("RGBA")))


def test_a_file_png_bytes_wrote_is_still_never_published_byte_for_byte():
    """The fallback stays for the one source that can match: a file this function wrote itself."""
    from automedbench.untrusted import reencode_image

    pixels = np.random.default_rng(4).integers(0, 256, (16, 16), dtype=np.uint8)
    ours = png_bytes(pixels)
    again = reencode_image(ours, "ours.png")
    assert again != ours
    with Image.open(io.BytesIO(again)) as image:
        assert np.array_equal(np.asarray(image), pixels)


def test_a_volume_packed_as_the_stager_once_packed_is_published_as_any_other(tmp_path):
    """Segmentation's `publish_volume` wrote gzip level 6 with no time, and level 9 for a source that gave the same
    bytes: the gzip header (XFL) told such sources from the rest. The same voxels packed either way now publish the
    same bytes, and never the source's own."""
    import gzip

    import nibabel as nib
    from automedbench_segmentation.data.stagers import publish_volume

    voxels = np.random.default_rng(6).integers(-1000, 1000, (12, 10, 8)).astype(np.int16)
    image = nib.Nifti1Image(voxels, np.diag([0.8, 0.8, 2.5, 1.0]))
    image.set_data_dtype(np.int16)
    image.header.set_xyzt_units("mm", "sec")
    packed = tmp_path / "packed.nii.gz"  # what the stager itself used to publish
    packed.write_bytes(gzip.compress(image.to_bytes(), compresslevel=6, mtime=0))
    saved = tmp_path / "saved.nii.gz"
    nib.save(image, str(saved))
    publish_volume(packed, tmp_path / "out" / "packed.nii.gz")
    publish_volume(saved, tmp_path / "out" / "saved.nii.gz")
    first, second = (tmp_path / "out" / "packed.nii.gz").read_bytes(), (tmp_path / "out" / "saved.nii.gz").read_bytes()
    assert first == second
    assert first not in (packed.read_bytes(), saved.read_bytes())
    assert np.array_equal(np.asanyarray(nib.load(str(tmp_path / "out" / "saved.nii.gz")).dataobj), voxels)
