"""Leaderboard speed over many stored runs: synthetic, schema-valid result.json files (about 17 kB each,
like real ones), then the same steps `automedbench leaderboard` takes.

Run: `.venv/bin/python benchmarks/bench_leaderboard.py [--runs 10000] [--resamples 2000]`.
The files are read from the page cache (warm), as on a second look at a campaign.
The made-up runs are signed with a throwaway harness key (its own $AUTOMEDBENCH_STATE), never the user's:
kept with --keep, they are not taken for this machine's real runs by a later leaderboard.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from automedbench_campaign.htmlreport import render_html
from automedbench_campaign.leaderboard import build, to_json
from automedbench_campaign.render import to_csv
from automedbench_campaign.store import find_runs, load_table
from automedbench_campaign.synthetic import write_runs


def timed(fn):
    t = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--resamples", type=int, default=2000)
    parser.add_argument("--keep", type=Path, default=None, help="write the runs here and keep them")
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="amb-bench-lb-"))
    state = Path(tempfile.mkdtemp(prefix="amb-bench-lb-state-"))
    os.environ["AUTOMEDBENCH_STATE"] = str(state)  # this process and the CLI it starts sign/verify with it
    try:
        _, t_write = timed(lambda: write_runs(root, args.runs, seed=0))
        size = sum((p / "result.json").stat().st_size for p in find_runs([root]))
        found, t_find = timed(lambda: find_runs([root]))
        table, t_load = timed(lambda: load_table([root]))
        board, t_build = timed(lambda: build(table, resamples=args.resamples, seed=0))
        _, t_csv = timed(lambda: to_csv(board))
        _, t_json = timed(lambda: json.dumps(to_json(board)))
        page, t_html = timed(lambda: render_html(board, table))
        cli = [sys.executable, "-m", "automedbench.cli", "leaderboard", str(root), "--quiet",
               "--resamples", str(args.resamples), "--html", str(root.parent / f"{root.name}.html")]
        _, t_cli = timed(lambda: subprocess.run(cli, check=True, capture_output=True))
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"runs {len(found)} ({size / 1e6:.0f} MB of result.json), cells {len(board.cells)}, "
              f"resamples {args.resamples}")
        print(f"write synthetic runs   {t_write:7.2f} s (setup, not part of the leaderboard)")
        for label, value in (("find run folders", t_find), ("load needed fields", t_load),
                             ("cells + analyses + CIs", t_build), ("CSV", t_csv), ("JSON", t_json),
                             ("HTML report", t_html)):
            print(f"{label:<22} {value:7.2f} s")
        print(f"in-process total       {t_find + t_load + t_build + t_csv + t_json + t_html:7.2f} s")
        print(f"CLI end to end         {t_cli:7.2f} s (`automedbench leaderboard --quiet --html`, new process)")
        print(f"peak RSS               {rss:7.0f} MB; HTML {len(page) / 1e3:.0f} kB")
        if args.keep is not None:
            print(f"kept {root}: signed with the throwaway key in {state}, not yours (set AUTOMEDBENCH_STATE to "
                  "it to read them as genuine)")
    finally:
        if args.keep is None:
            shutil.rmtree(state, ignore_errors=True)
            shutil.rmtree(root, ignore_errors=True)
            (root.parent / f"{root.name}.html").unlink(missing_ok=True)


if __name__ == "__main__":
    main()
