"""Hostile agent bytes through the real runner (toy track, scripted steps), on every backend that runs here.

Each attack is an agent's tool calls; after each, the run must end `scored` or `agent_failure` (never an
infrastructure failure), its trajectory must read back whole, the post-run analysis (rules judge and
error-code detectors, counted in `harness_s`) must stay fast, and `show` must print no escape sequence.
"""

from __future__ import annotations

import io
import json

import attrs
import pytest
from automedbench.records import ToolCall
from automedbench.report import render
from automedbench.terminal import SafeConsole
from automedbench.testing import StepsAgent, register_agent, register_toy_track, run_task
from automedbench.trajectory import read_events, torn_line

TASK = "toy/vowels"
SOLVE = ("import os, pathlib\nws = pathlib.Path(os.environ['WORKSPACE_DIR'])\n"
         "for case in sorted(pathlib.Path(os.environ['DATA_DIR']).iterdir()):\n"
         "    word = (case / 'input.txt').read_text().strip()\n"
         "    out = ws / 'outputs' / case.name\n    out.mkdir(parents=True, exist_ok=True)\n"
         "    (out / 'answer.txt').write_text(str(sum(c in 'aeiou' for c in word)))\n")

# each: (name, steps); every step is (language, code), "raw" passes the code as the call's raw arguments
ATTACKS = {
    # "pip...error" and "weights...not found" were matched from every occurrence of the first word (quadratic)
    "regex-bomb-output": [["python", "import sys\nsys.stderr.write('pip' * 60000 + '\\n' + 'weights' * 30000)\n"
                                     "sys.stdout.write('a' * 200000)\nsys.exit(1)"]] * 4,
    # a lone surrogate, U+2028, NUL and raw invalid UTF-8 in output; an 8 MB line without a newline
    "odd-bytes-output": [["python", "import sys\nsys.stdout.buffer.write(b'\\xed\\xa0\\x80 \\xe2\\x80\\xa8 \\x00 \\xff'"
                                    " + b'x' * (8 << 20))"]],
    # lone surrogates and U+2028 in the call's own arguments (decoded from JSON escapes)
    "odd-chars-arguments": [["raw", json.dumps({"language": "python", "code": "print('\ud800 \u2028 \x00')"},
                                               ensure_ascii=True)]],
    # escape sequences in output, in an output file name and in the submitted answers
    "terminal-escapes": [["python", "print('\\x1b]0;owned\\x07\\x1b[2J\\x9b31m\\u202e')\n" + SOLVE
                          + "(ws / 'outputs' / '\\x1b[2Jx').mkdir(exist_ok=True)\n"
                          "for p in (ws / 'outputs').glob('*/answer.txt'):\n"
                          "    p.write_text('\\x1b[31m=cmd|calc\\x1b]8;;http://x\\x07')\n"]],
    # 0.8 MB of code full of heredocs and echoed literals (the code-text analysis' worst cases). The heredocs
    # feed the builtin `read`, which the analysis reads exactly as it read `cat` (a command writing x.py), but
    # bash runs them in seconds instead of forking 40,000 `cat`s (a minute of the agent's own time, to its timeout)
    "heredoc-flood": [["bash", "read <<A > x.py\nA\n" * 40000 + "echo '" + "lit\n" * 20000 + "'\nexit 3"]],
    # wrongly typed and huge call ids / languages
    "odd-call-shape": [["raw", json.dumps({"language": ["python"], "code": {"a": 1}})],
                       ["raw", "{" * 100000], ["python", SOLVE]],
}


class NamedSteps(StepsAgent):
    """StepsAgent, but a call id an agent chooses: long, with control characters."""

    name = "bytes-steps"

    def next_turn(self, messages):
        turn = super().next_turn(messages)
        return attrs.evolve(turn, tool_calls=[ToolCall("\x1b[2J" + "i" * 5000, c.name, c.arguments)
                                              for c in turn.tool_calls])


def backends() -> list[str]:
    from automedbench.sandboxes.local import bwrap_path

    return (["local"] if bwrap_path() is not None else []) + ["local-plain"]


@pytest.mark.parametrize("backend", backends())
# the heredoc flood's post-run analysis of 0.8 MB of code: the slow tier
@pytest.mark.parametrize("attack", [pytest.param(a, marks=pytest.mark.slow) if a == "heredoc-flood" else a
                                    for a in sorted(ATTACKS)])
def test_hostile_agent_bytes_are_recorded_not_a_crash(tmp_path, attack, backend):
    register_toy_track()
    register_agent(NamedSteps)
    result, run_dir = run_task(TASK, NamedSteps.name, out=tmp_path / "runs", data_root=tmp_path / "data",
                               sandbox=backend, agent_options={"steps": ATTACKS[attack]}, workspace_quota_mb=0)
    assert result.state in ("scored", "agent_failure"), (result.state, result.error)
    assert torn_line(run_dir / "trajectory.jsonl") is None
    events = read_events(run_dir / "trajectory.jsonl")
    assert events[-1]["type"] == "end" and any(e.get("name") == "execute_code" for e in events)
    assert result.judge is None or not result.judge.error, result.judge.error
    assert not [c for c in result.error_codes if c.code in ("H-DETECTOR", "H-HOOK")], result.error_codes
    # the post-run analysis is bounded and its time is the harness's
    assert result.runtime.harness_s < 60, result.runtime
    assert result.runtime.wall_s >= result.runtime.harness_s + result.runtime.agent_s
    buffer = io.StringIO()
    render(result, SafeConsole(file=buffer, force_terminal=True, width=200), items=True)
    shown = buffer.getvalue().replace("\x1b[", "")  # the console's own styling: CSI m codes only
    assert "\x1b" not in shown and "\x9b" not in shown and "\u202e" not in shown and "2J" not in shown.replace(
        "\\x1b[2J", "")
