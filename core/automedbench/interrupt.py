"""SIGTERM and SIGHUP on a harness process become an orderly unwind, like Ctrl-C.

Python's default for SIGTERM ends the process at once: no `finally` runs, so a run's loop-mounted workspace,
its cgroups, its disk reservation and its sandbox's processes outlive it. A process that owns runs (the
command line, a sweep's worker) installs `terminate_as_interrupt` in its main thread; the first signal then
raises `Terminated`, a KeyboardInterrupt, so every path that already closes a run as `cancelled` on Ctrl-C
does the same here. Library code never installs it: a process that embeds the harness keeps its own handlers.

`held` is the other half: while a finished run writes its record, SIGINT, SIGTERM and SIGHUP are recorded
instead of acted on, then delivered to the handler that was there before, so an interrupt that lands in
scoring, the run-finished hooks or the result write no longer costs a submitted run its record.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any

SIGNALS = (signal.SIGTERM, signal.SIGHUP)

_received: list[int] = []  # the signal that started the unwind in this process (at most one)


class Terminated(KeyboardInterrupt):
    """The process was asked to stop by a signal: unwind as on Ctrl-C (the run ends `cancelled`)."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"terminated by {signal.Signals(signum).name}")
        self.signum = signum


def _handler(signum: int, frame: FrameType | None) -> None:
    if _received:  # already unwinding: a repeated signal must not cut the clean-up short (SIGKILL still can)
        return
    _received.append(signum)
    raise Terminated(signum)


def received() -> int | None:
    """The signal this process is unwinding from, or None (no signal, or Ctrl-C)."""
    return _received[0] if _received else None


def exit_status(default: int = 130) -> int:
    """The exit status for an interrupted command: 128 + the signal's number, or `default` (Ctrl-C's 130)."""
    signum = received()
    return 128 + signum if signum is not None else default


def reason() -> str:
    """Why a run was cancelled, for its record."""
    signum = received()
    return f"cancelled: {signal.Signals(signum).name} received" if signum is not None else "cancelled by the user"


def check() -> None:
    """Raise `Terminated` again if this process is unwinding from a signal: a loop that starts runs one after
    another (an in-process sweep) calls it before each, so a run that closed as cancelled is its last."""
    signum = received()
    if signum is not None:
        raise Terminated(signum)


def rearm() -> None:
    """Forget the signal once its unwind is over (a pool worker whose run closed as cancelled): the next one
    unwinds the next run instead of being ignored."""
    _received.clear()


def _main_thread() -> bool:
    """Python delivers signals to the main thread only: elsewhere handlers can be neither set nor run."""
    return threading.current_thread() is threading.main_thread()


def _swap(handlers: dict[int, Any]) -> dict[int, Any]:
    """Install `handlers` by signal (None: the default action); the handlers they replaced, to restore."""
    return {signum: signal.signal(signum, signal.SIG_DFL if handler is None else handler)
            for signum, handler in handlers.items()}


def _unwinding() -> list[int]:
    """The signals that unwind this process: SIGHUP only if it is not ignored, since `nohup automedbench run ...`
    ignores it so that a closed terminal does not stop the run (the handler made the hang-up cancel it)."""
    return [s for s in SIGNALS if not (s == signal.SIGHUP and signal.getsignal(s) == signal.SIG_IGN)]


def install() -> None:
    """Install the handler for good (a sweep's worker process); only from the main thread, else nothing."""
    if _main_thread():
        _swap(dict.fromkeys(_unwinding(), _handler))


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """While inside, SIGTERM and SIGHUP raise `Terminated`; the previous handlers come back on leaving.

    Does nothing outside the main thread, so a command run from a test's worker thread keeps the host's
    handlers."""
    if not _main_thread():
        yield
        return
    _received.clear()  # a command run again in the same process (tests) starts with no signal seen
    previous = _swap(dict.fromkeys(_unwinding(), _handler))
    try:
        yield
    finally:
        _swap(previous)


HELD = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def held() -> Iterator[None]:
    """Defer SIGINT/SIGTERM/SIGHUP to the end of the block, then deliver the first to the previous handler; a
    second signal inside the block acts at once (an operator who presses Ctrl-C twice means it). Main thread
    only: elsewhere Python code cannot handle signals and the block runs unchanged."""
    if not _main_thread():
        yield
        return
    pending: list[int] = []

    def restore() -> None:  # once: the second signal may have restored them already
        _swap(previous)
        previous.clear()

    def hold(signum: int, frame: FrameType | None) -> None:
        if pending:  # the second one: stop holding and act now
            restore()
            signal.raise_signal(signum)
            return
        pending.append(signum)

    previous = _swap(dict.fromkeys(HELD, hold))
    try:
        yield
    finally:
        restore()
        if pending:
            signal.raise_signal(pending[0])
