"""Red team round 29: an agent that makes its run "the harness's fault", through the real command line and runner.

- **Requests the model gateway parsed whole, in the harness's own process** (installed agents): anything in the
  sandbox can talk to the gateway (through the relay's port), and the gateway read each request's model name by
  parsing the whole body (`_model_of`, up to the 64 MB a request may hold), where the step ledger already left bodies
  over 16 MB unread; bodies under 16 MB were parsed three times (model name, the ledger's request and reply). A body
  of 64 MB of `{},` is 22 million dicts: 1.7 GB of the harness's memory and ~3.6 CPU-s holding the GIL for one
  request (`json.loads` alone: peak 1,723,196 KB against 144,592 KB for the bytes). The harness has no memory limit
  of its own (the sandbox calls do), so each command of the model's could add that to every running harness of a
  sweep: the OOM killer's choice on a loaded machine, the run left with no record and run again. Now every parse of
  what the sandbox or the provider sent goes through `wiremessages.parse_bounded`: at most MAX_PARSED_BYTES and
  MAX_PARSED_CONTAINERS `{` and `[`, else not read (counted as too large for steps; the model name is then the
  run's, as for any request naming none). Measured through the real command line (two 60 MB requests at once from
  the installed program): the harness's resident memory grew by 1630 MB before, 230 MB now (the bodies themselves,
  the loopback provider's copy included); CPU 6.2+3.5 s -> 4.4+0.5 s for the whole test.
- **A transcript parsed whole, same class**: an installed program's transcript is a file in the workspace (anything in
  the sandbox writes it), read after the session up to 32 MB and parsed whole (mini-swe-agent's trajectory.json):
  31 MB of `{},` in its messages took ~0.8 GB of the harness (`json.loads` peak 864,568 KB against 76,896 KB for
  the text) and the run was scored with ten million empty messages read. The transcript parsers now parse through
  `parse_bounded` too (the whole file, each JSONL line, each observation): such a transcript is not read, and the
  run is the agent's failure naming it ("its transcript could not be read"); the harness grew by 88 MB in that run.
- **A CLI agent's log, same class**: `--agent cli` reads its command's log (up to 20 MB, in the workspace) line by
  line, each line parsed whole: one line of 19 MB of `{},` grew the harness by 516 MB through the real command
  line, 38 MB now (the line is skipped as unreadable, the lines after it still read).
- **A CLI agent's log of many small lines** (same agent, the harness's time): every line of the log became an
  imported event, written to the trajectory one by one and read by the judge and detectors after. 20 MB of
  one-line messages (582 541 events) made a 65 MB trajectory and took the run 101.7 CPU-s and 600 s of wall time
  (segmentation/demo, this loaded machine; 6.4 CPU-s for 20 MB of long lines), scored in the end. Now a CLI log
  gives at most `cli_agent.MAX_EVENTS` (5000, as the installed systems' transcripts keep 5000 replies) and a note
  saying how many more it held; the test's run takes 20 s.

Tried and held (no test kept), each through the real runner on toy/vowels, `local` and `local-plain`: non-UTF-8 and
newline names at the top of outputs/ and inside a case; 3000 nested 200-character folders; a FIFO as an output, a
bound unix socket in a case, a FIFO as plan/plan.md; a setsid'd loop writing outputs/ after the call; outputs and the
workspace chmod 000/500; `unshare -Urm` and a tmpfs mounted over outputs/; 200 000 files in a plain call's /dev/shm
(its /dev is read-only, its shm charged to the call's memory group); a 2^30 x 2^30 plan.png and a 1.3 MB non-UTF-8
plan.md (the rules judge grades them). Pathological outputs through the cold evaluator on every demo (JSON nested
200 000 deep, a 100 000-digit number, lone surrogates, 1e999, 200 000 boxes; .npy headers of 2^40 and 2^62
elements, object and million-character string dtypes; NIfTI headers of 32767^3, 7 dimensions, RGB24, vox_offset
1e30, a 300 MB gzip of zeros; 50 MB of NUL as a report): every one `scored`, Task 0. The provider-health probe
cannot be failed from a sandbox without the host's network: an outage is declared only when the harness's own
request fails too.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path

import test_cli_newuser
from test_agents_round1 import Provider

cli = test_cli_newuser.cli

# the installed program: two requests at once of ~60 MB of empty JSON objects each (under the gateway's 64 MB cap),
# then one ordinary request and a clean exit
FLOOD = r'''#!/usr/bin/env python3
import os, threading, urllib.request
url = os.environ["OPENAI_API_BASE"].rstrip("/") + "/chat/completions"
def post(body):
    request = urllib.request.Request(url, body, {"content-type": "application/json", "authorization": "Bearer x"})
    try:
        with urllib.request.urlopen(request, timeout=300) as reply:
            reply.read()
    except OSError as exc:
        print("failed:", exc)
bomb = b"[" + b"{}," * (20 << 20) + b"{}]"
threads = [threading.Thread(target=post, args=(bomb,)) for _ in range(2)]
for t in threads: t.start()
for t in threads: t.join()
post(b'{"model": "m", "messages": [{"role": "user", "content": "go"}]}')
'''


# the installed program writes its transcript (mini-swe-agent's trajectory.json) as 31 MB of empty JSON objects, under
# the 32 MB a transcript may hold, and makes no model call
TRANSCRIPT = r'''#!/usr/bin/env python3
import os
with open(os.path.join(os.environ["AMB_DIR"], "trajectory.json"), "wb") as handle:
    handle.write(b'{"messages": [' + b"{}," * ((31 << 20) // 3) + b"{}]}")
'''


def _resident_kb() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * 4


def _peak_growth_mb(action: Callable[[], object]) -> float:
    """How many MB this process's resident memory (the harness's: the command line runs in it) grew at most while
    `action` ran."""
    base, peak, done = _resident_kb(), [0], threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], _resident_kb())
            time.sleep(0.005)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        action()
    finally:
        done.set()
        sampler.join()
    return (peak[0] - base) / 1024


def _harness_growth(cli, tmp_path: Path, program_text: str) -> tuple[dict, list[dict], float]:
    """Run toy/vowels with `program_text` as the installed program (mini-swe-agent) against a loopback provider
    that answers; (the record, the trajectory's events, how many MB the harness grew at most)."""
    program = tmp_path / "bin" / "mini"
    program.parent.mkdir()
    program.write_text(program_text)
    program.chmod(0o755)
    out = tmp_path / "runs"

    def run() -> None:
        with Provider("slow") as provider:
            cli("run", "--task", "toy/vowels", "--agent", "mini-swe-agent", "--agent-option", "api_key_env=none",
                "--agent-option", f"bin={program}", "--agent-option", f"base_url={provider.url}",
                "--time-limit", "240", "--out", out)

    grown = _peak_growth_mb(run)
    record = json.loads(next(out.glob("*/result.json")).read_text())
    events = [json.loads(line) for line in next(out.glob("*/trajectory.jsonl")).read_text().splitlines()]
    return record, events, grown


def test_requests_from_the_sandbox_cost_the_harness_bounded_memory(cli, tmp_path):
    """Before: the harness's resident memory grew by 1630 MB while the two requests were parsed; now by 230 MB."""
    record, events, grown_mb = _harness_growth(cli, tmp_path, FLOOD)
    # the stub writes no transcript (the agent's failure, said so): what matters is that the run has its record
    assert record["state"] == "agent_failure" and "transcript could not be read" in record["error"], record
    gateway = next(e for e in events if e.get("type") == "model_gateway")
    # both large requests reached the gateway, unread: refused (their model is unknown; round 3 of the agents)
    assert (gateway["calls"], gateway["refused"]) == (1, 2), gateway
    assert grown_mb < 600, f"the harness grew by {grown_mb:.0f} MB"


def test_a_transcript_the_program_wrote_costs_the_harness_bounded_memory(cli, tmp_path):
    """Before: the harness grew by ~0.8 GB parsing the 31 MB transcript whole; now it is not read (too many objects
    to be a transcript) and the run is the agent's failure, saying so."""
    record, _, grown_mb = _harness_growth(cli, tmp_path, TRANSCRIPT)
    assert record["state"] == "agent_failure" and "transcript could not be read" in record["error"], record
    assert grown_mb < 300, f"the harness grew by {grown_mb:.0f} MB"


# a CLI agent (`--agent cli`) whose log is one line of 19 MB of empty JSON objects (under the 20 MB a log may hold),
# then one message the parser reads
CLI_LOG = r'''import sys
with open(sys.argv[1], "wb") as handle:
    handle.write(b"[" + b"{}," * ((19 << 20) // 3) + b"{}]\n")
    handle.write(b'{"type": "message", "content": "done"}\n')
'''


def test_a_cli_agents_log_costs_the_harness_bounded_memory(cli, tmp_path):
    """Before: the harness grew by ~0.5 GB parsing the log's long line; now that line is skipped, the rest read."""
    (tmp_path / "write_log.py").write_text(CLI_LOG)
    spec = tmp_path / "cli.yaml"
    spec.write_text("name: log-writer\nfiles: {write_log.py: write_log.py}\n"
                    "command: python3 {dir}/write_log.py {log}\nlog_format: steps-jsonl\n")
    out = tmp_path / "runs"
    grown = _peak_growth_mb(lambda: cli("run", "--task", "toy/vowels", "--agent", "cli", "--agent-option",
                                        f"spec={spec}", "--out", out))
    record = json.loads(next(out.glob("*/result.json")).read_text())
    events = [json.loads(line) for line in next(out.glob("*/trajectory.jsonl")).read_text().splitlines()]
    assert record["state"] == "scored", record  # the CLI exited 0: submitted (no outputs: Task 0)
    assert any(e.get("type") == "cli_message" and e.get("content") == "done" for e in events)
    assert grown < 250, f"the harness grew by {grown:.0f} MB"


# a CLI agent whose log is 20 MB of one-line messages (582 541 of them)
MANY = r'''import sys
with open(sys.argv[1], "wb") as handle:
    line = b'{"type": "message", "content": "m"}\n'
    handle.write(line * ((20 << 20) // len(line) - 1))
'''


def test_a_cli_agents_log_of_many_small_lines_records_a_bounded_number_of_events(cli, tmp_path):
    """Before: 582 541 imported events, a 65 MB trajectory, the run 101.7 CPU-s (52.2+49.5) and 600 s of wall time
    on this machine (6.4 CPU-s for a log of 20 MB in long lines); now the first MAX_EVENTS and a note."""
    (tmp_path / "many.py").write_text(MANY)
    spec = tmp_path / "cli.yaml"
    spec.write_text("name: chatty\nfiles: {many.py: many.py}\ncommand: python3 {dir}/many.py {log}\n"
                    "log_format: steps-jsonl\n")
    out = tmp_path / "runs"
    cli("run", "--task", "toy/vowels", "--agent", "cli", "--agent-option", f"spec={spec}", "--out", out)
    record = json.loads(next(out.glob("*/result.json")).read_text())
    events = [json.loads(line) for line in next(out.glob("*/trajectory.jsonl")).read_text().splitlines()]
    assert record["state"] == "scored", record
    imported = [e for e in events if e.get("imported")]
    assert sum(e["type"] == "cli_message" for e in imported) == 5000, len(imported)
    note = [e["note"] for e in imported if e["type"] == "note"]
    assert note == ["the chatty log holds 577541 more step(s) and message(s) past the first 5000: not recorded"], note
