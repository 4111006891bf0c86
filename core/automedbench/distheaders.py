"""An installed distribution's metadata header fields, read from the header lines alone.

`Distribution.metadata` (and `.name`, `.version`, `.requires`, which read it) imports the e-mail parser and parses
the whole file as a message, its long description (a README for editable installs) included: about 1 ms a file,
and the parser's import ~5 ms, in every one-off run. The fields a run reads (name, version, requirements) are
header lines, which end at the first blank line: only those are read (in blocks, up to MAX_HEADER_CHARS), never the
description after them (automedbench's own is 200 KB, pydantic's 140 KB).
"""

from __future__ import annotations

import re
from typing import Any

MAX_HEADER_CHARS = 65536  # a metadata file's header block is a few KB; a long description follows it
BLOCK_CHARS = 4096
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
# what PathDistribution.read_text takes for "no such file" (it answers None for these)
_ABSENT = (FileNotFoundError, IsADirectoryError, KeyError, NotADirectoryError, PermissionError)


def _head(dist: Any, name: str) -> str | None:
    """The start of the metadata file `name`: up to the headers' end (a blank line) or more than MAX_HEADER_CHARS,
    else the whole file; decoded as `read_text` does (UTF-8, universal newlines). A distribution that is not found
    on a path (`_path`, a folder or a zip's) is asked for the whole file (`read_text`)."""
    folder = getattr(dist, "_path", None)
    if not hasattr(folder, "joinpath"):
        return dist.read_text(name)
    try:
        with folder.joinpath(name).open("r", encoding="utf-8") as handle:
            text = ""
            while len(text) <= MAX_HEADER_CHARS:
                block = handle.read(BLOCK_CHARS)
                if not block:
                    break
                # universal newlines: every line break reads as "\n", so a blank line is "\n\n" (or a first "\n")
                seen, text = len(text), text + block
                if text.startswith("\n") or "\n\n" in text[max(seen - 1, 0):]:
                    break
            return text
    except _ABSENT:
        return None


def header_fields(dist: Any, names: tuple[str, ...]) -> dict[str, list[str]] | None:
    """Every value of the header fields `names` (matched without regard to case, as e-mail headers are) in the
    distribution's METADATA (or PKG-INFO), in file order; None where it has neither file, reading fails (a
    stand-in distribution) or its headers do not end within MAX_HEADER_CHARS (a partial list would look whole)."""
    try:
        text = _head(dist, "METADATA") or _head(dist, "PKG-INFO")
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
    # no end within the bound: what follows may hold more of the fields, so the caller asks the distribution (`_head`
    # reads past the bound only then, and stops one block after it: the text is longer than the bound exactly when the
    # whole file is)
    return fields if len(text) <= MAX_HEADER_CHARS else None
