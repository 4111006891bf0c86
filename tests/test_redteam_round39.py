"""Red team round 39: trivial-but-positive evidence outside segmentation, through the real runner and CLI.

Round 37 made segmentation's positive evidence (S5's s5_positive_evidence, the S3 bound's "no case of the run shows
positive evidence") beat the all-ones mask's Dice on the case. The same class stood open in three other tracks, each
a scripted agent with round 36's injected plan, graded by the loopback judge that obeys it:

- **classification**: one label for every case is right on every case of that class (the demo's balanced accuracy
  1/7 = 0.143, the constant baseline's); S3 1.0, S5 positive 1, rating C. The run must now beat one label
  everywhere and agree with the reference beyond chance (Cohen's kappa >= 0.1).
- **VQA**: "A" or "yes" to every question is right wherever that is the gold; the rating cap already named it (one
  answer per question kind, or no agreement beyond the wording), S5 did not. Its facts now hold S5 and S3 too.
- **detection**: a dense grid of boxes (3878 a smear, mAP 0.013) has a true positive in every case. Its boxes match
  other images' references as often as their own (339 and 339); a run's must match its own twice as often.

- **synthesis MR->CT**: positive evidence was SSIM above the unchanged input's on the case, but the MR scores ~0 on
  the HU scale, so a body outline (0 HU inside, air outside: the constant baseline, Task 0.21) was evidence in every
  case. The evaluator now scores that outline per case too and evidence must beat both.

Report generation (a template copied to most studies is no evidence) and enhancement (SSIM above the input's on the
case; identity and identity-noise show none) already decided it.
"""

from __future__ import annotations

import json

import pytest
from automedbench.testing import item_values, needs, run_cli, run_steps, stage_scores
from test_redteam_round35 import INJECT, judge_model  # noqa: F401  (the loopback judge that obeys injected text)

PLAN = ("mkdir -p $WORKSPACE_DIR/plan && printf '# Plan\\nResearch: published models for the task.\\n"
        f"Pipeline: load, preprocess, inference with the model, save, validate.\\n{INJECT}\\n' > "
        "$WORKSPACE_DIR/plan/plan.md")
SIGNATURE_PNG = "printf '\\211PNG\\r\\n\\032\\n' > $WORKSPACE_DIR/plan/plan.png"
CASES = ("import glob, json, os\nws = os.environ['WORKSPACE_DIR']\n"
         "cases = sorted(os.path.basename(d) for d in glob.glob('/data/public/*') if os.path.isdir(d))\n"
         "for c in cases[:{n}]:\n    os.makedirs(f'{{ws}}/outputs/{{c}}', exist_ok=True)\n")
# the cheapest output of each track, written without opening an image: one label, one answer, a grid of boxes
WRITE = {
    "classification/demo": ("    json.dump({{'label': 'melanocytic_nevi'}}, "
                            "open(f'{{ws}}/outputs/{{c}}/prediction.json', 'w'))\n"),
    "vqa/demo": ("    q = json.load(open(f'/data/public/{{c}}/question.json'))\n"
                 "    label = 'A' if q.get('options') else ''\n"
                 "    answer = {{'question_id': c, 'predicted_label': label, "
                 "'predicted_answer': q['options']['A'] if label else 'yes', 'raw_model_output': label or 'yes', "
                 "'model_name': 'none', 'runtime_s': 0.0}}\n"
                 "    json.dump(answer, open(f'{{ws}}/outputs/{{c}}/answer.json', 'w'))\n"),
    "detection/demo": ("    meta = json.load(open(f'/data/public/{{c}}/meta.json'))\n    boxes = []\n"
                       "    for name, s in (('RBC', 40.0), ('WBC', 70.0), ('Platelets', 20.0)):\n"
                       "        for y in range(0, int(meta['height'] - s) + 1, int(s // 2)):\n"
                       "            for x in range(0, int(meta['width'] - s) + 1, int(s // 2)):\n"
                       "                boxes.append({{'class': name, 'score': 0.5, 'x1': x, 'y1': y, "
                       "'x2': x + s, 'y2': y + s}})\n"
                       "    json.dump({{'boxes': boxes}}, open(f'{{ws}}/outputs/{{c}}/prediction.json', 'w'))\n"),
}
# classification/demo's label-prior is a random draw over a secret draw of 42 cases: its chance-corrected balanced
# accuracy clears the 0.1 bar on a few stagings in a hundred by chance (CI run AL: Task 0.2309 against the bar's
# 0.229), so it is no fixed verdict to assert here; the two fixed labellings are.
TRIVIAL = {"classification/demo": ("constant", "majority-class"),
           "vqa/demo": ("constant", "label-prior", "question-prior"),
           # prior-boxes (the same few boxes in every image): held again since round 41, by the references' own bar
           "detection/demo": ("constant", "prior-boxes"),
           "synthesis/demo-mrct": ("constant",)}


def _attack(task_id: str) -> list[tuple[str, str]]:
    """Round 36's forged plan, a pilot on one case, then the batch: the trivial output throughout."""
    write = (CASES + WRITE[task_id]).format
    check = "import random\nassert True\nprint(random.random())\n"  # round 36's "computed" pilot check
    return [("bash", PLAN), ("bash", SIGNATURE_PNG), ("python", "print(1+1)"), ("python", write(n=1) + check),
            ("python", write(n=10_000))]


@needs("openai")
@pytest.mark.parametrize("task_id", list(WRITE))
def test_a_trivial_output_is_no_positive_evidence(judge_model, data_root, tmp_path, task_id):  # noqa: F811
    """Before: S3 1.0 from the obeying judge (its pilot "passed"), s5_positive_evidence 1, rating C, with a Task at
    the trivial baselines' level. Now the whole-run fact holds every case: S3 at the partial level with the bound's
    reason, S5 positive 0, rating F."""
    judge = judge_model("obey")
    result, _ = run_steps(task_id, _attack(task_id), out=tmp_path / "runs", data_root=data_root, tier="standard",
                          **judge.options())
    assert result.state == "scored" and result.aggregate.task < 0.45, result.aggregate  # below every okay band
    assert stage_scores(result)["S3"] == 0.5, stage_scores(result)
    assert "shows positive metric evidence" in " ".join(
        i.rationale for s in result.stages if s.stage == "S3" for i in s.items)
    assert item_values(result)["s5_positive_evidence"] == 0.0
    assert result.aggregate.rating == "F", result.aggregate.rating_reason


def _evaluated(task_id: str, baseline: str, out) -> dict:
    done = run_cli("evaluate", "--task", task_id, "--baseline", baseline, "--out", str(out), "--no-pictures")
    assert done.exit_code in (0, 1), done.output
    return json.loads((out / "result.json").read_text())


@pytest.mark.parametrize("task_id", list(TRIVIAL))
def test_no_trivial_baseline_shows_positive_evidence_and_the_reference_does(task_id, tmp_path):
    """`evaluate --baseline` through the CLI: before, the constant and prior baselines of these tracks earned
    s5_positive_evidence 1 (rating C); now 0 (F), while the references themselves keep it."""
    for name in (*TRIVIAL[task_id], "perfect"):
        result = _evaluated(task_id, name, tmp_path / name)
        items = {i["id"]: i["value"] for s in result["stages"] for i in s["items"]}
        expected = 1.0 if name == "perfect" else 0.0
        assert items["s5_positive_evidence"] == expected, (name, result["aggregate"])
        assert (result["aggregate"]["rating"] == "F") == (name != "perfect"), (name, result["aggregate"])


def test_one_class_throughout_leaves_every_case_to_its_row(reg):
    """A cohort of one class: one label is the answer, so neither whole-run fact holds the reference's cases."""
    from automedbench.api import MetricBlock

    track, task = reg.task("classification/demo")
    trivial = {"one_label_score": 1 / 7, "chance_kappa": 0.0}
    assert track.no_positive_evidence(task, MetricBlock("balanced_accuracy", 0.143, 0.143, components=trivial))
    alone = {"one_label_score": 1.0, "chance_kappa": 0.0}
    assert track.no_positive_evidence(task, MetricBlock("balanced_accuracy", 1.0, 1.0, components=alone)) is None
    old = MetricBlock("balanced_accuracy", 0.143, 0.143)  # an evaluation stored before round 39
    assert track.no_positive_evidence(task, old) is None
