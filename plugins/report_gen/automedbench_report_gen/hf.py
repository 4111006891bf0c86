"""The text metrics as Hugging Face `evaluate` modules (in `hf_metrics/<name>/<name>.py`, loaded by path,
offline). Each module is a thin `evaluate.Metric` whose `_compute` calls `compute` below, so the numbers
are the evaluator's own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .clinical import ClinicalScorer
from .labeler import RuleLabeler, micro_prf
from .nlg import bleu, meteor, rouge_l
from .text import scored_text

MODULES = Path(__file__).parent / "hf_metrics"
NAMES = ("report_bleu", "report_meteor", "report_rouge_l", "report_chexpert_labels", "report_entity_f1")


def module_path(name: str) -> str:
    """The folder to pass to `evaluate.load` for one of NAMES."""
    if name not in NAMES:
        raise KeyError(f"no evaluate module {name!r}; choose from {', '.join(NAMES)}")
    return str(MODULES / name)


def compute(name: str, predictions: list[str], references: list[str]) -> dict[str, Any]:
    refs = [scored_text(r) for r in references]
    hyps = [scored_text(p) for p in predictions]
    if name == "report_bleu":
        values, _ = bleu(refs, hyps)
        return {**{f"bleu_{n + 1}": v for n, v in enumerate(values)}, "bleu": sum(values) / 4}
    if name == "report_meteor":
        return {"meteor": meteor(refs, hyps)[0]}
    if name == "report_rouge_l":
        return {"rouge_l": rouge_l(refs, hyps)[0]}
    if name == "report_chexpert_labels":
        labeler = RuleLabeler()
        p, r, f = micro_prf(labeler.label(refs), labeler.label(hyps))
        return {"micro_precision": p, "micro_recall": r, "micro_f1": f}
    if name == "report_entity_f1":
        return {"entity_f1": ClinicalScorer().score(refs, hyps).components["entity_f1_rule"]}
    raise KeyError(name)


def metric_class(name: str, description: str) -> type:
    """An `evaluate.Metric` subclass for one of NAMES (string predictions and references)."""
    import datasets
    import evaluate

    class ReportMetric(evaluate.Metric):
        def _info(self) -> Any:
            return evaluate.MetricInfo(
                description=description, citation="", inputs_description="predictions, references: report texts",
                features=datasets.Features({"predictions": datasets.Value("string"),
                                            "references": datasets.Value("string")}))

        def _compute(self, predictions: list[str], references: list[str]) -> dict[str, Any]:
            return compute(name, list(predictions), list(references))

    ReportMetric.__name__ = "".join(part.capitalize() for part in name.split("_"))
    return ReportMetric
