"""Held-out report metric values against the original scorer (round 21).

The original (`eval_report_gen/mlrg_metrics.py` -> MLRG `tools/metrics/metrics.py::compute_nlg_scores`) feeds
pycocoevalcap `re.sub(' +', ' ', text.replace('.', ' .'))` and strips nothing; ROUGE-L there splits on " ", so a
findings text opening with "." ("." then " ." after the replace) has an empty first token. Ours stripped the
leading space: ROUGE-L of ". heart normal" against ". lungs clear" read 0.333 where the original reads 0.5
(worst over 700 generated corpora: 0.166 before, 0 after; BLEU-1..4 and METEOR were already equal, 0).

The original's section header (`SECTION_HEADER_PATTERN`) allows any whitespace between the name and the colon
(`\\s*:`) and before the name on its line; ours allowed spaces only, so "FINDINGS\\t:" or "FINDINGS" followed by
more than 33 spaces was no header here and the whole report (impression included) was scored.

The MLRG-7 value there (`compute_mlrg_scores` then `aggregate.compute_clinical_score`) rounds each of the seven
slots to 4 decimals and sums them weighted 0.142857 (the task config's weights), rounded to 4; ours averaged the
unrounded slots, 1e-4 off in ~8% of corpora (100,000 simulated slot sets).
"""

from __future__ import annotations

import contextlib
import io
import re

import pytest
from automedbench_report_gen import metric, nlg
from automedbench_report_gen.clinical import ClinicalScorer
from automedbench_report_gen.text import scored_text
from test_report_gen_conformance_round15 import original_findings


def original_nlg(references: list[str], hypotheses: list[str]) -> tuple[list[float], float]:
    """MLRG's preprocessing restated, then the COCO scorers the original calls (BLEU-1..4, ROUGE-L)."""
    from pycocoevalcap.bleu.bleu import Bleu
    from pycocoevalcap.rouge.rouge import Rouge

    def prep(texts: list[str]) -> dict[int, list[str]]:
        return {i: [re.sub(" +", " ", t.replace(".", " ."))] for i, t in enumerate(texts)}

    with contextlib.redirect_stdout(io.StringIO()):
        bleu, _ = Bleu(4).compute_score(prep(references), prep(hypotheses), verbose=0)
    rouge, _ = Rouge().compute_score(prep(references), prep(hypotheses))
    return [float(b) for b in bleu], float(rouge)


@pytest.mark.parametrize(("references", "hypotheses"), [
    ([". heart normal"], [". lungs clear"]),  # before: 0.333, the original 0.5
    ([".heart normal."], ["heart normal."]),  # before: 0.667, the original 0.557
    ([". No effusion.", "Heart normal."], ["..No effusion.", ". Heart normal. "]),
    (["Heart size normal.\nLungs clear."], ["Heart  size normal .\tLungs clear."]),  # unchanged, pinned
])
def test_text_metrics_equal_the_originals(references, hypotheses):
    bleu_n, rouge = original_nlg(references, hypotheses)
    found = nlg.score_texts(references, hypotheses, with_meteor=False)
    assert found.rouge_l == pytest.approx(rouge, abs=1e-12)
    assert found.bleu_n == pytest.approx(bleu_n, abs=1e-12)


@pytest.mark.parametrize("report", [
    "FINDINGS\t: Heart size normal.\nIMPRESSION: No acute process.",
    "FINDINGS" + " " * 40 + ": Heart size normal.\nIMPRESSION: No acute process.",
    "INDICATION: cough.\n\x0cFINDINGS :\nHeart size normal.\nIMPRESSION\t:\tNo acute process.",
])
def test_whitespace_before_the_colon_still_makes_a_header(report):
    """Before: no header found, so the whole report (indication and impression too) was scored."""
    assert original_findings(report) == "Heart size normal."
    assert scored_text(report) == original_findings(report)


def original_clinical_score(components: dict[str, float]) -> float:
    """The original's MLRG-7: BLEU = round(mean of BLEU-1..4, 4), every other slot round(v, 4), then
    round(sum(0.142857 * slot), 4)."""
    bleu = round(sum(components[f"bleu_{n}"] for n in range(1, 5)) / 4, 4)
    others = [components[k] for k in ("meteor", "rouge_l", "entity_f1_rule", "label_micro_p_rule",
                                      "label_micro_r_rule", "label_micro_f1_rule")]
    return round(sum(0.142857 * v for v in [bleu, *(round(o, 4) for o in others)]), 4)


def test_mlrg7_is_summed_from_rounded_weighted_slots_as_the_original(monkeypatch):
    """Text metrics fixed (no JVM) at values whose 5th decimals round the two ways apart; clinical slots real."""
    fixed = nlg.NLGScores([0.412346, 0.300004, 0.200004, 0.100004], 0.250594, 0.333334,
                          [0.25, 0.25], [0.25, 0.25], [0.33, 0.33])
    monkeypatch.setattr(nlg, "score_texts", lambda refs, hyps, with_meteor=True: fixed)
    refs = ["Mild cardiomegaly. No pleural effusion.", "Small left pleural effusion. No pneumothorax."]
    hyps = ["Heart size is normal. No pleural effusion.", "Small left pleural effusion and mild edema."]
    value, components, _, _ = metric.score_corpus(refs, hyps, "mlrg", ClinicalScorer())
    slots = [fixed.bleu, fixed.meteor, fixed.rouge_l, *(components[k] for k in (
        "entity_f1_rule", "label_micro_p_rule", "label_micro_r_rule", "label_micro_f1_rule"))]
    assert round(sum(slots) / 7, 4) != original_clinical_score(components)  # the case tells the two apart
    assert value == original_clinical_score(components)
