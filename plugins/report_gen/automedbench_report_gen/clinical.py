"""The four clinical slots of MLRG-7 (RadGraph F1, CheXbert micro P/R/F1) and their offline stand-ins.

`rules` (default, offline): the rule labeler's 14 CheXpert labels give micro P/R/F1 in the CheXbert
slots; its entity sets (observation + status + anatomy/size attributes) give a per-report set F1 in the
RadGraph slot. `models`: the real CheXbert from local weights and, if asked, RadGraph through its own
package. Component names say which was used, so an offline number is never read as the published one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from attrs import define, field

from .labeler import ClinicalLabeler, RuleLabeler, micro_prf, set_f1


@define
class ClinicalScores:
    components: dict[str, float]  # the four slot values, named for what computed them
    per_case: list[dict[str, float]] = field(factory=list)
    exact: bool = False  # True only when both CheXbert and RadGraph are the real models


class ClinicalScorer:
    """Labels references and predictions with one labeler and one entity scorer."""

    def __init__(self, labeler: ClinicalLabeler | None = None, radgraph: Any = None) -> None:
        self.labeler = labeler or RuleLabeler()
        self.radgraph = radgraph
        self.rules = RuleLabeler()

    @property
    def label_prefix(self) -> str:
        return "label_micro" if self.labeler.name == "rules" else "chexbert_micro"

    @property
    def exact(self) -> bool:
        return self.labeler.name == "chexbert" and self.radgraph is not None

    def score(self, references: list[str], hypotheses: list[str]) -> ClinicalScores:
        truth, pred = self.labeler.label(references), self.labeler.label(hypotheses)
        precision, recall, f1 = micro_prf(truth, pred)
        if self.radgraph is not None:
            entity_name = "radgraph_f1"
            entity_mean, entity_cases = self.radgraph.score(references, hypotheses)
        else:
            entity_name = "entity_f1_rule"
            refs, hyps = self.rules.entities(references), self.rules.entities(hypotheses)
            entity_cases = [set_f1(r, h) for r, h in zip(refs, hyps, strict=True)]
            entity_mean = sum(entity_cases) / len(entity_cases) if entity_cases else 0.0
        suffix = "" if self.labeler.name != "rules" else "_rule"
        components = {entity_name: entity_mean, f"{self.label_prefix}_p{suffix}": precision,
                      f"{self.label_prefix}_r{suffix}": recall, f"{self.label_prefix}_f1{suffix}": f1}
        per_case = []
        for i, (t, p) in enumerate(zip(truth, pred, strict=True)):
            cp, cr, cf = micro_prf([t], [p])
            per_case.append({"entity_f1": entity_cases[i], "label_p": cp, "label_r": cr, "label_f1": cf})
        return ClinicalScores(components, per_case, self.exact)


def make_scorer(options: dict[str, str]) -> ClinicalScorer:
    """The scorer the evaluation options ask for (`clinical_backend=rules|models`)."""
    from automedbench.api import UserError

    backend = options.get("clinical_backend", "rules") or "rules"
    if backend == "rules":
        return ClinicalScorer()
    if backend != "models":
        raise UserError(f"clinical_backend must be 'rules' or 'models', not {backend!r}")
    weights = options.get("chexbert_weights", "")
    bert = options.get("bert_dir", "")
    if not weights or not bert:
        raise UserError("clinical_backend=models needs chexbert_weights=PATH (chexbert.pth) and bert_dir=PATH "
                        "(a local bert-base-uncased folder)")
    for path in (weights, bert):
        if not Path(path).exists():
            raise UserError(f"{path} does not exist")
    from .chexbert import CheXbertLabeler

    radgraph = None
    if options.get("radgraph", "").lower() in ("1", "yes", "true", "partial"):
        from .radgraph_adapter import RadGraphScorer

        radgraph = RadGraphScorer()
    return ClinicalScorer(CheXbertLabeler(Path(weights), Path(bert)), radgraph)
