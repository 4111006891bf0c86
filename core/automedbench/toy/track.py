"""The toy track: vowel counting, written only against `automedbench.api` like any third-party track."""

from __future__ import annotations

from pathlib import Path

from automedbench.api import (
    CasePicture,
    CaseScore,
    CaseVerdict,
    MetricBlock,
    PackagedTrack,
    Panel,
    RubricItem,
    ScriptedSolution,
    ScriptStep,
    StagedData,
    TaskEvaluation,
    TaskSpec,
    atomic_write_text,
    default_rubric,
    plan_step,
    reword,
    staging_area,
)

# What the rules judge looks for in this track's executed code: the toy's own checks, not array shapes.
HINTS = {
    "s2b_compatibility_check": {"patterns": [r"isascii\(", r"islower\("], "minimum": 2},
    "s3_validate": {"checks": {"shape": r"len\(files\)", "values": r"isdigit\(",
                               "plausibility": r"<= len\(word"}},
}
ANSWER = "answer.txt"
MAX_ANSWER_BYTES = 64


def vowels(word: str) -> int:
    return sum(ch in "aeiou" for ch in word)


def read_answer(case_dir: Path) -> tuple[int | None, str]:
    """(count, problem): the contract check, reading at most a few bytes and never following a link."""
    path = case_dir / ANSWER
    if path.is_symlink() or not path.is_file():
        return None, f"{ANSWER} missing"
    with path.open("rb") as handle:
        data = handle.read(MAX_ANSWER_BYTES + 1)
    if len(data) > MAX_ANSWER_BYTES:
        return None, f"{ANSWER} longer than {MAX_ANSWER_BYTES} bytes"
    text = data.decode("ascii", "replace").strip()
    if not text.isdigit():
        return None, f"{ANSWER} is not a decimal number: {text[:20]!r}"
    return int(text), ""


class VowelEvaluation(TaskEvaluation):
    """Accuracy over cases; a missing or invalid case counts 0 (partial) and gates strict to 0."""

    def score_case(self, case_id: str, submitted: Path) -> CaseScore:
        answer, _ = read_answer(submitted)
        truth = int((self.staged.private / case_id / ANSWER).read_text().strip())
        return CaseScore(case_id, {"correct": float(answer == truth)})

    def case_picture(self, case_id: str, submitted: Path | None) -> CasePicture | None:
        """The word, the agent's count (read with the contract's reader) and the true count: text only."""
        word = (self.staged.public / case_id / "input.txt").read_text()[:200].strip()
        answer = read_answer(submitted)[0] if submitted is not None else None
        truth = (self.staged.private / case_id / ANSWER).read_text()[:20].strip()
        return CasePicture([Panel("word", text=word, role="input"),
                            Panel("answer", text="(no valid answer)" if answer is None else str(answer), role="output"),
                            Panel("vowels", text=truth, role="reference")])

    def aggregate(self, scores: list[CaseScore | None], case_ids: list[str]) -> MetricBlock:
        values = [s.values["correct"] if s is not None else 0.0 for s in scores]
        partial = sum(values) / len(case_ids) if case_ids else 0.0
        strict = partial if all(s is not None for s in scores) else 0.0
        per_case = [{"case_id": c, "correct": v} for c, v in zip(case_ids, values, strict=True)]
        return MetricBlock("accuracy", strict, partial, per_case=per_case)


class ToyTrack(PackagedTrack):
    name = "toy"

    def stage_demo(self, task: TaskSpec, dest: Path) -> StagedData:
        words = list(task.params["words"])
        case_ids = [f"case_{i:02d}" for i in range(len(words))]
        with staging_area(dest) as area:  # the swap every track uses: a failed re-stage keeps the old data
            for case_id, word in zip(case_ids, words, strict=True):
                atomic_write_text(area.public / case_id / "input.txt", word + "\n", shared=True)
                atomic_write_text(area.private / case_id / ANSWER, f"{vowels(word)}\n")
            return area.commit(case_ids)

    def check_case(self, task: TaskSpec, case_id: str, submitted: Path, public: Path) -> CaseVerdict:
        answer, problem = read_answer(submitted)
        return CaseVerdict(case_id, True, answer is not None, [problem] if problem else [])

    def rubric(self, task: TaskSpec) -> list[RubricItem]:
        return reword(default_rubric(), {}, HINTS)

    def evaluation(self, task: TaskSpec, staged: StagedData, options: dict[str, str]) -> TaskEvaluation:
        return VowelEvaluation(task, staged, options)

    def baselines(self) -> dict[str, str]:
        return {"perfect": "the reference counts", "empty": "no outputs", "constant": "the count 0 for every word"}

    def write_baseline(self, task: TaskSpec, name: str, staged: StagedData, dest: Path) -> None:
        dest.mkdir(parents=True, exist_ok=True)
        if name == "empty":
            return
        for case_id in staged.case_ids:
            truth = "0" if name == "constant" else (staged.private / case_id / ANSWER).read_text()
            atomic_write_text(dest / case_id / ANSWER, truth)

    def reference_solution(self, task: TaskSpec, tier: str, data_dir: str, workspace: str) -> ScriptedSolution:
        out = f"{workspace}/outputs"
        count = ("import pathlib, sys\n"
                 f"data, out = pathlib.Path({data_dir!r}), pathlib.Path({out!r})\n"
                 "ids = sys.argv[1:] or sorted(p.name for p in data.iterdir() if p.is_dir())\n"
                 "for case in ids:\n"
                 "    word = (data / case / 'input.txt').read_text().strip()\n"
                 "    (out / case).mkdir(parents=True, exist_ok=True)\n"
                 "    (out / case / 'answer.txt').write_text(str(sum(c in 'aeiou' for c in word)))\n"
                 "print('wrote', len(ids), 'answers')\n")
        check = ("import pathlib\n"
                 f"data, files = pathlib.Path({data_dir!r}), sorted(pathlib.Path({out!r}).glob('*/answer.txt'))\n"
                 "bad = [str(p) for p in files if not p.read_text().strip().isdigit()]\n"
                 "for p in files:\n"
                 "    word = (data / p.parent.name / 'input.txt').read_text().strip()\n"
                 "    assert 0 <= int(p.read_text()) <= len(word), p\n"
                 "print(len(files), 'answers; values', [p.read_text() for p in files][:3], 'bad', bad)\n"
                 "assert files and not bad\n")
        plan_md = ("# Plan: count vowels\n\n## Candidates\n- str.count per vowel\n- a regular expression\n"
                   "- a set-membership loop (chosen: simplest model/method)\n\n## Pipeline\n"
                   "1. load input.txt\n2. preprocess: strip\n3. inference: count vowels\n"
                   "4. save answer.txt\n5. validate one case, then the batch\n")
        steps = [
            ScriptStep("explore", "python",
                       "import pathlib, sys\n"
                       f"paths = sorted(pathlib.Path({data_dir!r}).glob('*/input.txt'))\n"
                       "words = [p.read_text().strip() for p in paths]\n"
                       "print(len(words), 'cases; ascii', all(w.isascii() for w in words),"
                       " 'lower', all(w.islower() for w in words), 'python', sys.version.split()[0])",
                       say="Exploring the data and the environment."),
            plan_step(f"{workspace}/plan", plan_md, "Pipeline: vowel counting",
                      ["input.txt", "count", "answer.txt"], say="Writing plan.md and plan.png."),
            ScriptStep("setup", "python", ("import sys\nprint('python', sys.version.split()[0])\n"
                        "print('method obtained: built-in str; method ready')"),
                       say="Checking the environment; the method needs no weights."),
            ScriptStep("pilot", "bash", f"python3 - case_00 <<'EOF'\n{count}EOF", say="Pilot on ONE case."),
            ScriptStep("validate", "python", check, say="Checking the pilot output's shape and values."),
            ScriptStep("batch", "bash", f"python3 - <<'EOF'\n{count}EOF", say="Running every case."),
            ScriptStep("verify", "python", check, say="Verifying every output."),
            ScriptStep("submit", submit=True, say="Submitting."),
        ]
        return ScriptedSolution(steps, {
            "incomplete": [ScriptStep("batch", "bash", f"python3 - case_00 case_01 <<'EOF'\n{count}EOF",
                                      say="Two cases only.")],
            "count-y": [ScriptStep("batch", "bash", f"python3 - <<'EOF'\n{count.replace('aeiou', 'aeiouy')}EOF",
                                   say="Running every case, counting y as a vowel.")]})

    def scripted_variants(self) -> dict[str, str]:
        return {"count-y": "counts 'y' as a vowel in the batch: the three words with a y come out wrong (Task)"}
