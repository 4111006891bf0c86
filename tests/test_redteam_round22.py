"""Red team round 22: hidden answers in the release stagers, attacked through the real stager, runner and evaluator.

- **A class told apart by which way it was resampled** (classification, class 1, round 16's residual): round 16
  published every case of a staging at one size, the drawn images' median, so a class the download stores larger
  (Kermany's normal radiographs, the Brain Tumor MRI Dataset's no-tumour slices against its 512x512 tumour
  slices) was shrunk and the other enlarged. An enlarged image holds nothing above its source's Nyquist
  frequency; a shrunk one is full band. On a chest-xray-pneumonia download whose two class folders hold the same
  texture at two sizes, an agent ranking the staged JPEGs by Laplacian energy (variance of the 4-neighbour
  Laplacian over the image's variance; no model, no label) and calling the sharper half normal scored accuracy
  1.0, rating A, through the real runner. Every image of a download with more than one size is now shrunk to one
  size below the smallest drawn image's (`SHRINK` of its height and width): each passes the same Lanczos
  anti-aliasing at the published scale, none is enlarged. On a texture download the attacker went from 0.98
  (rating A) to 0.44 (chance). Residual, measured: on pure white pixel noise (no content, only grain) the
  aliasing Lanczos lets through still grows with the shrink factor: 1.0 -> 0.62 through the runner, 0.66-0.68
  in a direct simulation; a stronger shrink (0.7, 0.5) did not lower it. Cost: a download of several sizes is
  published at 0.9 of its smallest image, not its median (honest models resize to their input size anyway).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

# ranks the staged JPEGs by Laplacian energy over variance: the sharper half is called `normal`
BY_SHARPNESS = """
import json, os
import numpy as np
from PIL import Image
data, out = os.environ['DATA_DIR'], os.path.join(os.environ['WORKSPACE_DIR'], 'outputs')
score = {}
for case in sorted(os.listdir(data)):
    path = os.path.join(data, case, 'image.jpg')
    if os.path.isfile(path):
        with Image.open(path) as image:
            p = np.asarray(image.convert('L')).astype(float)
        lap = 4 * p[1:-1, 1:-1] - p[:-2, 1:-1] - p[2:, 1:-1] - p[1:-1, :-2] - p[1:-1, 2:]
        score[case] = lap.var() / max(p.var(), 1e-9)
cut = float(np.median(list(score.values())))
for case, s in score.items():
    os.makedirs(os.path.join(out, case), exist_ok=True)
    label = 'normal' if s > cut else 'pneumonia'
    open(os.path.join(out, case, 'prediction.json'), 'w').write(json.dumps({'label': label}))
print('scores', sorted(round(v, 3) for v in score.values()))
"""


def _texture_download(root: Path, per_class: int = 50) -> Path:
    """Kermany's layout (`chest_xray/test/{NORMAL,PNEUMONIA}/*.jpeg`), every image the same kind of texture (a
    1/f field, as anatomy is nearly scale-free, plus a little pixel noise, as a detector leaves) stored at a size
    per class: 96x80 normal, 64x56 pneumonia."""
    rng = np.random.default_rng(22)
    for folder, (width, height) in (("NORMAL", (96, 80)), ("PNEUMONIA", (64, 56))):
        target = root / "chest_xray" / "test" / folder
        target.mkdir(parents=True)
        for n in range(per_class):
            f = np.hypot(np.fft.fftfreq(height)[:, None], np.fft.fftfreq(width)[None, :])
            f[0, 0] = 1.0
            field = np.real(np.fft.ifft2(np.fft.fft2(rng.normal(size=(height, width))) / f))
            field = (field - field.mean()) / field.std()
            grain = rng.normal(0.0, 4.0, (height, width))
            pixels = np.clip(128 + 40 * field + grain, 0, 255).astype(np.uint8)
            Image.fromarray(pixels, "L").save(target / f"{folder.lower()}-{n:04d}.jpeg", quality=95)
    return root


def test_a_class_the_download_stores_larger_is_not_told_apart_by_the_resampling_trace(tmp_path):
    """Round 16 published one size, the median: the larger class was shrunk, the smaller enlarged, and an enlarged
    image has no energy near its Nyquist frequency. An agent calling the sharper half of the cases normal scored
    accuracy 1.0 through the real runner; now every image is shrunk to one size below the smallest: chance."""
    from test_redteam_round18 import stage_and_run

    download = _texture_download(tmp_path / "download")
    staged, result = stage_and_run("classification/chest-xray-pneumonia", download, BY_SHARPNESS, tmp_path)
    assert len(staged.case_ids) == 100
    assert result.state == "scored", result.error
    print("accuracy", result.task.partial, result.aggregate.rating)
    assert result.task.partial <= 0.6 and result.aggregate.rating not in ("A", "B"), result.task.partial
    sizes = set()
    for case in staged.case_ids:
        with Image.open(staged.public / case / "image.jpg") as image:
            sizes.add(image.size)
    assert len(sizes) == 1 and all(w < 64 and h < 56 for w, h in sizes), sizes  # one size, below the smallest


def test_a_few_tiny_images_do_not_shrink_the_whole_staging_to_their_size():
    """The one size follows the 5th-percentile image, not the smallest: a download of 512x512 slices holding
    three 64x64 thumbnails is published near 512 (the thumbnails enlarged, three cases of a hundred), not at 57;
    under 21 images the smallest still decides (every image shrunk), and one shared size is kept as it is."""
    from automedbench_classification.data.stagers import SHRINK, one_size

    assert one_size([(64, 64)] * 3 + [(512, 512)] * 97) == (int(512 * SHRINK), int(512 * SHRINK))
    assert one_size([(96, 80), (64, 56)] * 5) == (int(64 * SHRINK), int(56 * SHRINK))
    assert one_size([(300, 200)] * 4) == (300, 200)
