"""The scripted reference solution for the demo, as tool calls (agent code, run in the sandbox)."""

from __future__ import annotations

from importlib import resources

from automedbench.api import ScriptedSolution, ScriptStep, TaskSpec, flawed_batches, plan_step, verify_and_submit

PLAN_MD = """# Plan: {title}

## Candidates considered
| Candidate | Classes | Weights here? | Verdict |
|---|---|---|---|
| demo-lesion-vit, the pinned ViT (transformers; assets folder) | 7 (abbreviations) | yes, offline | **chosen** |
| ViT-B/16 fine-tuned on HAM10000 (transformers) | 7 (abbreviations) | no (offline) | unavailable |
| EfficientNet / ConvNeXt fine-tuned on ISIC 2018 | 7 | no | unavailable offline |

Chosen: the pinned checkpoint in `$ASSETS_DIR`, loaded with `AutoModelForImageClassification` and
`AutoImageProcessor` from local files only. It answers with the checkpoint's abbreviations
(id2label {{0: akiec, 1: bcc, 2: bkl, 3: df, 4: mel, 5: nv, 6: vasc}}), so every label is mapped onto the
task's canonical class names (`meta.json` classes) before writing.

## Pipeline
1. Load `image.jpg` (RGB) and `meta.json` (classes).
2. Preprocess: the checkpoint's processor (resize to its input size, rescale 1/255, mean = std = 0.5).
3. Inference: logits of shape (batch, 7) -> softmax -> argmax -> id2label abbreviation.
4. Post-process/save: abbreviation -> canonical class name; write `outputs/<case>/prediction.json`
   {{"label": ...}}.
5. Validate: pilot ONE image; check the logits' length, the probabilities' sum and that the label is one of
   meta.json's classes; then a class histogram on ten images; then the batch.
6. Verify every prediction file and submit.
"""

DIAGRAM_STEPS = ["image.jpg", "ViT processor", "ViT logits (1x7)", "id2label -> class", "prediction.json"]
DIAGRAM_TITLE = "Pipeline: the pinned ViT classifier, labels mapped to canonical names"

EXPANSIONS = {"akiec": "actinic_keratoses", "bcc": "basal_cell_carcinoma", "bkl": "benign_keratosis_like_lesions",
              "df": "dermatofibroma", "mel": "melanoma", "nv": "melanocytic_nevi", "vasc": "vascular_lesions"}

CHECK = """
import json, pathlib
def check(case_dir, pred_path):
    meta = json.loads((pathlib.Path(case_dir) / 'meta.json').read_text())
    label = json.loads(pathlib.Path(pred_path).read_text())['label']
    assert label in meta['classes'], label
    return label
"""


def method_source() -> str:
    return resources.files(__package__).joinpath("method.py").read_text()


def demo_solution(task: TaskSpec, tier: str, data_dir: str, ws: str) -> ScriptedSolution:
    out, plan = f"{ws}/outputs", f"{ws}/plan"
    method = f'cd {ws} && python3 classify_lesions.py "$ASSETS_DIR" {data_dir} {out} {ws}/label_map.json'
    first = f"$(ls {data_dir} | head -1)"
    steps = [
        ScriptStep("explore", "bash",
                   f"ls {data_dir} | head; ls {data_dir}/{first}; cat {data_dir}/{first}/meta.json; nproc; "
                   'echo "assets: $ASSETS_DIR"; ls -l "$ASSETS_DIR"; cat "$ASSETS_DIR/preprocessor_config.json"; '
                   # the versions from the installed metadata: importing torch and transformers only to print
                   # them cost a few CPU-seconds per run (the setup step imports them anyway)
                   "python3 -c \"from importlib.metadata import version; print('torch', version('torch'), "
                   "'transformers', version('transformers'), 'pillow', version('pillow'))\"",
                   say="Exploring the images, the pinned checkpoint's files and the environment."),
        plan_step(plan, PLAN_MD.format(title=task.title), DIAGRAM_TITLE, DIAGRAM_STEPS,
                  say="Candidates: the pinned ViT, a HAM10000 ViT-B/16, EfficientNet/ConvNeXt. "
                      "Writing plan.md and plan.png."),
        ScriptStep("inspect", "python",
                   "import glob, json, numpy as np\nfrom PIL import Image\n"
                   f"path = sorted(glob.glob('{data_dir}/*/image.jpg'))[0]\n"
                   "img = Image.open(path)\na = np.asarray(img)\n"
                   "meta = json.load(open(path.replace('image.jpg', 'meta.json')))\n"
                   "print(path, 'size', img.size, 'mode', img.mode, 'shape', a.shape, 'dtype', a.dtype)\n"
                   "print('classes', meta['classes'])\nassert img.mode == 'RGB'",
                   say="Checking input compatibility: image size, mode, dtype, class list."),
        ScriptStep("setup", "python",
                   f"import hashlib, json, os, pathlib, sys\nsrc = {method_source()!r}\n"
                   f"pathlib.Path('{ws}/classify_lesions.py').write_text(src)\nsys.path.insert(0, '{ws}')\n"
                   "import classify_lesions\nassets = os.environ['ASSETS_DIR']\n"
                   "model, processor = classify_lesions.load(assets)\n"
                   "print('processor', type(processor).__name__, 'size', processor.size, "
                   "'mean', processor.image_mean, 'std', processor.image_std)\n"
                   f"meta = json.load(open(sorted(pathlib.Path('{data_dir}').glob('*/meta.json'))[0]))\n"
                   f"expansions = {EXPANSIONS!r}\n"
                   "id2label = model.config.id2label\nprint('id2label', id2label)\n"
                   "label_map = {abbr: expansions[abbr] for abbr in id2label.values()}\n"
                   "assert sorted(label_map.values()) == sorted(meta['classes']), (label_map, meta['classes'])\n"
                   f"pathlib.Path('{ws}/label_map.json').write_text(json.dumps(label_map, indent=1))\n"
                   "print('mapping id2label -> classes, one-to-one:', label_map)\n"
                   "weights = pathlib.Path(assets, 'model.safetensors').read_bytes()\n"
                   "print('checkpoint model.safetensors sha256', hashlib.sha256(weights).hexdigest()[:12])\n"
                   "print('classifier loaded and ready:', len(id2label), 'classes,', "
                   "sum(p.numel() for p in model.parameters()), 'parameters')",
                   say="Loading the pinned checkpoint offline, checking its id2label against the task's classes."),
        ScriptStep("pilot", "bash", f"{method} {first}", say="Pilot on ONE image."),
        ScriptStep("validate", "python",
                   CHECK + "import collections, json, os, sys\n"
                   f"sys.path.insert(0, '{ws}')\nimport classify_lesions\n"
                   "model, processor = classify_lesions.load(os.environ['ASSETS_DIR'])\n"
                   f"case = sorted(os.listdir('{out}'))[0]\n"
                   f"label = check('{data_dir}/' + case, '{out}/' + case + '/prediction.json')\n"
                   f"(name, probs), = classify_lesions.predict(model, processor, "
                   f"[classify_lesions.read_image('{data_dir}/' + case + '/image.jpg')])\n"
                   "print(case, '->', name, '->', label, '(one of the classes); scores', len(probs), "
                   "'sum', round(sum(probs), 4))\n"
                   "assert len(probs) == len(model.config.id2label) and abs(sum(probs) - 1) < 1e-4\n"
                   f"label_map = json.load(open('{ws}/label_map.json'))\n"
                   f"few = sorted(os.listdir('{data_dir}'))[:10]\n"
                   f"images = [classify_lesions.read_image('{data_dir}/' + c + '/image.jpg') for c in few]\n"
                   "hist = collections.Counter(label_map[n] for n, _ in "
                   "classify_lesions.predict(model, processor, images))  # in memory: nothing written\n"
                   "print('predicted-class histogram on 10 images:', dict(hist))\n"
                   "assert set(hist) <= set(label_map.values()) and len(hist) > 1, "
                   "'every prediction is one class: check the preprocessing'\n"
                   "print('PILOT OK')",
                   say="Validating the pilot: one score per class, the label maps onto a class; then a class "
                       "histogram on ten images."),
        ScriptStep("batch", "bash", method, say="Classifying every image."),
        *verify_and_submit(
            CHECK + "import collections, os\n"
            f"cases = sorted(os.listdir('{data_dir}'))\nbad, hist = [], collections.Counter()\n"
            "for case in cases:\n"
            f"    p = '{out}/' + case + '/prediction.json'\n"
            "    try:\n"
            f"        hist[check('{data_dir}/' + case, p)] += 1\n"
            "    except Exception as exc:\n        bad.append((case, repr(exc)))\n"
            "print(len(cases), 'prediction files checked; problems:', bad or 'none')\n"
            "print('class histogram:', dict(hist))\nassert not bad",
            "prediction file", "predictions"),
    ]
    half = f"$(ls {data_dir} | head -{max(1, task.case_count // 2)})"
    plain = f'cd {ws} && python3 classify_lesions.py "$ASSETS_DIR" {data_dir} {out}'
    return ScriptedSolution(steps, flawed_batches(
        (plain, "Classifying every image, writing the model's labels as they are."),
        (f"{method} {half}", "Classifying the first half.")))
