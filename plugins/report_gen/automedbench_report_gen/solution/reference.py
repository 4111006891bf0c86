"""The scripted reference solution for the report demo, as tool calls (agent code, run in the sandbox)."""

from __future__ import annotations

from importlib import resources

from automedbench.api import ScriptedSolution, ScriptStep, TaskSpec, flawed_batches, plan_step, verify_and_submit

PLAN_MD = """# Plan: {title}

## Candidates considered
| Candidate | Multi-view? | Weights here? | Verdict |
|---|---|---|---|
| MLRG (mk-runner/MLRG) | yes, longitudinal multi-view | no (offline) | strongest open CXR report model; unavailable |
| CXRMate (aehrc/cxrmate) | yes | no | unavailable offline |
| HERGen (HKU-MedAI/HERGen) | history-aware | no | unavailable offline |
| R2-LLM (synlp/R2-LLM) | single image + LLM | no | unavailable offline |
| Pixel rules (cohort-median difference + anatomical zones) | yes, union over views | needs none | **chosen** |

Chosen model: the pixel-rule reporter `report_method.py` (inference entrypoint:
`python3 report_method.py DATA_DIR OUT_DIR [CASE_ID ...]`). The studies share one base radiograph, so
the difference from the cohort median, read in anatomical zones, shows effusion, cardiomegaly,
consolidation, pneumothorax and tubes.

## Rules
- One case is one study: every file in `manifest.json["image_files"]` is read (all views), findings are
  the union over the views (a small pneumothorax may show on the expiratory view only).
- Output path: `outputs/<case_id>/report.txt`, FINDINGS first, then IMPRESSION.

## Pipeline
1. Load: read each `manifest.json` and every image in `image_files`.
2. Preprocess: window each view to its 1-99 % percentiles; build the cohort median background.
3. Inference: zone means of each view's difference -> findings (union over views).
4. Post-process/save: write the findings as report sentences to `outputs/<case_id>/report.txt`.
5. Validate: pilot the study in `pilot_ids.txt` first; open its report.txt and check FINDINGS present,
   40-8000 printable characters, views_used equals the number of image_files; rerun if it fails.
6. Batch every study, verify every report, submit.
"""

DIAGRAM_STEPS = ["manifest.json", "all views", "median diff", "zone rules", "sentences", "report.txt"]
DIAGRAM_TITLE = "Pipeline: chest X-ray findings (pixel rules, all views of a study)"

CHECK_REPORT = """
import json, pathlib, string
def check(out, data, case):
    text = pathlib.Path(out, case, 'report.txt').read_text()
    assert text.startswith('FINDINGS:'), text[:40]
    assert 40 <= len(text) <= 8000 and sum(c.isalpha() for c in text) >= 20
    assert all(c in string.printable for c in text)
    manifest = json.loads(pathlib.Path(data, case, 'manifest.json').read_text())
    return text, len(manifest['image_files'])
"""


def method_source() -> str:
    return resources.files(__package__).joinpath("method.py").read_text()


def demo_solution(task: TaskSpec, tier: str, data_dir: str, ws: str) -> ScriptedSolution:
    out, plan = f"{ws}/outputs", f"{ws}/plan"
    method = f"cd {ws} && python3 report_method.py {data_dir}"
    steps = [
        ScriptStep("explore", "bash",
                   f"ls {data_dir} | head; cat {data_dir}/pilot_ids.txt; nproc; "
                   "python3 -c \"import numpy, PIL; print('numpy', numpy.__version__, 'pillow', PIL.__version__)\"",
                   say="Exploring the studies and checking the environment."),
        plan_step(plan, PLAN_MD.format(title=task.title), DIAGRAM_TITLE, DIAGRAM_STEPS,
                  say="Candidates: MLRG, CXRMate, HERGen, R2-LLM, pixel rules. Writing plan.md and plan.png."),
        ScriptStep("inspect", "python",
                   "import collections, glob, json, os\nfrom PIL import Image\n"
                   f"paths = sorted(glob.glob('{data_dir}/*/manifest.json'))\nviews = collections.Counter()\n"
                   "for p in paths:\n    m = json.load(open(p))\n    views[len(m['image_files'])] += 1\n"
                   "m = json.load(open(paths[0]))\n"
                   "for f in m['image_files']:\n"
                   "    img = Image.open(os.path.join(os.path.dirname(paths[0]), f))\n"
                   "    print(f, img.size, img.mode)\n"
                   "print(len(paths), 'studies; views per study', dict(views), '; positions', m.get('view_positions'))",
                   say="Reading the manifests and opening every image of a study."),
        ScriptStep("setup", "python",
                   f"import hashlib, pathlib, subprocess\nsrc = {method_source()!r}\n"
                   f"pathlib.Path('{ws}/report_method.py').write_text(src)\n"
                   f"case = pathlib.Path('{data_dir}/pilot_ids.txt').read_text().split()[0]\n"
                   f"run = subprocess.run(['python3', '{ws}/report_method.py', '{data_dir}', '{ws}/smoke', case],"
                   " capture_output=True, text=True, check=True)\n"
                   "print(run.stdout.strip())\n"
                   "print('method obtained: report_method.py sha256', hashlib.sha256(src.encode()).hexdigest()[:12])\n"
                   "print('pipeline ran ok on', case)",
                   say="Writing the reporter (the entrypoint named in the plan) and running it once."),
        ScriptStep("pilot", "bash", f"{method} {out} $(head -1 {data_dir}/pilot_ids.txt)",
                   say="Pilot: ONE study end to end with the same entrypoint."),
        ScriptStep("validate", "python",
                   CHECK_REPORT +
                   f"case = pathlib.Path('{data_dir}/pilot_ids.txt').read_text().split()[0]\n"
                   f"text, n = check('{out}', '{data_dir}', case)\n"
                   "print(text)\n"
                   f"import subprocess\nrun = subprocess.run(['python3', '{ws}/report_method.py', '{data_dir}', "
                   f"'{ws}/smoke', case], capture_output=True, text=True, check=True).stdout\n"
                   "views_used = int(run.split('views_used ')[1].split('/')[0])\n"
                   "assert views_used == n, (views_used, n)\n"
                   "print('PILOT OK: FINDINGS present,', len(text), 'characters, views_used', views_used, 'of', n,"
                   " 'image_files')",
                   say="Opening the pilot report and checking it: format, FINDINGS, all views used."),
        ScriptStep("batch", "bash", f"{method} {out}", say="Reporting every study."),
        *verify_and_submit(
            CHECK_REPORT +
            f"cases = sorted(p.name for p in pathlib.Path('{data_dir}').iterdir() if p.is_dir())\nbad = []\n"
            "for case in cases:\n"
            "    try:\n"
            f"        check('{out}', '{data_dir}', case)\n"
            "    except Exception as exc:\n        bad.append((case, repr(exc)))\n"
            f"texts = {{pathlib.Path('{out}', c, 'report.txt').read_text() for c in cases}}\n"
            "print(len(cases), 'reports checked;', len(texts), 'distinct; problems:', bad or 'none')\n"
            "assert not bad",
            "report", "reports"),
    ]
    half = max(1, task.case_count // 2)
    return ScriptedSolution(steps, flawed_batches(
        (f"{method} {out}", "Reporting every study, with bullet points.", (
            "import glob\n"
            f"for p in glob.glob('{out}/*/report.txt'):\n"
            "    text = open(p).read().replace('FINDINGS: ', 'FINDINGS:\\n\\u2022 ')\n"
            "    open(p, 'w', encoding='utf-8').write(text)\nprint('bulleted the findings')\n")),
        (f"{method} {out} --limit {half}", "Reporting the first half of the studies.")))
