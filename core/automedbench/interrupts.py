"""Interrupts held back while a finished run writes its record.

An operator's Ctrl-C (or a sweep stopping its workers with SIGINT, then SIGTERM) used to land anywhere in a
run's last steps — scoring, the run-finished hooks, writing result.json, releasing the workspace — and a
run whose agent had already submitted lost its record and left its workspace image mounted. While a run
finishes, SIGINT and SIGTERM are recorded instead of acted on; once the record is written the first one is
delivered again to whatever handler was there before. A second signal of either kind acts at once (an
operator who presses Ctrl-C twice means it).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any

HELD = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def held_interrupts() -> Iterator[None]:
    """Defer SIGINT/SIGTERM to the end of the block (main thread only; elsewhere signals cannot be handled
    by Python code and the block runs unchanged)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous: dict[int, Any] = {}
    pending: list[int] = []

    def hold(signum: int, frame: FrameType | None) -> None:
        if pending:  # the second one: stop holding and act now
            restore()
            signal.raise_signal(signum)
            return
        pending.append(signum)

    def restore() -> None:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        previous.clear()

    for signum in HELD:
        previous[signum] = signal.signal(signum, hold)
    try:
        yield
    finally:
        restore()
        if pending:
            signal.raise_signal(pending[0])
