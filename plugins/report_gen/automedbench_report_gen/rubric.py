"""The report-generation rubric, declared on the core's rubric model: the original report-generation judge
rubric (upstream docs/detailed_rubrics.md), where every stage is the mean of its applicable binary checks.

S1 has 11 checks (plan.png, its match with the plan, and the candidate comparison are Standard/Pro only:
*credited* at Lite, the paper's rule in every track, once the agent passed a graded S1 item), S2 has 7,
S3 has 7 (the last, "rerun after a failed pilot", applies only when a single-case pilot failed:
`applies_if="pilot_failed"`). Each item carries the rule hint the rules judge grades it by (`rule` names
a generic or built-in check); the LLM judge reads the same items' wording and levels.
The result stores this declaration.
"""

from __future__ import annotations

from typing import Any

from automedbench.api import Rubric, RubricItem, mean_stage

CREDITED_AT_LITE = {"lite": "auto-pass"}

# Report models the original's heuristic judge recognised, plus this demo's pixel-rule method.
MODELS = (r"(?i)\bMLRG\b|CXRMate|HERGen|R2-?LLM|CheXagent|MAIRA|LLaVA-?Rad|\bQwen|\bLLaVA|R2Gen|"
          r"pixel[- ]rule|image rules|classical")

# (stage, id, description, tier rules, condition, rules-judge hints)
ITEMS: list[tuple[str, str, str, dict[str, str], str, dict[str, Any]]] = [
    ("S1", "s1_plan_md", "plan/plan.md exists", {}, "", {"rule": "s1a"}),
    ("S1", "s1_model", "the plan names the selected report model (MLRG, CXRMate, HERGen, R2-LLM, ...) or method",
     {}, "", {"rule": "plan_mentions", "patterns": [MODELS]}),
    ("S1", "s1_entrypoint", "the plan names the inference entrypoint (script, function or CLI)", {}, "",
     {"rule": "plan_mentions", "patterns": [r"(?i)entry ?point|inference (script|command|function|cli)",
                                            r"\bpython3? (-m [\w.]+|[\w./-]+\.py)"]}),
    ("S1", "s1_case_is_study", "the plan says one case is one study (all its images), not one image", {}, "",
     {"rule": "plan_mentions", "patterns": [r"(?i)\b(one|each|a) (case|study) (is|=) (one|a|the (whole|entire))? ?"
                                            r"study|not (one|a single) (jpe?g|image|file|view)"]}),
    ("S1", "s1_all_images", "the plan says every file in the manifest's image_files must be used", {}, "",
     {"rule": "plan_mentions", "patterns": [r"(?i)\b(every|all|each)\b[^.\n]{0,60}image_files",
                                            r"(?i)image_files[^.\n]{0,60}\b(all|every|each)\b",
                                            r"(?i)\ball (the |its )?(views|images) (of|in) (a|the|each|one) study"]}),
    ("S1", "s1_output_path", "the plan states the exact output path <output_dir>/<case>/report.txt", {}, "",
     {"rule": "plan_mentions", "patterns": [r"(?i)[<{]?\bcase(_?id)?[>}]?/report\.txt"]}),
    ("S1", "s1_pilot_required", "the plan requires a pilot study before the batch", {}, "",
     {"rule": "plan_mentions", "patterns": [r"(?i)\bpilot\b|(one|single|first) (case|study) (first|test|run)"]}),
    ("S1", "s1_pilot_check", "the plan defines at least one specific check of the pilot report", {}, "",
     {"rule": "plan_mentions", "patterns": [r"(?i)\b(check|verif|assert|confirm|inspect)\w*\b[^.\n]{0,80}"
                                            r"(FINDINGS|characters|printable|length|views?_used|image_files|"
                                            r"non-?empty|format)"]}),
    ("S1", "s1_plan_png", "plan/plan.png exists (Standard/Pro only)", CREDITED_AT_LITE, "", {"rule": "s1e"}),
    ("S1", "s1_png_matches", "plan.png shows the chosen model and the stage order (Standard/Pro only)",
     CREDITED_AT_LITE, "", {"rule": "s1f"}),
    ("S1", "s1_compare", "the plan compares candidate report models and justifies the choice (Standard/Pro only)",
     CREDITED_AT_LITE, "", {"rule": "s1d", "minimum": 3,
                            "candidates": [r"(?i)\bMLRG\b", r"(?i)CXRMate", r"(?i)HERGen", r"(?i)R2-?LLM",
                                           r"(?i)CheXagent|MAIRA|LLaVA-?Rad", r"(?i)pixel|image rules|classical"]}),
    ("S2", "s2_pipeline_runs", "the selected pipeline executed successfully", {}, "",
     {"rule": "s2e", "patterns": [r"(?i)pipeline (ran|ok)|smoke (report|run) ok", r"(?i)model (is )?(loaded|ready)"]}),
    ("S2", "s2_reads_manifest", "manifest.json is read", {}, "",
     {"rule": "code_uses", "patterns": [r"manifest\.json"]}),
    ("S2", "s2_images_from_manifest", "the images are loaded from the manifest's image_files", {}, "",
     {"rule": "code_uses", "patterns": [r"\[\s*['\"]image_files['\"]\s*\]|\.get\(\s*['\"]image_files"]}),
    ("S2", "s2_study_unit", "a study is kept as one input unit (all its views together)", {}, "",
     {"rule": "code_uses", "patterns": [r"for \w+ in [^\n]*image_files|\bviews_used\b"]}),
    ("S2", "s2_writes_report", "report.txt is written", {}, "", {"rule": "code_uses", "outputs": True}),
    ("S2", "s2_entrypoint", "the entrypoint named in the plan is the one that runs", {}, "",
     {"rule": "plan_entrypoint"}),
    ("S2", "s2_official_export", "the official export / decode logic is used where one exists (the model's own "
     "repository or the method file, not a rewrite)", {}, "",
     {"rule": "code_uses", "where": "any", "patterns": [r"git clone|from_pretrained|snapshot_download|\.generate\(",
                                                        r"(?i)method obtained|official"]}),
    ("S3", "s3_pilot_first", "at least one pilot study before the full batch", {}, "", {"rule": "pilot_first"}),
    ("S3", "s3_same_pipeline", "the pilot uses the same model / entrypoint / export as the batch", {}, "",
     {"rule": "pilot_same_entrypoint"}),
    ("S3", "s3_pilot_output", "the pilot writes <output_dir>/<case>/report.txt", {}, "", {"rule": "pilot_output"}),
    ("S3", "s3_pilot_opened", "the saved pilot report is opened and inspected", {}, "",
     {"rule": "pilot_check", "pattern": r"read_text\(|open\([^)\n]*report|\bcat\b[^\n]*report\.txt"}),
    ("S3", "s3_checks_image_files", "the validation checks the study's image_files", {}, "",
     {"rule": "pilot_check", "pattern": r"image_files"}),
    ("S3", "s3_all_images_used", "the validation confirms all images of the study were used", {}, "",
     {"rule": "pilot_check", "pattern": r"views?_used|len\([^)\n]*image_files[^)\n]*\)\s*[=!]="}),
    ("S3", "s3_rerun_after_fail", "after a failed pilot, the pilot is rerun (and passes) before the batch", {},
     "pilot_failed", {"rule": "pilot_rerun"}),
]


def report_rubric() -> Rubric:
    """The declared rubric: three mean stages of binary items, tier exclusions and the conditional rerun."""
    items = [RubricItem(item_id, stage, text, tiers=dict(tiers), applies_if=condition, hints=dict(hints))
             for stage, item_id, text, tiers, condition, hints in ITEMS]
    return Rubric([mean_stage("S1"), mean_stage("S2"), mean_stage("S3")], items)
