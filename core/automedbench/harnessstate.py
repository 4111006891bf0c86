"""The harness's private state: a folder no sandbox can see and a secret key in it.

Anything a later run trusts (the grading step's reply cache, the disk-reservation ledger, the proof that a
result is the harness's own) lives here, never in the data root or a run folder. The key is 32 random bytes
in a 0600 file of a 0700 folder owned by the harness's user ($AUTOMEDBENCH_STATE, default
$XDG_STATE_HOME/automedbench); other keys are derived from it per purpose (`derived_key`), so one secret
serves them all and no two uses share a key. No sandbox ever sees the folder: `local` and `docker` do not
mount it (the runner refuses a state folder under a mounted path), and `local-plain` calls run in a mount
namespace where it is covered before the agent's code starts (`sandboxes/plainns.py`); a plain run that
cannot do so is refused. So nothing is ever rotated "after" an agent: no agent ever had the key.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import pwd
import stat
from pathlib import Path

from .errors import UserError
from .fsutil import append_line_locked

KEY_FILE = "harness.key"
KEY_BYTES = 32
# Every state folder a harness of this user made, one real path a line, in the user's default state folder:
# a plain call hides them all, not only its own run's (another campaign's key was readable from a plain run)
KNOWN_FILE = "state-folders"
MAX_KNOWN = 1000
_registered: set[str] = set()


def default_state_dir(home: str | None = None) -> Path:
    """The state folder a harness uses when $AUTOMEDBENCH_STATE is not set."""
    base = os.environ.get("XDG_STATE_HOME") if home is None else None
    return Path(base or os.path.join(home or str(Path.home()), ".local", "state")) / "automedbench"


def state_dir() -> Path:
    """Where the harness keeps what only it may write ($AUTOMEDBENCH_STATE or $XDG_STATE_HOME/automedbench)."""
    env = os.environ.get("AUTOMEDBENCH_STATE")
    if env:
        return Path(env).expanduser()
    return default_state_dir()


def ensure_state_dir() -> Path:
    """The state folder, made (0700) if missing: a plain call's namespace covers it only if it exists."""
    folder = state_dir()
    _private_dir(folder)
    return folder


def _private_dir(path: Path) -> None:
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
        raise UserError(f"harness state folder {path} is not a folder owned by this user")
    if info.st_mode & 0o077:
        os.chmod(path, 0o700)
    _register(path)


def _register(path: Path) -> None:
    """List `path` among this user's state folders (`KNOWN_FILE` in the default one), once."""
    real = os.path.realpath(path)
    if real in _registered or "\n" in real:
        return
    home = default_state_dir()
    if real not in _known_in(home):
        if os.path.realpath(home) != real:
            _private_dir(home)  # registers itself first
        append_line_locked(home / KNOWN_FILE, real.encode("utf-8", "surrogateescape") + b"\n")
    _registered.add(real)


def _known_in(home: Path) -> list[str]:
    try:
        with open(home / KNOWN_FILE, "rb", opener=lambda p, f: os.open(p, f | os.O_NOFOLLOW)) as handle:
            data = handle.read(MAX_KNOWN * 4200)
    except OSError:
        return []
    return [line.decode("utf-8", "surrogateescape") for line in data.splitlines()[-MAX_KNOWN:] if line]


def user_homes() -> list[str]:
    """The homes whose files a `local-plain` call could read as this user: this user's, and as root every user's."""
    homes = {str(Path.home())}
    if os.geteuid() == 0:
        with contextlib.suppress(OSError, KeyError):
            homes |= {entry.pw_dir for entry in pwd.getpwall() if entry.pw_dir.startswith("/")}
    return sorted(homes)


def known_state_dirs(homes: list[str] | None = None) -> list[Path]:
    """Every state folder a harness on this host may keep a key in, that exists: the current one, this user's
    default and every folder listed in its `KNOWN_FILE`; as root also every user's default (root reads any
    user's key; `homes`: `user_homes()` when the caller has them already). What a `local-plain` call covers: a
    plain agent runs as the harness's user and would read another harness's key (another campaign, checkout or
    test worker) by its path."""
    found = [state_dir(), default_state_dir(),
             *(default_state_dir(home) for home in (user_homes() if homes is None else homes)),
             *(Path(p) for p in _known_in(default_state_dir()))]
    out: list[Path] = []
    # a set, one lstat each (a folder, not a link): a list's `in` and two stats each took 24 ms a plain call with
    # the 800 folders a developer's test runs had listed
    seen: set[Path] = set()
    for folder in found:
        if folder in seen:
            continue
        seen.add(folder)
        with contextlib.suppress(OSError, ValueError):
            if stat.S_ISDIR(os.lstat(folder).st_mode):
                out.append(folder)
    return out


def harness_key(folder: Path | None = None, *, create: bool = True) -> bytes | None:
    """The harness's secret: 32 bytes from os.urandom in a 0600 file, opened without following links and
    refused unless it is a regular file of this user that no one else reads. Made on first use (`create`);
    with create=False a missing key is None (a reader never makes one)."""
    folder = folder or state_dir()
    path = folder / KEY_FILE
    if create:
        _private_dir(folder)
        _make_key(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        if create:
            raise
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o077:
            raise UserError(f"harness key {path} must be a regular 0600 file of this user; remove it to "
                            "make a new one (cached grades are then asked again, earlier results read as unsigned)")
        key = os.read(fd, KEY_BYTES + 1)
    finally:
        os.close(fd)
    if len(key) != KEY_BYTES:
        raise UserError(f"harness key {path} is damaged ({len(key)} bytes); remove it to make a new one")
    return key


def derived_key(purpose: str, folder: Path | None = None, *, create: bool = True) -> bytes | None:
    """A key for one purpose (the result proof, the signing seed...): HMAC-SHA256(harness key, purpose)."""
    key = harness_key(folder, create=create)
    return None if key is None else hmac.new(key, purpose.encode(), hashlib.sha256).digest()


def _make_key(path: Path) -> None:
    """A fresh random key at `path` unless one is there: written whole to a temporary name, synced, then
    linked into place (link never replaces), so a concurrent reader sees no key or the whole key."""
    if os.path.lexists(path):
        return
    temp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, os.urandom(KEY_BYTES))
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        with contextlib.suppress(FileExistsError):  # another process made it first: theirs stands
            os.link(temp, path)
    finally:
        temp.unlink(missing_ok=True)
