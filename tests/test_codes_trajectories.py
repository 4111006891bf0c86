"""Generic detectors on hand-written trajectories: the E2/E3/E4 rules that the scripted agents do not hit."""

from __future__ import annotations

import copy

import pytest
from automedbench.detectors import CodeContext
from automedbench.records import CaseVerdict
from automedbench_codes.generic import ExecutionDetector, SetupDetector, VerificationDetector
from automedbench_codes.tagging import detect

OUTPUTS = ["organ.nii.gz", "lesion.nii.gz"]


def call(turn, code, exit_code=0, stderr="", changed=(), with_outputs=0, stdout=""):
    return {"type": "tool", "name": "execute_code", "turn": turn, "code": code, "exit_code": exit_code,
            "stdout": stdout, "stderr": stderr, "changed_cases": list(changed), "cases_with_outputs": with_outputs}


@pytest.fixture()
def base(run_agent):
    result, _ = run_agent("noop")
    result = copy.deepcopy(result)
    result.error_codes = []
    return result


def ctx(result, events, present=0):
    result.cases = [CaseVerdict(f"case_{i:03d}", i < present, i < present) for i in range(5)]
    return CodeContext(result, events, None, OUTPUTS)


def test_setup_failure_blocking_everything_is_e2(base):
    events = [call(1, "import monai", 1, "Traceback (most recent call last):\nModuleNotFoundError: No module "
                   "named 'monai'"), call(2, "pip install monai", 1, "ERROR: No matching distribution found")]
    (code,) = SetupDetector().detect(ctx(base, events))
    assert code.code == "E2" and code.evidence_turns == [1, 2]


def test_setup_failure_that_was_fixed_is_not_e2(base):
    events = [call(1, "import monai", 1, "ModuleNotFoundError: No module named 'monai'"),
              call(2, "python run.py outputs", 0, changed=[f"case_{i:03d}" for i in range(5)], with_outputs=5)]
    assert SetupDetector().detect(ctx(base, events, present=5)) == []


def test_unrecovered_crash_is_e4(base):
    events = [call(1, "python run.py outputs", 0, changed=["case_000"], with_outputs=1),
              call(2, "python run.py outputs", 1, "Traceback (most recent call last):\n  ...\nValueError: operands "
                   "could not be broadcast together with shapes (64,64,32) (64,64,16)", with_outputs=1)]
    (code,) = detect(ctx(base, events, present=1), [ExecutionDetector()])  # both E4 rules merge into one
    assert code.code == "E4" and "partial execution" in code.message and "(ValueError)" in code.message
    assert code.evidence_turns == [1, 2]


def test_crash_followed_by_a_successful_rerun_is_not_e4(base):
    every = [f"case_{i:03d}" for i in range(5)]
    events = [call(1, "python run.py outputs", 1, "RuntimeError: sliding window failed"),
              call(2, "python run.py outputs", 0, changed=every, with_outputs=5)]
    assert ExecutionDetector().detect(ctx(base, events, present=5)) == []


def test_failed_check_then_submit_is_e3(base):
    base.submission.submitted = True
    every = [f"case_{i:03d}" for i in range(5)]
    events = [call(1, "python run.py outputs case_000", 0, changed=["case_000"], with_outputs=1),
              call(2, "check outputs/case_000/lesion.nii.gz", 1, "AssertionError: lesion empty", with_outputs=1),
              call(3, "python run.py outputs", 0, changed=every[1:], with_outputs=5),
              {"type": "tool", "name": "submit_results", "turn": 4, "result": {}}]
    fired = VerificationDetector().detect(ctx(base, events, present=5))
    assert [c.code for c in fired] == ["E3"] and "failed and was never passed" in fired[0].message
    assert fired[0].evidence_turns == [2]


def test_failed_check_fixed_later_is_not_e3(base):
    base.submission.submitted = True
    every = [f"case_{i:03d}" for i in range(5)]
    events = [call(1, "python run.py outputs case_000", 0, changed=["case_000"], with_outputs=1),
              call(2, "check outputs/case_000/lesion.nii.gz", 1, "AssertionError: lesion empty", with_outputs=1),
              call(3, "python run.py --fix outputs case_000", 0, changed=["case_000"], with_outputs=1),
              call(4, "check outputs/case_000/lesion.nii.gz", 0, stdout="OK", with_outputs=1),
              call(5, "python run.py outputs", 0, changed=every[1:], with_outputs=5)]
    assert VerificationDetector().detect(ctx(base, events, present=5)) == []


def test_pilot_that_checks_its_own_output_counts_as_validation(base):
    every = [f"case_{i:03d}" for i in range(5)]
    pilot = ("seg = run('case_000'); save(seg)\nassert seg.shape == ct.shape\nprint(np.unique(seg))")
    events = [call(1, pilot, 0, changed=["case_000"], with_outputs=1),
              call(2, "python run.py outputs", 0, changed=every[1:], with_outputs=5)]
    assert VerificationDetector().detect(ctx(base, events, present=5)) == []
    events[0]["code"] = "seg = run('case_000'); save(seg)"  # the same pilot without any check
    (code,) = VerificationDetector().detect(ctx(base, events, present=5))
    assert code.code == "E3" and code.evidence_turns == [2]
