"""The report Task metric as a `TaskEvaluation`: texts are collected case by case, then scored
corpus-level at once, as the original scorer does (its paper says per case; the per-case mean is kept
as the component `mlrg_per_case_mean` so both readings are visible).

MLRG-7 = mean of seven values: BLEU (mean of BLEU-1..4), METEOR, ROUGE-L, RadGraph F1 and CheXbert micro
precision, recall and F1. Without the CheXbert/RadGraph weights the last four are the rule labeler's
stand-ins and the Task is called `mlrg-offline`. PathCap tasks (`params.metric_kind: nlg3`) use the mean
of BLEU, METEOR and ROUGE-L only (`nlg-3`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from automedbench.api import CasePicture, CaseScore, MetricBlock, StagedData, TaskEvaluation, TaskSpec

from . import contract, grader, nlg
from .clinical import ClinicalScorer, make_scorer
from .codes import templated
from .labeler import label_text
from .text import has_impression_only, largest_template_group, mlrg_preprocess, scored_text

FACTS_FILE = "facts.json"
# the components that count reports (printed whole, never as a score's "0.000")
COUNTS = ("valid_cases", "distinct_reports")


def reference_text(private_case: Path) -> str:
    return (private_case / contract.REPORT_FILE).read_text("utf-8")


def read_facts(private_case: Path) -> dict[str, Any]:
    path = private_case / FACTS_FILE
    return json.loads(path.read_text("utf-8")) if path.is_file() else {}


def metric_name(kind: str, clinical: ClinicalScorer | None) -> str:
    if kind == "nlg3":
        return "nlg-3"
    return "mlrg-7" if clinical is not None and clinical.exact else "mlrg-offline"


ORIGINAL_WEIGHT = 0.142857  # the original's `clinical_metric_weights`: each of the seven slots, as written there


def original_mlrg7(slots: list[float]) -> float:
    """The MLRG-7 value as the original computes it: each slot rounded to 4 decimals (`compute_mlrg_scores`),
    weighted 0.142857, summed, rounded to 4 (`compute_clinical_score`). Averaging the unrounded slots instead
    put the Task 1e-4 off the original's in ~8% of corpora (round 21)."""
    return round(sum(ORIGINAL_WEIGHT * round(v, 4) for v in slots), 4)


def score_corpus(references: list[str], hypotheses: list[str], kind: str,
                 clinical: ClinicalScorer | None) -> tuple[float, dict[str, float], list[dict[str, float]], float]:
    """(task value, components, per-case values, per-case mean of the task formula) for texts already
    reduced to their scored sections."""
    text = nlg.score_texts(references, hypotheses)
    components = {f"bleu_{n + 1}": v for n, v in enumerate(text.bleu_n)}
    components |= {"bleu": text.bleu, "meteor": text.meteor or 0.0, "rouge_l": text.rouge_l}
    slots = [text.bleu, text.meteor or 0.0, text.rouge_l]
    per_case = [{"bleu": b, "meteor": m, "rouge_l": r} for b, m, r in
                zip(text.per_case_bleu, text.per_case_meteor, text.per_case_rouge_l, strict=True)]
    if kind != "nlg3" and clinical is not None:
        found = clinical.score(references, hypotheses)
        components |= found.components
        slots += list(found.components.values())
        for case, extra in zip(per_case, found.per_case, strict=True):
            case.update(extra)
    keys = ["bleu", "meteor", "rouge_l"] + ([] if kind == "nlg3" else ["entity_f1", "label_p", "label_r", "label_f1"])
    case_means = [sum(c[k] for k in keys) / len(keys) for c in per_case]
    value = original_mlrg7(slots) if len(slots) == 7 else sum(slots) / len(slots)  # PathCap nlg-3: no original
    return value, components, per_case, (sum(case_means) / len(case_means) if case_means else 0.0)


class ReportEvaluation(TaskEvaluation):
    """Collects (reference, prediction) per valid case; `aggregate` scores the corpus once."""

    def __init__(self, task: TaskSpec, staged: StagedData, options: dict[str, str] | None = None) -> None:
        super().__init__(task, staged, options)
        self.kind = str(task.params.get("metric_kind", "mlrg"))
        self.clinical = make_scorer(self.options) if self.kind != "nlg3" else None
        self.texts: dict[str, tuple[str, str]] = {}
        self.last: tuple[str, str] | None = None  # the report just scored (whole), for its picture

    def score_case(self, case_id: str, submitted: Path) -> CaseScore:
        report = contract.read_report(submitted / contract.REPORT_FILE)
        self.last = (case_id, report)
        private = self.staged.private / case_id
        pick = self._section()
        self.texts[case_id] = (pick(reference_text(private)), pick(report))
        facts = read_facts(private)
        later = list(facts.get("later_view_only", []))
        found = label_text(self.texts[case_id][1]).status if later else {}
        missed = [name for name in later if found.get(name) not in ("positive", "uncertain")]
        requests = [grader.grade_request(*self.texts[case_id])] if grader.enabled(self.options) else []
        return CaseScore(case_id, {"impression_only": has_impression_only(report), "views": facts.get("views", 1),
                                   "later_view_only": later, "missed_later_view": missed, "chars": len(report)},
                         requests)

    def _section(self):
        """What of a report is scored: the FINDINGS section (the default), or the whole text."""
        return scored_text if self.task.params.get("scored_section", "findings") == "findings" else str.strip

    def _all_references(self, case_ids: list[str]) -> list[str]:
        """Every study's scored reference text, those of studies with no valid report included."""
        pick = self._section()
        return [self.texts[c][0] if c in self.texts else pick(reference_text(self.staged.private / c))
                for c in case_ids]

    def case_picture(self, case_id: str, submitted: Path | None) -> CasePicture | None:
        from .picture import case_picture

        last, self.last = self.last, None
        report = last[1] if last is not None and last[0] == case_id and submitted is not None else None
        return case_picture(self.staged.public / case_id, report, reference_text(self.staged.private / case_id))

    def aggregate(self, scores: list[CaseScore | None], case_ids: list[str]) -> MetricBlock:
        name = metric_name(self.kind, self.clinical)
        valid = [s for s in scores if s is not None and s.case_id in self.texts]
        if not valid:
            return MetricBlock(name, 0.0, 0.0, components={"valid_cases": 0}, counts=list(COUNTS[:1]))
        refs = [self.texts[s.case_id][0] for s in valid]
        hyps = [self.texts[s.case_id][1] for s in valid]
        value, components, per_case, case_mean = score_corpus(refs, hyps, self.kind, self.clinical)
        coverage = len(valid) / len(case_ids) if case_ids else 0.0
        components = {k: round(v, 4) for k, v in components.items()}
        key = "nlg3_per_case_mean" if self.kind == "nlg3" else "mlrg_per_case_mean"
        components |= {key: round(case_mean, 4), "valid_cases": len(valid),
                       "distinct_reports": len({mlrg_preprocess(h).lower() for h in hyps}),
                       # near-identical texts (word overlap >= 0.9): one template, whatever a word added per case;
                       # the references' own share says how much repetition the cohort itself has. Over every
                       # study: a missing report is the blind report it stands for (the template), and every
                       # reference counts, so leaving studies out cannot turn the cap off
                       "template_share": round((largest_template_group(hyps) + len(case_ids) - len(valid))
                                               / len(case_ids), 4),
                       "reference_template_share": round(largest_template_group(self._all_references(case_ids))
                                                         / len(case_ids), 4)}
        if self.kind != "nlg3" and self.clinical is not None:
            components["labeler_" + self.clinical.labeler.name] = 1.0
        value = round(value, 4)
        strict = value if len(valid) == len(case_ids) else 0.0
        one_template = templated(components)
        rows = []
        for score, values in zip(valid, per_case, strict=True):
            # S5's positive evidence: a case scored above 0 that is not part of a template copied to most studies
            positive = not one_template and any(v > 0 for v in values.values())
            rows.append({"case_id": score.case_id, **{k: round(v, 4) for k, v in values.items()}, **score.values,
                         "positive": positive})
        return MetricBlock(name, strict, round(value * coverage, 4), components=components, per_case=rows,
                           counts=list(COUNTS))
