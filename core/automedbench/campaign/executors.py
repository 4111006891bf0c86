"""Where sweep runs execute: in this process, a local process pool (default) or Ray tasks.

Every executor runs the same function, `execute_payload`, which is one
`Run(RunOptions(...), registry()).execute()` and returns a small summary dict.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

from ..errors import UserError


def execute_payload(payload: dict[str, Any]) -> dict[str, Any]:
    """Run one matrix entry; never raises (a crash is an infrastructure failure of this attempt)."""
    from ..plugins import registry
    from ..runner import Run, RunOptions

    t0 = time.monotonic()
    summary: dict[str, Any] = {"run_id": payload["run_id"], "state": "infrastructure_failure", "overall": None,
                               "cost_usd": 0.0, "wall_s": 0.0, "error": None}
    try:
        opts = dict(payload["options"])
        opts["out"] = Path(opts["out"])
        opts["data_root"] = Path(opts["data_root"]) if opts.get("data_root") else None
        result = Run(RunOptions(**opts), registry()).execute()
        summary.update(state=result.state, overall=result.aggregate.overall,
                       cost_usd=result.runtime.cost_usd + result.runtime.judge_cost_usd, error=result.error)
    except Exception as exc:  # the runner writes its own result.json; this covers failures before that
        summary["error"] = f"{type(exc).__name__}: {exc}"
    summary["wall_s"] = round(time.monotonic() - t0, 3)
    return summary


class Executor(ABC):
    name = ""

    @abstractmethod
    def submit(self, payload: dict[str, Any], cpus: float, gpus: float) -> Any:
        """Start one run; returns a handle."""

    @abstractmethod
    def wait(self, handles: list[Any]) -> list[tuple[Any, dict[str, Any]]]:
        """Block until at least one handle finishes; return (handle, summary) for each finished one."""

    def close(self, cancel: bool = False) -> None:  # noqa: B027 - optional hook, nothing to release by default
        """Release workers; `cancel` drops runs not started yet."""


class InlineExecutor(Executor):
    """Runs each payload in this process when waited for: no parallelism, easiest to debug."""

    name = "inline"

    def submit(self, payload: dict[str, Any], cpus: float, gpus: float) -> Any:
        return payload

    def wait(self, handles: list[Any]) -> list[tuple[Any, dict[str, Any]]]:
        return [(handles[0], execute_payload(handles[0]))]


class LocalExecutor(Executor):
    """A process pool of `workers` spawned interpreters (spawn: the sandbox forks, so no fork of threads).

    A worker that dies (OOM kill, segfault) breaks a ProcessPoolExecutor for good: its runs come back as
    infrastructure failures and the next submit starts a fresh pool, so the sweep can retry them."""

    name = "local"

    def __init__(self, workers: int, function: Any = None) -> None:
        self.workers = workers
        self.function = function or execute_payload
        self.pool = self._new_pool()

    def _new_pool(self) -> Any:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        return ProcessPoolExecutor(max_workers=self.workers, mp_context=multiprocessing.get_context("spawn"))

    def submit(self, payload: dict[str, Any], cpus: float, gpus: float) -> Any:
        from concurrent.futures.process import BrokenProcessPool

        try:
            return self.pool.submit(self.function, payload)
        except BrokenProcessPool:
            self.pool.shutdown(wait=False, cancel_futures=True)
            self.pool = self._new_pool()
            return self.pool.submit(self.function, payload)

    def wait(self, handles: list[Any]) -> list[tuple[Any, dict[str, Any]]]:
        from concurrent.futures import FIRST_COMPLETED
        from concurrent.futures import wait as wait_futures

        done, _ = wait_futures(handles, return_when=FIRST_COMPLETED)
        out = []
        for future in done:
            try:
                out.append((future, future.result()))
            except Exception as exc:  # the worker process died
                out.append((future, {"state": "infrastructure_failure", "overall": None, "cost_usd": 0.0,
                                     "wall_s": 0.0, "error": f"worker died: {type(exc).__name__}: {exc}"}))
        return out

    def close(self, cancel: bool = False) -> None:
        """On cancel: queued runs are dropped; runs in flight get CANCEL_GRACE_S to close as cancelled (a
        terminal's Ctrl-C reaches the workers too), then an interrupt of their own, then termination."""
        if not cancel:
            self.pool.shutdown(wait=True)
            return
        workers = list((getattr(self.pool, "_processes", None) or {}).values())
        self.pool.shutdown(wait=False, cancel_futures=True)
        _stop_processes(workers)


CANCEL_GRACE_S = 10.0


def _stop_processes(workers: list[Any], grace_s: float = CANCEL_GRACE_S) -> None:
    """Wait for pool workers to exit; interrupt (SIGINT: the run closes as cancelled) then terminate laggards."""
    import os
    import signal

    for then in ("interrupt", "terminate", None):
        deadline = time.monotonic() + grace_s
        for proc in workers:
            proc.join(max(0.0, deadline - time.monotonic()))
        alive = [p for p in workers if p.is_alive()]
        if not alive or then is None:
            return
        for proc in alive:
            if then == "interrupt":
                os.kill(proc.pid, signal.SIGINT)
            else:
                proc.terminate()


class RayExecutor(Executor):
    """One Ray task per run, with its CPU/GPU needs; `address` None starts (or joins) a local instance."""

    name = "ray"

    def __init__(self, address: str | None = None, init_options: dict[str, Any] | None = None) -> None:
        try:
            import ray
        except ImportError:
            raise UserError("--executor ray needs Ray: pip install 'automedbench[ray]' (or pip install ray)") from None
        self.ray = ray
        if not ray.is_initialized():
            ray.init(address=address, include_dashboard=False, log_to_driver=False, **(init_options or {}))
        self.remote = ray.remote(max_retries=0)(execute_payload)

    def submit(self, payload: dict[str, Any], cpus: float, gpus: float) -> Any:
        return self.remote.options(num_cpus=cpus, num_gpus=gpus).remote(payload)

    def wait(self, handles: list[Any]) -> list[tuple[Any, dict[str, Any]]]:
        ready, _ = self.ray.wait(handles, num_returns=1)
        out = []
        for ref in ready:
            try:
                out.append((ref, self.ray.get(ref)))
            except Exception as exc:  # the worker or node was lost
                out.append((ref, {"state": "infrastructure_failure", "error": f"ray task failed: {exc}",
                                  "overall": None, "cost_usd": 0.0, "wall_s": 0.0}))
        return out

    def close(self, cancel: bool = False) -> None:
        """Leave a Ray instance we joined running; the driver's own local instance stops with the process."""


EXECUTORS = ("local", "ray", "inline")


def make_executor(name: str, workers: int, ray_address: str | None = None) -> Executor:
    if name == "local":
        return LocalExecutor(workers)
    if name == "ray":
        return RayExecutor(ray_address)
    if name == "inline":
        return InlineExecutor()
    raise UserError(f"unknown executor {name!r}; choose {', '.join(EXECUTORS)}")
