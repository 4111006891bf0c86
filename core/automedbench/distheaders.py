"""An installed distribution's metadata header fields, read from the header lines alone.

`Distribution.metadata` (and `.name`, `.version`, `.requires`, which read it) imports the e-mail parser and parses
the whole file as a message, its long description (a README for editable installs) included: about 1 ms a file,
and the parser's import ~5 ms, in every one-off run. The fields a run reads (name, version, requirements) are
header lines, which end at the first blank line.
"""

from __future__ import annotations

import re
from typing import Any

MAX_HEADER_CHARS = 65536  # a metadata file's header block is a few KB; a long description follows it
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def header_fields(dist: Any, names: tuple[str, ...]) -> dict[str, list[str]] | None:
    """Every value of the header fields `names` (matched without regard to case, as e-mail headers are) in the
    distribution's METADATA (or PKG-INFO), in file order; None where it has neither file, reading fails (a
    stand-in distribution) or its headers do not end within MAX_HEADER_CHARS (a partial list would look whole)."""
    try:
        text = dist.read_text("METADATA") or dist.read_text("PKG-INFO")
    except Exception:  # not a full Distribution: the caller asks it its own way
        return None
    if not text:
        return None
    wanted = {name.lower(): name for name in names}
    fields: dict[str, list[str]] = {name: [] for name in names}
    # the e-mail parser's line breaks only: str.splitlines also breaks at a form feed (a GPL text's page break)
    for line in _LINE_BREAK.split(text[:MAX_HEADER_CHARS]):
        # the end of the headers (the long description follows) is an empty line; one of blanks continues a folded
        # value (a license's paragraph break, scipy's and scikit-image's wheels), as the e-mail parser reads it
        if not line:
            return fields
        key, sep, value = line.partition(":")
        name = wanted.get(key.strip().lower()) if sep and not line[:1].isspace() else None
        if name is not None:
            fields[name].append(value.strip())
    # no end within the bound: what follows may hold more of the fields, so the caller asks the distribution
    return fields if len(text) <= MAX_HEADER_CHARS else None
