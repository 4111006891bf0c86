"""Clinical labelers behind one interface: the 14 CheXpert observations per report, binarised as the
original's "rrg" mode does ({positive, uncertain} -> 1, {negative, blank} -> 0).

`RuleLabeler` is the offline default: our own phrase lists per observation, clause splitting and
NegEx-style negation and uncertainty cues (no parser, no weights). It also yields the entity sets the
offline stand-in for RadGraph F1 compares. `chexbert.CheXbertLabeler` is the real model when the
user has its weights on disk."""

from __future__ import annotations

import re
from typing import Literal, Protocol

from attrs import define, field

OBSERVATIONS: tuple[str, ...] = (
    "Enlarged Cardiomediastinum", "Cardiomegaly", "Lung Opacity", "Lung Lesion", "Edema", "Consolidation",
    "Pneumonia", "Atelectasis", "Pneumothorax", "Pleural Effusion", "Pleural Other", "Fracture",
    "Support Devices", "No Finding",
)
Status = Literal["positive", "uncertain", "negative"]


class ClinicalLabeler(Protocol):
    """Anything that turns reports into 14 binary CheXpert labels (order: OBSERVATIONS)."""

    name: str

    def label(self, texts: list[str]) -> list[list[int]]:
        ...


# ------------------------------------------------------------------ vocabulary (our own lists)

MENTIONS: dict[str, str] = {
    "Enlarged Cardiomediastinum": r"widen\w* (of the )?(superior )?mediastin\w*|mediastin\w* widening"
                                  r"|enlarged cardiomediastinal|cardiomediastinal (silhouette|contours?) "
                                  r"(is |are )?(mildly |markedly )?enlarged|mediastinum is widened",
    "Cardiomegaly": r"cardiomegaly|(heart|cardiac silhouette|cardiac shadow)( size)? (is |appears )?"
                    r"(mildly |moderately |markedly |severely )?(enlarged|increased)|enlarged (heart|cardiac)"
                    r"|enlargement of the (heart|cardiac)|cardiac enlargement",
    "Lung Opacity": r"(?<!nodular )opacit(y|ies)|opacification|infiltrat\w*|airspace (disease|process)"
                    r"|(?<!nodular )densit(y|ies) in the",
    "Lung Lesion": r"nodul\w*|\bmass(es)?\b|metasta\w*|neoplas\w*|tumou?r|cannonball|lesions?\b",
    "Edema": r"o?edema|(vascular|venous) congestion|heart failure|\bchf\b",
    "Consolidation": r"consolidat\w*",
    "Pneumonia": r"pneumonia|infectious process|\binfection\b",
    "Atelectasis": r"atelecta\w*|\bcollapse\b",
    "Pneumothorax": r"pneumothora\w*",
    "Pleural Effusion": r"(?<!pericardial )effusions?|pleural fluid|blunting of the (\w+ )?costophrenic"
                        r"|costophrenic (angle )?blunting|fluid (layering )?in the (\w+ )?pleural",
    "Pleural Other": r"pleural (thickening|plaques?|scarring)|fibrothorax",
    "Fracture": r"fractur\w*",
    "Support Devices": r"(endotracheal|tracheostomy|nasogastric|orogastric|feeding|chest|\bet|\bng) tubes?"
                       r"|catheter|central (venous )?line|picc|pacemaker|pacer|defibrillator|sternotomy wires"
                       r"|\bstents?\b|support devices?",
}
# Explicit normal statements: a negative mention without a negation word (used for entities only).
NORMALS: dict[str, str] = {
    "Cardiomegaly": r"(heart|cardiac)( size| silhouette)? (is |are )?(normal|within normal limits|unremarkable)"
                    r"|normal (heart|cardiac) (size|silhouette)|heart is normal in size",
    "Enlarged Cardiomediastinum": r"(cardio)?mediastinal (silhouette|contours?) (is |are )?(normal|within "
                                  r"normal limits|unremarkable)",
    "Lung Opacity": r"lungs are clear|clear lungs|lungs (are )?(otherwise )?well expanded and clear",
    "Pleural Effusion": r"costophrenic (angles|sulci) (are )?(sharp|clear)",
}
PRE_NEGATION = re.compile(r"\b(no|not|without|negative for|free of|clear of|absence of|nor|rather than"
                          r"|resolution of|resolved|removal of)\b")
POST_NEGATION = re.compile(r"^[^.]{0,40}?\b(is|are|was|were|has|have)? ?(not (seen|identified|present|evident|"
                           r"appreciated|enlarged|visualized)|absent|resolved|removed)\b")
STRONG_UNCERTAIN = re.compile(r"\b(may|might|possibl[ey]|probabl[ey]|likely|cannot (be )?(excluded?|ruled out)"
                              r"|not excluded|concern(ing)? for|versus|vs|could (represent|reflect|be)"
                              r"|borderline|equivocal|questionable|question of|differential)\b")
WEAK_UNCERTAIN = re.compile(r"\b(suspicious|suggest\w*|suspect\w*|compatible with|consistent with infection)\b")
CLAUSE = re.compile(r"[.;:!?\n]|\bbut\b|\bhowever\b|\balthough\b|\bexcept\b")
ANATOMY: dict[str, str] = {
    r"\bright\b": "right", r"\bleft\b": "left", r"\bbilateral(ly)?\b|\bboth\b": "bilateral",
    r"\bupper\b": "upper", r"\bmid(dle)?\b": "middle", r"\blower\b": "lower",
    r"\bbas(e|es|al|ilar)\b": "base", r"\bap(ex|ices|ical)\b": "apex", r"\blobes?\b": "lobe",
    r"\bcostophrenic\b": "costophrenic", r"\bhemithorax\b": "hemithorax", r"\bhil(um|ar|a)\b": "hilum",
    r"\blateral\b": "lateral", r"\bperihilar\b": "perihilar", r"\bzones?\b": "zone",
}
SIZES: dict[str, str] = {r"\b(small|trace|tiny|minimal)\b": "small", r"\b(moderate|moderate-sized)\b": "moderate",
                         r"\b(large|massive|extensive)\b": "large", r"\bmild(ly)?\b": "mild"}
_MENTION = {label: re.compile(pattern) for label, pattern in MENTIONS.items()}
_NORMAL = {label: re.compile(pattern) for label, pattern in NORMALS.items()}
_ANATOMY = [(re.compile(p), name) for p, name in ANATOMY.items()]
_SIZES = [(re.compile(p), name) for p, name in SIZES.items()]
_RANK: dict[str, int] = {"positive": 3, "uncertain": 2, "negative": 1}
MAX_TEXT = 20000


@define
class ReportLabels:
    """Per observation its status (absent key = not mentioned), plus entities for the entity-F1 stand-in."""

    status: dict[str, Status] = field(factory=dict)
    entities: set[tuple[str, str]] = field(factory=set)

    def binary(self) -> list[int]:
        return [1 if self.status.get(name) in ("positive", "uncertain") else 0 for name in OBSERVATIONS]


def clauses(text: str) -> list[str]:
    return [c.strip() for c in CLAUSE.split(text.lower()) if c and c.strip()]


def mention_status(clause: str, start: int, end: int) -> Status:
    """Negation and uncertainty for one mention: strong uncertainty beats negation beats weak uncertainty."""
    before, after = clause[:start], clause[end:]
    if STRONG_UNCERTAIN.search(before) or STRONG_UNCERTAIN.search(after[:30]):
        return "uncertain"
    if PRE_NEGATION.search(before) or POST_NEGATION.search(after):
        return "negative"
    if WEAK_UNCERTAIN.search(before):
        return "uncertain"
    return "positive"


def label_text(text: str) -> ReportLabels:
    """Label one report (FINDINGS text or a whole report)."""
    out = ReportLabels()
    for clause in clauses(text[:MAX_TEXT]):
        attributes = {name for pattern, name in _ANATOMY if pattern.search(clause)}
        attributes |= {f"size:{name}" for pattern, name in _SIZES if pattern.search(clause)}
        for label, pattern in _MENTION.items():
            for match in pattern.finditer(clause):
                status = mention_status(clause, match.start(), match.end())
                _note(out, label, status, attributes)
        for label, pattern in _NORMAL.items():
            if pattern.search(clause):
                _note(out, label, "negative", set())
    sick = [n for n in OBSERVATIONS[:-1] if n != "Support Devices" and out.status.get(n) in ("positive", "uncertain")]
    if not sick:
        out.status["No Finding"] = "positive"
    return out


def _note(out: ReportLabels, label: str, status: Status, attributes: set[str]) -> None:
    if _RANK[status] > _RANK.get(out.status.get(label, ""), 0):
        out.status[label] = status
    out.entities.add((label, status))
    if status != "negative":
        out.entities |= {(label, a) for a in attributes}


class RuleLabeler:
    """The offline default labeler (deterministic, about a millisecond per report)."""

    name = "rules"

    def label(self, texts: list[str]) -> list[list[int]]:
        return [label_text(t).binary() for t in texts]

    def entities(self, texts: list[str]) -> list[set[tuple[str, str]]]:
        return [label_text(t).entities for t in texts]


def set_f1(reference: set, hypothesis: set) -> float:
    """F1 of two entity sets; 0 when either is empty (as RadGraph's reward does)."""
    if not reference or not hypothesis:
        return 0.0
    common = len(reference & hypothesis)
    if not common:
        return 0.0
    precision, recall = common / len(hypothesis), common / len(reference)
    return 2 * precision * recall / (precision + recall)


def micro_prf(truth: list[list[int]], pred: list[list[int]]) -> tuple[float, float, float]:
    """Micro-averaged precision, recall and F1 over reports x labels (sklearn's "micro avg" row, 0 if undefined)."""
    tp = sum(t and p for tr, pr in zip(truth, pred, strict=True) for t, p in zip(tr, pr, strict=True))
    n_pred = sum(map(sum, pred))
    n_true = sum(map(sum, truth))
    precision = tp / n_pred if n_pred else 0.0
    recall = tp / n_true if n_true else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1
