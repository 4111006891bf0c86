"""Where the harness's own time goes: named steps of a run, summed into `Runtime.harness_steps`.

`harness_s` is the wall time the agent's code and model did not use; the steps say which part of the
harness spent it (set-up, sandbox, freeze, evaluation, judge, ...), so overhead can be found and cut."""

from __future__ import annotations

import contextlib
import functools
import os
import resource
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from .records import Runtime

OTHER = "other"  # harness time outside every named step (the turn loop's own bookkeeping, trajectory writes)


@contextlib.contextmanager
def step(runtime: Runtime, name: str) -> Iterator[None]:
    """Add the block's wall time to `runtime.harness_steps[name]` (seconds, rounded to ms), even if it raises."""
    started = time.monotonic()
    try:
        yield
    finally:
        add(runtime, name, time.monotonic() - started)


F = TypeVar("F", bound=Callable[..., Any])


def timed(name: str) -> Callable[[F], F]:
    """Declare a run's step: a method `fn(self, state, ...)` whose wall time goes to `state.runtime`'s step `name`
    (the state: anything with a `runtime`, a RunState or the Result), even if it raises."""
    def declare(fn: F) -> F:
        @functools.wraps(fn)
        def timed_step(self: Any, state: Any, *args: Any, **kwargs: Any) -> Any:
            with step(state.runtime, name):
                return fn(self, state, *args, **kwargs)

        return timed_step  # type: ignore[return-value]

    return declare


def add(runtime: Runtime, name: str, seconds: float) -> None:
    runtime.harness_steps[name] = round(runtime.harness_steps.get(name, 0.0) + seconds, 3)


def close(runtime: Runtime) -> None:
    """Put what no named step covered under OTHER, so the steps add up to harness_s (to the ms)."""
    named = sum(v for k, v in runtime.harness_steps.items() if k != OTHER)
    runtime.harness_steps[OTHER] = round(max(0.0, runtime.harness_s - named), 3)


def own_cpu() -> float:
    """CPU seconds this process has used (every thread, start-up included)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def children_cpu() -> float:
    """CPU seconds of the child processes this process has waited for (their own reaped children included)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def process_age() -> float:
    """Wall seconds since this process started (the kernel's start time, 10 ms ticks; 0 where unknown)."""
    try:
        raw = open("/proc/self/stat", "rb").read()  # noqa: SIM115 (one read of a proc file)
        started = int(raw[raw.rindex(b")") + 2:].split()[19]) / os.sysconf("SC_CLK_TCK")
        return max(0.0, time.clock_gettime(time.CLOCK_BOOTTIME) - started)
    except (OSError, ValueError, IndexError, AttributeError):
        return 0.0


_FIRST_RUN_SEEN = False


class CpuLedger:
    """The harness's own CPU over one run: this process's (since its start for the first run of a process, so
    start-up and imports count) plus the child processes it waited for, less those `excluded` (the agent's tool
    calls, the evaluator): what is left of the children are the harness's helpers (the workspace image's tools)."""

    def __init__(self) -> None:
        global _FIRST_RUN_SEEN
        first, _FIRST_RUN_SEEN = not _FIRST_RUN_SEEN, True
        self.startup_s = round(process_age(), 3) if first else 0.0
        self.own0 = 0.0 if first else own_cpu()
        self.children0 = children_cpu()
        self.excluded: dict[str, float] = {}

    @contextlib.contextmanager
    def exclude(self, name: str) -> Iterator[None]:
        """Count the CPU of the children waited for inside the block under `name`, not as the harness's."""
        before = children_cpu()
        try:
            yield
        finally:
            self.excluded[name] = self.excluded.get(name, 0.0) + children_cpu() - before

    def harness(self) -> float:
        helpers = children_cpu() - self.children0 - sum(self.excluded.values())
        return round(own_cpu() - self.own0 + max(0.0, helpers), 3)
