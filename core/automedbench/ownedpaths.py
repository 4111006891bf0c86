"""Folders only this user may change: the staging a run is scored against and the folder its record is written in.

A staging must be changeable only by the harness's own user (or root), or its references are not the harness's.

A run is scored against `private/` and its agent given `public/`; the result is then signed as the harness's.
A staging another user can write (a data root shared with a group, staged by a colleague, or left world-writable
by a umask) lets that user change the references between runs: references replaced by what an agent of theirs
writes scored it Task 1.0, signed and counted. So a staging is used only when every folder and file of it, and
every folder from it up to the data root (up to / for one linked from outside it), belongs to this user or root
and is writable by no one else (a folder from the task up to the data root may be a sticky one, like /tmp:
others cannot rename what is ours; group write is allowed for the user's own private group, where a umask of 002
puts every new file).

The same holds for the folder a run is written in (`--out`, a sweep's folder) and every folder above it: a user
who can write one of them can rename the run folder away while the run goes on and put one of their own in its
place (a trajectory, verdict and evaluation of their making), which the harness then signs as the run's evidence.
"""

from __future__ import annotations

import functools
import grp
import os
import pwd
import stat
from pathlib import Path

from .errors import UserError

MAX_ENTRIES = 2_000_000  # entries of one staging checked; more is refused (no staging holds that many files)


@functools.lru_cache(maxsize=64)
def _own_group(gid: int) -> bool:
    """Whether group `gid` is this user's own: its primary group, named after it, with no other member named and
    no other account's primary group (a user private group, which a umask of 002 makes every new file writable
    by). A shared primary group (`users`, gid 100) lists none of the accounts that have it as primary."""
    if gid != os.getegid():
        return False
    try:
        group = grp.getgrgid(gid)
        me = pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return False
    return group.gr_name == me and all(m == me for m in group.gr_mem) and all(
        account.pw_gid != gid or account.pw_name == me for account in pwd.getpwall())


def _problem(path: str, info: os.stat_result, *, sticky_ok: bool = False) -> str | None:
    """Why `path` could be changed by another user, or None."""
    if info.st_uid not in (os.geteuid(), 0):
        return f"{path} belongs to user {info.st_uid}, not this one ({os.geteuid()}) or root"
    if stat.S_ISLNK(info.st_mode) or (sticky_ok and info.st_mode & stat.S_ISVTX):
        return None  # a link's own mode means nothing (its folder's does); no one renames our entries of a sticky one
    if info.st_mode & stat.S_IWOTH:
        return f"{path} is writable by others"
    if info.st_mode & stat.S_IWGRP and not _own_group(info.st_gid):
        return f"{path} is writable by its group ({info.st_gid})"
    return None


def check_runs_folder(out: Path) -> None:
    """Refuse (one line) a runs folder that another user could change, it or a folder above it (sticky ones
    excepted): see the module's docstring."""
    why = _upward_problem(os.path.realpath(out), "/")
    if why is not None:
        raise UserError(f"runs folder {out} not used: {why}; another user could replace a run's folder while it "
                        "runs and have the harness sign their files as its record (write runs into a folder "
                        "only you can change)")


def _upward_problem(folder: str, stop: str) -> str | None:
    """The first of `folder` and the folders above it, up to `stop` (inclusive) or the filesystem root, another
    user could change (sticky ones excepted), or None."""
    while True:
        why = _problem(folder, os.lstat(folder), sticky_ok=True)
        if why is not None or folder == stop or folder == os.path.dirname(folder):
            return why
        folder = os.path.dirname(folder)


def check_staging_owned(dest: Path, data_root: Path) -> None:
    """Refuse (one line) a staging at `dest` another user could change: see the module's docstring."""
    why = _tree_problem(str(dest))
    if why is None:
        # up to the data root for a staging inside it; one linked from elsewhere up to / (as a runs folder): a
        # string prefix ("data2" under "data") is not inside, and outside nothing above it was checked
        root = os.path.realpath(data_root)
        folder = os.path.dirname(os.path.realpath(dest))
        why = _upward_problem(folder, root if os.path.commonpath([folder, root]) == root else "/")
    if why is not None:
        raise UserError(f"staged data not used: {why}; another user could change the references a run is scored "
                        f"against (chown the staging to this user and `chmod -R go-w {dest}`, or stage it again "
                        "into a data root of your own)")


def _tree_problem(top: str) -> str | None:
    """The first entry of the tree at `top` (links not followed) another user could change, or None."""
    seen = 0
    stack = [top]
    problem = _problem(top, os.lstat(top))
    real = os.path.realpath(top)
    if problem is None and real != top:  # a link's mode means nothing: the folder it names holds the staging
        problem = _problem(real, os.lstat(real))
    while stack and problem is None:
        folder = stack.pop()
        with os.scandir(folder) as entries:
            for entry in entries:
                seen += 1
                if seen > MAX_ENTRIES:
                    return f"{top} holds more than {MAX_ENTRIES} entries"
                info = entry.stat(follow_symlinks=False)
                problem = _problem(entry.path, info)
                if problem is not None:
                    break
                if stat.S_ISDIR(info.st_mode):
                    stack.append(entry.path)
    return problem
