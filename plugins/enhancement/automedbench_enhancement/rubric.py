"""Enhancement wording of the generic rubric (from the original enhancement RUBRIC.md) and the rules judge's hints.

S3 is the original's four-level ladder, kept here so the track-declared rubric model can take it over:
0 no pilot; 0.2 shape only; 0.5 shape + plausible range (HU about [-1300, 3200] or [0, 1], no NaN/Inf,
not constant); 1.0 a single-case pilot + shape + range + a quality check (noise reduced, resolution
doubled, or a visual check), then the batch.
"""

from __future__ import annotations

from typing import Any

from automedbench.api import S3_LEVELS, Rubric, default_rubric, reword, with_ladder

S3_LADDER: list[float] = [0.0, 0.2, 0.5, 1.0]

WORDING: dict[str, str] = {
    "s1b_plan_pipeline": "plan.md lays out a clear pipeline: load input.npy, preprocess (HU window / [0, 1] "
                         "scaling), enhance, post-process back to the output units and grid, save, validate",
    "s1c_task_model": "the plan chooses a real enhancement method (a denoiser for LDCT, a super-resolution "
                      "method for MRI), not an identity copy or a pure bicubic/Gaussian bypass",
    "s1d_researched_3": "at least 3 candidate enhancement methods were researched",
    "s2a_model_obtained": "model weights downloaded or the method obtained (LDCT Lite: DRUNet via deepinv; "
                          "MRI Lite: Swin2SR)",
    "s2b_compatibility_check": "compatibility checked before inference: input shape, dtype and value range "
                               "(HU or [0, 1]), framework versions; no training on the test cases",
    "s2c_env_ready": "environment set up and dependencies confirmed",
    "s2d_env_fail_within_5": "environment failures resolved within 5 attempts (or none occurred)",
    "s2e_model_loaded": "model loaded and confirmed working (on the GPU where one is present)",
    "s3_validate": "validate ONE case before the batch: 1.0 single-case pilot + output shape + plausible range "
                   "(HU about [-1300, 3200] or [0, 1], no NaN/Inf, not constant) + a quality check (noise "
                   "reduced, resolution doubled, or visual), then the batch; 0.5 shape + range; 0.2 shape only; "
                   "0 no pilot",
}

HINTS: dict[str, dict[str, Any]] = {
    "s1c_task_model": {"patterns": [r"non-?local means|\bNLM\b|total.variation|\bTV\b|BM3D|DnCNN|DRUNet|Restormer",
                                    r"SwinIR|Swin2SR|zero-?fill|k-space|Lanczos|super-?resolution"]},
    "s1d_researched_3": {"candidates": [r"BM3D", r"DnCNN", r"DRUNet|deepinv", r"Restormer", r"SwinIR|Swin2SR",
                                        r"non-?local means|\bNLM\b", r"total.variation", r"bicubic",
                                        r"Lanczos", r"zero-?fill"], "minimum": 3},
    "s2a_model_obtained": {"patterns": [r"(?i)method obtained", r"(?i)weights (downloaded|obtained)"]},
    "s2b_compatibility_check": {"patterns": [r"\.shape", r"dtype", r"\.min\(|\.max\(|percentile|units"],
                                "minimum": 2},
    "s3_validate": {"checks": {"shape": r"\.shape",
                               "range": r"isfinite|\.min\(|\.max\(",
                               "quality": r"(?i)noise|\.std\(|resolution|doubled|ssim|psnr"},
                    "partial": ["range"]},
}


def track_rubric() -> Rubric:
    """The core's rubric in this track's words and hints, with the original enhancement S3 ladder:
    0 / 0.2 (shape only) / 0.5 (shape + range) / 1.0 (+ a quality check)."""
    return with_ladder(reword(default_rubric(), WORDING, HINTS), "S3", list(S3_LEVELS))
