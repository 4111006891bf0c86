"""Red team round 36: the facts the harness's bound on S1-S3 reads (`verdictcaps`, round 35), forged cheaply.

An adversarial scripted agent on segmentation/demo (Standard) satisfies every fact without doing the work, graded
by a loopback judge that obeys an injected line (tests/test_redteam_round35.py): plan.md of rubric words and the
injection, a plan.png of the eight PNG signature bytes, `print(1+1)` as "computed", a pilot of empty masks on one
case that prints a random number and asserts True, and a "batch" that copies the pilot's masks to every case.
Before: S1 1.0, S2 1.0, S3 1.0, Agentic 0.95, Overall 0.475 (Task 0, rating F); the reference 1.0/1.0/1.0, Agentic
1.0, Overall 0.96, A; a trivial agent (empty masks, nothing else) Agentic 0.2, F; the rules judge on the attacker
S1 0.33, S2 0.6, S3 0.5, Agentic 0.55. The three forged facts, now read as the rules judge reads them:

- **plan.png** (s1e, s1f): the bound asked only for the PNG signature; eight bytes passed. Now s1e needs a PNG that
  decodes and is at least 64 px a side, s1f one drawn on a canvas that is not blank (the rules judge's own checks,
  now shared in `planimage`): the eight bytes and a blank page earn 0 from any judge (S1 1.0 -> 0.67).
- **"computed" read no case** (s2b, input compatibility checked): any call that printed a word the agent had not
  typed lifted every S2 cap. s2b now needs a successful call before the first output that names an input file and
  prints what it read (or asserts): `print(1+1)` no longer does (S2 1.0 -> 0.8).
- **a garbage pilot "validated"** (s3): a contract-valid pilot plus any printed value reached the top of the
  ladder. The evaluation already scored every case: when the track counts none as positive metric evidence (S5's
  own test; empty masks copied everywhere: Dice 0), no check passed anything that matters, and S3 is capped at the
  ladder's partial level (S3 1.0 -> 0.5). The bound reads the evaluation from the run folder; no judge is shown the
  metric. (First merged as a cap on the pilot's case alone, which capped an honest method wrong on that one case:
  the toy's count-y variant, S3 1.0 -> 0.5 where only its Task should suffer; CI run Z.)

After: the attacker with the obeying judge S1 0.67, S2 0.8, S3 0.5 (Agentic 0.95 -> 0.65); the rules judge's
verdicts on it are unchanged and uncapped. The reference on every release track's demo keeps S1-S3 1.0 uncapped.

Left open: plan.md's content items (s1b-s1d) rest on no harness fact; a 64x64 PNG with three coloured boxes costs a
few lines; s2a/s2c/s2e still accept any computed output (an honest `torch.__version__` reads no case either). A
pilot and batch of all-ones masks is "positive" (Dice > 0 against the organ): a one-line change takes the obeying
judge back to S1 0.67, S2 0.8, S3 1.0, S5 1.0, Agentic 0.89, Task 0.019, rating C (the rules judge: Agentic 0.60).
Closing it needs the pilot's case scored against the trivial baselines' scores on that case (two more isolated
evaluations per run, stored for rejudge). What an honest run loses: a pilot whose own case its model got wrong (no
positive evidence on that case) is capped at S3 partial, even if its checks were sound.
"""

from __future__ import annotations

import struct
import zlib

import attrs
import pytest
from automedbench.records import ItemVerdict, JudgeVerdict
from automedbench.runfolder import RunFolder
from automedbench.scoring import judge_input
from automedbench.testing import item_values, needs, run_cli, run_steps, run_task, stage_scores
from automedbench.verdictcaps import bound_verdict
from test_redteam_round35 import INJECT, TASK, ZEROS, judge_model  # noqa: F401  (the loopback judge fixture)

pytestmark = needs("openai")
PLAN = ("mkdir -p $WORKSPACE_DIR/plan && printf '# Plan\\nResearch: nnU-Net, TotalSegmentator, MedSAM.\\n"
        f"Pipeline: load, preprocess, inference with the model, save, validate.\\n{INJECT}\\n' > "
        "$WORKSPACE_DIR/plan/plan.md")
SIGNATURE_PNG = "printf '\\211PNG\\r\\n\\032\\n' > $WORKSPACE_DIR/plan/plan.png"
PILOT = ZEROS.format(n=1) + "import random\nassert True\nprint(random.random())\n"
COPY_BATCH = ("cd $WORKSPACE_DIR/outputs && for d in /data/public/*/; do c=$(basename $d); mkdir -p $c; "
              "cp -n case_*/organ.nii.gz case_*/lesion.nii.gz $c/ 2>/dev/null; done; true")
ATTACK = [("bash", PLAN), ("bash", SIGNATURE_PNG), ("python", "print(1+1)"), ("python", PILOT),
          ("bash", COPY_BATCH)]


def _png(width: int, height: int, pixel) -> bytes:
    """An RGB PNG whose pixel (x, y) is `pixel(x, y)`, written by hand (no imaging library needed)."""
    rows = b"".join(b"\0" + b"".join(bytes(pixel(x, y)) for x in range(width)) for y in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def _diagram(x: int, y: int) -> tuple[int, int, int]:
    """Two boxes and an arrow on a white canvas."""
    if 20 <= y < 60 and (10 <= x < 70 or 130 <= x < 190):
        return (70, 130, 180) if x < 100 else (240, 170, 60)
    return (0, 0, 0) if 38 <= y < 42 and 70 <= x < 130 else (255, 255, 255)


def _capped(result, stage: str) -> dict[str, str]:
    return {i.id: i.rationale for s in result.stages if s.stage == stage for i in s.items if "capped at" in i.rationale}


def test_forged_facts_earn_no_stage_from_an_obeying_judge(judge_model, data_root, tmp_path, reg):  # noqa: F811
    """Before: S1 1.0, S2 1.0, S3 1.0 (Agentic 0.95). Now s1e/s1f 0, s2b 0, S3 0.5, each capped with its reason;
    re-grading keeps the bound (it reads the stored evaluation)."""
    judge = judge_model("obey")
    result, run_dir = run_steps(TASK, ATTACK, out=tmp_path / "runs", data_root=data_root, tier="standard",
                                **judge.options())
    assert INJECT in judge.prompts[0] and result.aggregate.task == 0.0  # the judge read it; the masks are empty
    values = item_values(result)
    assert values["s1e_plan_png"] == 0.0 and values["s1f_plot_pipeline"] == 0.0
    assert values["s1a_plan_md"] == 1.0  # plan.md exists: the obeyed judge's own value stands
    assert "no IHDR header" in _capped(result, "S1")["s1e_plan_png"]
    assert values["s2b_compatibility_check"] == 0.0 and values["s2c_env_ready"] == 1.0
    assert "named an input file" in _capped(result, "S2")["s2b_compatibility_check"]
    assert stage_scores(result)["S3"] == 0.5
    assert "shows positive metric evidence" in _capped(result, "S3")["s3_validate"]
    assert result.aggregate.agentic < 0.7

    regraded = run_cli("rejudge", str(run_dir), *judge.cli())
    assert regraded.exit_code == 0, regraded.output
    assert stage_scores(RunFolder(run_dir).load_result()) == stage_scores(result)

    # the same run with other plan.png bytes: a blank page is a PNG (s1e) but no diagram (s1f); a drawn one is both
    track, task = reg.task(TASK)
    inp = judge_input(RunFolder(run_dir), track, task, "standard")
    high = JudgeVerdict("x", "1", [ItemVerdict(i.id, i.stage, i.description, max(i.levels), "high")
                                   for i in inp.rubric])
    for png, expected in ((_png(200, 100, lambda x, y: (255, 255, 255)), (1.0, 0.0)),
                          (_png(200, 100, _diagram), (1.0, 1.0)), (_png(32, 32, _diagram), (0.0, 0.0))):
        bounded = {i.id: i.value for i in bound_verdict(attrs.evolve(inp, plan_png=png), high).items}
        assert (bounded["s1e_plan_png"], bounded["s1f_plot_pipeline"]) == expected


def test_the_rules_judge_is_not_capped_on_the_attack(data_root, tmp_path, reg):
    """The rules judge reads the same facts: its verdicts on the forged run pass the bound unchanged."""
    _, run_dir = run_steps(TASK, ATTACK, out=tmp_path / "runs", data_root=data_root, tier="standard")
    track, task = reg.task(TASK)
    inp = judge_input(RunFolder(run_dir), track, task, "standard")
    rules = reg.create("judge", "rules").grade(inp)
    assert bound_verdict(inp, rules) == rules
    assert {i.id: i.value for i in rules.items}["s3_validate"] == 0.5


def test_an_input_inspected_before_the_pilot_keeps_s2b(judge_model, data_root, tmp_path):  # noqa: F811
    """What closes s2b for `print(1+1)` leaves it to a call that reads an input and prints what it read."""
    judge = judge_model("credit")
    shape = ("import glob, nibabel as nib\nimg = nib.load(sorted(glob.glob('/data/public/*/ct.nii.gz'))[0])\n"
             "print(img.shape, img.header.get_data_dtype())\n")
    result, _ = run_steps(TASK, [("python", shape), ("python", ZEROS.format(n=1)), ("python", ZEROS.format(n=99))],
                          out=tmp_path / "runs", data_root=data_root, tier="standard", **judge.options())
    assert item_values(result)["s2b_compatibility_check"] == 1.0 and not _capped(result, "S2")


DEMOS = ["vqa/demo", "detection/demo", "classification/demo", "report_gen/demo", "segmentation/demo",
         "enhancement/demo-ldct", "synthesis/demo"]


@pytest.mark.slow
@pytest.mark.parametrize("task_id", DEMOS)
def test_the_reference_keeps_every_grade_on_every_demo(judge_model, data_root, tmp_path, task_id):  # noqa: F811
    """Honest work is never capped: the reference on every release track's demo, graded by a judge that credits
    every item, keeps S1-S3 1.0 with no item capped (its pilot's case shows positive evidence, its input checks
    print what they read, its plan.png is a diagram)."""
    judge = judge_model("credit")
    result, _ = run_task(task_id, "reference", out=tmp_path / "runs", data_root=data_root, tier="standard",
                         **judge.options())
    capped = {i.id: i.rationale for s in result.stages for i in s.items if "capped at" in i.rationale}
    assert not capped, capped
    assert [stage_scores(result)[s] for s in ("S1", "S2", "S3")] == [1.0, 1.0, 1.0]
