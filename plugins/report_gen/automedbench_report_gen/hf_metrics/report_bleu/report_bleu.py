"""Hugging Face `evaluate` module for the report track: Corpus BLEU-1..4 and their mean (pycocoevalcap, MLRG
preprocessing, FINDINGS section when present).

Load offline by path: `evaluate.load("<this folder>")`; the numbers come from
automedbench_report_gen.hf, the code the evaluator runs."""

from automedbench_report_gen.hf import metric_class

DESCRIPTION = (
    "Corpus BLEU-1..4 and their mean (pycocoevalcap, MLRG preprocessing, FINDINGS section when "
    "present)"
)
ReportBleu = metric_class("report_bleu", DESCRIPTION)
