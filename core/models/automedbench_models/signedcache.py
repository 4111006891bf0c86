"""Signed JSONL caches: a line counts only if the harness signed it with its key (`automedbench.harnessstate`).

The grading step's reply cache holds gold answers and decides grades, so whoever can write the file must
not choose a grade: every line carries an HMAC-SHA256 over its content with the harness key, and a line
without a valid MAC (forged, foreign, edited) is ignored and counted.
"""

from __future__ import annotations

import fcntl
import hashlib
import hmac
import json
import os
import stat
from pathlib import Path
from typing import Any

from automedbench.api import append_line_locked

MAC_FIELD = "mac"


def _canonical(entry: dict[str, Any]) -> bytes:
    body = {k: v for k, v in entry.items() if k != MAC_FIELD}
    return json.dumps(body, sort_keys=True, ensure_ascii=False, allow_nan=False).encode("utf-8", "backslashreplace")


def sign(entry: dict[str, Any], key: bytes) -> dict[str, Any]:
    """The entry with its MAC: HMAC-SHA256(key, canonical JSON of every other field)."""
    return {**entry, MAC_FIELD: hmac.new(key, _canonical(entry), hashlib.sha256).hexdigest()}


def verify(entry: Any, key: bytes) -> bool:
    if not isinstance(entry, dict) or not isinstance(entry.get(MAC_FIELD), str):
        return False
    try:
        expected = hmac.new(key, _canonical(entry), hashlib.sha256).hexdigest()
    except (TypeError, ValueError):
        return False
    return hmac.compare_digest(expected, entry[MAC_FIELD])


class SignedJsonl:
    """A JSONL cache whose lines count only if the harness signed them.

    Loaded once with no-follow open, a shared lock, and size limits; `entries` maps each line's `key`
    field to the entry; `rejected` counts lines that parsed but failed the MAC (forged, foreign or
    edited), `note` says why the file could not be used at all. Appends are signed, locked, fsynced."""

    def __init__(self, path: Path | None, key: bytes, *, max_bytes: int = 64 << 20, max_line: int = 8_000) -> None:
        self.path, self._key = path, key
        self.entries: dict[str, dict[str, Any]] = {}
        self.rejected = 0
        self.note = ""
        if path is not None:
            self._load(path, max_bytes, max_line)

    def _load(self, path: Path, max_bytes: int, max_line: int) -> None:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            return
        except OSError as exc:
            self.note = f"cache {path} unreadable ({exc.strerror}); every request is sent"
            return
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                self.note = f"cache {path} is not a regular file; every request is sent"
                return
            fcntl.flock(handle.fileno(), fcntl.LOCK_SH)
            data = handle.read(max_bytes + 1)
        if len(data) > max_bytes:
            self.note = f"cache {path} is larger than {max_bytes} bytes; only its start was read"
            data = data[:max_bytes]
        for line in data.split(b"\n"):
            if not line:
                continue
            if len(line) > max_line:
                self.rejected += 1
                continue
            try:
                entry = json.loads(line)
            except ValueError:  # a torn last line after a crash: not a forgery, not counted
                continue
            if not verify(entry, self._key) or not isinstance(entry.get("key"), str):
                self.rejected += 1
                continue
            self.entries[entry["key"]] = entry

    def get(self, key: str) -> dict[str, Any] | None:
        return self.entries.get(key)

    def put(self, entry: dict[str, Any], *, mode: int = 0o600, nofollow: bool = True) -> None:
        signed = sign(entry, self._key)
        self.entries[entry["key"]] = signed
        if self.path is None:
            return
        line = json.dumps(signed, sort_keys=True, ensure_ascii=False) + "\n"
        append_line_locked(self.path, line.encode("utf-8"), mode=mode, nofollow=nofollow)
