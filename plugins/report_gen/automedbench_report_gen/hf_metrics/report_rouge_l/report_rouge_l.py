"""Hugging Face `evaluate` module for the report track: ROUGE-L F (beta 1.2, pycocoevalcap), mean over reports.

Load offline by path: `evaluate.load("<this folder>")`; the numbers come from
automedbench_report_gen.hf, the code the evaluator runs."""

from automedbench_report_gen.hf import metric_class

DESCRIPTION = (
    "ROUGE-L F (beta 1.2, pycocoevalcap), mean over reports"
)
ReportRougeL = metric_class("report_rouge_l", DESCRIPTION)
