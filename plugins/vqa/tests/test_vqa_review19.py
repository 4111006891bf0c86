"""Review round 19: a label-only MCQ answer's option-text key (the chance check's) whatever blank it is written as."""

from __future__ import annotations

import pytest
from automedbench_vqa import contract
from automedbench_vqa.metric import EvaluationState, score_question

QUESTION = {"question_id": "q1", "mode": "multiple_choice", "question": "Which organ?",
            "options": {"A": "Liver", "B": "Spleen", "C": "Kidney"}}
GOLD = {"answer_label": "B", "answer_text": "Spleen"}


@pytest.mark.parametrize("blank", ["", "   ", "\n\t"])
def test_a_blank_predicted_answer_is_read_as_its_options_text(blank):
    """The checker strips predicted_answer, so whitespace there is a label-only answer (valid); the metric read
    only "" as one and keyed "   " as no answer at all (a blank in the option-text chance) before review 19."""
    record = {"question_id": "q1", "predicted_label": "b", "predicted_answer": blank,
              "raw_model_output": "The answer is B.", "model_name": "m", "runtime_s": 1.0}
    assert contract.check_record(record, "q1", QUESTION).kind == "valid"
    values, _ = score_question(record, GOLD, QUESTION, EvaluationState())
    assert values["score"] == 1.0
    assert values["answer_text_key"] == values["gold_text_key"] == "spleen"
