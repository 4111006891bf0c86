"""The harness's private state: a folder no sandbox mounts, a secret key in it, and signed JSONL caches.

Anything a later run trusts (the grading step's reply cache, an answer judge's verdict cache) lives here,
never in the data root, and every line carries an HMAC-SHA256 over its content with the harness key: a
line written by anyone without the key (an agent on a backend that can write the file, a copied cache
from another machine, a hand edit) fails the check, is ignored and counted. The key is 32 random bytes
in a 0600 file of a 0700 folder owned by the harness's user ($AUTOMEDBENCH_STATE, default
$XDG_STATE_HOME/automedbench); the runner refuses to start a run whose sandbox would mount that folder.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import hmac
import json
import os
import stat
from pathlib import Path
from typing import Any

from .errors import UserError
from .fsutil import append_line_locked

KEY_FILE = "harness.key"
KEY_BYTES = 32
MAC_FIELD = "mac"


def state_dir() -> Path:
    """Where the harness keeps what only it may write ($AUTOMEDBENCH_STATE or $XDG_STATE_HOME/automedbench)."""
    env = os.environ.get("AUTOMEDBENCH_STATE")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "automedbench"


def _private_dir(path: Path) -> None:
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
        raise UserError(f"harness state folder {path} is not a folder owned by this user")
    if info.st_mode & 0o077:
        os.chmod(path, 0o700)


def harness_key(folder: Path | None = None) -> bytes:
    """The harness's secret (created on first use): 32 bytes from os.urandom in a 0600 file, opened
    without following links and refused unless it is a regular file of this user that no one else reads."""
    folder = folder or state_dir()
    _private_dir(folder)
    path = folder / KEY_FILE
    with contextlib.suppress(FileExistsError):
        _write_new_key(path)
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o077:
            raise UserError(f"harness key {path} must be a regular 0600 file of this user; remove it to "
                            "make a new one (cached grades are then asked again)")
        key = os.read(fd, KEY_BYTES + 1)
    finally:
        os.close(fd)
    if len(key) != KEY_BYTES:
        raise UserError(f"harness key {path} is damaged ({len(key)} bytes); remove it to make a new one")
    return key


def rotate_key(folder: Path | None = None) -> None:
    """Replace the harness key (atomically): every line signed with the old one is foreign from now on. Done
    after a run without filesystem isolation, whose agent could read the key."""
    folder = folder or state_dir()
    _private_dir(folder)
    temp = folder / f".{KEY_FILE}.{os.getpid()}.{os.urandom(4).hex()}"
    _write_new_key(temp)
    os.replace(temp, folder / KEY_FILE)


def _write_new_key(path: Path) -> None:
    """A fresh random key in a new 0600 file at `path` (FileExistsError if anything is there), synced."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, os.urandom(KEY_BYTES))
        os.fsync(fd)
    finally:
        os.close(fd)


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
