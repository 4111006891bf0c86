"""The public helpers tracks share instead of copying code: the symlink-safe opener, the pre-submit gate on valid
outputs, the scripted solutions' closing steps and flawed batches, detectors' case facts, and a track's task by id."""

from __future__ import annotations

import errno
import os
import subprocess
import sys

import pytest
from automedbench.api import (
    CodeContext,
    Detector,
    PackagedTrack,
    UserError,
    flawed_batches,
    open_below,
    valid_output_gate,
    verify_and_submit,
    verify_each_case,
)
from automedbench.records import CaseVerdict, Header, Isolation, MetricBlock, Result, Runtime


def test_open_below_never_follows_a_link_at_any_level(tmp_path):
    (tmp_path / "case" / "sub").mkdir(parents=True)
    (tmp_path / "case" / "out.txt").write_text("mine")
    (tmp_path / "secret.txt").write_text("reference")
    (tmp_path / "case" / "link.txt").symlink_to(tmp_path / "secret.txt")
    (tmp_path / "hop").symlink_to(tmp_path / "case")
    fd = open_below(tmp_path, ["case", "out.txt"])
    with os.fdopen(fd) as handle:
        assert handle.read() == "mine"
    for parts in (["case", "link.txt"], ["hop", "out.txt"]):  # a link as the file, a link as a folder on the way
        with pytest.raises(OSError) as err:
            open_below(tmp_path, parts)
        assert err.value.errno in (errno.ELOOP, errno.ENOTDIR), parts
    with pytest.raises(FileNotFoundError):
        open_below(tmp_path, ["case", "gone.txt"])
    for bad in (["..", "x"], ["case", ""], ["case/out.txt"], ["case", "."]):
        with pytest.raises(OSError) as err:
            open_below(tmp_path, bad)
        assert err.value.errno == errno.EINVAL, bad
    folder = open_below(tmp_path, ["case", "sub"], directory=True)
    os.close(folder)
    with pytest.raises(OSError):
        open_below(tmp_path / "hop", ["out.txt"])  # the root itself is opened without following a link


def test_the_gate_counts_valid_outputs_in_order_and_says_what_a_valid_one_is():
    problems = {"c1": "missing", "c2": None, "c3": "NaN", "c4": None}
    asked: list[str] = []

    def problem(case_id):
        asked.append(case_id)
        return problems[case_id]

    assert valid_output_gate(["c2", "c4", "c1", "c3"], 0.5, problem, "x.npy", "a float array") is None
    assert asked == ["c2", "c4"]  # enough found: the rest is not read
    refusal = valid_output_gate(list(problems), 0.75, problems.get, "x.npy", "a float array")
    assert refusal == ("submission refused: 2 of the 4 cases have a valid x.npy (3 needed before you may submit; "
                       "a valid output is a float array). Problems: c1: missing; c3: NaN")
    assert valid_output_gate(["c1"], 0.0, problems.get, "x.npy", "y") is not None  # at least one, always


def test_closing_steps_and_flawed_batches_are_the_steps_a_track_wrote():
    verify, submit = verify_and_submit("print('ok')", "report", "reports")
    assert (verify.phase, verify.code, verify.say) == ("verify", "print('ok')", "Verifying every report before "
                                                                                  "submitting.")
    assert submit.phase == "submit" and submit.submit and submit.say == "All reports verified; submitting."
    variants = flawed_batches(("run.sh", "Running, then damaging.", "print('damaged')\n"), ("run.sh --half", "Half."))
    (wrong,), (half,) = variants["wrong-format"], variants["incomplete"]
    assert wrong.code == "run.sh && python3 - <<'EOF'\nprint('damaged')\nEOF" and wrong.phase == half.phase == "batch"
    assert (half.code, half.say) == ("run.sh --half", "Half.")
    assert flawed_batches(("a", "b"), ("c", "d"))["wrong-format"][0].code == "a"


def test_verify_each_case_runs_and_fails_on_a_bad_case(tmp_path):
    """The generated check, run as the agent's sandbox would run it: every case checked, a bad one fails it."""
    data, out = tmp_path / "data", tmp_path / "out"
    for case, text in (("a", "1"), ("b", "2"), ("c", "x")):
        (data / case).mkdir(parents=True)
        (out / case).mkdir(parents=True)
        (out / case / "n.txt").write_text(text)
    verify, _ = verify_each_case(str(data), str(out), "import pathlib\n", "name = 'n.txt'",
                                 "assert (out / case / name).read_text().isdigit()")
    done = subprocess.run([sys.executable, "-c", verify.code], capture_output=True, text=True)
    assert done.returncode != 0 and "3 cases checked; problems: [('c'," in done.stdout
    (out / "c" / "n.txt").write_text("3")
    done = subprocess.run([sys.executable, "-c", verify.code], capture_output=True, text=True)
    assert done.returncode == 0 and "3 cases checked; problems: none" in done.stdout


def test_detectors_read_flagged_cases_and_fire_once_for_them():
    rows = [{"case_id": "a", "valid": True, "same": True}, {"case_id": "b", "valid": False, "same": True},
            {"case_id": "c", "valid": True}]
    result = Result(Header("r", "t/x", "t", "lite", "a", "local", "rules", "now"), "scored", "submitted", Runtime(),
                    [], MetricBlock("m", 1.0, 1.0, per_case=rows), None, Isolation("local"),
                    cases=[CaseVerdict("a", True, True), CaseVerdict("b", True, False), CaseVerdict("c", True, True)])
    ctx = CodeContext(result, [])
    assert ctx.flagged("same") == ["a"] and [r["case_id"] for r in ctx.valid_rows] == ["a", "c"]
    assert ctx.last_write_turns == []

    class Same(Detector):
        name = "same"

        def detect(self, ctx):
            return self.fire_cases("E3", ctx.flagged("same"), "output(s) like the input", [4], "S3")

    (fired,) = Same().detect(ctx)
    assert (fired.code, fired.message, fired.evidence_turns) == ("E3", "1 output(s) like the input: a", [4])
    assert Same().fire_cases("E3", [], "none", [1]) == []


def test_a_track_finds_its_task_by_id_and_packaged_tracks_find_their_folder():
    from automedbench.toy.track import ToyTrack

    track = ToyTrack()
    assert track.task("toy/vowels").id == "toy/vowels"
    with pytest.raises(UserError, match=r"no toy task 'toy/vowel'.*did you mean 'toy/vowels'"):
        track.task("toy/vowel")
    assert ToyTrack.root == __import__("pathlib").Path(sys.modules[ToyTrack.__module__].__file__).parent

    class Elsewhere(PackagedTrack):
        name = "elsewhere"
        root = ToyTrack.root  # an explicit root still wins

    assert Elsewhere.root == ToyTrack.root
