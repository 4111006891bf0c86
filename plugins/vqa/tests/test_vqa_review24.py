"""Review round 24 of the secret option order (option_order.py), through the real MedXpertQA stager.

- A question whose text lists its options with letters in a form other than "Answer Choices: (A) ..." or lines
  starting "A." ("Options: A. x B. y" on one line, "A) x B) y", "(a) x", "A - x" lines): the options were dealt
  and the text kept the dataset's letters, so the question said "B) tumor" while option B was another; a model
  reading the text answered by a letter that is now another option's. Such questions keep the dataset's order.
"""

from __future__ import annotations

import json

import attrs
import pytest
from automedbench.testing import load_task, stage_from_folder
from test_vqa_review22 import medxpertqa_folder

TASK = "vqa/medxpertqa-mm"
WORDS = ["erythema", "livedo", "purpura", "vasculitis", "psoriasis", "eczema", "urticaria", "lichen", "tinea"]
# how a list in the question writes one option (its letter, its text), and what separates the entries
FORMS = (("{k}) {v}", " "), ("{k}. {v}", " "), ("{k}: {v}", ", "), ("({l}) {v}", "\n"), ("{k} - {v}", "\n"),
         ("{l}) {v}", "; "))
PLAIN = len(FORMS)  # every seventh question lists no options: it is dealt
N = 14 * (len(FORMS) + 1)


def _question(i: int) -> tuple[dict[str, str], str, str]:
    """(options, gold letter, question text) of question `i`."""
    options = {k: f"{WORDS[(i + j) % len(WORDS)]} {i}" for j, k in enumerate("ABCD")}
    kind = i % (len(FORMS) + 1)
    text = f"Case {i}: which finding is shown?"
    if kind != PLAIN:
        form, sep = FORMS[kind]
        text += " Options: " + sep.join(form.format(k=k, l=k.lower(), v=v) for k, v in options.items())
    return options, "ABCD"[i % 4], text


@pytest.fixture(scope="module")
def staged(tmp_path_factory):
    root = tmp_path_factory.mktemp("review24")
    track, spec = load_task(TASK)
    spec = attrs.evolve(spec, case_count=N)  # a small download: fewer than the release's count is refused as short
    download = medxpertqa_folder(root / "src", [_question(i) for i in range(N)])
    return stage_from_folder(track, spec, root / "data", download)


def test_a_question_listing_its_options_in_another_form_keeps_its_letters(staged):
    """Before: 78 of the 84 questions listing their options were dealt, their text naming other options' letters."""
    moved, disagree = 0, []
    for qid in staged.case_ids:
        question = json.loads((staged.public / qid / "question.json").read_text())
        gold = json.loads((staged.private / qid / "answer.json").read_text())
        source = int(gold["source_id"].split("-")[1])
        options, label, text = _question(source)
        assert question["question"] == text and gold["answer_text"] == options[label]
        assert question["options"][gold["answer_label"]] == options[label]  # the gold letter follows its option
        if source % (len(FORMS) + 1) == PLAIN:
            moved += question["options"] != options
        elif question["options"] != options:
            disagree.append(source)
    assert not disagree, f"{len(disagree)} questions whose text lists the options were dealt: {disagree[:5]}"
    assert moved >= 10  # 14 questions listing nothing, each kept by chance with p = 1/24
