"""Hugging Face `evaluate` module for the report track: METEOR 1.5 (pycocoevalcap jar, needs Java), corpus
aggregate.

Load offline by path: `evaluate.load("<this folder>")`; the numbers come from
automedbench_report_gen.hf, the code the evaluator runs."""

from automedbench_report_gen.hf import metric_class

DESCRIPTION = (
    "METEOR 1.5 (pycocoevalcap jar, needs Java), corpus aggregate"
)
ReportMeteor = metric_class("report_meteor", DESCRIPTION)
