"""What reaches the operator's terminal and spreadsheets: agent text made inert.

An agent's words, file names and tool output end up in run progress, `show`, `codes`, leaderboards and sweep
progress. Escape sequences in them (ESC, 8-bit CSI, OSC 8 links, title changes), bidi overrides and line
separators could rewrite what the operator sees, so every console the command line prints through shows them
as visible escapes. CSV cells that a spreadsheet would run as a formula get a leading quote.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
from typing import Any

from rich.console import Console

# C0 controls but tab and newline, DEL and the C1 block (0x9b is CSI), bidi embeddings/overrides/isolates,
# line and paragraph separators, lone surrogates (unencodable)
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029"
                     "\ud800-\udfff]")
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal_safe(text: str) -> str:
    """`text` with every control, bidi and separator character shown as a visible escape (tab and newline kept)."""
    return _UNSAFE.sub(_visible, text)


def json_terminal_safe(text: str) -> str:
    """A JSON document for a terminal: json.dumps(ensure_ascii=False) leaves C1 controls and bidi characters
    raw inside strings; they become \\uXXXX escapes (valid JSON, the same value)."""
    return _UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


# what a write to a terminal or pipe that is gone raises: the reader closed the pipe (`| head`), the terminal hung up
LOST_OUTPUT = (errno.EPIPE, errno.EIO, errno.ENXIO, errno.ECONNRESET)


class SafeConsole(Console):
    """A rich console that passes no escape sequence from the text it is given (markup still applies), and that a
    reader gone away cannot stop: rich's own answer to a closed pipe is SystemExit, which skipped every clean-up a
    run makes (its workspace stayed mounted, its folder half-made). Output is dropped from then on; `lost` says why.
    """

    lost = ""  # why the output stopped reaching its reader ("" while it does)

    def render_str(self, text: str, **kwargs: Any):  # type: ignore[override]
        return super().render_str(terminal_safe(text), **kwargs)

    def on_broken_pipe(self) -> None:
        self._lose(f"the reader closed the pipe ({os.strerror(errno.EPIPE)})")

    def _check_buffer(self) -> None:
        try:
            super()._check_buffer()
        except OSError as exc:  # a hung-up terminal (EIO); a closed pipe raised by a flush of our own
            if exc.errno not in LOST_OUTPUT:
                raise
            self._lose(f"the output was lost ({exc.strerror or exc})")

    def echo(self, text: str) -> None:
        """`text` and a newline as they are (no markup, no wrapping: JSON, a key, paths a script reads), flushed; a
        reader gone away (`| head -1`) drops it and what follows, as for `print`, where click.echo exited 1."""
        if self.lost:
            return
        try:
            self.file.write(text + "\n")
            self.file.flush()
        except OSError as exc:
            if exc.errno not in LOST_OUTPUT:
                raise
            self._lose(f"the output was lost ({exc.strerror or exc})")

    def _lose(self, why: str) -> None:
        """Drop every later line; the stream's descriptor now writes to /dev/null, so that Python's own flush of
        what it still buffers (at exit) cannot fail again."""
        self.quiet = True
        del self._buffer[:]
        if not self.lost:
            self.lost = why
        with contextlib.suppress(Exception):  # a stream with no descriptor (a test's buffer) has nothing to redirect
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self.file.fileno())
            os.close(devnull)


def csv_cell(value: Any) -> Any:
    """A cell a spreadsheet shows as text: a string starting with = + - @ (or tab, CR) gets a leading quote."""
    if isinstance(value, str) and value.startswith(FORMULA_START):
        return "'" + value
    return value
