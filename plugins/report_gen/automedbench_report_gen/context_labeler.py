"""An optional labeler on medspacy's ConText (negation, uncertainty, hypothetical) behind the same
`ClinicalLabeler` interface, with our own radiology target phrases (`labeler.MENTIONS`) as its rules.

medspacy is not a dependency: it pins spaCy < 3.8, whose thinc needs numpy < 2, so it cannot share an
environment with the harness's numpy 2. It runs fully offline (no model download: a rule sentencizer,
the target matcher and ConText). Measured against the rule labeler in README ("The offline labeler")."""

from __future__ import annotations

from typing import Any

from .labeler import _RANK, MAX_TEXT, MENTIONS, OBSERVATIONS, Status


class ContextLabeler:
    """14 CheXpert labels from medspacy ConText modifiers on our target phrases; the same per-label
    precedence (positive > uncertain > negative) and No Finding rule as `RuleLabeler`."""

    name = "medspacy-context"

    def __init__(self) -> None:
        try:
            import medspacy
            from medspacy.ner import TargetRule
        except ImportError as exc:
            raise ImportError("the ConText labeler needs medspacy (pip install medspacy, in an environment "
                              "with numpy < 2)") from exc
        try:  # PyRuSH logs every sentence boundary at DEBUG through loguru
            from loguru import logger

            logger.disable("PyRuSH")
        except ImportError:
            pass
        self.nlp: Any = medspacy.load(enable=["medspacy_pyrush", "medspacy_target_matcher", "medspacy_context"])
        rules = [TargetRule(label, label, pattern=f"(?i){pattern}") for label, pattern in MENTIONS.items()]
        self.nlp.get_pipe("medspacy_target_matcher").add(rules)

    def status(self, text: str) -> dict[str, Status]:
        out: dict[str, Status] = {}
        for ent in self.nlp(text[:MAX_TEXT]).ents:
            if ent._.is_negated:
                found: Status = "negative"
            elif ent._.is_uncertain or ent._.is_hypothetical:
                found = "uncertain"
            else:
                found = "positive"
            if _RANK[found] > _RANK.get(out.get(ent.label_, ""), 0):
                out[ent.label_] = found
        sick = [n for n in OBSERVATIONS[:-1] if n != "Support Devices" and out.get(n) in ("positive", "uncertain")]
        if not sick:
            out["No Finding"] = "positive"
        return out

    def label(self, texts: list[str]) -> list[list[int]]:
        rows = []
        for text in texts:
            status = self.status(text)
            rows.append([1 if status.get(name) in ("positive", "uncertain") else 0 for name in OBSERVATIONS])
        return rows
