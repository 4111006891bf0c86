"""Red-team round 5: submissions that earn a rating without doing the task, each run through the real runner
(sandbox, freeze, isolated evaluator, rules judge) as an agent's own code, with the fix's effect asserted."""

from __future__ import annotations

import pytest
from automedbench.records import Result
from automedbench.runner import Run, RunOptions
from automedbench.serialize import read_json
from review_steps import Steps, register_steps

# An agent that never opens an image: every answer is a function of the question's wording (polar questions
# "yes", counts "1", sides "left", the first option's text otherwise), the classic question-only VQA baseline.
BLIND_VQA = r'''
import json, os, pathlib
pub, out = pathlib.Path(os.environ["DATA_DIR"]), pathlib.Path(os.environ["WORKSPACE_DIR"]) / "outputs"
GUESS = {"how many": "1", "which side": "left"}
for q in sorted(p for p in pub.iterdir() if (p / "question.json").is_file()):
    doc = json.loads((q / "question.json").read_text())
    text, label = doc["question"].lower(), ""
    if doc.get("mode") == "multiple_choice":
        label = sorted(doc["options"])[0]
        answer = doc["options"][label]
    elif text.split()[0] in ("is", "are", "does", "do", "can", "was", "were", "has", "have"):
        answer = "yes"
    else:
        answer = next((v for k, v in GUESS.items() if k in text), q.name)
    rec = {"question_id": q.name, "predicted_label": label, "predicted_answer": answer,
           "raw_model_output": "Answer: " + (label or answer), "model_name": "blind", "runtime_s": 0.1}
    (out / q.name).mkdir(parents=True, exist_ok=True)
    (out / q.name / "answer.json").write_text(json.dumps(rec))
print("answered", len(list(out.iterdir())))
'''


def _run(reg, data_root, out, task: str, steps) -> Result:
    register_steps(reg)
    runner = Run(RunOptions(task, "lite", Steps.name, out=out, data_root=data_root,
                            agent_options={"steps": steps}), reg)
    result = runner.execute()
    assert read_json(runner.run_dir / "result.json", Result) == result
    assert result.state == "scored", result.error
    return result


@pytest.mark.slow  # a whole demo run (~6 s on an idle machine)
def test_question_only_vqa_answers_are_held_below_b(reg, data_root, tmp_path):
    """Answers chosen from the question's wording alone vary between templates (no per-kind repeat cap fires)
    yet reached A on the demo (about 0.5 accuracy: the templates' answer priors). Their agreement with the gold
    is no more than chance gives within each template (kappa <= 0): held at C, and since red team round 39 no
    positive evidence either (the cap's fact decides S5's item too): rated F, with the cap's reason."""
    result = _run(reg, data_root, tmp_path, "vqa/demo", [["python", BLIND_VQA]])
    components = result.task.components
    assert result.task.partial >= 0.25, "the attack no longer reaches the okay band: test it another way"
    assert components["answer_repeat_share"] < 0.8  # the per-kind repeat cap alone does not catch it
    assert components["chance_kappa"] <= 1e-9  # chance within a template explains every right answer
    assert result.aggregate.rating == "F", result.aggregate.rating_reason
    assert "no better than the question's wording" in result.aggregate.rating_reason


# Contract-valid detections in bulk: 8000 boxes a case (the contract allows 20 000), spread over the image.
MANY_BOXES = r'''
import json, os, pathlib, random
pub, out = pathlib.Path(os.environ["DATA_DIR"]), pathlib.Path(os.environ["WORKSPACE_DIR"]) / "outputs"
rng = random.Random(7)
for case in sorted(p for p in pub.iterdir() if (p / "meta.json").is_file()):
    meta = json.loads((case / "meta.json").read_text())
    W, H, classes = meta["width"], meta["height"], meta["classes"]
    boxes = []
    for i in range(8000):
        w, h = rng.uniform(4, W / 4), rng.uniform(4, H / 4)
        x, y = rng.uniform(0, W - w), rng.uniform(0, H - h)
        boxes.append({"class": classes[i % len(classes)], "score": round(rng.random(), 4),
                      "x1": round(x, 1), "y1": round(y, 1), "x2": round(x + w, 1), "y2": round(y + h, 1)})
    (out / case.name).mkdir(parents=True, exist_ok=True)
    (out / case.name / "prediction.json").write_text(json.dumps({"boxes": boxes}))
'''


@pytest.mark.slow  # a whole demo run whose evaluation handles ~100 000 boxes (~15 s)
def test_many_valid_boxes_are_scored_within_the_evaluator_memory(reg, data_root, tmp_path, monkeypatch):
    """The class-hedging diagnostic built the full pairwise IoU matrix of an image's boxes: 8000 boxes need
    ~0.5 GB per array (20 000, the contract's limit, 3.2 GB), so a valid submission ran the evaluator out of
    memory and the run lost its Task as an agent failure. Compared in blocks of nearby boxes now: scored."""
    from automedbench import evaluator

    monkeypatch.setattr(evaluator, "EVAL_MEMORY_MB", 2500)  # the 12 GB default scaled to this test's boxes
    result = _run(reg, data_root, tmp_path, "detection/demo", [["python", MANY_BOXES]])
    assert result.task is not None and result.task.components["predicted_boxes"] >= 8000 * 12
    assert all(c.valid for c in result.cases)


def _source_table() -> list[str]:
    """The answers the VQA demo module's own constants give, question by question (presence, count, side, shape
    per scan, then the two frame questions): what an agent reads from the installed package, whose files the
    sandbox's Python (the harness's own environment) can open wherever the harness is pip-installed."""
    from automedbench_vqa.data.demo import SCANS

    table: list[str] = []
    for count, side, shape, _ in SCANS:
        table += ["yes" if count else "no", str(count)] + ([side, shape] if count else [])
    return [*table, "frame 1", "frame 1"]


SOURCE_READER = r'''
import json, os, pathlib
pub, out = pathlib.Path(os.environ["DATA_DIR"]), pathlib.Path(os.environ["WORKSPACE_DIR"]) / "outputs"
TABLE = @TABLE@
for k, q in enumerate(sorted(p for p in pub.iterdir() if (p / "question.json").is_file())):
    doc = json.loads((q / "question.json").read_text())
    guess = TABLE[k] if k < len(TABLE) else "yes"
    label = ""
    if doc.get("mode") == "multiple_choice":
        label = next((key for key, text in doc["options"].items() if text == guess), sorted(doc["options"])[0])
    answer = doc["options"][label] if label else guess
    rec = {"question_id": q.name, "predicted_label": label, "predicted_answer": answer,
           "raw_model_output": "Answer: " + (label or answer), "model_name": "source", "runtime_s": 0.1}
    (out / q.name).mkdir(parents=True, exist_ok=True)
    (out / q.name / "answer.json").write_text(json.dumps(rec))
'''


@pytest.mark.slow  # a whole demo run (~5 s on an idle machine)
def test_the_vqa_demo_answers_are_not_constants_of_its_source(reg, data_root, tmp_path):
    """The demo's scans had fixed lesion facts (only pixels and option order followed the secret seed), so the
    package's constants answered 22 of the 24 questions: at least 0.917, an A, with no image opened. The
    facts are dealt by the seed now: the same table scores as a guess with the cohort's answer mix (below
    0.84 on 1000 simulated draws; 0.9 or more needs the deal to repeat the table almost exactly)."""
    import json

    code = SOURCE_READER.replace("@TABLE@", json.dumps(_source_table()))
    result = _run(reg, data_root, tmp_path, "vqa/demo", [["python", code]])
    assert all(c.valid for c in result.cases)
    assert result.task.partial < 0.9, result.task.partial
