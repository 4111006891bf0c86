"""Classification wording of the rubric, rule hints, and the S3 ladder.

The release's classification package ships the segmentation track's tier config byte for byte, so the
S3 ladder is the paper's {0, 0.5, 1.0} (as segmentation and detection); the wording is this track's own
(the research's proposed ladder: one image end to end, logits of the model's class count, the label
mapped onto exactly one canonical class, then a predicted-class histogram over a few images before the
batch). `S3_LADDER` declares it here so a track-declared rubric model can take it over.
"""

from __future__ import annotations

from typing import Any

from automedbench.api import S3_PAPER_LEVELS, Rubric, default_rubric, reword, with_ladder

S3_LADDER = S3_PAPER_LEVELS

WORDING: dict[str, str] = {
    "s1b_plan_pipeline": "plan.md lays out the pipeline: load image.jpg, preprocess (RGB, resize, the model's "
                         "mean/std), inference (logits, argmax), map the model's label onto the task's canonical "
                         "class name, write prediction.json, validate",
    "s1c_task_model": "the plan chose an image classifier whose classes map one-to-one onto the task's classes "
                      "(not a detector, a segmenter or a backbone without a trained head)",
    "s1d_researched_3": "at least 3 distinct candidate classifiers/methods were compared",
    "s2b_compatibility_check": "input compatibility checked before inference: image size and mode (RGB), the "
                               "preprocessing the model expects, and its id2label against the task's classes",
    "s2e_model_loaded": "classifier loaded and confirmed working on an image",
    "s3_validate": "tested ONE image first: the output has one score per model class, its label maps onto "
                   "exactly one canonical class and prediction.json reads back; then checked the predicted-"
                   "class histogram over a few images before the batch: 1.0 pilot + mapping + histogram, then "
                   "batch; 0.5 pilot with partial checks; 0 no pilot",
}

HINTS: dict[str, dict[str, Any]] = {
    "s1c_task_model": {"patterns": [r"(?i)classif", r"(?i)ViT|EfficientNet|ConvNeXt|Swin|ResNet|DenseNet|"
                                    r"centroid|colour rule|color rule"]},
    "s1d_researched_3": {"candidates": [r"ViT", r"EfficientNet", r"ConvNeXt", r"Swin", r"ResNet", r"DenseNet",
                                        r"(?i)colour rules?|color rules?|nearest.centroid"], "minimum": 3},
    "s2a_model_obtained": {"patterns": [r"from_pretrained", r"snapshot_download", r"(?i)method obtained",
                                        r"(?i)weights (downloaded|obtained)", r"\.safetensors|checkpoint"]},
    "s2b_compatibility_check": {"patterns": [r"\.size\b|\.shape\b", r"\.mode\b|dtype",
                                             r"id2label|\[['\"]classes['\"]\]"], "minimum": 2},
    "s2e_model_loaded": {"patterns": [r"(?i)model (is )?(loaded|ready)", r"(?i)classifier (is )?(loaded|ready)",
                                      r"(?i)method ready"]},
    # the pilot's prediction.json read back, its label checked against the classes, a class histogram
    "s3_validate": {"checks": {"json": r"json\.load|\[['\"]label['\"]\]",
                               "mapping": r"in meta\[['\"]classes['\"]\]|id2label|in classes",
                               "histogram": r"Counter\(|histogram|value_counts|bincount"},
                    "partial": ["json", "mapping"]},
}


def classification_rubric() -> Rubric:
    return with_ladder(reword(default_rubric(), WORDING, HINTS), "S3", list(S3_LADDER))
