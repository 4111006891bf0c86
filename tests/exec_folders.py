"""Every sandbox call folder (`automedbench-exec-*` under the temp dir) a test session's process makes is gone
when the session ends: a sandbox session a test opened and never closed leaves one (its `close()` removes it),
and a day of test runs left ~500 in /tmp. tests/conftest.py installs `track()` at import and checks at the end
of each (worker's) session with `leaked()`, naming the test that opened each folder left behind.

Only folders made in this process are tracked: a harness subprocess a test kills hard may leave its own."""

from __future__ import annotations

import os
from pathlib import Path

from automedbench.fsutil import remove_tree
from automedbench.sandboxcall import CallFolder

MADE: dict[Path, str] = {}  # folder -> the test (PYTEST_CURRENT_TEST) that was running when it was made


def track() -> None:
    """Record each CallFolder this process makes, with the test that made it (once per process)."""
    if getattr(CallFolder.__init__, "tracked", False):
        return
    made = CallFolder.__init__

    def tracking(self: CallFolder) -> None:
        made(self)
        MADE[self.path] = os.environ.get("PYTEST_CURRENT_TEST", "(outside a test)").rsplit(" (", 1)[0]

    tracking.tracked = True  # type: ignore[attr-defined]
    CallFolder.__init__ = tracking  # type: ignore[method-assign]


def leaked(remove: bool = False) -> dict[Path, str]:
    """The tracked folders that still exist, with the tests that made them; removed (and forgotten) when
    `remove`. Folders already gone are forgotten either way."""
    found = {path: test for path, test in MADE.items() if path.exists()}
    for path in list(MADE):
        if path not in found or remove:
            del MADE[path]
    for path in found if remove else ():
        remove_tree(path)
    return found
