"""JSON for every record, through one cattrs converter so that loading validates types and fields."""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Any, TypeVar

import cattrs
from cattrs.preconf.json import make_converter

from .errors import UserError
from .fsutil import atomic_write_text, encode_text

T = TypeVar("T")

converter = make_converter(forbid_extra_keys=False)


def to_dict(record: Any) -> Any:
    return converter.unstructure(record)


def from_dict(data: Any, cls: type[T]) -> T:
    return converter.structure(data, cls)


# A lone surrogate (from a JSON escape like \\ud800 in an agent's file or words) cannot be UTF-8.
_SURROGATE = re.compile("[\ud800-\udfff]")


def json_text(data: Any, **options: Any) -> str:
    """JSON text of plain data that UTF-8 can always hold: a lone surrogate inside a string is written as the
    six characters `\\udXXX` (an escaped backslash), so it reads back as visible text, never as a surrogate
    that the next writer or a strict parser (orjson) would refuse. Every JSON file and line the harness
    writes from agent text goes through here."""
    text = json.dumps(data, ensure_ascii=False, **options)
    return _SURROGATE.sub(lambda m: f"\\\\u{ord(m.group()):04x}", text) if _SURROGATE.search(text) else text


def json_line(data: Any) -> bytes:
    """`data` as one line of JSON, the bytes an append-only log (the trajectory) writes: `json_text`, then
    `encode_text` as every harness write does."""
    line = json_text(data) + "\n"
    return encode_text(line)


def dumps(record: Any, *, indent: int | None = 2) -> str:
    return json_text(to_dict(record), indent=indent, allow_nan=False)


def loads(text: str, cls: type[T]) -> T:
    return from_dict(json.loads(text), cls)


def write_json(path: Path, record: Any) -> None:
    """Atomically write a record: a reader sees the old file or the new one, never half of one."""
    text = dumps(record) + "\n"
    atomic_write_text(path, text)


# A stored record larger than this is refused unread (run folders are re-read by leaderboard, rejudge, replay).
MAX_RECORD_BYTES = 256 << 20


def read_json(path: Path, cls: type[T]) -> T:
    """Load a record; the file itself is opened without following a symlink and read up to MAX_RECORD_BYTES."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except OSError as exc:
        raise UserError(f"{path}: unreadable ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_RECORD_BYTES:
            raise UserError(f"{path}: not a regular file of at most {MAX_RECORD_BYTES} bytes")
        data = handle.read(MAX_RECORD_BYTES + 1)
    return decode_record(data, cls, path)


def decode_record(data: bytes, cls: type[T], path: Path | str) -> T:
    """A record from a file's bytes already read (`read_json`, or bytes whose proof was checked), errors naming
    `path`."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: not UTF-8 ({exc.reason})") from None
    try:
        return loads(text, cls)
    except RecursionError:
        raise UserError(f"{path}: nested too deeply") from None
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    except cattrs.BaseValidationError as exc:
        detail = "; ".join(cattrs.transform_error(exc))
        raise UserError(f"{path}: does not match the {cls.__name__} schema: {detail}") from None
