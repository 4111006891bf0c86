"""Public-knowledge attackers against a staged VQA task (issue 35): programs that read only what an agent can
(the task file, the staged questions) and the dataset's public table (its rows, as anyone can fetch them).

On main a question's published id was the dataset's row (`pathvqa_00017`) and the sample came from the task
file's seed: the public table answered every question. Now ids and sample are the staging secret's: answering
by id or by position stays at chance. Looking a question up by its text still works: the question is the
dataset's own, so every VQA release task declares its public source (`public_source`), and leaderboards can
set those runs apart (`leaderboard --public-sources exclude`)."""

from __future__ import annotations

import json

from automedbench.testing import evaluate_outputs, load_task, stage_from_folder
from test_vqa_stager_conformance import WORDS, open_parquet

TASK = "vqa/pathvqa"


def write(answers: dict[str, str], dest):
    for qid, text in answers.items():
        (dest / qid).mkdir(parents=True, exist_ok=True)
        record = {"question_id": qid, "predicted_label": "", "predicted_answer": text,
                  "raw_model_output": f"Answer: {text}", "model_name": "public-table", "runtime_s": 0.0}
        (dest / qid / "answer.json").write_text(json.dumps(record) + "\n")
    return dest


def row(qid: str) -> int:
    """The row a published id names: main's were decimal (`pathvqa_00017`); read anything else as a number too."""
    tail = qid.rsplit("_", 1)[1]
    return int(tail) if tail.isdigit() else int(tail, 16)


def test_public_table_attackers(tmp_path):
    import attrs

    download = open_parquet(tmp_path / "download", n=40)
    table = [WORDS[i % len(WORDS)] for i in range(40)]  # the public parquet's answers, row by row
    track, task = load_task(TASK)
    staged = stage_from_folder(track, attrs.evolve(task, params={**task.params, "sample": 30}), tmp_path / "root",
                               download)
    questions = {q: json.loads((staged.public / q / "question.json").read_text()) for q in staged.case_ids}
    scores = {}
    for name, answers in {
        "the row the id names (main's pathvqa_<row>)": {q: table[row(q) % 40] for q in questions},
        "case i is row i": dict(zip(sorted(questions), table, strict=False)),
        "the question's text looked up in the public table (declared)": {
            q: table[int(r["question"].split()[-1].rstrip("?"))] for q, r in questions.items()},
    }.items():
        result = evaluate_outputs(TASK, submission=write(answers, tmp_path / name[:12].replace(" ", "-")),
                                  data_root=tmp_path / "root", work=tmp_path / f"eval-{len(scores)}")
        scores[name] = result.task.partial
    by_id, by_position, by_text = scores.values()
    # chance is about 0.07 (one of 15 words); a bound of 0.25 was passed by chance about once in 700 runs
    # (simulated), 0.5 about once in 10^9; a leak scores 1.0 (main's ids: every answer)
    assert by_id < 0.5 and by_position < 0.5, scores
    assert by_text == 1.0, scores  # the content of a public dataset cannot be hidden: the task declares it
    assert task.public_source.startswith("https://") and task.network
