"""Post-run analysis on hostile trajectories, against plain text of the same size.

The rules judge's evidence (effective code, observed output) and the trace's failure classification
(`setup_failures`, `runtime_failures`, `inspections`) over N failed calls, each with INLINE_LIMIT characters
of output and of code. "hostile" repeats the fragments that once made a pattern quadratic ("pip", "weights",
a run of word characters, heredocs); "plain" is prose of the same length. The reference is the plain
trajectory: the ratio says what a hostile agent can add to the analysis. Best of `--repeats`.

Run: `.venv/bin/python benchmarks/bench_post_run.py [--calls 20 200] [--repeats 3]`.
"""

from __future__ import annotations

import argparse
import time

from automedbench.judges.rules import Evidence
from automedbench.trace import Trace
from automedbench.trajectory import INLINE_LIMIT

KINDS = {
    "plain": ("the model was loaded and the outputs were written to disk. " * 400, "x = 1\n" * 3000),
    "hostile-pip": ("pip" * INLINE_LIMIT, "weights" * INLINE_LIMIT),
    "hostile-word": ("a" * INLINE_LIMIT, "b" * INLINE_LIMIT),
    "hostile-heredoc": ("lit x\n" * INLINE_LIMIT, "cat <<A > x.py\nA\n" * (INLINE_LIMIT // 16)),
}


def trajectory(kind: str, calls: int) -> list[dict]:
    out, code = KINDS[kind]
    out, code = out[:INLINE_LIMIT], code[:INLINE_LIMIT]
    return [{"type": "tool", "name": "execute_code", "turn": i, "call_id": f"c{i}", "language": "bash" if i % 2
             else "python", "code": code, "stdout": out, "stderr": out, "exit_code": 1, "changed_cases": [],
             "cases_with_outputs": 0} for i in range(1, calls + 1)]


def analyse(events: list[dict]) -> None:
    trace = Trace(events, ["answer.txt"])
    trace.setup_failures()
    trace.runtime_failures()
    trace.inspections()
    ev = Evidence(events)
    for call in ev.calls:
        ev.text(call)


def best_of(events: list[dict], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        analyse(events)
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, nargs="+", default=[20, 200])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print("| calls | kind | seconds | / plain |")
    print("|---|---|---|---|")
    for calls in args.calls:
        plain = best_of(trajectory("plain", calls), args.repeats)
        for kind in KINDS:
            t = plain if kind == "plain" else best_of(trajectory(kind, calls), args.repeats)
            print(f"| {calls} | {kind} | {t:.3f} | {t / plain:.2f}x |")


if __name__ == "__main__":
    main()
