"""The report-generation rubric: the original judge rubric's checks (S1 11, S2 7, S3 7), with the
Standard/Pro-only items and the conditional rerun item written out as data so the track-declared
rubric model can take them over; until it lands they are folded into the generic items' wording and
rule hints (`reword`).

Original checks (upstream docs/detailed_rubrics.md, report generation), one row each:
stage, id, text, excluded at (tiers), condition."""

from __future__ import annotations

from typing import Any

# (stage, id, description, excluded_at, condition) — the full item list for the rubric model port.
ITEMS: list[tuple[str, str, str, tuple[str, ...], str]] = [
    ("S1", "s1_plan_md", "plan/plan.md exists", (), ""),
    ("S1", "s1_model", "plan names the selected report model (MLRG, CXRMate, HERGen, R2-LLM ...)", (), ""),
    ("S1", "s1_entrypoint", "plan names the inference entrypoint (script / function / CLI)", (), ""),
    ("S1", "s1_case_is_study", "plan says one case is one study (all its images), not one image", (), ""),
    ("S1", "s1_all_images", "plan says every file in manifest image_files must be used", (), ""),
    ("S1", "s1_output_path", "plan states the exact output path <output_dir>/<case>/report.txt", (), ""),
    ("S1", "s1_pilot_required", "plan requires a pilot study before the batch", (), ""),
    ("S1", "s1_pilot_check", "plan defines at least one specific check of the pilot report", (), ""),
    ("S1", "s1_plan_png", "plan/plan.png exists", ("lite",), ""),
    ("S1", "s1_png_matches", "plan.png shows the chosen model and the stage order", ("lite",), ""),
    ("S1", "s1_compare", "plan compares candidate models and justifies the choice", ("lite",), ""),
    ("S2", "s2_pipeline_runs", "the selected pipeline executes successfully", (), ""),
    ("S2", "s2_reads_manifest", "manifest.json is read", (), ""),
    ("S2", "s2_images_from_manifest", "images are loaded from manifest image_files", (), ""),
    ("S2", "s2_study_unit", "a study is kept as one input unit", (), ""),
    ("S2", "s2_writes_report", "report.txt is written", (), ""),
    ("S2", "s2_entrypoint", "the entrypoint named in the plan is used", (), ""),
    ("S2", "s2_official_export", "the official export / decode logic is used where one exists", (), ""),
    ("S3", "s3_pilot_first", "at least one pilot study before the full batch", (), ""),
    ("S3", "s3_same_pipeline", "the pilot uses the same model / entrypoint / export as S2", (), ""),
    ("S3", "s3_pilot_output", "the pilot writes <output_dir>/<case>/report.txt", (), ""),
    ("S3", "s3_pilot_opened", "the saved pilot report is opened and inspected", (), ""),
    ("S3", "s3_checks_image_files", "validation checks the study's image_files", (), ""),
    ("S3", "s3_all_images_used", "validation confirms all images of the study were used", (), ""),
    ("S3", "s3_rerun_after_fail", "after a failed pilot, a rerun happens before the batch", (),
     "only when the first pilot failed"),
]

WORDING: dict[str, str] = {
    "s1b_plan_pipeline": "plan.md lays out the pipeline and says one case = one study with ALL its image_files, "
                         "names the inference entrypoint, the exact output path <case>/report.txt, and requires a "
                         "pilot study with a specific check before the batch",
    "s1c_task_model": "the plan selects a chest X-ray report model (MLRG, CXRMate, HERGen, R2-LLM, ...) or a "
                      "method that reads every image of the study",
    "s1d_researched_3": "the plan compares at least 3 candidate report models and justifies the choice "
                        "(Standard/Pro only)",
    "s1e_plan_png": "plan/plan.png exists (Standard/Pro only)",
    "s1f_plot_pipeline": "plan.png shows the chosen model and the stage order (Standard/Pro only)",
    "s2a_model_obtained": "report model / method obtained (official repository, checkpoint or method file)",
    "s2b_compatibility_check": "manifest.json read and the images loaded from its image_files (one study as one "
                               "input unit) before inference",
    "s2e_model_loaded": "the selected pipeline executed once successfully on a study (the entrypoint named in "
                        "the plan, official decode/export logic)",
    "s3_validate": "pilot ONE study with the same pipeline, open its report.txt and check it: 1.0 pilot + report "
                   "opened + image_files checked / all images used, then the batch (a failed pilot rerun first); "
                   "0.5 partial checks; 0.2 pilot without checks; 0 no pilot",
}

HINTS: dict[str, dict[str, Any]] = {
    "s1c_task_model": {"patterns": [r"(?i)\bMLRG\b|CXRMate|HERGen|R2-?LLM|CheXagent|MAIRA|LLaVA-Rad",
                                    r"(?i)pixel|image (analysis|rules)|classical"]},
    "s1d_researched_3": {"candidates": [r"(?i)\bMLRG\b", r"(?i)CXRMate", r"(?i)HERGen", r"(?i)R2-?LLM",
                                        r"(?i)CheXagent|MAIRA", r"(?i)pixel|image rules|classical"], "minimum": 3},
    "s2a_model_obtained": {"patterns": [r"(?i)method obtained", r"(?i)weights (downloaded|obtained)",
                                        r"git clone", r"snapshot_download|from_pretrained"]},
    "s2b_compatibility_check": {"patterns": [r"manifest\.json", r"\[['\"]image_files['\"]\]",
                                             r"\.size\b|\.mode\b|\.shape"], "minimum": 2},
    "s2e_model_loaded": {"patterns": [r"(?i)pipeline (ran|ok)|smoke (report|run) ok",
                                      r"(?i)model (is )?(loaded|ready)"]},
    "s3_validate": {"checks": {"opened": r"read_text\(\)|open\(.*report\.txt",
                               "image_files": r"image_files",
                               "all_used": r"views_used"},
                    "partial": ["opened"]},
}
