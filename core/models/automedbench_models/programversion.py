"""Which release of an installed agent system a run uses, read from its install, and the one line a user reads when it
is not a release this harness was run against.

Read from the files the install left (an npm package's `package.json`, a virtualenv's `*.dist-info` folder, Claude
Code's native `versions/X.Y.Z`), never by starting the program: Node and LiteLLM take seconds to start, and a
program's `--version` may look for updates over a network the run may not have. The systems change their flags,
settings files and output formats between releases (Gemini CLI 0.61 refuses any command holding `$(`, a backtick
or `<(`; Qwen Code 0.24 declares Node 22), so a run records the release it was made with.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from .systems import AgentSystem

MAX_MANIFEST_BYTES = 1 << 20  # a package.json is a few KB; anything larger is not one
VERSION = re.compile(r"\d+(?:\.\d+){1,3}(?:[-.+][0-9A-Za-z.-]{1,30})?")


def installed_version(system: AgentSystem, binary: Path) -> str:
    """The release of `system` that `binary` belongs to, or '' when its install does not say."""
    if system.kind == "npm":
        return _npm_version(system.package, binary) or _native_claude_version(binary)
    return _python_version(system.package, binary)


def _npm_version(package: str, binary: Path) -> str:
    """`version` of `<prefix>/node_modules/<package>/package.json`, the prefix found from the program's path (its
    `.bin` link, the script it points to, or Codex's native program in a sibling package)."""
    for link in (binary, binary.resolve()):
        parts = link.parts
        if "node_modules" not in parts:
            continue
        manifest = Path(*parts[:parts.index("node_modules") + 1]) / package / "package.json"
        try:
            with manifest.open("rb") as handle:
                data = json.loads(handle.read(MAX_MANIFEST_BYTES + 1)[:MAX_MANIFEST_BYTES])
        except (OSError, ValueError):
            continue
        version = data.get("version") if isinstance(data, dict) and data.get("name") == package else None
        if isinstance(version, str) and VERSION.fullmatch(version):
            return version
    return ""


def _native_claude_version(binary: Path) -> str:
    """Claude Code's native installer keeps each release as `.../claude/versions/X.Y.Z`, linked from `bin/claude`."""
    target = binary.resolve()
    return target.name if target.parent.name == "versions" and VERSION.fullmatch(target.name) else ""


def _python_version(package: str, binary: Path) -> str:
    """The version in the name of the virtualenv's `<package>-<version>.dist-info` folder (`uv tool install` links
    the program from its own virtualenv: followed)."""
    venv = binary.resolve().parent.parent
    if not (venv / "pyvenv.cfg").is_file():
        return ""
    wanted = re.sub(r"[-_.]+", "_", package).lower()
    for info in sorted(venv.glob("lib/python3*/site-packages/*.dist-info")):
        name, _, version = info.name.removesuffix(".dist-info").partition("-")
        if re.sub(r"[-_.]+", "_", name).lower() == wanted and VERSION.fullmatch(version):
            return version
    return ""


def version_line(system: AgentSystem, binary: Path, version: str) -> str:
    """The one line a user reads before the run when the installed release is not one this harness was tested with
    (or cannot be told), naming the tested ones and the install that pins one; '' for a tested release."""
    if version in system.tested:
        return ""
    tested = ", ".join(system.tested)
    which = f"{system.title} {version} is installed" if version else \
        f"cannot tell which {system.title} release {binary} is"
    return (f"{system.name}: {which}; this harness was tested with {tested} (flags, settings files and output "
            f"formats change between releases: if the run misbehaves, install a tested one: "
            f"`{system.pinned_install()}`)")
