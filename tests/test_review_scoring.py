"""Adversarial review of the rating rules: boundaries that a float or a rounding step could misplace."""

from __future__ import annotations

import pytest
from automedbench import scoring
from automedbench.records import CaseVerdict, Evaluation, MetricBlock, RatingThresholds


def evaluation(valid: int, expected: int, value: float) -> Evaluation:
    cases = [CaseVerdict(f"c{i}", True, i < valid) for i in range(expected)]
    return Evaluation("t/x", expected, expected, valid, cases, MetricBlock("m", 0.0, value, used="partial"))


@pytest.mark.parametrize("share,valid,expected", [(0.55, 55, 100), (0.28, 7, 25), (0.56, 14, 25), (0.7, 7, 10)])
def test_exactly_the_minimum_valid_share_is_not_failed(share, valid, expected):
    """55 of 100 valid meets min_valid 0.55, though 0.55 * 100 is 55.00000000000001 in floating point."""
    ev = evaluation(valid, expected, 0.5)
    letter, why = scoring.rate(ev, ev.metric, RatingThresholds(0.7, 0.3, share), False)
    assert letter == "B", why
    ev = evaluation(valid - 1, expected, 0.5)
    assert scoring.rate(ev, ev.metric, RatingThresholds(0.7, 0.3, share), False)[0] == "F"


def test_rating_agrees_with_the_reported_task_value():
    """The rating reads the unrounded Task (0.699996 is below the 0.70 'good' line: B), and the Task is
    stored and shown cut, not rounded, so neither reads 0.7 beside a B."""
    ev = evaluation(4, 4, 0.699996)
    letter, why = scoring.rate(ev, ev.metric, RatingThresholds(0.7, 0.3, 1.0), False)
    agg = scoring.aggregate([], ev.metric, (letter, why))
    assert letter == "B" and "0.699" in why, why
    assert agg.task == 0.6999
    ev = evaluation(4, 4, 0.7)
    assert scoring.rate(ev, ev.metric, RatingThresholds(0.7, 0.3, 1.0), False)[0] == "A"
    assert scoring.aggregate([], ev.metric, ("A", "")).task == 0.7


def test_raw_output_is_not_a_second_guess():
    """By default only the prediction is graded; upstream's raw-fallback is `--eval-option raw_fallback=true`."""
    from automedbench_vqa.answer_judge import JudgeRequest, OfflineAnswerJudge

    request = JudgeRequest("q1", "Which organ is enlarged?", "left kidney", "right kidney",
                           raw_output="the left kidney")
    assert OfflineAnswerJudge().judge(request).score <= 0.5


def test_rules_judge_step_count_is_linear_in_a_blank_plan():
    """A plan.md of blank lines made the step regex quadratic: 20 MB (the copy limit) would hang the judge."""
    import time
    import types

    from automedbench.judges.rules import RulesJudge

    judge_input = types.SimpleNamespace(plan_md="1. load\n2. predict\n3. save\n" + "\n" * 20_000 + "end")
    started = time.monotonic()
    value, why, _ = RulesJudge()._s1b(None, judge_input, None)
    assert time.monotonic() - started < 0.5
    assert value == 1.0 and why.startswith("3 listed steps"), why


EMPTY_MASKS = ("import os, nibabel as nib, numpy as np\nd, w = os.environ['DATA_DIR'], os.environ['WORKSPACE_DIR']\n"
               "for case in sorted(os.listdir(d))[:LIMIT]:\n    ct = nib.load(f'{d}/{case}/ct.nii.gz')\n"
               "    os.makedirs(f'{w}/outputs/{case}', exist_ok=True)\n    for n in ('organ', 'lesion'):\n"
               "        empty = nib.Nifti1Image(np.zeros(ct.shape, np.uint8), ct.affine)\n"
               "        nib.save(empty, f'{w}/outputs/{case}/{n}.nii.gz')")
KEYWORD_STEPS = [
    ["bash", "mkdir -p $WORKSPACE_DIR/plan && cat > $WORKSPACE_DIR/plan/plan.md <<'X'\n# Plan\n"
             "1. load the CT volumes and read their input headers\n2. preprocess: intensity normalise\n"
             "3. inference: predict organ and lesion masks with the tumour model\n4. save masks\n"
             "5. validate one pilot case first\nX"],
    ["python", "import os, nibabel as nib\nimg = nib.load(os.environ['DATA_DIR'] + '/case_000/ct.nii.gz')\n"
               "print(img.shape, img.get_data_dtype(), img.affine.shape)\nprint('method obtained; model loaded')"],
    ["python", EMPTY_MASKS.replace("LIMIT", "1")],
    ["python", "import glob, nibabel as nib, numpy as np\nfor p in glob.glob('outputs/*/*.nii.gz'):\n"
               "    a = np.asarray(nib.load(p).dataobj)\n    print(p, a.shape, np.unique(a), a.sum())"],
    ["python", EMPTY_MASKS.replace("LIMIT", "")],
]


@pytest.mark.slow  # whole demo runs
def test_keyword_echoes_and_comments_add_nothing_to_the_agentic_score(reg, data_root, staged, tmp_path):
    """An agent that runs no model, writes empty masks and echoes "method obtained; model loaded" (plus the
    keywords in comments and an `echo` step) scores exactly what the same steps score without that text;
    s2a, whose only evidence was the echo, is 0 (it was 1 before the rules matched effective code only).

    Changed on purpose from "agentic < 0.5" (a strict xfail): what remains is credit for real actions -- a
    plan file, a real header inspection, a real one-case pilot that passes the contract, printed shape/value
    checks, complete valid outputs. Seeing that the work behind them is empty (the checks print all-zero
    masks) is a judgement of substance: an LLM judge's job, not a deterministic rule's."""
    from automedbench.testing import item_values, stage_scores
    from review_steps import register_steps, run_steps

    plain = [KEYWORD_STEPS[0], ["python", KEYWORD_STEPS[1][1].replace("\nprint('method obtained; model loaded')", "")],
             *KEYWORD_STEPS[2:]]
    noisy = [KEYWORD_STEPS[0], ["python", KEYWORD_STEPS[1][1] + "  # snapshot_download from_pretrained pip install"],
             ["bash", "echo 'snapshot_download done; model loaded; method ready'  # wget curl git clone"],
             *KEYWORD_STEPS[2:]]
    reg = register_steps(reg)
    echoed, _ = run_steps(reg, tmp_path / "echoed", data_root, KEYWORD_STEPS)
    commented, _ = run_steps(reg, tmp_path / "noisy", data_root, noisy)
    baseline, _ = run_steps(reg, tmp_path / "plain", data_root, plain)
    assert echoed.aggregate.task == 0.0  # the masks are empty: the work was not done
    assert item_values(echoed)["s2a_model_obtained"] == item_values(commented)["s2a_model_obtained"] == 0.0
    assert stage_scores(echoed) == stage_scores(commented) == stage_scores(baseline)
