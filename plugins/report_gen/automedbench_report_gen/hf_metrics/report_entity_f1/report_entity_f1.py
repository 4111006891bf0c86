"""Hugging Face `evaluate` module for the report track: Offline entity F1 (rule labeler entities), the stand-in
for RadGraph F1.

Load offline by path: `evaluate.load("<this folder>")`; the numbers come from
automedbench_report_gen.hf, the code the evaluator runs."""

from automedbench_report_gen.hf import metric_class

DESCRIPTION = (
    "Offline entity F1 (rule labeler entities), the stand-in for RadGraph F1"
)
ReportEntityF1 = metric_class("report_entity_f1", DESCRIPTION)
