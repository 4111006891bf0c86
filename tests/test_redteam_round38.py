"""Red team round 38: hidden answers that public information decides, attacked through the real stager and runner.

- **A study's findings told by its PNG file sizes** (report_gen/demo, the generator's content): each view was
  written by PIL at its default compression, and how well an image packs depends on what was painted on it
  (effusion, an enlarged heart, consolidation, a tube), so `ls -l` of a study's images said which of the
  generator's 12 CASES it holds. A scripted agent that opens no image (it renders every CASE with seeds of its own
  through the generator's public code, learns each view's expected file size, matches the studies to the CASES one
  to one by size within their view count and writes each matched CASE's report in its first wording) named 4-10 of
  12 studies and scored Task 0.686-0.775 (mean 0.731 over 4 stagings; 0.775 is B) through the real runner, against
  0.645-0.695 for the strongest trivial baseline (nearest-template) on the same stagings. Round 28 measured this
  channel (0.721, C) and left it, since the decoded pixels' own compressibility gives the same numbers; but that is
  a statistic of the image the agent must read to do the task, while a file size is read without opening anything.
  Every view is now stored uncompressed, as vqa/demo's are (`data.demo.png_bytes`): one file size for all (247 435
  bytes), the pixels unchanged, and the same agent names 1-3 of 12 (a guess within each view count) and scores
  0.512-0.639 (mean 0.555), below nearest-template. What stays is the image itself: the same matching on the zlib
  size of each view's decoded pixels (a statistic of what the agent must read to do the task) names 7-9 of 12 and
  scores 0.769-0.793 over 3 stagings (the scripted reference 0.84), as round 28 found; left.

Tried and held (scripts reading only what the sandbox reads; no test kept): classification/demo's JPEG file sizes
and the zlib size of the decoded pixels, each class's sizes learnt from the generator's own renders: balanced
accuracy 0.10, 0.25, 0.20 through the real runner (constant 0.143, label-prior 0.08-0.23; B needs 0.45). On
enhancement/demo-ldct the noise model's band limit (no noise power above 0.35 cycles/pixel, so the input's top band
is the reference's) added to nlm's lower band: SSIM 0.9764 -> 0.9772 (A needs 0.9922); a Wiener filter with the known
noise spectrum 0.91-0.95, below nlm. Two stagings of every demo share no public file that names a reference: the
files equal across stagings are per-case meta.json, question templates and manifests. Every demo's generator seed is
the staging's secret (`secret.seed("demo")`) and every stream of it is drawn per purpose; the one reuse found
(classification/demo's case index 7 renders from the stream that shuffles the class plan) would need the 128-bit
PCG64 state read back from a blurred, noised JPEG. A sweep's worker-slot data root (hard links, or copies across
devices) shows the published atime and mtime only. The synthesis README still called the release's choice of
volumes "sorted, spread evenly ... deterministic" (stagers.py tries them in the secret order): corrected.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import attrs
import numpy as np
from automedbench import staging
from automedbench.runfolder import RunFolder
from automedbench.stagesecret import SECRET_FILE, StagingSecret
from automedbench.testing import load_task, run_steps
from PIL import Image

TASK = "report_gen/demo"

LIST_SIZES = ("import json, os, pathlib\nroot = pathlib.Path(os.environ['DATA_DIR'])\nsizes = {}\n"
              "for study in sorted(p for p in root.iterdir() if p.is_dir()):\n"
              "    files = json.loads((study / 'manifest.json').read_text())['image_files']\n"
              "    for f in files:\n"
              "        sizes.setdefault(len(files), set()).add(os.stat(study / f).st_size)\n"
              "print('SIZES', json.dumps(sorted([k, sorted(v)] for k, v in sizes.items())))\n")


def _view_sizes(public: Path) -> set[int]:
    return {p.stat().st_size for p in public.glob("*/images/*.png")}


def test_every_published_view_has_one_file_size_and_the_generators_pixels(tmp_path):
    """Before: 17 views of 12 studies in 17 sizes, which named the findings. Now one size; the pixels are still
    the generator's render of the study's findings (an honest reader sees what it saw)."""
    from automedbench_report_gen.data.demo import CASES, LATER_VIEW_ONLY, render

    track, task = load_task(TASK)
    staged = staging.stage(track, task, tmp_path / "data")
    assert len(list(staged.public.glob("*/images/*.png"))) == sum(f.views for f in CASES)
    assert len(_view_sizes(staged.public)) == 1, sorted(_view_sizes(staged.public))
    seed = StagingSecret.load(staged.private / SECRET_FILE).seed("demo")
    for case in staged.case_ids[:3]:
        findings = json.loads((staged.private / case / "facts.json").read_text())["findings"]
        source = next(k for k, f in enumerate(CASES) if attrs.asdict(f) == findings)
        for view, image in enumerate(sorted((staged.public / case / "images").iterdir())):
            drawn = render(CASES[source], view, seed, source, LATER_VIEW_ONLY.get(source, []))
            shown = np.asarray(Image.open(io.BytesIO(image.read_bytes())))
            assert np.array_equal(shown, (drawn * 255 + 0.5).astype(np.uint8)), (case, view)


def test_the_sandbox_lists_one_file_size_per_view(tmp_path):
    """Through the real runner: the agent's listing of /data/public finds one size for every view, whatever the
    study holds (before: a size per finding set, 0.686-0.775 from sizes alone)."""
    track, task = load_task(TASK)
    staging.stage(track, task, tmp_path / "data")
    result, run_dir = run_steps(TASK, [("python", LIST_SIZES)], out=tmp_path / "runs", data_root=tmp_path / "data")
    printed = [e["stdout"] for e in RunFolder(run_dir).events()
               if e.get("type") == "tool" and "SIZES" in str(e.get("stdout", ""))]
    assert printed, (result.state, result.error)
    listed = json.loads(printed[0].split("SIZES", 1)[1].strip())  # [[view count, [sizes]], ...]
    assert {k for k, _ in listed} == {1, 2}
    assert len({size for _, sizes in listed for size in sizes}) == 1, listed
