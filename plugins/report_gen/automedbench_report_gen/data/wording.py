"""Report sentences for the demo: the reference set (two variants per finding, picked per case) and a
second, reworded set with the same findings in other words (the "reworded" baseline). Both sets label
identically under the rule labeler (tested), so only wording separates them."""

from __future__ import annotations

from attrs import define


@define(frozen=True)
class Findings:
    """What a demo study shows. Sides are the patient's (right = image left)."""

    cardiomegaly: bool = False
    effusion: str = ""  # "", "right", "left", "bilateral"
    effusion_size: str = "small"  # small | moderate
    consolidation: str = ""  # "", "right", "left"
    pneumothorax: str = ""  # "", "right", "left"
    ett: bool = False
    views: int = 1


REFERENCE: dict[str, list[str]] = {
    "ett": ["An endotracheal tube is in place.", "Endotracheal tube in satisfactory position."],
    "heart_big": ["The heart is enlarged.", "The cardiac silhouette is enlarged."],
    "heart_ok": ["The heart size is normal.", "Normal heart size."],
    "nodules": ["Multiple rounded nodules are seen in both lungs, consistent with metastases.",
                "There are multiple bilateral pulmonary nodules, consistent with metastatic disease."],
    "consolidation": ["There is consolidation in the {side} mid lung zone.",
                      "Focal consolidation is present in the {side} mid zone."],
    "no_consolidation": ["No focal consolidation.", "There is no focal consolidation."],
    "effusion": ["There is a {size} {side} pleural effusion.", "A {size} {side} pleural effusion is present."],
    "effusions": ["There are {size} bilateral pleural effusions.", "{Size} bilateral pleural effusions are present."],
    "pneumothorax": ["There is a {side} pneumothorax.", "A {side} apical pneumothorax is seen."],
    "no_effusion_ptx": ["No pleural effusion or pneumothorax.", "There is no pleural effusion or pneumothorax."],
    "no_ptx": ["No pneumothorax.", "There is no pneumothorax."],
    "no_effusion": ["No pleural effusion.", "There is no pleural effusion."],
}
REWORDED: dict[str, list[str]] = {
    "ett": ["Endotracheal tube terminates above the carina."],
    "heart_big": ["Cardiomegaly is present."],
    "heart_ok": ["Cardiac size is within normal limits."],
    "nodules": ["Numerous round pulmonary masses are scattered through both lungs, in keeping with metastases."],
    "consolidation": ["Airspace consolidation is noted in the {side} mid zone."],
    "no_consolidation": ["No consolidation."],
    "effusion": ["{Size} {side}-sided pleural effusion."],
    "effusions": ["{Size} effusions are present on both sides."],
    "pneumothorax": ["{Side} pneumothorax is identified."],
    "no_effusion_ptx": ["No pneumothorax or effusion is seen."],
    "no_ptx": ["No pneumothorax is seen."],
    "no_effusion": ["No effusion is seen."],
}
NORMAL_REPORT = ("FINDINGS: The heart size and mediastinal contours are normal. The lungs are clear. "
                 "There is no pleural effusion or pneumothorax.\n\nIMPRESSION: No acute cardiopulmonary process.\n")


def _pick(bank: dict[str, list[str]], key: str, choice: int, **fill: str) -> str:
    options = bank[key]
    text = options[choice % len(options)]
    caps = {k.capitalize(): v.capitalize() for k, v in fill.items()}
    return text.format(**fill, **caps)


def sentence_keys(f: Findings) -> list[tuple[str, dict[str, str]]]:
    """The FINDINGS sentences as (bank key, fill) in a fixed order: devices, heart, lungs, pleura."""
    out: list[tuple[str, dict[str, str]]] = []
    if f.ett:
        out.append(("ett", {}))
    out.append(("heart_big" if f.cardiomegaly else "heart_ok", {}))
    out.append(("nodules", {}))
    if f.consolidation:
        out.append(("consolidation", {"side": f.consolidation}))
    else:
        out.append(("no_consolidation", {}))
    if f.effusion == "bilateral":
        out.append(("effusions", {"size": f.effusion_size}))
    elif f.effusion:
        out.append(("effusion", {"size": f.effusion_size, "side": f.effusion}))
    if f.pneumothorax:
        out.append(("pneumothorax", {"side": f.pneumothorax}))
    key = "no_effusion_ptx" if not f.effusion and not f.pneumothorax else "no_ptx" if f.effusion and not \
        f.pneumothorax else "no_effusion" if not f.effusion else ""
    if key:
        out.append((key, {}))
    return out


def findings_sentences(f: Findings, bank: dict[str, list[str]], choices: list[int]) -> list[str]:
    """The FINDINGS sentences of `sentence_keys`; `choices` picks each one's variant."""
    c = iter(choices + [0] * 12)
    return [_pick(bank, key, next(c), **fill) for key, fill in sentence_keys(f)]


def impression(f: Findings) -> str:
    parts = ["Multiple pulmonary nodules, consistent with metastases."]
    if f.effusion or f.pneumothorax or f.consolidation or f.cardiomegaly:
        parts.append("Acute or interval findings as described above.")
    return " ".join(parts)


def report(f: Findings, bank: dict[str, list[str]], choices: list[int]) -> str:
    return f"FINDINGS: {' '.join(findings_sentences(f, bank, choices))}\n\nIMPRESSION: {impression(f)}\n"
