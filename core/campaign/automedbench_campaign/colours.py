"""Series colours for the leaderboard's charts: one colour per series, however many series a chart has.

A chart's legend names each series by its colour, so two series may never share one: the ten-colour palette
repeated from the eleventh agent (or agent and conditions) on, and two agents' bars and points then read as one.
"""

from __future__ import annotations

import colorsys
from collections.abc import Iterable

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf")
_GOLDEN_ANGLE = 0.381966  # of a turn: successive hues stay far apart however many there are
_SHADES = ((0.55, 0.45), (0.75, 0.35), (0.45, 0.60))  # (saturation, lightness) rounds beyond the palette


def colour(index: int) -> str:
    """The `index`-th series colour: the palette, then hues a golden angle apart in three shades."""
    if index < len(PALETTE):
        return PALETTE[index]
    k = index - len(PALETTE)
    saturation, lightness = _SHADES[k % len(_SHADES)]
    red, green, blue = colorsys.hls_to_rgb((0.07 + k * _GOLDEN_ANGLE) % 1.0, lightness, saturation)
    return "#" + "".join(f"{round(255 * c):02x}" for c in (red, green, blue))


def series_colours(names: Iterable[str]) -> dict[str, str]:
    """A distinct colour for each name (in the order given; repeats named once)."""
    out: dict[str, str] = {}
    used: set[str] = set()
    index = 0
    for name in dict.fromkeys(names):
        while (found := colour(index)) in used:  # two generated hues that round to one hex: take the next
            index += 1
        out[name] = found
        used.add(found)
        index += 1
    return out
