"""An installed distribution's metadata header fields, read from the header lines alone.

`Distribution.metadata` (and `.name`, `.version`, `.requires`, which read it) imports the e-mail parser and parses
the whole file as a message, its long description (a README for editable installs) included: about 1 ms a file,
and the parser's import ~5 ms, in every one-off run. The fields a run reads (name, version, requirements) are
header lines, which end at the first blank line.
"""

from __future__ import annotations

from typing import Any

MAX_HEADER_CHARS = 65536  # a metadata file's header block is a few KB; a long description follows it


def header_fields(dist: Any, names: tuple[str, ...]) -> dict[str, list[str]] | None:
    """Every value of the header fields `names` (matched without regard to case, as e-mail headers are) in the
    distribution's METADATA (or PKG-INFO), in file order; None where it has neither file or reading fails (a
    stand-in distribution, an egg-info install that keeps its requirements elsewhere)."""
    try:
        text = dist.read_text("METADATA") or dist.read_text("PKG-INFO")
    except Exception:  # not a full Distribution: the caller asks it its own way
        return None
    if not text:
        return None
    wanted = {name.lower(): name for name in names}
    fields: dict[str, list[str]] = {name: [] for name in names}
    for line in text[:MAX_HEADER_CHARS].splitlines():
        if not line.strip():
            break  # the end of the headers: the long description follows
        key, sep, value = line.partition(":")
        name = wanted.get(key.strip().lower()) if sep and not line[:1].isspace() else None
        if name is not None:
            fields[name].append(value.strip())
    return fields
