"""Adversarial review of the trust boundary: attacks an agent could mount, each run through the real harness.

Every test here failed before its fix: it states what a cheating (or merely unlucky) agent must not get.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from review_steps import exec_events, need_bwrap, register_steps, run_steps


@pytest.fixture(scope="module")
def reg_steps(reg):
    return register_steps(reg)


# ---------------------------------------------------------------- run state


def test_non_utf8_output_name_does_not_make_the_run_an_infrastructure_failure(reg_steps, tmp_path, data_root,
                                                                               staged):
    """A bad file name in outputs/ must not turn the agent's own run into a retryable harness failure."""
    code = ("import os\n"
            "ws = os.fsencode(os.environ['WORKSPACE_DIR'])\n"
            "open(ws + b'/outputs/bad-\\xff-name', 'wb').close()\n"
            "os.makedirs(ws + b'/outputs/case_\\xfe', exist_ok=True)\n"
            "open(ws + b'/outputs/case_\\xfe/organ.nii.gz', 'wb').close()\n")
    result, run_dir = run_steps(reg_steps, tmp_path, data_root, [["python", code]], sandbox="local-plain")
    assert result.state == "scored", result.error
    assert result.aggregate.rating == "F" and result.stage("S4").score == 0.0
    tools = exec_events(run_dir)
    assert len(tools) == 1 and tools[0]["exit_code"] == 0


# ---------------------------------------------------------------- trajectory


@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\x85"])
def test_unicode_line_separators_in_tool_output_keep_the_trajectory_whole(tmp_path, separator):
    """Tool output is the agent's: a Unicode line separator in it must not cut the log short for the judge."""
    from automedbench.trajectory import TrajectoryWriter, read_events

    writer = TrajectoryWriter(tmp_path / "trajectory.jsonl")
    writer.write({"type": "tool", "turn": 1, "stdout": f"before{separator}{{}}{separator}after"})
    writer.write({"type": "tool", "turn": 2, "stdout": "second call"})
    writer.write({"type": "end", "reason": "submitted"})
    writer.close()
    events = read_events(tmp_path / "trajectory.jsonl")
    assert [e["type"] for e in events] == ["tool", "tool", "end"]
    assert events[0]["stdout"] == f"before{separator}{{}}{separator}after"


def test_streams_written_with_an_event_are_spilled_whatever_it_names(tmp_path):
    """The conversation yields a tool event with its streams and the writer spills the long ones: an observed
    step of an installed agent may carry no call id (or an empty one), which must never stop the write."""
    from automedbench.trajectory import TrajectoryWriter, read_events

    writer = TrajectoryWriter(tmp_path / "trajectory.jsonl")
    long = "z" * 20_000
    writer.write({"type": "tool", "turn": 3, "call_id": "c1"}, {"stdout": long, "stderr": "short"})
    writer.write({"type": "tool", "turn": 4}, {"stdout": long})  # no call id
    writer.write({"type": "tool", "turn": 5, "call_id": ""}, {"stdout": long})  # an empty one
    writer.close()
    first, second, third = read_events(tmp_path / "trajectory.jsonl")
    assert first["stderr"] == "short" and first["stdout_chars"] == 20_000
    assert (tmp_path / first["stdout_file"]).read_text() == long
    for event in (second, third):
        assert (tmp_path / event["stdout_file"]).read_text() == long and "_step_" in event["stdout_file"]


# ---------------------------------------------------------------- symlinked workspace folders


def test_symlinked_plan_folder_is_not_copied(reg_steps, tmp_path, data_root, staged):
    """plan/ replaced by a symlink to a host folder: the harness must not copy host files as the plan."""
    need_bwrap()
    host = tmp_path / "host"
    host.mkdir()
    (host / "plan.md").write_text("HOST SECRET " * 40)
    code = f"rm -rf /workspace/plan && ln -s {host} /workspace/plan"
    result, run_dir = run_steps(reg_steps, tmp_path / "runs", data_root, [["bash", code]])
    assert result.state == "scored"
    assert not (run_dir / "artefacts" / "plan.md").exists()


def test_snapshot_does_not_follow_a_symlinked_outputs_folder(tmp_path):
    """outputs/ as a symlink to a big host tree would be walked around every call (and faked evidence)."""
    from automedbench.observed import outputs_snapshot as _snapshot

    target = tmp_path / "elsewhere"
    (target / "case_001").mkdir(parents=True)
    (target / "case_001" / "organ.nii.gz").write_bytes(b"x")
    (tmp_path / "outputs").symlink_to(target)
    assert _snapshot(tmp_path / "outputs") == {}


RAW_SURROGATE = '{"language": "python", "code": "print(\'\\ud800\')"}'


def test_lone_surrogate_in_code_is_answered_not_an_infrastructure_failure(reg_steps, tmp_path, data_root, staged):
    r"""JSON arguments may carry "\ud800": code that cannot be written as UTF-8 is the agent's error."""
    result, run_dir = run_steps(reg_steps, tmp_path, data_root, [["raw", RAW_SURROGATE], ["bash", "true"]])
    assert result.state == "scored", result.error
    tools = exec_events(run_dir)
    assert [t.get("error") for t in tools] == ["bad_arguments", None]


def test_freeze_rejects_paths_too_long_for_the_host(tmp_path, monkeypatch):
    """A nest of folders whose host path passes PATH_MAX crashed freeze (a retryable harness failure)."""
    import os

    from automedbench.freeze import freeze

    outputs = tmp_path / "outputs"
    (outputs / "case_000").mkdir(parents=True)
    (outputs / "case_000" / "organ.nii.gz").write_bytes(b"ok")
    monkeypatch.chdir(outputs / "case_000")
    while len(os.getcwd()) < 4096 - 260:  # relative mkdir/chdir: the way an agent builds it
        os.mkdir("d" * 200)
        os.chdir("d" * 200)
    Path("f" * 250).write_bytes(b"x")
    monkeypatch.chdir(tmp_path)
    manifest = freeze(outputs, tmp_path / "submission", submitted=True)
    by_path = {e.path: e for e in manifest.files}
    assert not by_path["case_000/organ.nii.gz"].rejected
    assert (tmp_path / "submission" / "case_000" / "organ.nii.gz").read_bytes() == b"ok"
    deep = [e for e in manifest.files if e.rejected]
    assert len(deep) == 1 and "longer than" in deep[0].rejected


@pytest.mark.parametrize("call_id", ["a/b", "../../escape", "x" * 5000])
def test_tool_call_id_cannot_steer_the_side_file(tmp_path, call_id):
    """The call id comes from the model; a '/' or a huge id made the side-file write fail (or go elsewhere)."""
    from automedbench.trajectory import TrajectoryWriter

    writer = TrajectoryWriter(tmp_path / "trajectory.jsonl")
    long = "y" * 20_000
    fields = writer.stream_field(1, call_id, "stdout", long)
    again = writer.stream_field(1, call_id, "stdout", long + "2")
    writer.close()
    side = (tmp_path / fields["stdout_file"]).resolve()
    assert side.parent == (tmp_path / "tool_output").resolve()
    assert side.read_text() == long
    assert (tmp_path / again["stdout_file"]).read_text() == long + "2"  # a second call with the same id keeps its own
