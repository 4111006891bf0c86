"""Round eighteen of the red team: what rounds 17 changed, hidden answers public information decides, state shared
across trust levels; through the real runner.

- **A class told apart by the chroma noise its storage left** (detection and classification, class 1, rounds 14
  and 17's class): round 17 published every detection case in one colour mode, and round 14 every classification
  case, but a grey image the download stores as RGB (a site's converter, a colour-managed or dithered export)
  carries channel differences of a level or so that no grey-stored image has. In a staging published in RGB
  (detection: any source stored as RGB; classification: any drawn image in colour), the grey-stored cases came out
  with three exactly equal channels and the RGB-stored ones did not: an agent testing `R == G == B` told the
  class apart without any image analysis. On a GRAZPEDWRI-DX layout (PNG sources, the Lite detection task) whose
  metal images are dithered RGB exports of grey radiographs, the box-finding agent naming the class by that test
  scored mAP 1.0, rating A; on Kermany's layout whose pneumonia images are such exports (one normal image
  annotated in red makes the staging RGB; the noise survives the JPEG), accuracy 0.99, rating A; both through the
  real runner. Now a case whose content is grey (channels less than three levels apart on average: round 14's
  bound of one level, for the staging's mode, raised so that a stronger export's noise is no trace either) is
  published with three equal channels whatever its storage (`automedbench.api.one_colour_mode`, shared by both
  stagers); the agents are at a guess.
"""

from __future__ import annotations

import numpy as np
from automedbench.testing import load_task, run_steps, stage_from_folder
from PIL import Image
from test_redteam_round17 import BY_MODE

# round 17's box finder, naming the class by whether the image's three channels are equal instead of by its mode
BY_CHROMA = BY_MODE.replace("mode = image.mode", "rgb = np.asarray(image.convert('RGB')).astype(int)\n"
                            "        mode = 'L' if (rgb == rgb[..., :1]).all() else 'RGB'"
                            ).replace("'WBC'", "'fracture'").replace("'RBC'", "'metal'")
assert BY_CHROMA.count("'fracture'") == BY_CHROMA.count("'metal'") == 1


def stage_and_run(task_id: str, download, step: str, tmp_path):
    """(the staging of `download` for `task_id`, the result of one run of the agent `step` on it): the real
    runner, a cold evaluator."""
    track, task = load_task(task_id)
    root = tmp_path / "root"
    staged = stage_from_folder(track, task, root, download)
    result, _ = run_steps(task.id, [("python", step)], out=tmp_path / "runs", data_root=root,
                          warm_evaluator=False, workspace_quota_mb=64)
    return staged, result


def equal_channels(path) -> bool:
    """Whether a published image is RGB (the staging's one mode here) with its three channels equal."""
    with Image.open(path) as image:
        assert image.mode == "RGB", (path, image.mode)
        pixels = np.asarray(image).astype(int)
    return bool((pixels == pixels[..., :1]).all())


def dithered(pixels: np.ndarray, seed: int) -> Image.Image:
    """Grey pixels as an RGB export that dithers: each channel a level up here and there (mean |R-G| about 0.4,
    well inside what counts as grey content)."""
    rng = np.random.default_rng(seed)
    channels = np.repeat(pixels[..., None], 3, axis=2).astype(np.int16)
    channels += (rng.random(channels.shape) < 0.25).astype(np.int16)
    return Image.fromarray(np.clip(channels, 0, 255).astype(np.uint8), "RGB")


def graz_dithered(root, count: int = 100):
    """GRAZPEDWRI-DX's layout (PNG images, YOLO labels): grey-content radiographs with one bright 12x12 finding
    each at a position of its own; the metal images are dithered RGB exports of their grey pixels (PNG:
    losslessly stored), the fracture images grey PNGs."""
    labels = root / "folder_structure" / "yolov5" / "labels"
    labels.mkdir(parents=True)
    names = ["boneanomaly", "bonelesion", "foreignbody", "fracture", "metal", "periostealreaction",
             "pronatorsign", "softtissue", "text"]
    (labels.parent / "meta.yaml").write_text("names:\n" + "".join(f"  - {n}\n" for n in names) + "nc: 9\n")
    (root / "images_part1").mkdir(parents=True)
    for k in range(count):
        stem, metal = f"{1000 + k}_0123456789_01_WRI-L1_M014", k % 2 == 1
        x, y = 4 + (k * 7) % 44, 4 + (k * 5) % 28
        pixels = np.full((48, 64), 60, dtype=np.uint8)
        pixels[y:y + 12, x:x + 12] = 230
        (dithered(pixels, k) if metal else Image.fromarray(pixels)).save(root / "images_part1" / f"{stem}.png")
        (labels / f"{stem}.txt").write_text(f"{4 if metal else 3} {(x + 6) / 64} {(y + 6) / 48} {12 / 64} {12 / 48}")
    return root


def test_a_class_the_download_stores_as_dithered_rgb_is_not_told_by_unequal_channels(tmp_path):
    """Before: the fracture cases (grey PNGs) were published with three equal channels, the metal cases (dithered
    RGB exports of grey radiographs) with channels a level apart; the agent testing channel equality scored mAP
    1.0, rating A. Now every grey-content case has equal channels and the agent names one class for all."""
    staged, result = stage_and_run("detection/grazpedwri-dx", graz_dithered(tmp_path / "download"), BY_CHROMA,
                                   tmp_path)
    assert result.state == "scored", result.error
    assert result.task.partial <= 0.4 and result.aggregate.rating != "A", result.task.partial
    assert all(equal_channels(staged.public / case / "image.png") for case in staged.case_ids)


# labels each case by whether the published JPEG's three channels are equal
BY_EQUAL_CHANNELS = """
import json, os
import numpy as np
from PIL import Image
data, out = os.environ['DATA_DIR'], os.path.join(os.environ['WORKSPACE_DIR'], 'outputs')
for case in sorted(os.listdir(data)):
    if not os.path.isfile(os.path.join(data, case, 'image.jpg')):
        continue
    with Image.open(os.path.join(data, case, 'image.jpg')) as image:
        pixels = np.asarray(image.convert('RGB')).astype(int)
    grey = bool((pixels[..., 0] == pixels[..., 1]).all() and (pixels[..., 1] == pixels[..., 2]).all())
    os.makedirs(os.path.join(out, case), exist_ok=True)
    open(os.path.join(out, case, 'prediction.json'), 'w').write(json.dumps({'label': 'normal' if grey else
                                                                            'pneumonia'}))
"""


def test_a_class_stored_as_an_rgb_export_is_not_told_by_unequal_channels_in_a_colour_staging(tmp_path):
    """Kermany's layout whose pneumonia radiographs are RGB exports (six levels of blue here and there: a mean
    channel difference of 1.2, grey content though above round 14's bound of 1) and one normal image holds colour
    (an annotation in red), so the staging is RGB. Before: the grey-stored normal cases were published with equal
    channels, the exported ones not (the noise survives the JPEG): the agent testing channel equality scored
    accuracy 0.99, rating A, through the real runner. Now every grey-content case has equal channels: the agent
    answers normal for all but the coloured one (0.5)."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parents[1] / "plugins" / "classification" / "tests"))
    import classification_layouts as layouts

    download = layouts.kermany(tmp_path / "download", per_class=50)
    for k, path in enumerate(sorted((download / "test" / "PNEUMONIA").glob("*.jpeg"))):
        with Image.open(path) as image:
            grey = np.asarray(image.convert("L"))
        rgb = np.repeat(grey[..., None], 3, axis=2).astype(np.int16)
        rgb[..., 2] += 6 * (np.random.default_rng(k).random(grey.shape) < 0.4)
        Image.fromarray(np.clip(rgb, 0, 255).astype(np.uint8)).save(path.with_suffix(".png"))
        path.unlink()
    marked = sorted((download / "test" / "NORMAL").glob("*.jpeg"))[0]
    with Image.open(marked) as image:
        annotated = np.asarray(image.convert("RGB")).copy()
    annotated[:, :8] = (255, 0, 0)  # an annotation in red: colour content, so the staging is RGB
    Image.fromarray(annotated).save(marked, quality=95)
    staged, result = stage_and_run("classification/chest-xray-pneumonia", download, BY_EQUAL_CHANNELS, tmp_path)
    assert len(staged.case_ids) == 100
    assert result.state == "scored", result.error
    assert result.task.partial <= 0.55 and result.aggregate.rating not in ("A", "B"), result.task.partial
    # every case but the annotated one published with equal channels, in the staging's one mode, RGB
    assert sum(equal_channels(staged.public / case / "image.jpg") for case in staged.case_ids) == 99
