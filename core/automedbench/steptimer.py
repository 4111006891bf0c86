"""Where the harness's own time goes: named steps of a run, summed into `Runtime.harness_steps`.

`harness_s` is the wall time the agent's code and model did not use; the steps say which part of the
harness spent it (set-up, sandbox, freeze, evaluation, judge, ...), so overhead can be found and cut."""

from __future__ import annotations

import contextlib
import functools
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
