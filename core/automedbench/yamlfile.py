"""Reading the YAML files users and plugins write (task files, model configs, price tables, CLI specs)."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import yaml

from .errors import UserError

# libyaml's safe loader when it is compiled in (several times faster), else the pure-Python one.
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# The largest YAML file read: task files, model configs, price tables and CLI specs are a few KB; a bound
# keeps a mistaken path (a dataset, a device) from being read whole into memory.
MAX_YAML_BYTES = 4 * 1024 * 1024


def read_yaml(path: Path, what: str) -> Any:
    """Parse `path`; a missing, unreadable, oversized file or bad YAML is one clear line naming `what` it is."""
    try:
        # O_NONBLOCK: a FIFO or device named by mistake is refused, not waited on.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        mode = os.fstat(fd).st_mode  # before fdopen, which refuses a folder with an OSError of its own
        if not stat.S_ISREG(mode):
            os.close(fd)
            raise UserError(f"{what} {path}: a folder, not a file" if stat.S_ISDIR(mode)
                            else f"{what} {path}: not a regular file; not read")
        with os.fdopen(fd, "rb") as fh:
            raw = fh.read(MAX_YAML_BYTES + 1)
        if len(raw) > MAX_YAML_BYTES:
            raise UserError(f"{what} {path}: larger than {MAX_YAML_BYTES // (1024 * 1024)} MB; not read")
        return yaml.load(raw.decode("utf-8"), Loader=LOADER)
    except FileNotFoundError:
        raise UserError(f"{what} {path}: no such file") from None
    except OSError as exc:
        raise UserError(f"{what} {path}: cannot be read ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise UserError(f"{what} {path}: not UTF-8 text") from None
    except yaml.YAMLError as exc:
        raise UserError(f"{what} {path}: not valid YAML ({exc})") from None
