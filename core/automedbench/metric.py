"""The Metric interface: a named, reusable function from (prediction, reference) to numbers."""

from __future__ import annotations

from typing import Any, Protocol


class Metric(Protocol):
    name: str

    def __call__(self, prediction: Any, reference: Any, **options: Any) -> dict[str, float]:
        ...
