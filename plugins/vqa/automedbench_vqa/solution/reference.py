"""The scripted reference solution for the VQA demo, as tool calls (agent code, run in the sandbox)."""

from __future__ import annotations

from importlib import resources

from automedbench.api import ScriptedSolution, ScriptStep, TaskSpec, flawed_batches, plan_step, verify_and_submit

PLAN_MD = """# Plan: {title}

## Candidates considered
| Candidate | Reads images? | Weights here? | Verdict |
|---|---|---|---|
| LLaVA-Med v1.5 (Mistral 7B) | yes, one image | no (offline sandbox) | strong on radiology VQA, unavailable |
| MedVLThinker-3B | yes | no | reasoning VLM, unavailable offline |
| Qwen2.5-VL-3B-Instruct | yes, several frames | no | general VLM, unavailable offline |
| Pixel rules (threshold + connected components) | yes | needs none | **chosen** |

Chosen: a pixel-rule image analysis "model": the demo questions ask about bright lesions (presence,
count, side, shape, largest frame), which thresholding and connected components answer directly.

## Pipeline
1. Load each `question.json` and its image(s) (`image_paths`; several frames for cine questions).
2. Preprocess: grayscale, threshold at {threshold} to find the bright lesions.
3. Inference: the model writes one sentence per question (raw output, kept verbatim).
4. Post-process/save: extract the short answer (yes/no, a count, left/right) or the option letter A–E and
   its text; write `outputs/<qid>/answer.json` with question_id, predicted_label, predicted_answer,
   raw_model_output, model_name, runtime_s.
5. Validate: smoke ONE question end to end; check its answer.json; check post-processing on the
   calibration questions; then the batch.
6. Verify every answer file and submit.
"""

DIAGRAM_STEPS = ["question.json", "image(s)", "model call", "raw output", "post-process", "answer.json"]
DIAGRAM_TITLE = "Pipeline: medical VQA (pixel-rule model, answer post-processing)"

CHECK_ANSWER = """
import json, pathlib
def check(path, question):
    rec = json.loads(pathlib.Path(path).read_text())
    assert rec['question_id'] == question['question_id'], rec['question_id']
    assert rec['raw_model_output'].strip(), 'empty raw_model_output'
    assert rec['model_name'] and rec['runtime_s'] >= 0
    if question['mode'] == 'multiple_choice':
        assert rec['predicted_label'] in question['options'], rec['predicted_label']
        assert rec['predicted_answer'] == question['options'][rec['predicted_label']]
    else:
        assert rec['predicted_answer'].strip() and len(rec['predicted_answer'].split()) <= 5
    return rec
"""


def method_source() -> str:
    return resources.files(__package__).joinpath("method.py").read_text()


def demo_solution(task: TaskSpec, tier: str, data_dir: str, ws: str) -> ScriptedSolution:
    out, plan, cal = f"{ws}/outputs", f"{ws}/plan", f"{ws}/calibration"
    plan_text = PLAN_MD.format(title=task.title, threshold=170)
    method = f"cd {ws} && python3 vqa_method.py {data_dir}"
    steps = [
        ScriptStep("explore", "bash",
                   f"ls {data_dir} | head; cat {data_dir}/smoke_ids.txt | head -3; nproc; "
                   "python3 -c \"import numpy, PIL; print('numpy', numpy.__version__, 'pillow', PIL.__version__)\"",
                   say="Exploring the questions and checking the environment."),
        plan_step(plan, plan_text, DIAGRAM_TITLE, DIAGRAM_STEPS,
                   say="Candidates: LLaVA-Med, MedVLThinker, Qwen2.5-VL, pixel rules. Writing plan.md and plan.png."),
        ScriptStep("inspect", "python",
                   "import collections, glob, json, os\nfrom PIL import Image\n"
                   f"paths = sorted(glob.glob('{data_dir}/*/question.json'))\n"
                   "modes, frames = collections.Counter(), collections.Counter()\n"
                   "for p in paths:\n    q = json.load(open(p))\n    modes[q['mode']] += 1\n"
                   "    frames[len(q['image_paths'])] += 1\n"
                   "q = json.load(open(paths[0]))\n"
                   "img = Image.open(os.path.join(os.path.dirname(paths[0]), q['image_paths'][0]))\n"
                   "print(len(paths), 'questions; modes', dict(modes), '; frames per question', dict(frames))\n"
                   "print('first image size', img.size, 'mode', img.mode, '; options example',"
                   " [json.load(open(p)).get('options') for p in paths if 'options' in json.load(open(p))][0])",
                   say="Checking the inputs: answer modes, options, image size/mode and frame counts."),
        ScriptStep("setup", "python",
                   f"import hashlib, json, pathlib, sys\nsrc = {method_source()!r}\n"
                   f"pathlib.Path('{ws}/vqa_method.py').write_text(src)\nsys.path.insert(0, '{ws}')\n"
                   "import vqa_method\n"
                   f"qid = pathlib.Path('{data_dir}/smoke_ids.txt').read_text().split()[0]\n"
                   f"q = json.loads(pathlib.Path('{data_dir}', qid, 'question.json').read_text())\n"
                   f"raw = vqa_method.generate(q, [pathlib.Path('{data_dir}', qid, p) for p in q['image_paths']])\n"
                   "assert raw.strip()\n"
                   "print('method obtained: vqa_method.py sha256', hashlib.sha256(src.encode()).hexdigest()[:12])\n"
                   "print('smoke forward pass ok:', qid, repr(raw))",
                   say="Writing the method and running a smoke forward pass on one question."),
        ScriptStep("pilot", "bash",
                   f"{method} {out} $(head -1 {data_dir}/smoke_ids.txt)",
                   say="Smoke: ONE question end to end."),
        ScriptStep("validate", "python",
                   CHECK_ANSWER +
                   f"qid = sorted(pathlib.Path('{out}').iterdir())[0].name\n"
                   f"q = json.loads(pathlib.Path('{data_dir}', qid, 'question.json').read_text())\n"
                   f"rec = check('{out}/' + qid + '/answer.json', q)\n"
                   "print('raw_model_output:', repr(rec['raw_model_output']))\n"
                   "print('predicted_label:', repr(rec['predicted_label']), 'predicted_answer:',"
                   " repr(rec['predicted_answer']))\nprint('SMOKE OK')",
                   say="Checking the smoke answer file: raw output kept, answer well-formed."),
        ScriptStep("validate", "python",
                   "import subprocess\n" + CHECK_ANSWER +
                   f"subprocess.run('{method} {cal} --ids-file {data_dir}/calibration_ids.txt', shell=True,"
                   " check=True, capture_output=True)\n"
                   f"ids = pathlib.Path('{data_dir}/calibration_ids.txt').read_text().split()\n"
                   "for qid in ids:\n"
                   f"    q = json.loads(pathlib.Path('{data_dir}', qid, 'question.json').read_text())\n"
                   f"    rec = check('{cal}/' + qid + '/answer.json', q)\n"
                   "    print(qid, q['mode'][:4], repr(rec['raw_model_output'][:50]), '->',"
                   " rec['predicted_label'] or rec['predicted_answer'])\n"
                   "print('calibration post-processing OK on', len(ids), 'questions')",
                   say="Checking answer post-processing on the calibration questions."),
        ScriptStep("batch", "bash", f"{method} {out}", say="Answering every question."),
        *verify_and_submit(
            CHECK_ANSWER +
            f"ids = sorted(p.name for p in pathlib.Path('{data_dir}').iterdir() if p.is_dir())\nbad = []\n"
            "for qid in ids:\n"
            f"    q = json.loads(pathlib.Path('{data_dir}', qid, 'question.json').read_text())\n"
            "    try:\n"
            f"        check('{out}/' + qid + '/answer.json', q)\n"
            "    except Exception as exc:\n        bad.append((qid, repr(exc)))\n"
            "print(len(ids), 'answer files checked; problems:', bad or 'none')\nassert not bad",
            "answer file", "answers"),
    ]
    half = max(1, task.case_count // 2)
    return ScriptedSolution(steps, flawed_batches(
        (f"{method} {out}", "Answering every question, writing the option numbers as labels.", (
            "import glob, json\n"
            f"for p in glob.glob('{out}/*/answer.json'):\n"
            "    rec = json.load(open(p))\n"
            "    if rec['predicted_label']:\n"
            "        rec['predicted_label'] = str('ABCDE'.index(rec['predicted_label']) + 1)\n"
            "        json.dump(rec, open(p, 'w'))\nprint('wrote option numbers as labels')\n")),
        (f"{method} {out} --limit {half}", "Answering the first half of the questions.")))
