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
        fired: list[FiredCode] = []
        turns = [ctx.trace.last_write["turn"]] if ctx.trace.last_write else []
        metric = ctx.result.task
        rows = [r for r in (metric.per_case if metric else []) if r.get("valid")]
        copies = [r["case_id"] for r in rows if r.get("same_as_input")]
        if copies:
            fired.append(self.fire("E3", f"{len(copies)} output(s) identical to the degraded input (no synthesis): "
                                         f"{', '.join(copies[:5])}", turns, "S3"))
        off = [r["case_id"] for r in rows if r.get("out_max") is not None and r["out_max"] < HU_SCALE_MAX]
        if off:
            fired.append(self.fire("E4", f"{len(off)} output(s) not in HU (max < {HU_SCALE_MAX:.0f}: a normalisation "
                                         f"not inverted): {', '.join(off[:5])}", turns, "S4"))
        return fired
