"""Sweeps on a two-node Ray cluster on this machine vs the local process pool: scheduling overhead per run
and throughput on 1 vs 2 one-CPU nodes.

The cluster is the one the test suite starts (tests/test_campaign_ray_cluster.py: `ray start --block`
per node, 1 CPU and 500 MB object store each, loopback, own temp dirs and auth token); every Ray process
is stopped by PID at the end. On a 2-core machine this measures overhead and distribution, not speed-up.
Run: `.venv/bin/python benchmarks/bench_ray_cluster.py [--runs 40] [--agent noop]`.
"""

from __future__ import annotations

import argparse
import collections
import os
import secrets
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
# Ray reads its auth settings when it is imported: the driver (this process) needs them before that.
os.environ.setdefault("RAY_AUTH_TOKEN", secrets.token_hex(32))
os.environ["RAY_AUTH_MODE"] = "token"

from automedbench import staging
from automedbench.plugins import registry
from automedbench_campaign.sweep import Sweep, SweepConfig
from test_campaign_ray_cluster import LOOPBACK, Cluster

TASK = "segmentation/demo"


def sweep(reg, out: Path, data: Path, agent: str, runs: int, workers: int, executor: str,
          address: str | None = None) -> tuple[float, float | None, dict[str, int]]:
    config = SweepConfig.of([agent], [TASK], ["lite"], repeats=runs, workers=workers, out=out, executor=executor,
                            data_root=data, ray_address=address)
    t = time.perf_counter()
    report = Sweep(config, reg).run()
    wall = time.perf_counter() - t
    assert report.states == {"scored": runs}, report.states
    nodes = collections.Counter(r.node.get("ray_node_id", r.node.get("host", "?"))[:8]
                                for r in report.records.values())
    return wall, report.overhead_s_per_run, dict(nodes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--agent", default="noop")
    args = parser.parse_args()
    assert LOOPBACK["RAY_AUTH_TOKEN"] == os.environ["RAY_AUTH_TOKEN"]  # nodes and driver share the token
    reg = registry()
    work = Path(tempfile.mkdtemp(prefix="amb-bench-ray-"))
    data = work / "data"
    track, task = reg.task(TASK)
    staging.ensure(track, task, data)
    cluster = Cluster()
    rows = []
    try:
        rows.append(("local pool, 1 worker", *sweep(reg, work / "local1", data, args.agent, args.runs, 1, "local")))
        rows.append(("local pool, 2 workers", *sweep(reg, work / "local2", data, args.agent, args.runs, 2, "local")))
        cluster.start("head", head=True)
        cluster.wait_nodes(1)
        rows.append(("Ray, 1 one-CPU node", *sweep(reg, work / "ray1", data, args.agent, args.runs, 1, "ray",
                                                  cluster.address)))
        cluster.start("worker", head=False, resources='{"worker_node": 1}')
        cluster.wait_nodes(2)
        rows.append(("Ray, 2 one-CPU nodes", *sweep(reg, work / "ray2", data, args.agent, args.runs, 2, "ray",
                                                   cluster.address)))
    finally:
        if "ray" in sys.modules:
            sys.modules["ray"].shutdown()  # disconnect the driver before its cluster goes
        cluster.stop()
        shutil.rmtree(work, ignore_errors=True)
    print(f"{args.runs} runs of {args.agent} on {TASK} (lite) per row")
    for label, wall, overhead, nodes in rows:
        extra = f"{overhead * 1000:6.0f} ms/run" if overhead is not None else "     n/a"
        print(f"{label:<24} {wall:7.1f} s  {args.runs / wall * 60:6.1f} runs/min  outside Run.execute() {extra}"
              f"  runs per node {sorted(nodes.values(), reverse=True)}")


if __name__ == "__main__":
    main()
