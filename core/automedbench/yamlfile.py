"""Reading the YAML files users and plugins write (task files, model configs, price tables, CLI specs)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from .errors import UserError

# libyaml's safe loader when it is compiled in (several times faster), else the pure-Python one.
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_yaml(path: Path, what: str) -> Any:
    """Parse `path`; a missing file or bad YAML is one clear line naming `what` the file is."""
    try:
        return yaml.load(path.read_text(encoding="utf-8"), Loader=LOADER)
    except FileNotFoundError:
        raise UserError(f"{what} {path}: no such file") from None
    except UnicodeDecodeError:
        raise UserError(f"{what} {path}: not UTF-8 text") from None
    except yaml.YAMLError as exc:
        raise UserError(f"{what} {path}: not valid YAML ({exc})") from None
