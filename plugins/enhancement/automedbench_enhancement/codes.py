"""Enhancement error-code detectors (paper Table 16, enhancement column), from the scored result only.

- E3: outputs submitted that are copies of the input (identity) - "unchanged outputs accepted";
- E4: a range/scale error - LDCT outputs on a [0, 1] (or 0-255) scale instead of HU, or SR outputs far
  outside [0, 1] - the normalisation was not undone;
- E1: SR outputs on the input grid (shape not doubled): super-resolution treated as denoising.
The per-case facts (`same_as_input`, `out_min`, `out_max`) come from the evaluator's per-case rows;
shape problems come from the checker's reasons.
"""

from __future__ import annotations

from automedbench.api import CodeContext, Detector, FiredCode

HU_SCALE_MAX = 300.0  # an LDCT output whose max is below this cannot be HU (bone and contrast reach 1000+)
UNIT_SCALE_MAX = 2.0  # an SR output above this is not on the [0, 1] scale


class EnhancementOutputDetector(Detector):
    name = "enhancement-output"
    tracks = ("enhancement",)

    def detect(self, ctx: CodeContext) -> list[FiredCode]:
        turns, rows = ctx.last_write_turns, ctx.valid_rows
        fired = self.fire_cases("E3", ctx.flagged("same_as_input"), "output(s) identical to the input (RMS change "
                                "within 0.1% of the range) submitted unrepaired (no enhancement)", turns, "S3")
        kind = (ctx.result.header.task or "").split("/")[-1]
        sr = "sr" in kind
        if sr:
            off = [r["case_id"] for r in rows if r.get("out_max") is not None and r["out_max"] > UNIT_SCALE_MAX]
            what = f"outside the [0, 1] scale (max > {UNIT_SCALE_MAX})"
        else:
            off = [r["case_id"] for r in rows if r.get("out_max") is not None and r["out_max"] < HU_SCALE_MAX]
            what = f"not in HU (max < {HU_SCALE_MAX:.0f}: a [0, 1] or 8-bit scale left in place)"
        fired += self.fire_cases("E4", off, f"output(s) {what}", turns, "S4")
        same_grid = [c.case_id for c in ctx.invalid if any("!= expected" in r and _halved(r) for r in c.reasons)]
        if sr and same_grid:
            fired.append(self.fire("E1", f"{len(same_grid)} output(s) on the input grid, resolution not doubled "
                                         f"(super-resolution treated as denoising): {', '.join(same_grid[:5])}",
                                   turns, "S1"))
        return fired


def _halved(reason: str) -> bool:
    """True for a checker reason 'shape (h, w) != expected (2h, 2w)'."""
    try:
        got, want = reason.split("shape ", 1)[1].split(" != expected ")
        g = [int(v) for v in got.strip("() ").split(",")]
        w = [int(v) for v in want.strip("() ").split(",")]
    except (IndexError, ValueError):
        return False
    return len(g) == len(w) == 2 and w == [2 * g[0], 2 * g[1]]
