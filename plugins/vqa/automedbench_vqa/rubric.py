"""VQA wording of the generic rubric and the evidence the rules judge looks for.

What matters for VQA: a real model is called on the images (not a keyword heuristic), one smoke
question goes through the whole path first, and the answer post-processing (label extraction, short
answer) is checked on the calibration questions before the batch. The evaluator never runs the
agent's post-processing; the judge only looks at what the agent ran and printed.
"""

from __future__ import annotations

from typing import Any

from automedbench.api import S3_LEVELS, Rubric, default_rubric, reword, with_ladder

WORDING: dict[str, str] = {
    "s1b_plan_pipeline": "plan.md lays out the pipeline: load question + image(s), build the prompt, call the "
                         "model, post-process the raw output into the answer/label, write answer.json, validate",
    "s1c_task_model": "the plan chooses a model that reads the image(s) and answers in the required form "
                      "(a letter A–E for multiple choice, a short answer otherwise)",
    "s1d_researched_3": "at least 3 distinct candidate vision-language models/methods were compared",
    "s2a_model_obtained": "model weights / method obtained",
    "s2b_compatibility_check": "questions and images inspected before inference (image size/mode, frame count, "
                               "options, answer mode)",
    "s2e_model_loaded": "model loaded on the accelerator the run was given (the GPU where one is present) and "
                        "actually called: a smoke forward pass on one question produced a non-empty raw output",
    "s3_validate": "smoke ONE question end to end and check its answer.json (raw output kept, label/answer "
                   "well-formed), then check the answer post-processing on the calibration questions before the "
                   "batch: 1.0 smoke + raw output + format + calibration, then batch; 0.5 partial checks; 0.2 smoke "
                   "without checks; 0 no smoke question",
}

HINTS: dict[str, dict[str, Any]] = {
    "s1c_task_model": {"patterns": [r"vision[- ]language|\bVLM\b|LLaVA|Qwen2?\.?5?-?VL|MedVL\w*|Gemma",
                                    r"pixel|image (analysis|features|rules)"]},
    "s1d_researched_3": {"candidates": [r"LLaVA-?Med", r"MedVLThinker", r"MedVLSynther", r"Qwen2?\.?5?-?VL",
                                        r"Gemma", r"pixel|image rules|classical"], "minimum": 3},
    "s2a_model_obtained": {"patterns": [r"(?i)method obtained", r"(?i)weights (downloaded|obtained)"]},
    # code that reads the fields, not prose that names them: q['mode'], q.get('options'), img.size
    "s2b_compatibility_check": {"patterns": [r"\.size\b|\.mode\b",
                                             r"\[['\"](options|mode|question_type)['\"]\]|\.get\(['\"]options",
                                             r"\[['\"]image_paths['\"]\]"], "minimum": 2},
    "s2e_model_loaded": {"patterns": [r"(?i)smoke forward pass ok", r"(?i)model (is )?(loaded|ready)",
                                      r"(?i)loading checkpoint shards"]},
    "s3_validate": {"checks": {"raw_output": r"raw_model_output",
                               "format": r"predicted_label|predicted_answer",
                               "calibration": r"calibration"},
                    "partial": ["raw_output", "format"]},
}


def vqa_rubric() -> Rubric:
    """The default rubric in VQA's words, keeping the original's four-level S3 ladder (0/0.2/0.5/1.0)."""
    return with_ladder(reword(default_rubric(), WORDING, HINTS), "S3", S3_LEVELS)
