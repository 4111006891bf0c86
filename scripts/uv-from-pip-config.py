"""Print, one per line, the `uv pip install` options that give uv the package sources pip is configured with.

uv reads no pip configuration (pip.conf, PIP_* variables), so on a machine whose packages lie on a local index,
in a find-links folder or behind a constraints file, uv alone would look elsewhere or resolve differently.
Reads `python -m pip config list` (files and environment); exits non-zero when pip cannot say, so that the
caller falls back to pip itself.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

# pip's key -> uv's option; list-valued keys hold several whitespace-separated values
OPTIONS = {"index-url": "--index-url", "extra-index-url": "--extra-index-url", "find-links": "--find-links",
           "constraint": "--constraint"}


def pip_config() -> dict[str, list[str]]:
    """Each configured key's values, environment entries (`:env:.key`) taking the place of the files' ones."""
    listing = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True,
                             check=True, timeout=60).stdout
    files: dict[str, list[str]] = {}
    env: dict[str, list[str]] = {}
    for line in listing.splitlines():
        name, sep, raw = line.partition("=")
        if not sep or "." not in name:
            continue
        section, key = name.rsplit(".", 1)
        values = " ".join(shlex.split(raw)).split()
        (env if section == ":env:" else files).setdefault(key, []).extend(values)
    return {**files, **env}


def uv_options(config: dict[str, list[str]]) -> list[str]:
    """uv's flags for those sources; pip takes the best match over all indexes, so uv is told to as well."""
    args = ["--index-strategy", "unsafe-best-match"]
    for key, option in OPTIONS.items():
        for value in dict.fromkeys(config.get(key, [])):
            if key == "constraint" and not Path(value).is_file():
                continue
            args += [option, value]
    if any(v.lower() in ("1", "true", "yes", "on") for v in config.get("no-index", [])):
        args.append("--no-index")
    return args


if __name__ == "__main__":
    print("\n".join(uv_options(pip_config())))
