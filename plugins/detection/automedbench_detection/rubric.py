"""Detection wording of the rubric (the original detection rubric), rule hints, and the S3 ladder.

The original asked: s1c a detector that outputs boxes, not an image classifier; s2b image size, dtype
and normalisation checked; S3 one image tested, the JSON and the box coordinates verified. The paper
grades S3 on {0, 0.5, 1.0} for detection (Table 7); `S3_LADDER` declares it here so a track-declared
rubric model can take it over.
"""

from __future__ import annotations

from typing import Any

from automedbench.api import S3_PAPER_LEVELS, Rubric, default_rubric, reword, with_ladder

S3_LADDER = S3_PAPER_LEVELS

WORDING: dict[str, str] = {
    "s1b_plan_pipeline": "plan.md lays out the pipeline: load image + meta.json, preprocess (size, channels, "
                         "normalisation), detector inference, post-process (score filter, NMS, class mapping, "
                         "pixel coordinates), write prediction.json, validate",
    "s1c_task_model": "the plan chose a detector that outputs bounding boxes with classes and scores (not an image "
                      "classifier or a segmenter without boxes)",
    "s1d_researched_3": "at least 3 distinct candidate detectors/methods were compared",
    "s2b_compatibility_check": "input compatibility checked before inference: image size, dtype/channels and the "
                               "normalisation the detector expects, and the class list in meta.json",
    "s2e_model_loaded": "detector loaded and confirmed working on an image",
    "s3_validate": "tested ONE image first and verified its prediction.json (parses, known classes, scores in "
                   "[0, 1]) and the box coordinates (pixels, inside the image, x1 < x2, y1 < y2, plausible count), "
                   "then ran the batch: 1.0 pilot + JSON + coordinates checked, then batch; 0.5 pilot with partial "
                   "checks; 0 no pilot",
}

HINTS: dict[str, dict[str, Any]] = {
    "s1c_task_model": {"patterns": [r"(?i)detector|detection|bounding box|\bbox(es)?\b",
                                    r"(?i)YOLO|RetinaNet|Faster R-?CNN|FCOS|ATSS|DETR|watershed"]},
    "s1d_researched_3": {"candidates": [r"YOLO", r"RetinaNet", r"Faster R-?CNN", r"\bFCOS\b", r"\bATSS\b",
                                        r"DETR", r"MMDetection", r"classical|threshold|watershed"], "minimum": 3},
    "s2a_model_obtained": {"patterns": [r"(?i)method obtained", r"(?i)weights (downloaded|obtained)",
                                        r"\.pt\b|checkpoint"]},
    "s2b_compatibility_check": {"patterns": [r"\.size\b|\.shape\b", r"\.mode\b|dtype",
                                             r"\[['\"](width|height|classes)['\"]\]"], "minimum": 2},
    "s2e_model_loaded": {"patterns": [r"(?i)model (is )?(loaded|ready)", r"(?i)detector (is )?(loaded|ready)",
                                      r"(?i)method ready"]},
    # a check of the JSON (classes, scores) and of the coordinates, on the pilot's prediction.json
    "s3_validate": {"checks": {"json": r"json\.load|\[['\"]boxes['\"]\]",
                               "values": r"\[['\"]class['\"]\]|\[['\"]score['\"]\]",
                               "coordinates": r"x1.*x2|\[['\"]width['\"]\]"},
                    "partial": ["json", "values"]},
}


def detection_rubric() -> Rubric:
    return with_ladder(reword(default_rubric(), WORDING, HINTS), "S3", list(S3_LADDER))
