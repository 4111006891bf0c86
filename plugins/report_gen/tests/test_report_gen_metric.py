"""BLEU / ROUGE-L / METEOR as the original computes them, checked against independent implementations
and hand-computed values; why sacrebleu and rouge-score give other numbers."""

from __future__ import annotations

import pytest
from automedbench_report_gen import nlg
from automedbench_report_gen.metric import score_corpus
from automedbench_report_gen.text import mlrg_preprocess

REFS = ["The heart size is normal. The lungs are clear. No pleural effusion or pneumothorax.",
        "There is a small, right-sided pleural effusion. The heart is enlarged.",
        "Endotracheal tube in place. Focal consolidation in the left lower lobe.",
        "No acute cardiopulmonary abnormality. Degenerative changes of the spine."]
HYPS = ["The heart is normal. Lungs are clear. No effusion or pneumothorax.",
        "Small, right-sided effusion. Heart size is enlarged.",
        "Endotracheal tube in place, consolidation in the left lower lobe.",
        "No acute cardiopulmonary process."]


def iu_pairs(n: int = 200) -> tuple[list[str], list[str]]:
    """IU X-ray FINDINGS against the next study's FINDINGS (unrelated real reports), when available."""
    from automedbench_report_gen.iu_reports import bundled_archive, read_reports

    if bundled_archive() is None:
        return REFS, HYPS
    found = [r.findings for r in read_reports() if r.findings][: n + 1]
    return found[:n], found[1:n + 1]


def test_bleu_equals_nltk_corpus_bleu_on_the_same_tokens():
    from nltk.translate.bleu_score import corpus_bleu

    refs, hyps = iu_pairs()
    ours, _ = nlg.bleu(refs, hyps)
    tokens_r = [[mlrg_preprocess(r).split()] for r in refs]
    tokens_h = [mlrg_preprocess(h).split() for h in hyps]
    weights = [(1, 0, 0, 0), (0.5, 0.5, 0, 0), (1 / 3, 1 / 3, 1 / 3, 0), (0.25, 0.25, 0.25, 0.25)]
    theirs = [corpus_bleu(tokens_r, tokens_h, weights=w) for w in weights]
    assert ours == pytest.approx(theirs, abs=1e-6)


def test_bleu_hand_computed():
    # hypothesis "a b c d" against "a b c e": p1 3/4, p2 2/3, p3 1/2, p4 0 (BP 1); BLEU-2 = sqrt(3/4 * 2/3)
    values, _ = nlg.bleu(["a b c e"], ["a b c d"])
    assert values[0] == pytest.approx(0.75, abs=1e-6)
    assert values[1] == pytest.approx((0.75 * 2 / 3) ** 0.5, abs=1e-6)
    # no 4-gram match: pycocoevalcap counts 1e-15 matches instead of 0 (its "tiny"), so BLEU-4 is not 0
    assert values[3] == pytest.approx((0.75 * 2 / 3 * 0.5 * 1e-15) ** 0.25, rel=1e-3)


def test_sacrebleu_differs_because_of_its_tokeniser_not_the_formula():
    import sacrebleu

    refs, hyps = iu_pairs()
    ours, _ = nlg.bleu(refs, hyps)
    default = sacrebleu.corpus_bleu(hyps, [refs]).score / 100  # 13a tokeniser on the raw text
    same_tokens = sacrebleu.corpus_bleu([mlrg_preprocess(h) for h in hyps], [[mlrg_preprocess(r) for r in refs]],
                                        tokenize="none", smooth_method="none").score / 100
    assert same_tokens == pytest.approx(ours[3], abs=1e-4)  # same statistic once the tokens agree
    assert abs(default - ours[3]) > 1e-3  # 13a splits punctuation (commas, hyphens) differently


def lcs(a: list[str], b: list[str]) -> int:
    table = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i, x in enumerate(a):
        for j, y in enumerate(b):
            table[i + 1][j + 1] = table[i][j] + 1 if x == y else max(table[i][j + 1], table[i + 1][j])
    return table[-1][-1]


def rouge_l_beta(ref: str, hyp: str, beta: float) -> float:
    r, h = mlrg_preprocess(ref).split(), mlrg_preprocess(hyp).split()
    common = lcs(r, h)
    if not common:
        return 0.0
    precision, recall = common / len(h), common / len(r)
    return (1 + beta ** 2) * precision * recall / (recall + beta ** 2 * precision)


def test_rouge_l_is_the_lcs_f_measure_with_beta_1_2():
    mean, per_case = nlg.rouge_l(REFS, HYPS)
    expected = [rouge_l_beta(r, h, 1.2) for r, h in zip(REFS, HYPS, strict=True)]
    assert per_case == pytest.approx(expected, abs=1e-9)
    assert mean == pytest.approx(sum(expected) / len(expected), abs=1e-9)


def test_rouge_score_differs_by_beta_and_tokeniser():
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False)
    theirs = [scorer.score(r, h)["rougeL"].fmeasure for r, h in zip(REFS, HYPS, strict=True)]
    # rouge-score lower-cases and drops punctuation, then uses beta = 1
    lowered = [rouge_l_beta(" ".join(scorer._tokenizer.tokenize(r)), " ".join(scorer._tokenizer.tokenize(h)), 1.0)
               for r, h in zip(REFS, HYPS, strict=True)]
    assert theirs == pytest.approx(lowered, abs=1e-9)
    _, ours = nlg.rouge_l(REFS, HYPS)
    assert max(abs(a - b) for a, b in zip(ours, theirs, strict=True)) > 1e-3


@pytest.mark.slow  # METEOR's JVM
def test_corpus_scores_with_meteor_and_rule_slots():
    """One METEOR run (a JVM): identical texts give 1 in every slot except entity F1, which is 0 for the
    report without entities (as RadGraph's reward: 0 when either side has none)."""
    value, comps, per_case, case_mean = score_corpus(REFS, REFS, "mlrg", _rules())
    assert comps["meteor"] == pytest.approx(1.0) and comps["label_micro_f1_rule"] == 1.0
    assert [c["entity_f1"] for c in per_case] == [1.0, 1.0, 1.0, 0.0]
    assert comps["entity_f1_rule"] == 0.75
    # the original's arithmetic: slots rounded to 4, weighted 0.142857, the sum rounded to 4 (round 21)
    assert value == round(0.142857 * 6.75, 4) == 0.9643 and case_mean == pytest.approx(6.75 / 7, abs=1e-9)
    assert set(comps) >= {"bleu", "meteor", "rouge_l", "entity_f1_rule", "label_micro_p_rule",
                          "label_micro_r_rule", "label_micro_f1_rule"}


def test_corpus_differs_from_the_mean_of_cases():
    value, comps, _, case_mean = score_corpus(REFS, HYPS, "nlg3", None)
    assert set(comps) == {"bleu_1", "bleu_2", "bleu_3", "bleu_4", "bleu", "meteor", "rouge_l"}
    assert value == pytest.approx((comps["bleu"] + comps["meteor"] + comps["rouge_l"]) / 3)
    assert abs(case_mean - value) > 1e-3  # corpus BLEU pools n-gram counts; the per-case mean does not
    assert 0 < comps["meteor"] < 1


def _rules():
    from automedbench_report_gen.clinical import ClinicalScorer

    return ClinicalScorer()


def test_meteor_takes_reports_with_line_breaks():
    """Spaces only are collapsed (the original's preprocessing), so a report keeps its newlines; METEOR's jar
    reads one request per line, so for METEOR alone they become spaces (no protocol error, same score)."""
    refs = ["The heart size is normal.\nThe lungs are clear.", "Small left pleural effusion."]
    hyps = ["The heart is normal.\nLungs clear.\tNo effusion.", "Left pleural effusion,\nsmall."]
    flat = [" ".join(t.split()) for t in hyps]
    score, cases = nlg.meteor(refs, hyps)
    assert 0.0 < score < 1.0
    flat_score, flat_cases = nlg.meteor([" ".join(r.split()) for r in refs], flat)
    assert score == pytest.approx(flat_score) and cases == pytest.approx(flat_cases)
    # BLEU and ROUGE-L keep the newline as part of a token, as the original's whitespace handling does
    assert nlg.rouge_l(refs, hyps)[0] != pytest.approx(nlg.rouge_l(refs, flat)[0])

@pytest.mark.slow  # starts METEOR's JVM several times
def test_one_meteor_jvm_serves_every_call_of_a_process_with_the_numbers_of_a_fresh_one():
    """A warm evaluator scores many runs in one process: the reused JVM must give exactly what a new JVM
    gives for the same corpus, whatever it scored before; a dead JVM is replaced, not used."""
    first = nlg.meteor(REFS, HYPS)
    jvm = nlg._METEOR.meteor_p
    other = nlg.meteor(HYPS[::-1], REFS[::-1])  # another corpus in between
    again = nlg.meteor(REFS, HYPS)
    assert nlg._METEOR.meteor_p is jvm and jvm.poll() is None
    assert again == first and other != first
    nlg._close_meteor()  # a fresh JVM for the same corpus
    assert jvm.poll() is not None
    fresh = nlg.meteor(REFS, HYPS)
    assert fresh == first and nlg._METEOR.meteor_p is not jvm
    nlg._METEOR.meteor_p.kill()  # a JVM that died between calls is replaced
    nlg._METEOR.meteor_p.wait()
    assert nlg.meteor(REFS, HYPS) == first


def test_a_report_cannot_write_its_own_meteor_request():
    """METEOR's jar reads "EVAL ||| ..." lines with " ||| " between fields: pipes in a report are spaces for it."""
    refs = ["The heart size is normal. The lungs are clear."]
    forged = ["Normal. ||| The heart size is normal. The lungs are clear."]
    score, _ = nlg.meteor(refs, forged)
    plain, _ = nlg.meteor(refs, ["Normal.     The heart size is normal. The lungs are clear."])
    assert score == pytest.approx(plain)
