"""The one definition of pilot and batch (automedbench.trace), as the rules judge, the error-code detectors
and the harness's pilot tracker all read it, on hand-written trajectories."""

from __future__ import annotations

from automedbench.judges.rules import Evidence
from automedbench.pilot import PilotTracker
from automedbench.trace import Trace, is_batch, is_pilot

EVERY = [f"case_{i:03d}" for i in range(5)]


def call(turn, exit_code=0, changed=(), with_outputs=0, code="", call_id=None, **extra):
    return {"type": "tool", "name": "execute_code", "turn": turn, "call_id": call_id or f"c{turn}", "code": code,
            "exit_code": exit_code, "stdout": "", "stderr": "", "changed_cases": list(changed),
            "cases_with_outputs": with_outputs, **extra}


def test_batch_is_the_first_call_after_which_several_cases_have_outputs_even_without_writing():
    # turn 2 started a background job; turn 3 only looks, yet by then three cases have outputs
    events = [call(1, changed=["case_000"], with_outputs=1), call(2, with_outputs=1),
              call(3, with_outputs=3), call(4, changed=EVERY, with_outputs=5)]
    trace = Trace(events)
    assert trace.batch is events[2] and trace.batch_turn == 3
    assert [c["turn"] for c in trace.pilots] == [1, 2]
    assert trace.pilot is events[0]  # no pilot checks stored: the first output call


def test_a_failed_call_that_left_several_cases_is_still_the_batch(tmp_path):
    events = [call(1, exit_code=1, changed=EVERY[:3], with_outputs=3), call(2, changed=["case_003"], with_outputs=1)]
    trace = Trace(events)
    assert trace.batch is events[0]
    assert trace.pilots == []  # a one-case call after the batch is no pilot
    tracker = PilotTracker(tmp_path / "outputs", tmp_path / "pilot", EVERY)
    for event in events:
        tracker.note(event)
    assert tracker.batch_seen and tracker.candidates == []


def test_pilot_needs_success_a_write_one_case_and_the_harness_as_witness():
    good = call(1, changed=["case_000"], with_outputs=1)
    assert is_pilot(good)
    assert not is_pilot({**good, "exit_code": 1})
    assert not is_pilot({**good, "timed_out": True})
    assert not is_pilot({**good, "imported": True})  # a step a CLI agent reported itself
    assert not is_pilot({**good, "cases_with_outputs": 2}) and is_batch({**good, "cases_with_outputs": 2})


def test_pilot_in_the_batch_turn_does_not_count():
    events = [call(1, changed=["case_000"], with_outputs=1, call_id="a"),
              call(1, changed=EVERY[1:], with_outputs=5, call_id="b")]
    assert Trace(events).pilots == [] and Trace(events).pilot is None


def test_verified_pilot_is_the_first_that_passed_the_contract_check():
    events = [call(1, changed=["case_000"], with_outputs=1), call(2, changed=["case_000"], with_outputs=1),
              call(3, changed=EVERY, with_outputs=5)]
    checks = [{"turn": 1, "call_id": "c1", "valid": False, "reasons": ["empty mask"]},
              {"turn": 2, "call_id": "c2", "valid": True}]
    trace = Trace(events, pilot_checks=checks)
    assert trace.pilot is events[1]
    assert trace.failed_pilots == [checks[0]]
    assert Trace(events, pilot_checks=[]).pilot is None  # checks present but none passed
    assert Trace(events).pilot is events[0]  # a run from before pilot checks: the first output, if a pilot


def test_rules_judge_and_detectors_read_the_same_pilot_and_batch():
    events = [call(1, changed=["case_000"], with_outputs=1, code="seg.shape"), call(2, with_outputs=4),
              call(3, changed=EVERY, with_outputs=5)]
    evidence = Evidence(events, pilot_checks=None)
    trace = Trace(events)
    assert evidence.batch_turn == trace.batch_turn == 2
    assert evidence.pilot is trace.pilot is events[0]
    assert [c["turn"] for c in trace.checked_pilots()] == [1]


def test_attempts_keep_unrun_calls_and_calls_only_the_ones_that_ran():
    unrun = {"type": "tool", "name": "execute_code", "turn": 1, "call_id": "x", "error": "malformed_arguments"}
    events = [unrun, call(2)]
    trace = Trace(events)
    assert trace.attempts == [unrun, events[1]] and trace.calls == [events[1]]
