"""The C library through ctypes, found without `ctypes.util.find_library` (which starts `ldconfig -p` each call)."""

from __future__ import annotations

import ctypes
import functools


@functools.cache
def libc() -> ctypes.CDLL | None:
    """The process's own libc symbols (the interpreter links it), else the library `find_library` names, else None."""
    try:
        own = ctypes.CDLL(None, use_errno=True)
        if hasattr(own, "prctl") and hasattr(own, "inotify_init1"):
            return own
    except OSError:
        pass
    from ctypes import util  # only here: it imports shutil and subprocess, ~10 ms each plain call's plainns spent

    name = util.find_library("c")
    if name is None:
        return None
    try:
        return ctypes.CDLL(name, use_errno=True)
    except OSError:
        return None
