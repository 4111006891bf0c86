"""Hugging Face `evaluate` module for the report track: Micro P/R/F1 of the 14 CheXpert labels from the offline
rule labeler (rrg binarisation).

Load offline by path: `evaluate.load("<this folder>")`; the numbers come from
automedbench_report_gen.hf, the code the evaluator runs."""

from automedbench_report_gen.hf import metric_class

DESCRIPTION = (
    "Micro P/R/F1 of the 14 CheXpert labels from the offline rule labeler (rrg binarisation)"
)
ReportChexpertLabels = metric_class("report_chexpert_labels", DESCRIPTION)
