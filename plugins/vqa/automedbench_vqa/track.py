"""The VQA track: many small text-answer cases (one question each) over one or more images."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from automedbench.api import (
    S3_LEVELS,
    CaseScore,
    CaseVerdict,
    MetricBlock,
    PackagedTrack,
    Rubric,
    ScriptedSolution,
    StagedData,
    TaskSpec,
    UserError,
    atomic_write_text,
    default_rubric,
    reword,
    with_ladder,
)

from . import contract, scoring
from .answer_judge import (
    GRADER,
    MODEL_JUDGE,
    AnswerJudgeCache,
    OfflineAnswerJudge,
    available_judges,
    make_answer_judge,
)
from .records import read_private
from .rubric import HINTS, WORDING

HERE = Path(__file__).parent
JUDGE_CACHE = "answer_judge_cache.jsonl"
RAW_FALLBACK = "raw_fallback"


def read_question(public_case: Path) -> dict:
    record, problem = contract.read_json_object(public_case / contract.QUESTION_FILE)
    if record is None:
        raise UserError(f"staged question {public_case.name}: {problem}; re-stage the task with --force")
    return record


class VQATrack(PackagedTrack):
    name = "vqa"
    root = HERE

    def __init__(self) -> None:
        super().__init__()
        self.state = scoring.EvaluationState()
        self.public: Path | None = None

    # ---------------------------------------------------------------- staging

    def stage_demo(self, task: TaskSpec, dest: Path) -> StagedData:
        from .demo import stage_demo

        return stage_demo(task, dest)

    def stage_source(self, task: TaskSpec, dest: Path, source: Path) -> StagedData:
        from .stagers import stage_dataset

        return stage_dataset(task, dest, source)

    # ---------------------------------------------------------------- evaluation

    def evaluation_options(self) -> dict[str, str]:
        return {"answer_judge": "grade open-ended answers with this answer judge (offline, llm: a model named by "
                                "answer_judge.provider/.model, or one an add-on registers); default: 0.5·exact "
                                "match + 0.5·token F1",
                "answer_judge_cache": f"JSONL verdict cache [default: <staged task>/{JUDGE_CACHE}]",
                RAW_FALLBACK: "true: with an answer judge, also grade raw_model_output when the answer scores < 1 "
                              "and keep the better verdict (the original's rule, a second guess); default false"}

    def check_evaluation_options(self, options: dict[str, str]) -> dict[str, str]:
        checked = super().check_evaluation_options(options)
        if checked.get(RAW_FALLBACK, "false").lower() not in ("true", "false"):
            raise UserError(f"evaluation option {RAW_FALLBACK} must be true or false")
        name = checked.get("answer_judge", "none")
        provider = checked.get(f"{GRADER}.provider")
        if (name == MODEL_JUDGE) != bool(provider):
            raise UserError(f"answer_judge={MODEL_JUDGE} and {GRADER}.provider=NAME (a model backend) go together")
        if name and name not in ("none", MODEL_JUDGE) and name not in available_judges():
            make_answer_judge(name, checked)  # raises the one-line error with suggestions
        return checked

    def model_graders(self) -> dict[str, str]:
        return {GRADER: "the model answer judge (answer_judge=llm): grades open answers 0/0.5/1"}

    def apply_grades(self, task: TaskSpec, metric: MetricBlock, grades: list) -> MetricBlock:
        return scoring.apply_grades(metric, grades)

    def prepare_evaluation(self, task: TaskSpec, staged: StagedData, options: dict[str, str]) -> None:
        self.state = scoring.EvaluationState(raw_fallback=options.get(RAW_FALLBACK, "false").lower() == "true")
        self.public = staged.public
        name = options.get("answer_judge", "none")
        if name == MODEL_JUDGE:  # the offline judge stands in until the model's grades come back
            self.state.judge, self.state.model_judge = OfflineAnswerJudge(), True
        elif name and name != "none":
            self.state.judge = make_answer_judge(name, options)
            self.state.cache = AnswerJudgeCache(Path(options.get("answer_judge_cache") or staged.root / JUDGE_CACHE))

    def check_case(self, task: TaskSpec, case_id: str, submitted: Path, public: Path) -> CaseVerdict:
        question = read_question(public)
        result = contract.check_answer_file(submitted / contract.ANSWER_FILE, case_id, question)
        self.state.kinds[case_id] = result.kind
        present = (submitted / contract.ANSWER_FILE).exists()
        return CaseVerdict(case_id, present, result.kind == "valid", result.reasons)

    def score_case(self, task: TaskSpec, case_id: str, submitted: Path, private: Path) -> CaseScore:
        record, problem = contract.read_json_object(submitted / contract.ANSWER_FILE)
        if record is None:
            raise ValueError(problem)
        gold = json.loads((private / contract.ANSWER_FILE).read_text("utf-8"))
        question = read_question(self.public / case_id) if self.public is not None else {}
        values, requests = scoring.score_question(record, gold, question, self.state)
        return CaseScore(case_id, values, requests)

    def aggregate(self, task: TaskSpec, scores: list[CaseScore | None], case_ids: list[str],
                  private: Path) -> MetricBlock:
        return scoring.aggregate(task.metric, scores, case_ids, private, self.state)

    # ---------------------------------------------------------------- rubric, agents, baselines

    def rubric(self, task: TaskSpec) -> Rubric:
        # VQA keeps the original's four-level S3 ladder (0/0.2/0.5/1.0), declared here rather than inherited
        return with_ladder(reword(default_rubric(), WORDING, HINTS), "S3", S3_LEVELS)

    def positive_evidence(self, task: TaskSpec) -> str:
        return "a correct answer (score 1: the right letter or yes/no, an exact or judge-equivalent answer)"

    def positive_case(self, task: TaskSpec, row: dict[str, Any]) -> bool:
        return float(row.get("score") or 0.0) >= 1.0

    def reference_solution(self, task: TaskSpec, tier: str, data_dir: str, workspace: str) -> ScriptedSolution:
        if not task.demo:
            raise UserError(f"the scripted reference solution answers the generated demo only, not {task.id}")
        from .solution import demo_solution

        return demo_solution(task, tier, data_dir, workspace)

    def baselines(self) -> dict[str, str]:
        return {"perfect": "the gold answers", "empty": "an honest skip for every question",
                "constant": "'yes' for every text question, option A for every MCQ"}

    def write_baseline(self, task: TaskSpec, name: str, staged: StagedData, dest: Path) -> None:
        if name not in self.baselines():
            raise UserError(f"unknown baseline {name!r}")
        for qid in staged.case_ids:
            question = read_question(staged.public / qid)
            options = question.get("options") or {}
            gold = read_private(staged.private, qid)
            label, answer = "", ""
            if name == "perfect":
                label = gold.get("answer_label", "")
                answer = options.get(label, "") if label else gold.get("answer_text", "")
            elif name == "constant":
                label = "A" if contract.is_mcq(question) else ""
                answer = options.get("A", "") if label else "yes"
            record = {"question_id": qid, "predicted_label": label, "predicted_answer": answer,
                      "raw_model_output": (f"Answer: {label or answer}" if (label or answer) else ""),
                      "model_name": f"baseline:{name}", "runtime_s": 0.0}
            atomic_write_text(dest / qid / contract.ANSWER_FILE, json.dumps(record) + "\n")
