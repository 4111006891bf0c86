"""Token prices and per-call cost. Built-in list prices plus user YAML files that extend or override them.

Prices are USD per million tokens. A model id is matched exactly, then by the longest known prefix
(so `gpt-4o-mini-2024-07-18` finds `gpt-4o-mini`, not `gpt-4o`), after dropping a `provider/` prefix.
An unknown model costs 0 and is flagged `priced=False`: a missing price is visible, never guessed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from attrs import define
from automedbench.api import ModelConfig, Usage, UserError, read_yaml

PRICES_ENV = "AUTOMEDBENCH_PRICES"


@define(frozen=True)
class Price:
    """USD per 1M tokens. `cached_input`: prompt tokens served from cache; `cache_write`: tokens written."""

    input: float
    output: float
    cached_input: float | None = None
    cache_write: float | None = None


@define(frozen=True)
class Cost:
    usd: float
    priced: bool
    key: str = ""


# Public list prices (USD / 1M tokens) at the time of writing; extend or correct them with a YAML file.
DEFAULT_PRICES: dict[str, Price] = {
    "gpt-4o": Price(2.50, 10.00, 1.25),
    "gpt-4o-mini": Price(0.15, 0.60, 0.075),
    "gpt-4.1": Price(2.00, 8.00, 0.50),
    "gpt-4.1-mini": Price(0.40, 1.60, 0.10),
    "gpt-4.1-nano": Price(0.10, 0.40, 0.025),
    "o3": Price(2.00, 8.00, 0.50),
    "o4-mini": Price(1.10, 4.40, 0.275),
    "claude-opus-4": Price(15.00, 75.00, 1.50, 18.75),
    "claude-sonnet-4": Price(3.00, 15.00, 0.30, 3.75),
    "claude-3-7-sonnet": Price(3.00, 15.00, 0.30, 3.75),
    "claude-3-5-sonnet": Price(3.00, 15.00, 0.30, 3.75),
    "claude-3-5-haiku": Price(0.80, 4.00, 0.08, 1.00),
    "claude-haiku-4-5": Price(1.00, 5.00, 0.10, 1.25),
    "gpt-5": Price(1.25, 10.00, 0.125),
    "gpt-5-mini": Price(0.25, 2.00, 0.025),
    "gpt-5-nano": Price(0.05, 0.40, 0.005),
    "gemini-2.5-pro": Price(1.25, 10.00, 0.31),
    "gemini-2.5-flash": Price(0.30, 2.50, 0.075),
    "gemini-2.5-flash-lite": Price(0.10, 0.40, 0.025),
    "deepseek-chat": Price(0.27, 1.10, 0.07),
    "deepseek-reasoner": Price(0.55, 2.19, 0.14),
}


class PriceTable:
    """Model id -> Price, with prefix matching; later sources override earlier ones."""

    def __init__(self, prices: Mapping[str, Price] | None = None) -> None:
        self.prices: dict[str, Price] = dict(DEFAULT_PRICES if prices is None else prices)

    def update(self, raw: Mapping[str, Any], source: str = "prices") -> None:
        for key, value in raw.items():
            self.prices[str(key)] = parse_price(value, f"{source}: {key}")

    def load(self, path: Path) -> None:
        data = read_yaml(path, "price file") or {}
        if not isinstance(data, dict):
            raise UserError(f"price file {path}: expected a mapping of model -> {{input, output}}")
        self.update(data.get("pricing", data), str(path))

    def lookup(self, model: str) -> tuple[str, Price] | None:
        for name in (model, model.rsplit("/", 1)[-1]):
            if name in self.prices:
                return name, self.prices[name]
        bare = model.rsplit("/", 1)[-1]
        matches = [k for k in self.prices if bare.startswith(k)]
        if not matches:
            return None
        key = max(matches, key=len)
        return key, self.prices[key]

    def cost(self, model: str, usage: Usage) -> Cost:
        found = self.lookup(model)
        if found is None:
            return Cost(0.0, False)
        key, price = found
        cached_rate = price.cached_input if price.cached_input is not None else price.input
        write_rate = price.cache_write if price.cache_write is not None else price.input
        fresh = max(0, usage.prompt - usage.cached - usage.cache_write)
        usd = (fresh * price.input + usage.cached * cached_rate + usage.cache_write * write_rate
               + usage.completion * price.output) / 1e6
        return Cost(round(usd, 8), True, key)


def parse_price(value: Any, where: str) -> Price:
    if not isinstance(value, Mapping) or "input" not in value or "output" not in value:
        raise UserError(f"{where}: a price needs 'input' and 'output' (USD per 1M tokens)")
    try:
        return Price(float(value["input"]), float(value["output"]),
                     None if value.get("cached_input") is None else float(value["cached_input"]),
                     None if value.get("cache_write") is None else float(value["cache_write"]))
    except (TypeError, ValueError):
        raise UserError(f"{where}: prices must be numbers") from None


def config_prices(cfg: ModelConfig) -> PriceTable:
    """The price table a configured model is charged by: its `prices` files, then its inline `pricing`."""
    return price_table([Path(p).expanduser() for p in cfg.prices], cfg.pricing)


def price_table(files: list[Path] | None = None, extra: Mapping[str, Any] | None = None) -> PriceTable:
    """Built-in defaults, then $AUTOMEDBENCH_PRICES, then the given files, then inline entries."""
    table = PriceTable()
    env = os.environ.get(PRICES_ENV)
    for path in ([Path(env).expanduser()] if env else []) + list(files or []):
        table.load(path)
    if extra:
        table.update(extra, "inline prices")
    return table
