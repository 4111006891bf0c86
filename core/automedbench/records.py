"""Every record the harness stores, as attrs classes; JSON goes through `automedbench.serialize`.

One schema for every track: tracks fill the same records and put track-specific numbers into the
free-form `components` / `per_case` mappings of the metric block.
"""

from __future__ import annotations

from typing import Any, Literal

from attrs import Factory, define, field

SCHEMA_VERSION = 1

Tier = Literal["lite", "standard", "pro"]
TIERS: tuple[str, ...] = ("lite", "standard", "pro")
RunState = Literal["scored", "agent_failure", "infrastructure_failure", "cancelled"]
STAGES: tuple[str, ...] = ("S1", "S2", "S3", "S4", "S5")
STAGE_NAMES: dict[str, str] = {
    "S1": "Plan",
    "S2": "Setup",
    "S3": "Validate",
    "S4": "Inference",
    "S5": "Submit",
}
STAGE_WEIGHTS: dict[str, float] = {"S1": 0.25, "S2": 0.15, "S3": 0.35, "S4": 0.15, "S5": 0.10}


# ---------------------------------------------------------------- task definition


# A task's workspace need when its file does not declare one (TaskSpec.workspace_mb), MB: room for a model's
# weights, a pip cache and a real task's outputs.
DEFAULT_WORKSPACE_MB = 32768
# The smallest workspace a run can be given, MB (an ext4 image smaller than this has no room to work in).
MIN_WORKSPACE_MB = 16
MAX_WORKSPACE_MB = 1 << 24  # 16 TiB: a declared need beyond it is a typo, not a task


@define(frozen=True)
class TierInfo:
    """What the brief tells the agent about models at one tier (the SPEC's tier table)."""

    model: str = ""
    model_description: str = ""
    candidates: list[str] = Factory(list)
    clinical_background: str = ""
    requirements: list[str] = Factory(list)


@define(frozen=True)
class RatingThresholds:
    """Task-metric cut-offs for the letter rating: >= good is A, >= okay is B, >= floor (if set) is C, else F.

    `min_valid` is the share of cases that must be present and valid, else F (1.0: every case, as
    upstream segmentation; VQA tasks use 0.5 as upstream VQA did). `floor` is the C band's lower edge
    for tracks whose bands come from baselines (enhancement: best classical - 0.05); None = no floor.
    `present_valid`: F as soon as one output that is present fails the checker, however few are missing
    (the original synthesis format check: missing files do not fail it, a failing one does)."""

    good: float
    okay: float
    min_valid: float = 1.0
    floor: float | None = None
    present_valid: bool = False


@define(frozen=True)
class SandboxNeeds:
    """What a task's reference method needs inside the sandbox, checked before a run starts (`run` refuses with
    the install line, `validate-task` reports it, `automedbench tasks` shows whether this machine is ready).

    `modules` are top-level Python import names the method imports in the sandbox; `install` is what brings
    them (a pip requirement such as `automedbench-classification[model]`); `weights` says whether the method
    needs model weights obtained (downloaded, or loaded from the task's assets): a method that needs none
    earns S2's model-obtained item once it runs."""

    modules: list[str] = Factory(list)
    install: str = ""
    weights: bool = True


@define(frozen=True)
class ScoringNeed:
    """A program a task's metric runs in a local evaluator beyond Python (Java for METEOR), and whether this machine
    has it: `automedbench tasks TASK` lists each, present or missing, for a user choosing a machine; a missing one is
    the track's `scoring_gap`.

    `what` names it and what it is for; `found` is where it is here (a path), "" when missing; `gap` is the one line
    saying why the metric cannot run without it, naming the fix."""

    what: str
    found: str
    gap: str


@define(frozen=True)
class TaskSpec:
    """One task as its data file declares it. Missing fields are errors, never silent defaults."""

    id: str
    track: str
    title: str
    description: str
    modality: str
    input_files: list[str]
    output_files: list[str]
    case_count: int
    time_limit_s: int
    max_turns: int
    exec_timeout_s: int
    network: bool
    demo: bool
    rating: RatingThresholds
    tiers: dict[str, TierInfo]
    metric: str
    params: dict[str, Any] = Factory(dict)
    dataset: str = ""
    license: str = ""
    # Which Task value Overall uses unless the run says otherwise: strict (completeness-gated) or partial.
    task_score: Literal["strict", "partial"] = "strict"
    # How many times a reply with no tool call is answered by a continue message before the run ends
    # (open-weight models often answer in prose); an agent option `continues=N` overrides it.
    text_reply_continues: int = 3
    # What the time limit counts: `wall` (the paper's rule: every second from the first turn) or
    # `tools` (model replies excluded: for slow local model servers, where one reply can take minutes).
    time_limit_counts: Literal["wall", "tools"] = "wall"
    # What the reference method needs inside the sandbox (modules, the install line, weights or none).
    needs: SandboxNeeds = Factory(SandboxNeeds)
    # Disk the agent's workspace may need (model weights, caches, outputs), in MB: the size of the run's workspace
    # quota unless --workspace-quota-mb says otherwise, reserved whole before the run starts. A real task's model
    # weights take gigabytes (the default); a generated demo needs little and says so.
    workspace_mb: int = DEFAULT_WORKSPACE_MB
    # Where the task's labelled source can be fetched by anyone (a URL), when it can: with network access an
    # agent could fetch the answers themselves, so results on such a task are declared and can be set apart
    # (`automedbench tasks`, result.json's header, `leaderboard --public-sources`). "" = not public.
    public_source: str = ""


# ---------------------------------------------------------------- rubric and judging


ItemState = Literal["graded", "auto-pass", "excluded", "not-applicable"]
TierRule = Literal["auto-pass", "excluded"]


@define(frozen=True)
class RubricItem:
    """One gradable item. `kind` binary is 0/1; ladder takes one of `levels`.

    `tiers` says what happens to the item at a tier instead of grading: `auto-pass` (scores 1.0, e.g.
    Lite's research items) or `excluded` (left out of its stage's mean). `applies_if` names a condition
    of the trajectory (see `automedbench.rubric.CONDITIONS`); where it does not hold the item is *not
    applicable*: listed, never graded, left out of the mean, and never a null. `requires` forces the
    item to 0 when the named item scored 0."""

    id: str
    stage: str
    description: str
    kind: Literal["binary", "ladder"] = "binary"
    levels: list[float] = Factory(lambda: [0.0, 1.0])
    tiers: dict[str, TierRule] = Factory(dict)
    requires: str = ""
    applies_if: str = ""
    hints: dict[str, Any] = Factory(dict)

    def at_tier(self, tier: str) -> ItemState:
        return self.tiers.get(tier, "graded")


@define(frozen=True)
class StageRule:
    """How one judged stage folds its items: `mean` of its applicable items, or one `ladder` item."""

    stage: str
    aggregation: Literal["mean", "ladder"] = "mean"
    levels: list[float] = Factory(lambda: [0.0, 1.0])

    @property
    def text(self) -> str:
        if self.aggregation == "ladder":
            return "ladder " + "/".join("0" if v == 0 else f"{v:.1f}" if v == int(v) else f"{v:g}"
                                        for v in self.levels)
        return "mean of binary items"


@define(frozen=True)
class Rubric:
    """A track's rubric for S1–S3: stage rules, items, and what each named condition means.

    Stored in every result so that a score can be re-read against the rubric that produced it."""

    stages: list[StageRule]
    items: list[RubricItem]
    conditions: dict[str, str] = Factory(dict)

    def stage_rule(self, stage: str) -> StageRule:
        return next((s for s in self.stages if s.stage == stage), StageRule(stage))

    def item(self, item_id: str) -> RubricItem | None:
        return next((i for i in self.items if i.id == item_id), None)


@define
class ItemVerdict:
    """A judge's verdict on one rubric item, with the evidence that supports it."""

    id: str
    stage: str
    description: str
    value: float | None
    rationale: str
    evidence_turns: list[int] = Factory(list)
    auto: bool = False
    # graded by a judge, or settled by the rubric: auto-pass, excluded at the tier, not applicable
    state: ItemState = "graded"
    # the files it was decided from, as workspace paths ("plan/plan.md", "plan/plan.png", a script the agent
    # ran), present or missing; and the cases (S3's pilot, S4/S5's missing, invalid or positive ones)
    evidence_files: list[str] = Factory(list)
    evidence_cases: list[str] = Factory(list)


@define
class JudgeVerdict:
    judge: str
    judge_version: str
    items: list[ItemVerdict] = Factory(list)
    error: str | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    duration_s: float = 0.0


# ---------------------------------------------------------------- evaluation


@define
class FileEntry:
    """One file of a frozen submission; `rejected` files were not copied (symlink, too large...)."""

    path: str
    size: int
    sha256: str = ""
    rejected: str = ""


@define
class SubmissionManifest:
    files: list[FileEntry] = Factory(list)
    sha256: str = ""
    submitted: bool = False


@define
class CaseVerdict:
    case_id: str
    present: bool
    valid: bool
    reasons: list[str] = Factory(list)


# the component that counts a metric's numbers JSON cannot hold, written as null (evaluator.finite_metric); a
# rating reads it (scoring.non_finite_cap)
NON_FINITE_COMPONENT = "non_finite_numbers"
# a per-case row's values that the Task leaves out for that case, by name, each with why ({"lesion_dice": "no
# lesion in the reference"}): the run page says so beside the value, as the Task's own mean does not count it
CASE_LEFT_OUT = "left_out_of_task"


@define
class MetricBlock:
    """The task metric: `strict` is completeness-gated (any missing or invalid case gives 0)."""

    name: str
    strict: float
    partial: float
    used: Literal["strict", "partial"] = "strict"
    components: dict[str, float | None] = Factory(dict)
    per_case: list[dict[str, Any]] = Factory(list)
    # the components that are counts (cases answered, skipped, boxes), which the terminal and the pages print as
    # whole numbers: a count of 0 is "0", not a score's "0.000". Declared by the metric, not guessed from a name
    counts: list[str] = Factory(list)
    # the unit of a component or per-case value that has one (PSNR in dB, an error in HU), printed beside it by
    # the terminal and the pages: "psnr_mean_valid 42.807" read as a score of the SSIM's kind
    units: dict[str, str] = Factory(dict)
    # why a component is null, where the metric knows (LPIPS without its weights on disk): shown under the
    # components, where "lpips_mean_valid null" alone read as a failure of the run
    notes: dict[str, str] = Factory(dict)

    @property
    def value(self) -> float:
        return self.strict if self.used == "strict" else self.partial


@define
class PromptPart:
    """One piece of a grade request's prompt. `agent=True` marks text the agent wrote (an answer, a report):
    the grading step fences it and clips it; everything else is the track's own wording."""

    text: str
    agent: bool = False
    label: str = ""


@define
class GradeRequest:
    """A question for a model, made by a metric inside the isolated evaluator (which has no network and no
    keys) and answered by the model-graded scoring step afterwards (`evaluator.grade_evaluation`).

    `grader` names the track's model grader (its eval options `<grader>.provider`, `<grader>.model`, ...);
    the reply must be JSON `{"score": s, "rationale": "..."}` with `min(levels) <= s <= max(levels)`.
    `case_id` is set by the evaluator to the case whose score carried the request; `tag` tells a case's
    requests apart (e.g. the answer and the raw output)."""

    grader: str
    instructions: str
    parts: list[PromptPart]
    levels: list[float] = Factory(lambda: [0.0, 1.0])
    case_id: str = ""
    tag: str = ""


@define
class Evaluation:
    """What the isolated evaluator returns: only facts about the submission, never agent stages."""

    task_id: str
    expected_cases: int
    present_cases: int
    valid_cases: int
    cases: list[CaseVerdict]
    metric: MetricBlock
    extra_files: list[str] = Factory(list)
    duration_s: float = 0.0
    evaluator_version: str = ""
    error: str | None = None
    grade_requests: list[GradeRequest] = Factory(list)  # answered outside the evaluator (`evaluator.grade_evaluation`)
    # frozen files whose bytes no longer match the manifest (or files added after the freeze)
    tampered: list[str] = Factory(list)

    @property
    def completion(self) -> float:
        return self.present_cases / self.expected_cases if self.expected_cases else 0.0

    @property
    def all_valid(self) -> bool:
        return self.expected_cases > 0 and self.valid_cases == self.expected_cases


# ---------------------------------------------------------------- trajectory


@define
class ToolCall:
    id: str
    name: str
    arguments: str
    parsed: dict[str, Any] | None = None
    error: str | None = None
    # "" for a structured call; "text:<format>" when recovered from the reply text (agents/textcalls.py)
    source: str = ""


@define
class AgentTurn:
    """What an agent returns for one step: text and zero or more tool calls."""

    content: str = ""
    tool_calls: list[ToolCall] = Factory(list)
    reasoning: str = ""
    tokens_in: int = 0
    tokens_out: int = 0
    tokens_cached: int = 0
    cost_usd: float = 0.0
    finish_reason: str = ""
    # The agent has nothing further to do (a script ran out of steps): no continue message is sent.
    final: bool = False


@define
class ExecResult:
    exit_code: int
    stdout: str
    stderr: str
    duration_s: float
    timed_out: bool = False
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    capped: bool = False


# ---------------------------------------------------------------- isolation


@define
class BreachEvidence:
    turn: int
    kind: str
    path: str
    command: str = ""


@define
class Isolation:
    sandbox: str
    protections: list[str] = Factory(list)
    gaps: list[str] = Factory(list)
    breached: bool = False
    evidence: list[BreachEvidence] = Factory(list)
    # False when nothing kept the agent from the references or the harness (no filesystem isolation, a
    # tripwire that could not arm, the harness's environment changed): the scores cannot be trusted, and
    # leaderboards and code analyses leave the run out unless asked (--include-unverified)
    verified: bool = True
    unverified: list[str] = Factory(list)

    def distrust(self, reason: str) -> None:
        self.verified = False
        if reason not in self.unverified:
            self.unverified.append(reason)


# ---------------------------------------------------------------- result


@define
class StageScore:
    stage: str
    name: str
    score: float | None
    weight: float
    items: list[ItemVerdict] = Factory(list)
    rule: str = ""


@define
class FiredCode:
    """A post-run error code (E1–E5) or a harness code; codes never change a score."""

    code: str
    message: str
    stage: str = ""
    evidence_turns: list[int] = Factory(list)
    source: str = "harness"


@define
class Header:
    run_id: str
    task: str
    track: str
    tier: str
    agent: str
    sandbox: str
    judge: str
    started_at: str
    versions: dict[str, str] = Factory(dict)
    hashes: dict[str, str] = Factory(dict)
    schema_version: int = SCHEMA_VERSION
    # The task's declared public labelled source when the run had network access (TaskSpec.public_source):
    # the agent could have fetched the answers; leaderboards can set such runs apart. "" otherwise.
    public_source: str = ""
    # The score-changing options this run changed from their defaults, but the fields above (`changed_options`):
    # with them the run's command line can be given again (`rerun_command`). None in a result written before
    # they were kept: its command is not known.
    options: dict[str, Any] | None = None
    # Which attempt of its configuration on the machine that made it (`attempts.draw`: ledger, config, number), with
    # its sweep's id and planned size for a sweep's run ("sweep", "sweep_size"): a leaderboard shows how many of
    # the attempts made are in its folder. None in a result written before attempts were counted.
    attempt: dict[str, Any] | None = None


@define
class Runtime:
    wall_s: float = 0.0
    agent_s: float = 0.0  # waiting for the agent's replies (model time for chat agents)
    exec_s: float = 0.0  # running its tool calls in the sandbox (tool time)
    harness_s: float = 0.0
    eval_s: float = 0.0
    judge_s: float = 0.0
    turns: int = 0
    tool_calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    judge_cost_usd: float = 0.0
    peak_rss_mb: float = 0.0
    text_replies: int = 0  # replies with no tool call (each answered by a continue message while allowed)
    recovered_calls: int = 0  # tool calls recovered from reply text (agent option text_tool_calls)
    context_retries: int = 0  # provider calls retried after a context-overflow error, context trimmed
    time_limit_counts: str = "wall"  # the task's rule for its time limit (wall, or tools: model time excluded)
    node: dict[str, str] = Factory(dict)  # where a sweep ran it: Ray node id and host name
    # harness_s by step (steptimer.py): set-up, sandbox, brief, tripwire, freeze, evaluation, grading, ...
    harness_steps: dict[str, float] = Factory(dict)
    # the first run of a process: wall seconds from the process's start to the run's (interpreter, imports,
    # command-line parsing); 0 for a later run of the same process (a sweep worker's)
    startup_s: float = 0.0
    # CPU seconds of the harness itself up to the sealed record: its own process (start-up included for a
    # process's first run) and the helpers it waits for (the workspace image), not the agent's tool calls nor
    # the evaluator processes
    harness_cpu_s: float = 0.0
    # model names the agent's own program asked for besides the configured model, with how many requests each; the
    # configured model served them all (an installed agent's gateway pins every request to it)
    other_models: dict[str, int] = Factory(dict)
    # the agent's own program and its release (an installed system's `Codex CLI 0.171.0`), or ''
    agent_program: str = ""


@define
class Aggregate:
    agentic: float | None
    overall: float | None
    task: float | None
    rating: str
    rating_reason: str
    rule: str
    agentic_nulls_as_zero: float = 0.0


@define
class Result:
    header: Header
    state: RunState
    end_reason: str
    runtime: Runtime
    stages: list[StageScore]
    task: MetricBlock | None
    aggregate: Aggregate
    isolation: Isolation
    submission: SubmissionManifest = Factory(SubmissionManifest)
    cases: list[CaseVerdict] = Factory(list)
    error_codes: list[FiredCode] = Factory(list)
    judge: JudgeVerdict | None = None
    error: str | None = field(default=None)
    rubric: Rubric | None = None  # the S1–S3 rubric this run was scored with
    # Pro only: summary plots found beside the plan (reported, never scored); None at tiers that ask for none
    summary_plots: list[str] | None = None

    def stage(self, stage: str) -> StageScore:
        return next(s for s in self.stages if s.stage == stage)
