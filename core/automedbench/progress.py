"""Progress where people wait: a long `stage` (files and bytes written so far, on stderr) and a sweep's runs
in flight on a terminal. Off a terminal (CI, nohup, a pipe) progress is plain lines, one per event or per
interval, so a log shows it as it happens; on a terminal it is one live line, gone when the work ends."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rich.console import Console, RenderableType
from rich.markup import escape
from rich.progress import Progress
from rich.text import Text

# Seconds between two plain progress lines off a terminal (AUTOMEDBENCH_PROGRESS_S overrides it)
PLAIN_INTERVAL_S = 10.0
# Quiet for this long first: a demo staged in a second prints nothing
FIRST_AFTER_S = 2.0
SHOWN_IN_FLIGHT = 8


def plain_interval() -> float:
    try:
        return max(0.05, float(os.environ.get("AUTOMEDBENCH_PROGRESS_S", PLAIN_INTERVAL_S)))
    except ValueError:
        return PLAIN_INTERVAL_S


def tree_size(root: Path) -> tuple[int, int, int]:
    """(files, bytes, top-level folders) below `root`, links not followed; (0, 0, 0) while it does not exist."""
    files = size = 0
    folders = 0
    for folder, dirs, names in os.walk(root):
        if folder == str(root):
            folders = len(dirs)
        for name in names:
            if name.startswith(".") and name.endswith(".tmp"):
                continue  # an atomic write still in flight (fsutil.atomic_write_bytes): counted once renamed
            try:
                st = os.lstat(os.path.join(folder, name))
            except OSError:
                continue  # written and moved while we looked
            files += 1
            size += st.st_size
    return files, size, folders


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n < 1024 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TB"


class StagingProgress:
    """While a stager runs, report what it has written into its scratch copy (`<dest>/.incoming`): files,
    bytes and case folders of `public/`. A background thread that only reads sizes; stop() ends it."""

    def __init__(self, task_id: str, incoming: Path, cases: int, console: Console) -> None:
        self.task_id, self.incoming, self.cases, self.console = task_id, incoming, cases, console
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="staging-progress", daemon=True)
        self.lines = 0
        self._written = False  # files appeared in the scratch copy: a later empty one means it was swapped in
        self._started = time.monotonic()

    def __enter__(self) -> StagingProgress:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def describe(self) -> str | None:
        """The progress line; None once the new copy was swapped in (its scratch folder emptied or gone)."""
        files, size, _ = tree_size(self.incoming) if self.incoming.is_dir() else (0, 0, 0)
        if files == 0:
            if self._written:
                return None
            return f"staging {self.task_id}: reading the download, nothing written yet ({self._elapsed():.0f} s)"
        self._written = True
        cases = tree_size(self.incoming / "public")[2]
        return (f"staging {self.task_id}: {files:,} file(s), {human_bytes(size)} written, "
                f"{cases} of {self.cases} case folder(s)")

    def _elapsed(self) -> float:
        return time.monotonic() - self._started

    def _loop(self) -> None:
        if self._stop.wait(FIRST_AFTER_S):
            return
        if self.console.is_terminal:
            with self.console.status(f"staging {escape(self.task_id)}") as status:
                while not self._stop.wait(0.5):
                    line = self.describe()
                    if line is not None:
                        status.update(escape(line))
            return
        interval = plain_interval()
        while True:
            line = self.describe()
            if line is not None:  # between the swap and the end of the command there is nothing to count
                self.console.print(escape(line), soft_wrap=True)
                self.lines += 1
            if self._stop.wait(interval):
                return


class WaitTicker:
    """While a run waits on one step (an agent's long call, the evaluator, an LLM judge), say that it is still
    working: a live line with the seconds on a terminal, else a plain line every interval, so a log shows it.
    `start(label)` replaces the step being waited on; `stop()` ends the wait (before the next line is printed)."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.lines = 0
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()  # events may come from another thread (an installed agent's gateway)

    def start(self, label: str) -> None:
        with self._lock:
            self._end()
            self._stop = threading.Event()
            self._thread = threading.Thread(target=self._loop, args=(label, self._stop, time.monotonic()),
                                            name="wait-ticker", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        with self._lock:
            self._end()

    def _end(self) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=5)
            self._thread = None

    def _loop(self, label: str, stop: threading.Event, started: float) -> None:
        if self.console.is_terminal:
            if stop.wait(FIRST_AFTER_S):
                return
            with self.console.status(escape(label), spinner="dots") as status:
                while not stop.wait(0.5):
                    status.update(escape(f"{label} ({time.monotonic() - started:.0f} s)"))
            return
        interval = plain_interval()
        while not stop.wait(interval):
            self.console.print(escape(f"  … {label}: still working ({time.monotonic() - started:.0f} s)"),
                               style="dim", soft_wrap=True)
            self.lines += 1


class SweepProgress(Progress):
    """The sweep's bar, with the runs in flight under it (id and seconds running; the first few)."""

    def __init__(self, *columns: Any, **kwargs: Any) -> None:
        self.in_flight: dict[str, float] = {}  # before the base class, which renders once while it starts
        super().__init__(*columns, **kwargs)

    def get_renderables(self) -> Iterable[RenderableType]:
        yield self.make_tasks_table(self.tasks)
        now = time.monotonic()
        running = sorted(self.in_flight.items(), key=lambda item: item[1])
        for run_id, started in running[:SHOWN_IN_FLIGHT]:
            yield Text(f"  running {run_id}  {now - started:.0f}s", style="dim", overflow="ellipsis", no_wrap=True)
        if len(running) > SHOWN_IN_FLIGHT:
            yield Text(f"  and {len(running) - SHOWN_IN_FLIGHT} more running", style="dim")
