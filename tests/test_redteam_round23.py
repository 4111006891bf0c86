"""Red team round 23: hidden answers that public information decides, attacked through the real stager and evaluator.

- **The gold letter of a multiple-choice question was the dataset's** (vqa, MedXpertQA / MedFrameQA / OmniMedVQA /
  PMC-VQA / MMMU): every stager published the options in the download's own order, and a dataset's order is
  public and seldom uniform. On a MedXpertQA-like layout (MM/test.jsonl, options A-E, the options also listed in
  the question as "Answer Choices: (A) ... (E) ...") whose gold is "A" in 60 % of questions, answering "A" to
  every question scored 0.60 through `automedbench evaluate`. The stager now re-letters each question's options
  with a draw from the staging's secret (`automedbench_vqa.data.option_order`), remaps the gold letter and
  rewrites the embedded list; "all of the above" keeps its letter and a question naming options by letter
  ("both A and B") keeps the dataset's order. Measured on that layout (100 questions, four stagings): always-"A" 0.60 ->
  0.19-0.21, the best constant letter 0.60 -> 0.22-0.28, always-the-longest-option 0.14 -> 0.14 (a property of the
  texts, not of their order); answering by the option's text still scores 1.0.
- **A demo staged with `--from` was generated from the task file's seed** (every track; latent): `automedbench
  stage vqa/demo --from DIR` is accepted (a demo reads no download), and the staging drew the demo's secret seed
  only when no folder was given, so the generator ran with the YAML's public seed (20261202): the installed
  generator called with it regenerated all 24 staged questions' images byte for byte, and their answers. Not
  reached by a run: that staging's stamp has no generator digest, so the next `ensure` (run, evaluate) staged
  the demo again with a secret seed (the regenerating attack scored 0.0 through `automedbench evaluate`). Every demo
  staging now draws its seed from the secret, a folder given or not (`staging.stage`): 24 -> 0 questions' images
  are the public seed's.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import attrs
import pytest
from automedbench.testing import evaluate_outputs, load_task, stage_from_folder
from PIL import Image

TASK = "vqa/medxpertqa-mm"
N = 100
WORDS = ["erythema", "livedo", "larva", "agglutinin", "marmorata", "igne", "purpura", "vasculitis", "psoriasis",
         "eczema", "urticaria", "pemphigus", "lichen", "rosacea", "tinea", "scabies", "vitiligo", "melasma"]


def _jpeg(value: int) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (16, 12), (value % 256, 40, 90)).save(buffer, format="JPEG")
    return buffer.getvalue()


def _question(i: int) -> tuple[dict[str, str], str, str]:
    """(options, gold letter, question text) of question `i`: gold "A" for 60 %, the rest spread over B-E; every
    tenth ends with "All of the above" (gold there for half of them); two name options by letter."""
    options = {k: f"{WORDS[(3 * i + j) % len(WORDS)]} {'type ' * ((i + j) % 3)}{i}" for j, k in enumerate("ABCDE")}
    label = "A" if i % 10 < 6 else "BCDE"[i % 10 - 6]
    if i % 10 == 9:
        options["E"] = "All of the above"
        label = "E" if i % 20 == 19 else "B"
    if i in (7, 8):
        options["E"] = "Both A and B"
    text = f"A patient ({i}) presents with this rash. What is the most likely diagnosis?"
    return options, label, text + " Answer Choices: " + " ".join(f"({k}) {v}" for k, v in options.items())


def medxpertqa_download(root: Path) -> Path:
    """MedXpertQA's MM layout (MM/dev.jsonl, MM/test.jsonl, images/), written in code."""
    (root / "MM").mkdir(parents=True)
    (root / "images").mkdir()
    lines = []
    for i in range(N):
        options, label, text = _question(i)
        lines.append(json.dumps({"id": f"MM-{i}", "question": text, "options": options, "label": label,
                                 "images": [f"MM-{i}-a.jpeg"], "medical_task": "Diagnosis",
                                 "body_system": "Integumentary", "question_type": "Reasoning"}))
        (root / "images" / f"MM-{i}-a.jpeg").write_bytes(_jpeg(i))
    (root / "MM" / "dev.jsonl").write_text("\n".join(lines[:20]) + "\n")
    (root / "MM" / "test.jsonl").write_text("\n".join(lines[20:]) + "\n")
    return root


def _answers(staged, pick) -> dict[str, tuple[str, str]]:
    """Question id -> (label, option text) chosen by `pick(question)` from the public record alone."""
    chosen = {}
    for qid in staged.case_ids:
        question = json.loads((staged.public / qid / "question.json").read_text())
        label = pick(question)
        chosen[qid] = (label, question["options"][label])
    return chosen


def _score(answers: dict[str, tuple[str, str]], data_root: Path, work: Path) -> float:
    """The task accuracy of `answers` through `automedbench evaluate` (frozen, isolated evaluator)."""
    submission = work / "outputs"
    for qid, (label, text) in answers.items():
        (submission / qid).mkdir(parents=True)
        (submission / qid / "answer.json").write_text(json.dumps({
            "question_id": qid, "predicted_label": label, "predicted_answer": text,
            "raw_model_output": f"Answer: {label}", "model_name": "attack", "runtime_s": 0.0}))
    return evaluate_outputs(TASK, data_root=data_root, work=work / "eval", submission=submission).task.strict


@pytest.fixture(scope="module")
def staged_layout(tmp_path_factory):
    root = tmp_path_factory.mktemp("round23")
    track, spec = load_task(TASK)
    spec = attrs.evolve(spec, case_count=1)  # a small download: fewer than the release's count is refused as short
    data = root / "data"
    staged = stage_from_folder(track, spec, data, medxpertqa_download(root / "src"))
    return staged, data, root


def test_no_constant_letter_scores_above_chance(staged_layout):
    """Before: always-"A" 0.60 (the download's skew). After: each letter near 1/5."""
    staged, data, root = staged_layout
    scores = {letter: _score(_answers(staged, lambda q, k=letter: k), data, root / f"const-{letter}")
              for letter in "AE"}
    golds = [json.loads((staged.private / q / "answer.json").read_text())["answer_label"] for q in staged.case_ids]
    counts = {k: golds.count(k) / len(golds) for k in "ABCDE"}
    assert scores["A"] == pytest.approx(counts["A"]) and scores["E"] == pytest.approx(counts["E"])
    assert max(counts.values()) < 0.36, counts  # binomial(100, ~0.2): above 0.36 for any letter about 1e-4


def test_honest_answers_by_text_still_score_and_the_embedded_list_follows(staged_layout):
    """An answer found by the gold option's TEXT scores 1.0; the "Answer Choices" list matches the options."""
    staged, data, root = staged_layout
    golds = {q: json.loads((staged.private / q / "answer.json").read_text()) for q in staged.case_ids}
    by_text = _answers(staged, lambda q: next(k for k, v in q["options"].items()
                                              if v == golds[q["question_id"]]["answer_text"]))
    assert _score(by_text, data, root / "honest") == 1.0
    moved = 0
    for qid in staged.case_ids:
        question = json.loads((staged.public / qid / "question.json").read_text())
        listed = dict(re.findall(r"\(([A-E])\) (.*?)(?= \([A-E]\) |$)", question["question"].split("Choices: ")[1]))
        assert listed == question["options"]
        assert golds[qid]["answer_text"] == question["options"][golds[qid]["answer_label"]]
        source = int(golds[qid]["source_id"].split("-")[1])
        original, _, _ = _question(source)
        if original["E"] == "All of the above":
            assert question["options"]["E"] == "All of the above"  # its meaning is its place
        if source in (7, 8):
            assert question["options"] == original  # names options by letter: the dataset's order
        moved += question["options"] != original
    assert moved > 0.9 * N


def test_dealing_is_the_secret_s_draw_and_keeps_the_place_words():
    import random

    from automedbench_vqa.data.option_order import deal_options, keeps_place, names_letters

    options = {"A": "x", "B": "y", "C": "z", "D": "None of the above"}
    seen = set()
    for seed in range(40):
        question, gold = deal_options({"question": "Q?", "options": options}, {"answer_label": "B", "answer_text": "y"},
                                      random.Random(seed))
        assert question["options"]["D"] == "None of the above"
        assert question["options"][gold["answer_label"]] == "y"
        seen.add(gold["answer_label"])
    assert seen == {"A", "B", "C"}
    assert keeps_place("all of the above") and keeps_place("Neither") and not keeps_place("Vitamin A deficiency")
    assert names_letters("Both A and B") and names_letters("A, C") and names_letters("see option C")
    assert not names_letters("Hepatitis A") and not names_letters("a and b cells")


def test_a_demo_staged_from_a_folder_is_not_the_public_seed_s(tmp_path):
    """`automedbench stage vqa/demo --from DIR`: before, every staged image was the public seed's, byte for byte."""
    from automedbench.cli import main
    from automedbench_vqa.data.demo import demo_questions
    from click.testing import CliRunner

    (tmp_path / "download").mkdir()
    result = CliRunner().invoke(main, ["stage", "vqa/demo", "--from", str(tmp_path / "download"), "--data-root",
                                       str(tmp_path / "data")])
    assert result.exit_code == 0, result.output
    _, spec = load_task("vqa/demo")
    public_seed = int(spec.params["seed"])
    regenerated = {data for _, images, _ in demo_questions(public_seed) for _, data in images}
    staged = [p.read_bytes() for p in (tmp_path / "data" / "vqa" / "demo" / "public").rglob("*.png")]
    assert len(staged) >= 24
    assert not [data for data in staged if data in regenerated]
