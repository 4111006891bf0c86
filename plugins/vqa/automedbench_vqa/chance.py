"""Agreement beyond chance: whether the answers know more than the question's wording does.

A blind agent (no image opened) that answers from the question alone — "yes" to every "Is there ...?",
"1" to every "How many ...?", the commonest option text to every "What shape ...?" — varies its answers
between templates, so the per-kind repeat share misses it, yet on templated or yes-heavy sets its
accuracy passes the okay band. Cohen's kappa catches it whatever the mix: within each group of
questions that look alike to a blind agent, chance agreement is what the answer distribution and the
gold distribution give when independent; a blind agent's observed agreement is that and no more
(κ ≈ 0), a model that reads the image agrees more.

Groups: MCQ or text, then the question's wording when at least TEMPLATE_MIN answered questions share it, else its
form (polar "Is/Does ...?" or open). Agreement is a correct answer (score 1: letter, yes/no, exact or judge-
equivalent; keyed as the gold answer it was credited for); chance uses the answer keys, and for MCQ the larger of
the letter and option-text chances (a letter prior and an option-text prior are both blind). A group whose gold is
one answer throughout carries no evidence (the wording alone answers it) and is left out; so is kappa when fewer
than QUESTIONS_MIN questions remain. Every expected question counts, answered or not. A blank one (no valid
answer, key UNANSWERED, or a wrong answer that is no gold answer of its group: made up) is a blind guess that
missed: it agrees with nothing (observed 0, as its score is) while the chance side counts it as its group's
commonest gold answer, the guess with the best odds. Each of the two moves kappa down or leaves it (kappa falls as
observed falls or chance rises, and the commonest gold answer raises chance by at least as much as any answer it
replaces), so leaving a question out, or writing nonsense there, never raises kappa over any answer to that
question. Earlier rules let it: five blanks dropped the count below QUESTIONS_MIN (C -> A), nonsense for the wrong
answers lowered chance (kappa 0.00 -> 0.23, C -> A), and a blank credited as its group's commonest given answer
let a third of the questions left out (the wrong ones) reach kappa 0.1 (A). The price: a reader that leaves many
questions out needs more right among the rest to show it reads the image.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

TEMPLATE_MIN = 3  # answered questions sharing one wording: a template with its own answer prior
KAPPA_MIN = 0.1  # kappa below this over at least QUESTIONS_MIN answered questions: held at C
QUESTIONS_MIN = 20
UNANSWERED = "\x00unanswered"  # the answer key of a question with no valid answer (metric.unanswered_row)


def _chance(pairs: list[tuple[str, str]]) -> float:
    """Expected matches when answers and gold are drawn independently from their own distributions."""
    answers, golds = Counter(a for a, _ in pairs), Counter(g for _, g in pairs)
    return sum(answers[k] * golds[k] for k in answers) / len(pairs)


def _credited(row: dict[str, Any]) -> bool:
    return float(row.get("score") or 0.0) >= 1.0


def _blank(row: dict[str, Any], field: str, golds: set[str]) -> bool:
    """An answer that stands for no answer: none given, or a wrong one that is no gold answer of its group (a
    made-up string never agrees by chance; counted as given it would lower the chance a blind answerer needs,
    so unique nonsense in place of its wrong answers lifted kappa from 0.00 to 0.23, C -> A)."""
    answer = row.get(field, UNANSWERED)
    return answer == UNANSWERED or (answer not in golds and not _credited(row))


def _filled(members: list[dict[str, Any]], field: str, gold_field: str) -> tuple[list[tuple[str, str]], list[bool]]:
    """(answer, gold) per question, a blank one (`_blank`) given its group's commonest gold answer (the blind
    guess with the best odds: the chance side can only rise), a credited one its gold answer (the scorer found
    them equal: a model judge credits paraphrases, and one-off wordings of a blind guess, each its own key,
    could never agree by chance: kappa 0.0 -> 0.35, C -> A), and which questions were blank."""
    golds = {r[gold_field] for r in members}
    blank = [_blank(r, field, golds) for r in members]
    stand_in = Counter(r[gold_field] for r in members).most_common(1)[0][0]
    pairs = [(stand_in if b else r[gold_field] if _credited(r) else r[field], r[gold_field])
             for r, b in zip(members, blank, strict=True)]
    return pairs, blank


def agreement_beyond_chance(rows: list[dict[str, Any]]) -> dict[str, float | None]:
    """`chance_kappa` (None below QUESTIONS_MIN informative questions), `chance_observed` and `chance_expected`
    shares, over every question with a gold key, a blank one (none given, or made up) as a blind guess that
    missed."""
    counted = [r for r in rows if "answer_key" in r and "gold_key" in r]
    if not counted:
        return {"chance_kappa": None, "chance_observed": None, "chance_expected": None}
    bucket = lambda r: "mcq" if r.get("kind") == "mcq" else "text"  # noqa: E731 - a one-line key
    wording = Counter((bucket(r), r.get("question_key", "")) for r in counted)
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for row in counted:
        key = (bucket(row), row.get("question_key", ""))
        groups[key if wording[key] >= TEMPLATE_MIN else (bucket(row), f"form:{row.get('form', '')}")].append(row)
    observed = expected = 0.0
    n = 0
    for (kind, _), members in groups.items():
        if len({r["gold_key"] for r in members}) < 2:  # one gold answer: right answers prove nothing either way
            continue
        n += len(members)
        pairs, blank = _filled(members, "answer_key", "gold_key")
        observed += sum(not b and _credited(r) for r, b in zip(members, blank, strict=True))
        chance = _chance(pairs)
        if kind == "mcq" and all("answer_text_key" in r and "gold_text_key" in r for r in members):
            chance = max(chance, _chance(_filled(members, "answer_text_key", "gold_text_key")[0]))
        expected += chance
    if n == 0:
        return {"chance_kappa": None, "chance_observed": None, "chance_expected": None}
    kappa = (observed - expected) / (n - expected) if n - expected > 1e-9 else None
    return {"chance_kappa": round(kappa, 4) if kappa is not None and n >= QUESTIONS_MIN else None,
            "chance_observed": round(observed / n, 4), "chance_expected": round(expected / n, 4)}


def blind_answers(components: dict[str, Any]) -> bool:
    """The answers agree with the gold no better than the question's wording explains: the rating cap's fact."""
    kappa = components.get("chance_kappa")
    return kappa is not None and kappa < KAPPA_MIN
