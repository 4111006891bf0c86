"""The harness's private state: a folder no sandbox mounts and a secret key in it.

Anything a later run trusts (the grading step's reply cache, an answer judge's verdict cache) lives here,
never in the data root, and every line carries an HMAC-SHA256 over its content with the harness key
(`automedbench_models.signedcache`, beside the grading step, its one user): a line written by anyone without
the key (an agent on a backend that can write the file, a copied cache from another machine, a hand edit)
fails the check, is ignored and counted. The key is 32 random bytes in a 0600 file of a 0700 folder owned
by the harness's user ($AUTOMEDBENCH_STATE, default $XDG_STATE_HOME/automedbench); the runner refuses to
start a run whose sandbox would mount that folder, and rotates the key after a run whose agent could read it.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from .errors import UserError

KEY_FILE = "harness.key"
KEY_BYTES = 32


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
