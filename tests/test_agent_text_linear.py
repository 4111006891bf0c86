"""Agent bytes through every core parser that reads them after a run: crash-free and linear work.

Fuzz-style: seeded random adversarial texts (repeats of pattern fragments, lone surrogates, U+2028, NUL,
ESC sequences, over-long lines, unbalanced quotes and heredocs) go through the trace, the rules judge's
evidence, the code-text analysis and the terminal/CSV sanitisers. Scaling is asserted without a clock, so
that a loaded machine cannot fail it: the Python lines executed for ten times the input are counted
(linear: ~10x; a loop over lines rescanning per line: ~100x), and the regular expressions that were
quadratic keep the shape that makes them linear. The time itself is measured in
benchmarks/bench_text_scaling.py.
"""

from __future__ import annotations

import io
import random
import re
import sys

import pytest
from automedbench.codetext import effective, observed_output
from automedbench.judges.rules import ENTRYPOINT, Evidence
from automedbench.terminal import SafeConsole, csv_cell, json_terminal_safe, terminal_safe
from automedbench.trace import MAX_CALLS, SETUP, SETUP_PATTERNS, Trace

FRAGMENTS = ["pip", "weights", "a", " ", "\t", "{", "'", '"', "<<EOF\n", "#", "Error", "python ", "sh x.py ",
             ".py", "-m ", "\\", "\ud800", "\u2028", "\x00", "\x1b[2J", "\x9b31m", "\u202e", "\r", "\n"]


def adversarial(rng: random.Random, size: int) -> str:
    """A text of about `size` characters: long repeats of one or two fragments, with noise."""
    a, b = rng.choice(FRAGMENTS), rng.choice(FRAGMENTS)
    body = (a * (size // (2 * len(a)) + 1)) + (b + a) * (size // (2 * len(a + b)) + 1)
    noise = "".join(rng.choice(FRAGMENTS) for _ in range(20))
    return (noise + body)[:size]


def tool(turn: int, code: str = "", stdout: str = "", stderr: str = "", exit_code: int = 1, **extra):
    return {"type": "tool", "name": "execute_code", "turn": turn, "call_id": f"c{turn}", "language": "python",
            "code": code, "stdout": stdout, "stderr": stderr, "exit_code": exit_code, "changed_cases": [],
            "cases_with_outputs": 0, **extra}


def analyse(text: str) -> None:
    """Everything the post-run analysis does with one call's agent text."""
    events = [tool(1, code=text, stdout=text, stderr=text), {"type": "assistant", "content": text},
              tool(2, code=text, language="bash", stdout=text, exit_code=0)]
    trace = Trace(events, ["answer.txt"])
    trace.setup_failures()
    trace.runtime_failures()
    trace.inspections()
    ev = Evidence(events)
    for call in ev.calls:
        ev.text(call)
    ev.all_text()


def python_steps(fn, arg) -> int:
    """The Python lines executed by fn(arg): a count of the work that no other process can change."""
    count = 0

    def tracer(frame, event, _):
        nonlocal count
        count += event == "line"
        return tracer

    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        fn(arg)
    finally:
        sys.settrace(previous)
    return count


def assert_linear(fn, make, small: int = 2_000, factor: int = 10, ratio: float = 15.0) -> None:
    """Ten times the input may execute at most fifteen times the Python lines (quadratic work: ~100x)."""
    s_small, s_big = python_steps(fn, make(small)), python_steps(fn, make(small * factor))
    assert s_small > 0 and s_big / s_small < ratio, (s_small, s_big)


@pytest.mark.parametrize("seed", range(12))
def test_fuzzed_agent_text_never_crashes_the_post_run_analysis(seed):
    rng = random.Random(seed)
    for size in (1, 50, 3_000):
        analyse(adversarial(rng, size))


@pytest.mark.parametrize("fragment", ["pip", "weights", "a", "pip error", "{", "'", "<<EOF\n", "python x.py "])
def test_post_run_analysis_scales_linearly_on_repeats(fragment):
    assert_linear(analyse, lambda n: fragment * (n // len(fragment)))


def test_the_patterns_that_were_quadratic_are_linear_now():
    # "pip.*error" and "[\w./-]+\.py\b" rescanned a line from every occurrence: ~100x for 10x the input. Each
    # unbounded run after a literal now sits in an atomic group that commits to the line's first occurrence
    # (trace._same_line), and a path is matched only from where its run of path characters starts.
    unbounded = re.compile(r"\.\*|\.\+|\[\^\\n\]\*")
    runs = [p for p in SETUP_PATTERNS if unbounded.search(p)]
    assert len(runs) == 2 and all(p.startswith("(?m:^(?>[^\\n]*?") for p in runs), runs
    assert ENTRYPOINT.startswith(r"(?<![\w./-])[\w./-]+\.py")
    # a heredoc per line, each once searched the whole call for the script that runs it
    assert_linear(lambda code: effective("bash", code), lambda n: "cat <<A > x.py\nA\n" * (n // 16))
    # echoed literals: a pass per literal line per output line
    assert_linear(lambda n: observed_output("python", n[0], n[1]),
                  lambda n: ("print('''" + "\n".join(f"lit{i}" for i in range(n // 5)) + "''')",
                             "\n".join(f"lit{i} x" for i in range(n // 6))))


def test_same_line_patterns_keep_their_meaning():
    assert SETUP.search("ERROR: pip's resolver ... error: could not install")
    assert not SETUP.search("pip install foo\nfine") and not SETUP.search("all good: error-free weights")
    assert SETUP.search("the weights file was not found") and not SETUP.search("weights\nnot found")


def test_an_outsized_trajectory_is_examined_only_so_far_and_says_so():
    events = [tool(i, code="x = 1", exit_code=0) for i in range(1, MAX_CALLS + 50)]
    trace = Trace(events)
    assert len(trace.attempts) == MAX_CALLS and "only the first" in trace.note
    big = [tool(i, code="y" * 90_000, stdout="z" * 90_000, exit_code=0) for i in range(1, 60)]
    ev = Evidence(big)
    assert "analysed only" in ev.note
    assert len(ev.code(ev.calls[-1])) <= 2_000 < len(ev.code(ev.calls[0]))


def test_wrongly_typed_trajectory_fields_read_as_absent():
    # an agent that can edit its trajectory (local-plain) or a CLI agent's own log: no crash, no batch
    events = [tool(1, cases_with_outputs="9", changed_cases="case_1", code=["x"], stdout={"a": 1}),
              tool("2"), {"type": "tool", "name": "execute_code"}, "not an event", 42]
    trace = Trace(events)  # type: ignore[arg-type]
    assert trace.batch is None and len(trace.attempts) == 1 and trace.setup_failures() == []


def test_terminal_output_carries_no_escape_sequence_from_agent_text():
    from rich.table import Table

    hostile = "ok\x1b]0;owned\x07 \x1b[2J\x9b31m \u202eevil\u2028next \ud800 [bold]markup[/]"
    buffer = io.StringIO()
    console = SafeConsole(file=buffer, force_terminal=True, width=200, highlight=False)
    table = Table()
    table.add_column("agent text")
    table.add_row(hostile)
    console.print(hostile, markup=False)
    console.print(table)
    out = buffer.getvalue()
    visible = out.replace("\x1b[1m", "").replace("\x1b[0m", "")  # the console's own styling
    assert "\x1b]" not in visible and "\x1b[2J" not in visible and "\x9b" not in out and "\u202e" not in out
    assert "\\x1b]0;owned\\x07" in out and "\\u2028" in out and "\\ud800" in out
    assert terminal_safe("tab\tand\nnewline") == "tab\tand\nnewline"


def test_json_for_the_terminal_stays_the_same_json():
    import json

    value = {"msg": "a\x9b31m\u202eb\u2028c"}
    text = json_terminal_safe(json.dumps(value, ensure_ascii=False))
    assert "\x9b" not in text and "\u202e" not in text and json.loads(text) == value


@pytest.mark.parametrize("cell", ["=HYPERLINK(\"http://x\")", "+1+1", "-2+3", "@SUM(A1)", "\t=1", "\r=1"])
def test_csv_cells_never_start_a_formula(cell):
    assert csv_cell(cell) == "'" + cell
    assert csv_cell("plain") == "plain" and csv_cell(-0.5) == -0.5


def test_leaderboard_csv_quotes_formula_cells(tmp_path):
    import csv

    from automedbench_campaign.leaderboard import build
    from automedbench_campaign.render import to_csv
    from automedbench_campaign.store import load_table
    from automedbench_campaign.synthetic import write_runs

    write_runs(tmp_path, 8, seed=1, agents=["=cmd|' /C calc'!A0", "@evil"], tasks=["segmentation/task00"])
    rows = list(csv.DictReader(io.StringIO(to_csv(build(load_table([tmp_path]), resamples=50)))))
    assert sorted({r["agent"] for r in rows}) == ["'=cmd|' /C calc'!A0", "'@evil"]
    assert all(not str(v).startswith(("=", "+", "@", "\t", "\r")) for r in rows for v in r.values())
