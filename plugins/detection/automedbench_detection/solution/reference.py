"""The scripted reference solution for the demo, as tool calls (agent code, run in the sandbox)."""

from __future__ import annotations

from importlib import resources

from automedbench.api import ScriptedSolution, ScriptStep, TaskSpec, flawed_batches, plan_step, verify_and_submit

PLAN_MD = """# Plan: {title}

## Candidates considered
| Candidate | Outputs boxes? | Weights here? | Verdict |
|---|---|---|---|
| YOLOv8/YOLO11 (ultralytics) | yes, class + score | no (offline sandbox) | strong on BCCD-like cells, unavailable |
| Faster R-CNN / RetinaNet (MMDetection) | yes | no | two-stage / focal-loss detectors, unavailable offline |
| FCOS / ATSS (MMDetection) | yes | no | anchor-free, unavailable offline |
| Classical: colour thresholds + watershed | yes (one box per region) | needs none | **chosen** |

Chosen: a classical detector. The smears have three colour classes: red cells (red well above green),
white cells (large purple regions) and platelets (small purple dots). Touching red cells are split by a
watershed on the distance transform, which also acts as the non-maximum suppression (one box per cell).

## Pipeline
1. Load `image.png` (RGB, uint8) and `meta.json` (width, height, classes).
2. Preprocess: scale to [0, 1]; colour masks (purple: blue - red; red: red - green).
3. Inference: connected components on the purple mask (WBC by size, platelets small); distance
   transform + peak_local_max + watershed on the red mask (RBC).
4. Post-process/save: one box per region in pixel corners (x1, y1, x2, y2), class from meta.json's list,
   score from roundness; write `outputs/<case>/prediction.json`.
5. Validate: pilot ONE image; check the JSON, classes, scores and coordinates; then the batch.
6. Verify every prediction file and submit.
"""

DIAGRAM_STEPS = ["image.png", "colour masks", "watershed", "boxes", "prediction.json"]
DIAGRAM_TITLE = "Pipeline: classical blood-cell detector (thresholds + watershed)"

CHECK = """
import json, pathlib
def check(case_dir, pred_path):
    meta = json.loads((pathlib.Path(case_dir) / 'meta.json').read_text())
    boxes = json.loads(pathlib.Path(pred_path).read_text())['boxes']
    for b in boxes:
        assert b['class'] in meta['classes'], b['class']
        assert 0.0 <= b['score'] <= 1.0, b['score']
        assert 0 <= b['x1'] < b['x2'] <= meta['width'] and 0 <= b['y1'] < b['y2'] <= meta['height'], b
    return meta, boxes
"""


def method_source() -> str:
    return resources.files(__package__).joinpath("method.py").read_text()


def demo_solution(task: TaskSpec, tier: str, data_dir: str, ws: str) -> ScriptedSolution:
    out, plan = f"{ws}/outputs", f"{ws}/plan"
    method = f"cd {ws} && python3 detect_cells.py {data_dir} {out}"
    first = f"$(ls {data_dir} | head -1)"
    steps = [
        ScriptStep("explore", "bash",
                   f"ls {data_dir} | head; ls {data_dir}/{first}; cat {data_dir}/{first}/meta.json; nproc; "
                   "python3 -c \"import numpy, scipy, skimage; print('numpy', numpy.__version__, "
                   "'scipy', scipy.__version__, 'scikit-image', skimage.__version__)\"",
                   say="Exploring the images and checking the environment."),
        plan_step(plan, PLAN_MD.format(title=task.title), DIAGRAM_TITLE, DIAGRAM_STEPS,
                  say="Candidates: YOLO, Faster R-CNN/RetinaNet, FCOS/ATSS, a classical detector. "
                      "Writing plan.md and plan.png."),
        ScriptStep("inspect", "python",
                   "import glob, json, numpy as np\nfrom PIL import Image\n"
                   f"path = sorted(glob.glob('{data_dir}/*/image.png'))[0]\n"
                   "img = Image.open(path)\na = np.asarray(img)\n"
                   "meta = json.load(open(path.replace('image.png', 'meta.json')))\n"
                   "print(path, 'size', img.size, 'mode', img.mode, 'shape', a.shape, 'dtype', a.dtype)\n"
                   "print('meta', meta['width'], meta['height'], meta['classes'])\n"
                   "assert img.size == (meta['width'], meta['height'])\n"
                   "print('channel means', a.reshape(-1, a.shape[-1]).mean(0).round(1).tolist())",
                   say="Checking input compatibility: image size, mode, dtype, class list."),
        ScriptStep("setup", "python",
                   f"import hashlib, pathlib, sys\nsrc = {method_source()!r}\n"
                   f"pathlib.Path('{ws}/detect_cells.py').write_text(src)\nsys.path.insert(0, '{ws}')\n"
                   "import numpy as np, detect_cells\n"
                   "boxes = detect_cells.detect(np.full((64, 64, 3), 230, dtype=np.uint8))\n"
                   "print('method obtained: detect_cells.py sha256', hashlib.sha256(src.encode()).hexdigest()[:12])\n"
                   "print('detector loaded and ready: blank image gives', len(boxes), 'boxes')",
                   say="Writing the detector and confirming it runs."),
        ScriptStep("pilot", "bash", f"{method} {first}", say="Pilot on ONE image."),
        ScriptStep("validate", "python",
                   CHECK + "import collections, os\n"
                   f"case = sorted(os.listdir('{out}'))[0]\n"
                   f"meta, boxes = check('{data_dir}/' + case, '{out}/' + case + '/prediction.json')\n"
                   "counts = collections.Counter(b['class'] for b in boxes)\n"
                   "print(case, len(boxes), 'boxes', dict(counts), 'image', meta['width'], 'x', meta['height'])\n"
                   "assert 5 <= len(boxes) <= 200 and counts['RBC'] > 0\nprint('PILOT OK')",
                   say="Validating the pilot: JSON, classes, scores, pixel coordinates inside the image."),
        ScriptStep("batch", "bash", method, say="Detecting on every image."),
        *verify_and_submit(
            CHECK + "import os\n"
            f"cases = sorted(os.listdir('{data_dir}'))\nbad = []\n"
            "for case in cases:\n"
            f"    p = '{out}/' + case + '/prediction.json'\n"
            "    try:\n"
            f"        check('{data_dir}/' + case, p)\n"
            "    except Exception as exc:\n        bad.append((case, repr(exc)))\n"
            "print(len(cases), 'prediction files checked; problems:', bad or 'none')\nassert not bad",
            "prediction file", "predictions"),
    ]
    half = f"$(ls {data_dir} | head -{max(1, task.case_count // 2)})"
    return ScriptedSolution(steps, flawed_batches(
        (method, "Detecting on every image, saving [x, y, w, h, class] rows.", (
            "import glob, json\n"
            f"for p in glob.glob('{out}/*/prediction.json'):\n"
            "    doc = json.load(open(p))\n"
            "    rows = [[b['x1'], b['y1'], b['x2'] - b['x1'], b['y2'] - b['y1'], b['class'].lower()]\n"
            "            for b in doc['boxes']]\n"
            "    json.dump(rows, open(p, 'w'))\nprint('wrote [x, y, w, h, class] rows')\n")),
        (f"{method} {half}", "Detecting on the first half.")))
