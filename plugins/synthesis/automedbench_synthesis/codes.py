"""Synthesis error-code detectors (paper Table 16's codes, read from the scored result only).

- E3: outputs identical to the degraded input (`same_as_input`): unchanged outputs accepted;
- E4: outputs not in HU (max below 300: a [0, 1] or 0-255 normalisation left in place).
"""

from __future__ import annotations

from automedbench.api import CodeContext, Detector, FiredCode

HU_SCALE_MAX = 300.0  # a CT of a body holds bone or contrast far above this


class SynthesisOutputDetector(Detector):
    name = "synthesis-output"
    tracks = ("synthesis",)

    def detect(self, ctx: CodeContext) -> list[FiredCode]:
        turns = ctx.last_write_turns
        off = [r["case_id"] for r in ctx.valid_rows if r.get("out_max") is not None and r["out_max"] < HU_SCALE_MAX]
        return [*self.fire_cases("E3", ctx.flagged("same_as_input"), "output(s) identical to the degraded input "
                                 "(no synthesis)", turns, "S3"),
                *self.fire_cases("E4", off, f"output(s) not in HU (max < {HU_SCALE_MAX:.0f}: a normalisation not "
                                 "inverted)", turns, "S4")]
