"""Review of round 21's rules for honest agents: shapes of honest work that lost s2b / S3 / s1f credit.

- **A script written in one call and run in the next** (`cat > check.py <<EOF ... EOF`, then `python3 check.py
  /data/public/case_000/ct.nii.gz`): how CLI-style agents work. The writing call's heredoc is only written (not
  code that ran) and the running call holds no checks, so neither call was an input inspection (s2b 0) nor a
  pilot check (S3 0.5). The running call is now read with the script it runs (the latest body an earlier call wrote).
- **The input found by a glob** (`glob('/data/public/*/*.nii.gz')`, its name only in a printed label): round 21
  stopped reading the label, and the glob named no input. A wildcard pattern that finds an input file now names it.
- **A header tool** (`nib-ls /data/public/case_000/ct.nii.gz`, `fslinfo`): it prints the shape, type and spacing,
  but the rule looked for `.shape` / `dtype` in the code (s2b 0). A header tool (the item's `inspectors` hint) run
  on an input and printing something is now a check.
- **A photographed whiteboard or a shaded background** (s1f): no exact colour covers 20% of a photo's noisy canvas
  or of a gradient behind the boxes; the canvas is now measured in coarse colour steps (8 a channel). Noise and
  full-range gradients still have none.
"""

from __future__ import annotations

import io

import numpy as np
from automedbench.judge import JudgeInput
from automedbench.judges.rules import RulesJudge
from PIL import Image, ImageDraw

SCRIPT = ("cat > /workspace/{name} <<'EOF'\nimport sys, nibabel as nib, numpy as np\nimg = nib.load(sys.argv[1])\n"
          "{body}\nEOF")
INSPECT = "print(img.shape, img.get_data_dtype(), img.header.get_zooms())"
CHECK = "m = np.asanyarray(img.dataobj)\nprint(m.shape, np.unique(m), int(m.sum()))"
PILOT = "python3 /workspace/segment.py case_000"


def tool(turn: int, code: str, cases: int = 0, language: str = "bash") -> dict:
    return {"type": "tool", "name": "execute_code", "turn": turn, "exit_code": 0, "language": language,
            "cases_with_outputs": cases, "code": code, "stdout": ""}


def grade(reg, item_id: str, events: list[dict], plan_png: bytes | None = None, tier: str = "pro") -> float:
    track, task = reg.task("segmentation/demo")
    item = track.rubric(task).item(item_id)
    return RulesJudge().grade(JudgeInput(task, tier, [item], None, plan_png, events)).items[0].value


def test_a_script_written_by_one_call_and_run_by_the_next_is_the_check_it_runs(reg):
    inspect = [tool(2, SCRIPT.format(name="inspect.py", body=INSPECT)),
               tool(3, "python3 /workspace/inspect.py /data/public/case_000/ct.nii.gz")]
    batch = [tool(4, PILOT, 1), tool(9, "python3 /workspace/segment.py", 5)]
    assert grade(reg, "s2b_compatibility_check", inspect + batch) == 1.0
    check = [tool(5, SCRIPT.format(name="check.py", body=CHECK)),
             tool(6, "python3 check.py /workspace/outputs/case_000/organ.nii.gz")]
    assert grade(reg, "s3_validate", [batch[0], *check, batch[1]]) == 1.0
    # the script must have been written before it ran, by a call that succeeded, and be the one that runs
    assert grade(reg, "s2b_compatibility_check", [inspect[1], inspect[0], *batch]) == 0.0
    failed = {**inspect[0], "exit_code": 1}
    assert grade(reg, "s2b_compatibility_check", [failed, inspect[1], *batch]) == 0.0
    other = tool(3, "python3 /workspace/other.py /data/public/case_000/ct.nii.gz")
    assert grade(reg, "s2b_compatibility_check", [inspect[0], other, *batch]) == 0.0
    # the checks in a comment of the script are still no checks
    hollow = tool(2, SCRIPT.format(name="inspect.py", body="# " + INSPECT))
    assert grade(reg, "s2b_compatibility_check", [hollow, inspect[1], *batch]) == 0.0


def test_an_input_found_by_a_glob_is_named(reg):
    code = ("import glob, nibabel as nib\nf = sorted(glob.glob('/data/public/*/*.nii.gz'))[0]\nimg = nib.load(f)\n"
            "print('ct.nii.gz', img.shape, img.get_data_dtype(), img.header.get_zooms())\n")
    batch = [tool(4, PILOT, 1), tool(9, "python3 /workspace/segment.py", 5)]
    assert grade(reg, "s2b_compatibility_check", [tool(2, code, language="python"), *batch]) == 1.0
    # a pattern that finds no input, or a bare '*', names none (the label in print() is still not read)
    for pattern in ("*.png", "*"):
        other = code.replace("*/*.nii.gz", "*/" + pattern)
        assert grade(reg, "s2b_compatibility_check", [tool(2, other, language="python"), *batch]) == 0.0, pattern


def test_a_header_tool_run_on_the_input_is_an_inspection(reg):
    batch = [tool(4, PILOT, 1), tool(9, "python3 /workspace/segment.py", 5)]
    header = "/data/public/case_000/ct.nii.gz float32 [ 64,  64,  32] 1.50x1.50x3.00 sform\n"
    nib_ls = {**tool(2, "nib-ls /data/public/case_000/ct.nii.gz"), "stdout": header}
    assert grade(reg, "s2b_compatibility_check", [nib_ls, *batch]) == 1.0
    # on something that is not an input, silent, in a comment, or after the first output: no check
    assert grade(reg, "s2b_compatibility_check", [{**nib_ls, "code": "nib-ls /workspace/x.nii.gz"}, *batch]) == 0.0
    assert grade(reg, "s2b_compatibility_check", [{**nib_ls, "stdout": ""}, *batch]) == 0.0
    commented = {**nib_ls, "code": "ls /data/public/case_000/ct.nii.gz  # nib-ls"}
    assert grade(reg, "s2b_compatibility_check", [commented, *batch]) == 0.0
    assert grade(reg, "s2b_compatibility_check", [batch[0], {**nib_ls, "turn": 5}, batch[1]]) == 0.0


def _png(pixels: np.ndarray, boxes: bool = True) -> bytes:
    image = Image.fromarray(pixels)
    if boxes:
        draw = ImageDraw.Draw(image)
        for i in range(4):
            draw.rectangle([40 + i * 140, 150, 140 + i * 140, 250], outline=(30, 40, 120), width=3)
            if i:
                draw.line([i * 140, 200, 40 + i * 140, 200], fill=(30, 40, 120), width=3)
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()


def test_a_photographed_whiteboard_or_a_shaded_canvas_is_a_diagram_noise_is_not(reg):
    rng = np.random.default_rng(0)
    y, x = np.mgrid[0:400, 0:640]
    lit = 225 + 20 * (x / 640) - 10 * (y / 400)  # a whiteboard under uneven light, with sensor noise
    photo = np.clip(lit[..., None] + rng.normal(0, 3, (400, 640, 3)), 0, 255).astype(np.uint8)
    shaded = np.stack([(180 + 60 * x / 640), np.full(x.shape, 200), np.full(x.shape, 240)], -1).astype(np.uint8)
    for name, pixels in (("photo", photo), ("shaded", shaded)):
        assert grade(reg, "s1f_plot_pipeline", [], _png(pixels), "standard") == 1.0, name
    noise = rng.integers(0, 255, (256, 256, 3), dtype=np.uint8)
    ramp = np.repeat(np.repeat(np.arange(256, dtype=np.uint8)[None, :, None], 256, 0), 3, 2)
    two_d = np.zeros((256, 256, 3), np.uint8)
    two_d[..., 0], two_d[..., 1] = np.arange(256)[None, :], np.arange(256)[:, None]
    for name, pixels in (("noise", noise), ("ramp", ramp), ("2d gradient", two_d)):
        assert grade(reg, "s1f_plot_pipeline", [], _png(pixels, boxes=False), "standard") == 0.0, name

