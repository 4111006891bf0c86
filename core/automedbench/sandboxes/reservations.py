"""Disk reservations across concurrent runs: a lock-protected ledger in the harness's state folder.

A workspace quota is a sparse image: it promises space it has not taken yet. Two runs starting together
would each be promised 90 % of the same free disk, and the first to fill its image would make the other's
writes fail. Every promise is therefore entered in one ledger per machine (`reservations.json` in
/run/automedbench; $AUTOMEDBENCH_LEDGER names another folder), under an exclusive `flock`: a new run is
promised only what is free minus what earlier runs may still write, whichever checkout, state folder or runs
folder they use (a per-state-folder ledger let two harness installs promise the same free disk twice). An
entry of a process that has ended (a crash) is dropped the next time the ledger is read. Only root mounts
workspace images; elsewhere the ledger lives in the state folder and holds nothing.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

from attrs import asdict, define

from ..fsutil import atomic_write_text
from ..harnessstate import state_dir

LEDGER = "reservations.json"
MAX_LEDGER_BYTES = 1 << 20
MACHINE_DIR = Path("/run/automedbench")  # tmpfs: emptied at boot, when no promise can still be alive
LEDGER_ENV = "AUTOMEDBENCH_LEDGER"


def ledger_dir() -> Path:
    """Where this machine's promises are kept: $AUTOMEDBENCH_LEDGER, else /run/automedbench for root (who alone
    mounts workspace images), else the harness's state folder."""
    env = os.environ.get(LEDGER_ENV)
    if env:
        return Path(env).expanduser()
    if os.geteuid() == 0 and MACHINE_DIR.parent.is_dir():
        return MACHINE_DIR
    return state_dir()


def _start_time(pid: int) -> str:
    """The kernel's start tick of `pid` ("" when gone): a pid reused by another process does not match."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return ""
    fields = raw[raw.rindex(b")") + 2:].split()
    return fields[19].decode() if len(fields) > 19 else ""


@define
class Reservation:
    id: str
    device: int
    image: str
    size_bytes: int
    pid: int
    started: str
    # the copies the run makes of the image's files on the same disk (the freeze, the pilots), held until
    # the run ends: a concurrent run can never take the space a run's own submission needs
    extra_bytes: int = 0

    def outstanding(self) -> int:
        """What the run may still take from the disk: its image's size less the blocks it already holds, and
        the space set aside for its copies."""
        try:
            used = os.stat(self.image).st_blocks * 512
        except OSError:
            used = 0
        return max(0, self.size_bytes - used) + self.extra_bytes

    def alive(self) -> bool:
        return _start_time(self.pid) == self.started and self.started != ""


def largest(high: int, fits: Callable[[int], bool]) -> int:
    """The largest n in [0, high] with fits(n) (fits is monotone: true up to some n, false after)."""
    low = 0
    if fits(high):
        return high
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if fits(mid) else (low, mid)
    return low


class Ledger:
    """The reservations of every running run of this user; each method holds the lock for its whole work."""

    def __init__(self, folder: Path | None = None) -> None:
        self.folder = folder or ledger_dir()
        self.path = self.folder / LEDGER

    @contextlib.contextmanager
    def _locked(self) -> Iterator[list[Reservation]]:
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.folder / (LEDGER + ".lock"), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            entries = [e for e in self._read() if e.alive()]
            yield entries
            atomic_write_text(self.path, json.dumps([asdict(e) for e in entries], indent=1) + "\n")
        finally:
            os.close(fd)

    def _read(self) -> list[Reservation]:
        try:
            with open(self.path, "rb") as fh:
                raw = fh.read(MAX_LEDGER_BYTES + 1)
            rows = json.loads(raw) if len(raw) <= MAX_LEDGER_BYTES else []
            return [Reservation(**row) for row in rows if isinstance(row, dict)]
        except (OSError, ValueError, TypeError):
            return []  # a missing or unreadable ledger holds no promise: the disk's free space still bounds us

    def reserve(self, folder: Path, image: Path, wanted_bytes: int, share: float, minimum_bytes: int,
                copies: Callable[[int], int] | None = None) -> tuple[Reservation | None, int, int]:
        """Promise up to `wanted_bytes` on `folder`'s disk, and `copies(size)` more for what the run copies of
        an image of that size: (reservation or None, free bytes, promised to others)."""
        device = os.stat(folder).st_dev
        extra = copies or (lambda size: 0)
        with self._locked() as entries:
            free = shutil.disk_usage(folder).free
            others = sum(e.outstanding() for e in entries if e.device == device)
            budget = int(max(0, free - others) * share)
            size = largest(min(wanted_bytes, budget), lambda n: n + extra(n) <= budget)
            if size < minimum_bytes:
                return None, free, others
            entry = Reservation(secrets.token_hex(8), device, str(image), size, os.getpid(), _start_time(os.getpid()),
                                extra(size))
            entries.append(entry)
            return entry, free, others

    def release(self, reservation_id: str) -> None:
        with self._locked() as entries:
            entries[:] = [e for e in entries if e.id != reservation_id]

    def entries(self) -> list[Reservation]:
        with self._locked() as entries:
            return list(entries)
