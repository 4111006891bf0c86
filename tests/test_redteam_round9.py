"""Round nine of the red team on issue 35's fixes: attacks that got through, each now a test that failed before.

- **Paraphrases a judge credits** (class 6): with a model answer judge (`answer_judge=llm`), which is told to
  credit paraphrase and light hedging, the chance check keyed each answer by its own words. A blind answerer
  (the question-prior guess, no image opened) that wrote every text answer as a one-off paraphrase ("yes, see
  finding 17") was credited exactly as before, but no credited answer could agree by chance any more, while its
  wrong ones (made up: no gold answer) stood for the blind guess: kappa rose from about 0 to over 0.1 and the
  rating cap let it through. An answer the scorer credits is now the gold answer in the chance check.
"""

from __future__ import annotations

import json
import re

import pytest
from automedbench.testing import evaluate_outputs
from automedbench_vqa.answers import normalize
from automedbench_vqa.chance import KAPPA_MIN, agreement_beyond_chance
from test_backends_fakes import openai_reply, serve_fake_llm

fake_llm = pytest.fixture(serve_fake_llm, name="fake_llm")
VQA = "vqa/demo"


def _paraphrase_judge(request):
    """A judge that does what SYSTEM_PROMPT asks: a prediction that opens with the gold answer's words and hedges
    or elaborates after them is clinically equivalent (1), anything else wrong (0)."""
    user = request["body"]["messages"][1]["content"]
    gold = re.search(r"Gold answer:\n(.*?)\nPrediction:", user, re.S).group(1)
    prediction = re.search(r"<<<AGENT TEXT (\w+)>>>\n(.*?)\n<<<END AGENT TEXT \1>>>", user, re.S).group(2)
    words, said = normalize(gold).split(), normalize(prediction).split()
    score = 1.0 if words and said[:len(words)] == words else 0.0
    return openai_reply(json.dumps({"score": score, "rationale": "paraphrase" if score else "differs"}))


def _judge_options(server) -> dict[str, str]:
    return {"answer_judge": "llm", "answer_judge.provider": "openai", "answer_judge.model": "paraphrase-grader",
            "answer_judge.base_url": server.url + "/v1", "answer_judge.api_key_env": "none",
            "answer_judge.max_retries": "0"}


def test_credited_paraphrases_are_the_gold_answer_in_the_chance_check():
    """The class: 20 polar questions, half yes; a blind answerer says yes to each in its own words. Credited
    where the gold is yes, its keys differ from every gold key: before, kappa 0.33 (the same answers spelled
    "yes" give 0.0)."""
    rows = [{"kind": "closed", "answer_key": f"yes see finding {i}", "gold_key": gold, "question_key": "is there",
             "form": "yes_no_form", "score": float(gold == "yes")} for i, gold in enumerate(["yes", "no"] * 10)]
    plain = [{**r, "answer_key": "yes"} for r in rows]
    assert agreement_beyond_chance(plain)["chance_kappa"] == 0.0
    assert agreement_beyond_chance(rows)["chance_kappa"] == 0.0


def test_a_blind_answerer_in_its_own_words_stays_capped_under_a_model_judge(fake_llm, reg, data_root,
                                                                            tmp_path):
    fake_llm.fallback = _paraphrase_judge
    options = _judge_options(fake_llm)
    blind = evaluate_outputs(VQA, baseline="question-prior", data_root=data_root, work=tmp_path / "blind",
                             eval_options=options, registry=reg)
    assert blind.aggregate.rating not in ("A", "B"), blind.aggregate.rating_reason
    sub = tmp_path / "worded"
    for n, row in enumerate(blind.task.per_case):
        answer = json.loads((tmp_path / "blind" / "baseline" / row["case_id"] / "answer.json").read_text())
        if row["kind"] != "mcq":  # the same guess, in words no other answer uses
            answer["predicted_answer"] = answer["raw_model_output"] = f"{answer['predicted_answer']}, see finding {n}"
        (sub / row["case_id"]).mkdir(parents=True)
        (sub / row["case_id"] / "answer.json").write_text(json.dumps(answer))
    worded = evaluate_outputs(VQA, submission=sub, data_root=data_root, work=tmp_path / "eval-worded",
                              eval_options=options, registry=reg)
    assert worded.task.partial == blind.task.partial  # credited exactly as the plain guess
    kappa = worded.task.components["chance_kappa"]
    assert kappa is not None and kappa < KAPPA_MIN, (kappa, blind.task.components["chance_kappa"])
    assert worded.aggregate.rating not in ("A", "B"), worded.aggregate.rating_reason
