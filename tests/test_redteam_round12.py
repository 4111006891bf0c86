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

Held (driven through the real runner, each ending `scored` with its record and run page; no test kept unless noted):
tool-call arguments nested 200 000 deep (as the whole argument, as `code`, beside it, and in `submit_results`),
a 100 MB `code` and a 100 MB reply text (9 and 4 CPU-s of harness), NUL and lone surrogates in the reply text, the
tool name and the call id, a 1 MB tool name and call id, duplicate keys, arguments that are NaN / 1e999 / null /
a string, a language that is a list or holds a NUL, NUL and lone surrogates inside the code; outputs that are FIFOs,
sockets (made at the end of a call, after the pilot check), names that are not UTF-8, bidi and BOM names, 30 000
files in one case folder (2.9 CPU-s); plan.md a symlink to /etc/shadow and plan.png a folder; on local and
local-plain: a fork bomb, a memory bomb, a full disk and /tmp, the image's inodes exhausted, a background loop
rewriting outputs when its call ends, a FIFO named as a script the calls ran.
"""

from __future__ import annotations

import json

from automedbench.testing import run_steps

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
    result, run_dir = run_steps("vqa/demo", [("python", QUOTED_ID)], out=tmp_path / "runs", data_root=data_root,
                                warm_evaluator=False)
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

