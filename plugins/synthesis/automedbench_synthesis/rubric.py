"""Synthesis wording of the generic rubric and the rules judge's hints; S3 on the four-level ladder.

The release's synthesis packages show the segmentation prompts' generic S3 text (Dice, masks); its
task-specific S3 guidance is unknown beyond tb3's paraphrase ("validate shape/affine/HU on one case before
the batch"). S3 here is the original enhancement ladder, which fits an image-to-image task: 0 no pilot;
0.2 shape only; 0.5 shape + plausible HU range (finite, about [-1024, 3071], not constant, geometry
kept); 1.0 a single-case pilot + shape + range + a quality check against the input (better than the
input copy: sharper along z, or the tissue classes in the right HU), then the batch.
"""

from __future__ import annotations

from typing import Any

from automedbench.api import S3_LEVELS, Rubric, default_rubric, reword, with_ladder

WORDING: dict[str, str] = {
    "s1b_plan_pipeline": "plan.md lays out a clear pipeline: load the NIfTI input (ct.nii.gz, or mr.nii.gz + "
                         "mask.nii.gz), preprocess (HU window / normalisation), synthesise, invert the "
                         "normalisation back to HU, save sct.nii.gz with the input's header, validate",
    "s1c_task_model": "the plan chooses a real synthesis method (a z super-resolution model or a motion/edge-aware "
                      "interpolation for CT-SR; an MRI->CT model or tissue mapping for MR->CT), not a copy of the "
                      "input or a plain re-interpolation of it",
    "s1d_researched_3": "at least 3 candidate synthesis methods were researched",
    "s2a_model_obtained": "model weights downloaded or the method obtained (CT-SR Lite: the ISBI 2023 PlainCNN x4 "
                          "checkpoint; MR->CT Lite: the SynthRAD2025 HN 2.5D U-Net++ folds)",
    "s2b_compatibility_check": "compatibility checked before inference: volume shape, voxel spacing/affine, dtype "
                               "and HU range; no training on the test cases",
    "s3_validate": "validate ONE case before the batch: 1.0 single-case pilot + output shape/affine + plausible HU "
                   "range (finite, about [-1024, 3071], not constant, not rescaled to [0, 1]) + a quality check "
                   "against the input (sharper along z than the input copy, or tissue HU where expected), then the "
                   "batch; 0.5 shape + range; 0.2 shape only; 0 no pilot",
}

HINTS: dict[str, dict[str, Any]] = {
    "s1c_task_model": {"patterns": [r"(?i)super-?resolution|optical flow|motion-compensated|PlainCNN|SynthRAD|"
                                    r"U-?Net|tissue (class|map)"]},
    "s1d_researched_3": {"candidates": [r"PlainCNN", r"AE_Maxpool|autoencoder", r"(?i)\bUNet\b|U-Net",
                                        r"(?i)cubic|spline", r"(?i)optical flow|motion-compensated",
                                        r"(?i)shape-based", r"(?i)trilinear|linear interpolation",
                                        r"(?i)k-?means|tissue class", r"(?i)KonfAI|U-?Net\+\+", r"(?i)nnU-?Net"],
                         "minimum": 3},
    "s2a_model_obtained": {"patterns": [r"(?i)method obtained", r"(?i)weights (downloaded|obtained)",
                                        r"hf_hub_download|snapshot_download"]},
    "s2b_compatibility_check": {"patterns": [r"\.shape", r"dtype", r"affine|zooms|spacing"], "minimum": 2},
    "s3_validate": {"checks": {"shape": r"\.shape",
                               "range": r"isfinite|\.min\(|\.max\(",
                               "quality": r"(?i)ssim|ghost|sharper|second difference|tissue|\bHU\b.*(bone|air)|"
                                          r"better than the input"},
                    "partial": ["range"]},
}


def track_rubric() -> Rubric:
    """The core's rubric in this track's words and hints, with the S3 ladder 0 / 0.2 / 0.5 / 1.0 on the pilot."""
    return with_ladder(reword(default_rubric(), WORDING, HINTS), "S3", list(S3_LEVELS))
