"""Time scaling of the post-run analysis on agent text: ten times the input should cost about ten times the time.

The measurement tests/test_agent_text_linear.py used to make (a timing assertion, which a loaded machine can
fail): each pattern that was once quadratic on agent output, and the whole analysis of one call's text on
long repeats of one fragment, timed at `--size` and ten times that (best of five). A quadratic pattern costs
~100x for 10x the input; the check is a ratio below `--ratio` (30) once the large input takes 250 ms or more.
Exit status 1 when a row fails. The tests keep the deterministic guards (operation counts, pattern shapes).

Run: `.venv/bin/python benchmarks/bench_text_scaling.py [--size 10000] [--ratio 30]`.
"""

from __future__ import annotations

import argparse
import re
import time
from collections.abc import Callable
from typing import Any

from automedbench.codetext import effective, observed_output
from automedbench.judges.rules import ENTRYPOINT
from automedbench.trace import SETUP
from bench_post_run import analyse as analyse_events  # benchmarks/ is on the path when run as a script


def analyse(text: str) -> None:
    """The post-run analysis of one call's agent text (as code, stdout, stderr and a reply), as bench_post_run
    runs it over a trajectory."""
    call = {"type": "tool", "name": "execute_code", "turn": 1, "call_id": "c1", "language": "python", "code": text,
            "stdout": text, "stderr": text, "exit_code": 1, "changed_cases": [], "cases_with_outputs": 0}
    analyse_events([call, {"type": "assistant", "content": text},
                    {**call, "turn": 2, "call_id": "c2", "language": "bash", "exit_code": 0}])


def cases() -> dict[str, tuple[Callable[[Any], Any], Callable[[int], Any]]]:
    entry = re.compile(ENTRYPOINT)
    rows: dict[str, tuple[Callable[[Any], Any], Callable[[int], Any]]] = {
        "SETUP on 'pip' repeats": (SETUP.search, lambda n: "pip" * n),
        "SETUP on 'weights' repeats": (SETUP.search, lambda n: "weights" * n),
        "ENTRYPOINT on one long word": (entry.findall, lambda n: "a" * n),
        "bash heredocs, one per line": (lambda code: effective("bash", code),
                                        lambda n: "cat <<A > x.py\nA\n" * (n // 16)),
        "echoed literals": (lambda pair: observed_output("python", *pair),
                            lambda n: ("print('''" + "\n".join(f"lit{i}" for i in range(n // 5)) + "''')",
                                       "\n".join(f"lit{i} x" for i in range(n // 6)))),
    }
    for fragment in ["pip", "weights", "a", "pip error", "{", "'", "<<EOF\n", "python x.py "]:
        rows[f"whole analysis, {fragment!r} repeats"] = (analyse, lambda n, f=fragment: f * (n // len(f)))
    return rows


def seconds(fn: Callable[[Any], Any], arg: Any) -> float:
    best = float("inf")
    for _ in range(5):  # the best of five: other processes only ever add time
        t0 = time.perf_counter()
        fn(arg)
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--ratio", type=float, default=30.0)
    args = parser.parse_args()
    failed = 0
    print(f"| case | {args.size} chars (ms) | {10 * args.size} chars (ms) | ratio | ok |")
    print("|---|---|---|---|---|")
    for name, (fn, make) in cases().items():
        small, big = seconds(fn, make(args.size)), seconds(fn, make(10 * args.size))
        ok = big < 0.25 or big / max(small, 1e-4) < args.ratio
        failed += not ok
        verdict = "yes" if ok else "NO"
        ratio = big / max(small, 1e-6)
        print(f"| {name} | {small * 1e3:.1f} | {big * 1e3:.1f} | {ratio:.1f} | {verdict} |", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
