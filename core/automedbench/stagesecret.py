"""The per-staging secret: every hidden choice a staging makes is drawn from it.

Which items a real task samples, their order, their case ids and every random degradation (noise,
undersampling, crops) must not follow from anything a sandbox can read: the task file, the package's
source (a sandbox can read every installed package), or the download's own numbering, sort order, split
files and metadata tables (an agent with network access can fetch a public dataset's). A stager draws all
of them from `StagingArea.secret`, a `StagingSecret` made fresh for each staging (256 bits from `secrets`).
It is written to `private/staging.secret` (the references' side: never mounted in a sandbox, watched as a
reference where isolation is weak) so a staging can be audited, and nowhere else.

Each use names its purpose ("sample", "order", "noise/7", ...): the draws for different purposes are
independent (HMAC-SHA256 of the purpose under the secret), so adding a draw never shifts another one.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import random
import secrets as _secrets
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

SECRET_FILE = "staging.secret"
KEY_BYTES = 32
ID_DIGITS = 8  # hex digits of a drawn case id: 32 bits, collisions redrawn


class StagingSecret:
    """A staging's secret and the draws made from it. Its key is never shown (`repr` hides it)."""

    def __init__(self, key: bytes | None = None) -> None:
        key = _secrets.token_bytes(KEY_BYTES) if key is None else bytes(key)
        if len(key) < 16:
            raise ValueError("a staging secret needs at least 16 bytes")
        self._key = key

    def __repr__(self) -> str:
        return "StagingSecret(<hidden>)"

    def _digest(self, purpose: str) -> bytes:
        return hmac.new(self._key, purpose.encode("utf-8"), hashlib.sha256).digest()

    def seed(self, purpose: str) -> int:
        """A 63-bit integer for `purpose` (for generators that take an int seed)."""
        return int.from_bytes(self._digest(purpose)[:8], "big") >> 1

    def rng(self, purpose: str) -> random.Random:
        """A `random.Random` for `purpose`, seeded with all 256 bits of its digest."""
        return random.Random(int.from_bytes(self._digest(purpose), "big"))

    def generator(self, purpose: str) -> Any:
        """A NumPy `Generator` for `purpose` (noise, undersampling masks, crops), seeded with 256 bits."""
        import numpy as np

        return np.random.default_rng(int.from_bytes(self._digest(purpose), "big"))

    def shuffled(self, items: Iterable[T], purpose: str = "order") -> list[T]:
        """The items in a secret order."""
        order = list(items)
        self.rng(purpose).shuffle(order)
        return order

    def sample(self, items: Sequence[T], count: int, purpose: str = "sample") -> list[T]:
        """`count` of the items, chosen and ordered secretly (all of them, shuffled, when count >= len)."""
        return self.shuffled(items, purpose)[:max(0, count)]

    def case_ids(self, count: int, prefix: str = "case", purpose: str = "case ids", sep: str = "_") -> list[str]:
        """`count` distinct case ids `<prefix><sep><8 hex digits>` drawn from the secret, in no order: their
        sorted order (how a folder lists them) is unrelated to the order the stager assigns them in."""
        stream = self.id_stream(prefix, purpose, sep)
        return [next(stream) for _ in range(count)]

    def id_stream(self, prefix: str = "case", purpose: str = "case ids", sep: str = "_") -> Iterator[str]:
        """`case_ids` one at a time, without end (for a stager that learns its count as it goes).

        Each id is its own HMAC of the purpose and its index under the secret: ids drawn from one Mersenne
        Twister stream were linear in each other (from the 625th on, each a fixed function of three earlier
        ones: the twister's recurrence), so the published set held the order they were drawn in, which is
        the order the stager assigned them to its items (one class after another in a balanced draw)."""
        seen: set[str] = set()
        for index in itertools.count():
            token = self._digest(f"{purpose}\0{index}")[:ID_DIGITS // 2].hex()
            if token not in seen:
                seen.add(token)
                yield f"{prefix}{sep}{token}" if prefix else token

    def save(self, path: Path) -> None:
        """Write the key (hex) to `path`, readable by the harness's user only."""
        from .fsutil import atomic_write_text

        atomic_write_text(path, self._key.hex() + "\n")
        path.chmod(0o600)

    @classmethod
    def load(cls, path: Path) -> StagingSecret:
        """The secret a staging wrote (`private/staging.secret`), for auditing or reproducing it."""
        return cls(bytes.fromhex(path.read_text("ascii").strip()))
