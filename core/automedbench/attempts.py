"""How many times this machine ran one configuration: the attempt number each run signs in its header.

A genuine run copied into the folder a leaderboard reads counts, so a user who ran a cell seven times and copied
the best run showed a best-of-seven as one run, and no reader could tell. Signing cannot stop a user choosing,
but it can make choosing visible: every run draws the next number of its configuration (agent, task, tier and
conditions digest) from a ledger in the harness state folder (no sandbox sees it) and signs it with the ledger's
id, so a folder holding attempt 7 but not 1 to 6 says that six runs were made and left out; a reader on the machine
that made them also sees the attempts made after the last one copied. The ledger is one JSON file, rewritten
atomically under an exclusive lock (sweep workers draw at once); its id is random, made with the ledger, so a
ledger removed and made again is another ledger, never the same numbers twice under one id.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .fsutil import atomic_write_bytes, read_json_object, sha256_text
from .harnessstate import ensure_state_dir, state_dir

LEDGER = "attempts.json"
LOCK = ".attempts.lock"
MAX_LEDGER_BYTES = 16 << 20  # about 150 000 configurations
CONFIG_CHARS = 16  # of the configuration digest, as a header signs it


def config_key(agent: str, task: str, tier: str, conditions: str) -> str:
    """The configuration an attempt number counts: the same agent, task and tier under the same conditions."""
    return sha256_text(json.dumps([agent, task, tier, conditions]))[:CONFIG_CHARS]


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    fd = os.open(folder / LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _read(folder: Path) -> dict[str, Any] | None:
    """The ledger as {"id": ..., "counts": {config: n}}; None when there is none or it cannot be read whole."""
    # a regular file only, read in full to its bound: a FIFO there hung every run's draw at its open
    ledger = read_json_object(folder, LEDGER, MAX_LEDGER_BYTES)
    if ledger is None or not isinstance(ledger.get("id"), str) or not isinstance(ledger.get("counts"), dict):
        return None
    return ledger


def draw(agent: str, task: str, tier: str, conditions: str) -> dict[str, Any]:
    """The next attempt of this configuration on this machine, counted before the run does anything: what the run
    signs in its header ({"ledger": id, "config": digest, "number": n}). A ledger that cannot be read is started
    again under a new id (its numbers are then never confused with the old ones)."""
    folder = ensure_state_dir()
    key = config_key(agent, task, tier, conditions)
    with _locked(folder):
        ledger = _read(folder) or {"id": os.urandom(8).hex(), "counts": {}}
        counts, void = ledger["counts"], _void(ledger)
        if void.get(key):  # the number of an attempt the harness failed is taken again: the run that makes it up
            number = min(void[key])
            void[key] = [n for n in void[key] if n != number]
        else:
            number = (counts[key] if isinstance(counts.get(key), int) else 0) + 1
            counts[key] = number
        atomic_write_bytes(folder / LEDGER, json.dumps(ledger, sort_keys=True).encode())
    return {"ledger": ledger["id"], "config": key, "number": number}


def _void(ledger: dict[str, Any]) -> dict[str, list[int]]:
    """The ledger's numbers of attempts that ended as the harness's failure, not yet taken again ({config: [n]})."""
    void = ledger.get("void")
    if not isinstance(void, dict):
        void = ledger["void"] = {}
    for key in list(void):
        if not isinstance(void[key], list):
            del void[key]
        else:
            void[key] = [n for n in void[key] if type(n) is int]
    return void


def void(attempt: dict[str, Any]) -> bool:
    """Mark the number of a run that ended as an infrastructure failure (the harness's fault, never the agent's,
    retried by a sweep) to be drawn again by the next run of its configuration: the retry is the same attempt, so a
    sweep's own folder does not read as chosen for a run the harness lost. Its record keeps the number (a folder
    holding both says so by two runs of one number). Whether it was marked."""
    folder = state_dir()
    with _locked(folder):
        ledger = _read(folder)
        if not ledger or ledger["id"] != attempt.get("ledger") or type(attempt.get("number")) is not int:
            return False
        config, number = attempt.get("config"), attempt["number"]
        counted = ledger["counts"].get(config)
        numbers = _void(ledger).setdefault(str(config), [])
        if not isinstance(counted, int) or not 0 < number <= counted or number in numbers:
            return False
        numbers.append(number)
        atomic_write_bytes(folder / LEDGER, json.dumps(ledger, sort_keys=True).encode())
    return True


def release(attempt: dict[str, Any]) -> bool:
    """Give back the number of a run refused before its agent did anything (no run folder is left): never an
    attempt, so no row should read it as one left out. Only while it is the latest drawn of its configuration (a
    later draw keeps its number; the gap then stays, said as an attempt made). Whether it was given back."""
    folder = state_dir()
    with _locked(folder):
        ledger = _read(folder)
        counts = ledger["counts"] if ledger and ledger["id"] == attempt.get("ledger") else {}
        if counts.get(attempt.get("config")) != attempt.get("number"):
            return False
        counts[attempt["config"]] = attempt["number"] - 1
        atomic_write_bytes(folder / LEDGER, json.dumps(ledger, sort_keys=True).encode())
    return True


def made_here() -> tuple[str, dict[str, int]]:
    """This machine's ledger as (id, {config: attempts counted}), read once by a reader of many runs; ("", {})
    without one. A run whose ledger is another (made elsewhere, or before the ledger was made again) is told
    only by the folder that holds it."""
    ledger = _read(state_dir())
    if ledger is None:
        return "", {}
    void = _void(ledger)  # attempts the harness failed and no run has taken again are not made
    return ledger["id"], {k: v - len(void.get(k, ())) for k, v in ledger["counts"].items() if isinstance(v, int)}


def describe(attempt: Any) -> str:
    """One line on which attempt a stored run was, as `show` says it: its number, how many this machine's ledger
    has counted of its configuration when the run is this machine's, and its sweep."""
    if not isinstance(attempt, dict) or type(attempt.get("number")) is not int:
        return "attempt: not numbered (a run made before attempts were counted)"
    ledger_id, counts = made_here()
    line = f"attempt {attempt['number']} of its configuration (agent, task, tier, conditions)"
    if ledger_id and attempt.get("ledger") == ledger_id:
        line += f"; {counts.get(str(attempt.get('config')), attempt['number'])} made on this machine so far"
    else:
        line += " on the machine that made it (not this one: later attempts unknown here)"
    if attempt.get("sweep"):
        line += f"; a run of sweep {str(attempt['sweep'])[:64]} of {attempt.get('sweep_size')} planned runs"
    return line
