"""Round twelve of the red team: anything an agent can cause ends `scored` or `agent_failure`, with a result.json
every reader opens; never `infrastructure_failure`, a hang past the run's limits or a run without a record.

- **A reason that quotes the agent's file whole** (VQA, and any track): the evaluator stored every reason a track's
  check gave, at any length, and each is stored twice (evaluation.json and result.json). VQA's contract quotes the
  answer's `question_id` with `!r`, so a 1 MB id of apostrophes became 3 MB of escaped text per case: the VQA demo's
  24 cases gave an 81 MB result.json (72 MB evaluation.json, 3.8 s of harness CPU to write and hash). At about 76
  such cases (every VQA task but the demo has 120-2005) result.json passes the 256 MB every reader opens (show,
  verify, the leaderboards and the sweep's resume refuse it unread), and at about 85 the evaluator reaches its own
  256 MB file limit: the whole run is the agent's failure at Task 0. A verdict now keeps at most ten reasons of
  500 characters, whatever the track wrote (`evaluator.bounded_reasons`).
- **Replies that fill the host's disk** (any agent): the trajectory keeps every reply whole (its code twice: in the
  reply and in the call's event), in the run folder on the host's disk, outside the agent's quota. Six replies of
  20 MB of code filled a 160 MB disk, and the run ended `infrastructure_failure`, blamed on "another process on the
  host" (the agent was confined to its quota, so a full disk could not be its doing): a sweep retries that, and a
  leaderboard drops it. A reply now holds at most 4 Mi characters (`agent.MAX_REPLY_CHARS`, eight times the longest
  a model API returns) and the agent phase writes at most 128 MB of trajectory
  (`trajectory.MAX_AGENT_PHASE_BYTES`); past either, the agent's failure.
- **One file copied once per name** (any run): plan.md, plan.png and up to twenty plots were each copied into the
  run folder whole, without the freeze's refusal of hard links and sparse files, so one 12 MB file hard-linked
  under those 22 names put 264 MB on the host's disk from a 16 MB quota (on a 160 MB disk: `infrastructure_failure`,
  "another process filled the disk"). The plan's copies now share one 64 MB budget, and everything the agent can
  make the harness write beside its image (trajectory, tool-output side files, now 64 MB in bytes, plan copies,
  kept scripts: 261 MB) is promised with the image in the machine's disk ledger (`quota.copies_of`), so a full
  disk while the agent was confined is again never its doing.

Held (driven through the real runner, each ending `scored` with its record and run page; no test kept unless noted):
tool-call arguments nested 200 000 deep (as the whole argument, as `code`, beside it, and in `submit_results`),
a 100 MB `code` and a 100 MB reply text (9 and 4 CPU-s of harness), NUL and lone surrogates in the reply text, the
tool name and the call id, a 1 MB tool name and call id, duplicate keys, arguments that are NaN / 1e999 / null /
a string, a language that is a list or holds a NUL, NUL and lone surrogates inside the code; outputs that are FIFOs,
sockets (made at the end of a call, after the pilot check), names that are not UTF-8, bidi and BOM names, 30 000
files in one case folder (2.9 CPU-s); plan.md a symlink to /etc/shadow and plan.png a folder; on local and
local-plain: a fork bomb, a memory bomb, a full disk and /tmp, the image's inodes exhausted, a background loop
rewriting outputs when its call ends, a FIFO named as a script the calls ran; the run page of 19 replies of 32
calls with HTML and bidi controls in the words, the code and the output (escaped, 2.7 MB); a VQA answer of 300 000
quotes in every field of a valid answer (the record stays small: reasons only quoted them).
"""

from __future__ import annotations

import json
import os
import subprocess
from typing import ClassVar

import pytest
from automedbench.agent import Agent
from automedbench.records import AgentTurn, ToolCall
from automedbench.testing import register_agent, register_toy_track, run_steps, run_task

# every case's answer.json is well formed but names a question_id of 200 000 apostrophes and a quote (repr escapes
# each apostrophe: three bytes a character in the stored reason)
QUOTED_ID = """
import os, json
data, out = os.environ['DATA_DIR'], os.path.join(os.environ['WORKSPACE_DIR'], 'outputs')
for case in sorted(os.listdir(data)):
    if os.path.isdir(os.path.join(data, case)):
        os.makedirs(os.path.join(out, case), exist_ok=True)
        record = {"question_id": "'" * 200000 + '"', "predicted_label": "", "predicted_answer": "yes",
                  "raw_model_output": "yes", "model_name": "m", "runtime_s": 1.0}
        with open(os.path.join(out, case, 'answer.json'), 'w') as handle:
            json.dump(record, handle)
print('written')
"""


def test_a_reason_quoting_the_agents_file_stays_small_in_the_record(data_root, tmp_path):
    """Before: 0.6 MB of stored reason per case (15 MB of result.json for the demo's 24 cases; 81 MB with a 1 MB
    id), growing with the task's case count past what any reader opens."""
    result, run_dir = run_steps("vqa/demo", [("python", QUOTED_ID)], out=tmp_path / "runs", data_root=data_root)
    assert result.state == "scored", (result.state, result.error)
    assert (run_dir / "result.json").stat().st_size < 1 << 20
    assert (run_dir / "evaluation.json").stat().st_size < 1 << 20
    cases = json.loads((run_dir / "evaluation.json").read_text())["cases"]
    assert cases and not any(c["valid"] for c in cases)
    reasons = [r for c in cases for r in c["reasons"]]
    assert all(len(r) <= 500 for r in reasons)
    assert all(r.startswith("question_id '") or r.startswith("question_id \"") for r in reasons), reasons[:2]


def test_bounded_reasons_keeps_the_first_ten_and_says_how_many_more():
    from automedbench.evaluator import MAX_REASON_CHARS, MAX_REASONS, bounded_reasons

    assert bounded_reasons(["a", 2]) == ["a", "2"]
    kept = bounded_reasons(["x" * 10_000] * 25)
    assert len(kept) == MAX_REASONS + 1 and kept[-1] == f"... and {25 - MAX_REASONS} more"
    assert all(len(r) == MAX_REASON_CHARS for r in kept[:-1])



# ------------------------------------------------------------------ replies that fill the host's disk


class Verbose(Agent):
    """`Verbose.turns` replies, each one call whose code is a print and a comment of `Verbose.size` characters."""

    name = "redteam-verbose"
    size: ClassVar[int] = 0
    turns: ClassVar[int] = 0

    def __init__(self, **options) -> None:
        self.turn = 0

    def next_turn(self, messages) -> AgentTurn:
        self.turn += 1
        if self.turn > self.turns:
            return AgentTurn("submit", [ToolCall("s", "submit_results", "{}")])
        code = "print('turn')\n#" + "x" * self.size
        return AgentTurn(f"turn {self.turn}", [ToolCall(f"c{self.turn}",
                                                        "execute_code", json.dumps({"language": "python",
                                                                                    "code": code}))])


@pytest.fixture
def small_disk(tmp_path):
    """A 768 MB filesystem of its own for the runs folder (a tmpfs, root only): room for a 16 MB workspace and
    everything the run's reservation promises with it (`quota.copies_of`), and not much more."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small disk needs root")
    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=768m", "tmpfs", str(disk)]).returncode:
        pytest.skip("could not mount a tmpfs")
    yield disk
    subprocess.run(["umount", "-l", str(disk)], check=False)


def test_replies_that_fill_the_hosts_disk_are_the_agents_failure(reg, data_root, small_disk):
    """Before: infrastructure_failure, 'disk full while recording the run (No space left on device); the agent's
    writes were confined to its workspace quota, so another process on the host filled the disk' (measured on a
    160 MB disk: six such replies, a 147 MB trajectory; the twenty here write 880 MB)."""
    register_toy_track()
    Verbose.size, Verbose.turns = 20 << 20, 20
    register_agent(Verbose, reg)
    result, run_dir = run_task("toy/vowels", Verbose.name, out=small_disk / "runs", data_root=data_root, registry=reg,
                               workspace_quota_mb=16)
    assert result.state == "agent_failure", (result.state, result.error)
    assert "characters (at most" in result.error
    assert (run_dir / "trajectory.jsonl").stat().st_size < 1 << 20
    assert json.loads((run_dir / "result.json").read_text())["state"] == "agent_failure"
    assert not os.path.ismount(run_dir / "workspace")


def test_the_agent_phase_writes_a_bounded_trajectory(reg, data_root, tmp_path, monkeypatch):
    """Replies each within the per-reply bound still add up: past what the agent phase may write (made small here:
    8 MB) the run is the agent's failure, its record written. Before: scored, whatever the trajectory's size."""
    import automedbench.runner

    register_toy_track()
    monkeypatch.setattr(automedbench.runner, "MAX_AGENT_PHASE_BYTES", 8 << 20, raising=False)
    Verbose.size, Verbose.turns = 1 << 20, 12
    register_agent(Verbose, reg)
    result, run_dir = run_task("toy/vowels", Verbose.name, out=tmp_path / "runs", data_root=data_root, registry=reg)
    assert result.state == "agent_failure", (result.state, result.error)
    assert "the trajectory may hold" in result.error
    assert (run_dir / "trajectory.jsonl").stat().st_size <= (8 << 20) + 4096  # the closing event after it
    assert result.runtime.turns < 12
    assert json.loads((run_dir / "result.json").read_text())["state"] == "agent_failure"


# one 12 MB file in the workspace, hard-linked as plan.md, plan.png and twenty plots
LINKED_PLAN = """
import os
plan, blob = os.path.join(os.environ['WORKSPACE_DIR'], 'plan'), os.path.join(os.environ['WORKSPACE_DIR'], 'blob')
os.makedirs(plan, exist_ok=True)
with open(blob, 'wb') as handle:
    handle.write(os.urandom(12 << 20))
for name in ['plan.md', 'plan.png'] + ['summary%02d.png' % i for i in range(20)]:
    os.link(blob, os.path.join(plan, name))
print('linked')
"""


@pytest.mark.slow  # 8 s: 12 MB of random bytes made, copied and hashed
def test_plan_copies_stay_within_what_the_run_reserved(data_root, small_disk):
    """Before: each name copied whole (22 x 12 MB: 264 MB onto the host's disk from 12 MB of a 16 MB quota; on a
    160 MB disk the run ended infrastructure_failure, 'another process on the host filled the disk'). Now the plan's
    files and plots are copied within MAX_ARTEFACT_BYTES, and what the agent can make the harness write beside its
    image (trajectory, side files, plan copies, scripts) is promised with the image."""
    from automedbench.plan_artefacts import MAX_ARTEFACT_BYTES, MAX_SCRIPT_BYTES, MAX_SCRIPTS
    from automedbench.sandboxes import quota
    from automedbench.trajectory import MAX_AGENT_PHASE_BYTES, SIDE_BUDGET_BYTES

    register_toy_track()
    result, run_dir = run_steps("toy/vowels", [("python", LINKED_PLAN)], out=small_disk / "runs", data_root=data_root,
                                workspace_quota_mb=16)
    assert result.state == "scored", (result.state, result.error)
    copied = sum(p.stat().st_size for p in (run_dir / "artefacts").rglob("*") if p.is_file())
    assert 0 < copied <= MAX_ARTEFACT_BYTES
    assert (run_dir / "artefacts" / "plan.md").stat().st_size == 12 << 20  # the plan's own files come first
    extra = quota.copies_of(16 << 20) - 2 * (16 << 20)
    assert extra >= MAX_AGENT_PHASE_BYTES + SIDE_BUDGET_BYTES + MAX_ARTEFACT_BYTES + MAX_SCRIPTS * MAX_SCRIPT_BYTES
