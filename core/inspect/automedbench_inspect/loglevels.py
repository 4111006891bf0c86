"""Log records at levels inspect_ai has no name for, given one it has before its log handler sees them.

inspect_ai's log handler refuses a record whose level is not one of its names: a pydantic ValidationError raised out
of the logging call itself. nibabel logs a header problem at level 45 before raising it, so under `inspect eval` (the
harness runs inside inspect's process) the submit gate's check of a NIfTI with a bad magic said inspect's error
instead of the file's problem; any library logging at its own level failed where it logged."""

from __future__ import annotations

import logging

STANDARD = (logging.CRITICAL, logging.ERROR, logging.WARNING, logging.INFO, logging.DEBUG)


class NamedLevels(logging.Filter):
    """A record at an unnamed level ("Level 45") is given the nearest standard level below it (45 -> ERROR)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if logging.getLevelName(record.levelno) == f"Level {record.levelno}":
            level = next((s for s in STANDARD if record.levelno >= s), logging.DEBUG)
            record.levelno, record.levelname = level, logging.getLevelName(level)
        return True


def name_every_level() -> None:
    """Put `NamedLevels` on each of inspect's handlers of the root logger (installed when its eval starts): once."""
    for handler in logging.getLogger().handlers:
        if type(handler).__module__.startswith("inspect_ai") and not any(
                isinstance(f, NamedLevels) for f in handler.filters):
            handler.addFilter(NamedLevels())
