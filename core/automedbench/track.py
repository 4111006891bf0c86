"""The Track interface: everything a medical task family contributes to the harness.

A track owns its data (stagers, demo generators), its output contract (checker), its metric, its
rubric wording and brief templates, and a scripted reference solution. The core owns everything else.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

from attrs import Factory, define, field

from .records import (
    CaseVerdict,
    GradeRequest,
    MetricBlock,
    RatingThresholds,
    Rubric,
    SandboxNeeds,
    ScoringNeed,
    TaskSpec,
)

if TYPE_CHECKING:
    from .pictures import CasePicture


@define
class StagedData:
    """Where a staged task lives: `public/` is what the agent sees, `private/` is for the scorer only."""

    root: Path
    public: Path
    private: Path
    case_ids: list[str]


# The phases a scripted solution's steps belong to: the flawed variants drop, replace and reorder steps by
# phase, so a misspelt phase would silently survive a variant meant to remove it; `ScriptStep` refuses one.
Phase = Literal["explore", "plan", "inspect", "setup", "pilot", "validate", "batch", "verify", "submit", "breach"]
PHASES: tuple[str, ...] = get_args(Phase)


def _declared_phase(instance: Any, attribute: Any, value: str) -> None:
    if value not in PHASES:
        raise ValueError(f"ScriptStep phase {value!r} is not one of: {', '.join(PHASES)}")


@define
class ScriptStep:
    """One tool call of a scripted solution. `phase` (a `Phase`) names the stage it belongs to, which the
    flawed variants act on."""

    phase: Phase = field(validator=_declared_phase)
    language: str = "python"
    code: str = ""
    say: str = ""
    submit: bool = False


@define
class ScriptedSolution:
    """A competent run as tool calls, written by the track; the core's scripted agents replay and damage it."""

    steps: list[ScriptStep] = Factory(list)
    # Replacements for flawed variants, keyed by the variant name (e.g. "wrong-format", or one of the track's
    # own `Track.scripted_variants`): each replaces every step of the phases it names.
    variants: dict[str, list[ScriptStep]] = Factory(dict)


@define
class CaseScore:
    """One case's metric values, and the grade requests (if any) its metric leaves to a model grader."""

    case_id: str
    values: dict[str, Any]
    requests: list[GradeRequest] = Factory(list)


class TaskEvaluation(ABC):
    """Scoring state of one evaluation: `score_case` for each valid case, then `aggregate` once.

    Made by `Track.evaluation` inside the isolated evaluator, so it may hold per-evaluation state
    (caches, loaded reference models) without leaking it across evaluations through the track."""

    def __init__(self, task: TaskSpec, staged: StagedData, options: dict[str, str] | None = None) -> None:
        self.task = task
        self.staged = staged
        self.options = dict(options or {})

    @abstractmethod
    def score_case(self, case_id: str, submitted: Path) -> CaseScore:
        """Metric values for one case whose outputs passed the contract check (`submitted` = its folder)."""

    @abstractmethod
    def aggregate(self, scores: list[CaseScore | None], case_ids: list[str]) -> MetricBlock:
        """Fold per-case scores (None = missing or invalid) into the task metric, strict and partial."""

    def case_picture(self, case_id: str, submitted: Path | None) -> CasePicture | None:
        """A small picture of one case for the run page: its input, the agent's output and the reference side by
        side (`automedbench.api.Panel`: a slice under a mask, boxes, an image with its answer, a text).

        Called by the evaluator right after `score_case` (so the arrays it just loaded can be reused), and for
        missing or invalid cases with `submitted` None; never in the sandbox. Read agent files with the parsers the
        checker uses (size-limited), never run them. The default draws each input, output and reference file by
        its kind (`automedbench.api.default_case_picture`); None: no picture."""
        from .pictures import default_case_picture

        return default_case_picture(self.task.input_files, self.task.output_files, self.staged.public / case_id,
                                    submitted, self.staged.private / case_id)


def _agrees(value: Any) -> bool:
    """A per-case metric value that shows agreement with the reference: True, or a number above 0."""
    if isinstance(value, bool):
        return value
    return isinstance(value, (int, float)) and value == value and value > 0


class Track(ABC):
    """Subclass this in a plugin and register an instance through `automedbench_register_tracks`."""

    name: str = ""

    @abstractmethod
    def tasks(self) -> list[TaskSpec]:
        """Every task this track offers."""

    def task_file_problems(self) -> list[str]:
        """One line per task file of the track that did not load (its path and field), its other tasks listed all
        the same; none for a track whose tasks are not files."""
        return []

    def task(self, task_id: str) -> TaskSpec:
        """The track's task `task_id`; UserError (one line, with the closest ids) when it has none of that id."""
        from .errors import UserError, did_you_mean

        found = {t.id: t for t in self.tasks()}
        if task_id not in found:
            raise UserError(f"no {self.name} task {task_id!r}{did_you_mean(task_id, list(found))}")
        return found[task_id]

    @abstractmethod
    def stage(self, task: TaskSpec, dest: Path, source: Path | None) -> StagedData:
        """Write `dest/public` and `dest/private` (idempotent), through `staging_area(dest)` so a failed or
        concurrent re-stage never leaves a mix. Demo tasks generate; real ones read `source`."""

    @abstractmethod
    def template_dir(self) -> Path:
        """Folder of Jinja2 templates: `task.md.j2` and the optional `skill_s1/2/3.md.j2` hints."""

    @abstractmethod
    def check_case(self, task: TaskSpec, case_id: str, submitted: Path, public: Path) -> CaseVerdict:
        """Validate one case's outputs (in `submitted`) against the contract, using only public inputs."""

    def evaluation(self, task: TaskSpec, staged: StagedData, options: dict[str, str]) -> TaskEvaluation:
        """A fresh scoring object for one evaluation (MONAI's metric lifecycle: made once, fed case by case,
        aggregated once), made in the isolated evaluator; per-evaluation state lives there, not on the track.
        `options` holds only keys from `evaluation_options` (and the `<grader>.*` keys of `model_graders`)."""
        raise NotImplementedError(f"track {self.name} has no evaluation(): it cannot score {task.id}")

    def shared_outputs(self, task: TaskSpec) -> tuple[str, ...]:
        """Files at the outputs folder's top that answer for several cases at once (classification's
        `predictions.csv`, as the original accepts): each case is then checked even without its own folder
        (`check_case` says whether the case was answered), and the files are not listed as extra."""
        return ()

    def rubric(self, task: TaskSpec) -> Rubric:
        """This track's S1–S3 rubric (stage rules, items, tier rules, conditions); the default is the
        core's generic one. Build on `default_rubric()` with `reword`, `with_items` and `with_ladder`."""
        from .rubric import default_rubric

        return default_rubric()

    def rating_thresholds(self, task: TaskSpec, metric: MetricBlock | None) -> RatingThresholds:
        """The bands this run's Task is rated on: the task file's, unless the track rates a substitute
        metric (named in `metric.name`) on bands measured for it."""
        return task.rating

    def rating_cap(self, task: TaskSpec, metric: MetricBlock) -> str | None:
        """Why this Task, whatever its value, rates no better than C (a gaming pattern the metric rewards and
        a component exposes, e.g. boxes repeated under every class); None: rated on the bands alone."""
        return None

    def trivial_baselines(self) -> dict[str, str]:
        """The baselines (of `baselines()`) that a task's bands must hold below B: trivial or gaming
        submissions. Name -> what it games. Every track offers `empty` and `constant`."""
        return {"empty": "an empty output for every case", "constant": "one fixed output for every case"}

    def positive_evidence(self, task: TaskSpec) -> str:
        """What counts as positive metric evidence in one scored case, in words (S5's first half)."""
        return "a case whose metric shows agreement with the reference (a per-case value above 0)"

    def no_positive_evidence(self, task: TaskSpec, metric: MetricBlock) -> str | None:
        """Why no case of this run counts as positive evidence whatever its row says (a run at a trivial
        baseline's level: one label or answer everywhere is right on the cases of that class, which is no
        agreement); None: each case is decided by `positive_case`. Read from the whole run's metric."""
        return None

    def positive_case(self, task: TaskSpec, row: dict[str, Any]) -> bool:
        """Whether one valid case's metric row (`MetricBlock.per_case`) shows positive evidence: a Dice
        above 0 against a non-empty reference, a correct answer, a true positive... The default asks for
        agreement with the reference: a per-case metric value above 0 (a number, or True), so an all-wrong
        or empty submission earns nothing here. A track whose values are above 0 without agreeing (SSIM of any
        image, a count of boxes) overrides it."""
        return any(_agrees(value) for key, value in row.items() if key != "case_id")

    def rubric_conditions(self, task: TaskSpec) -> dict[str, Callable[[list[dict[str, Any]]], bool]]:
        """Conditions (name -> test on the trajectory events) that this track's items name in
        `applies_if`, beside the core's (`automedbench.rubric.CONDITIONS`). Describe each in
        `Rubric.conditions` so the stored rubric says what it means."""
        return {}

    def reference_solution(self, task: TaskSpec, tier: str, data_dir: str, workspace: str) -> ScriptedSolution:
        raise NotImplementedError(f"track {self.name} ships no scripted reference solution")

    def demo_only(self, task: TaskSpec, scope: str = "the generated demo") -> Exception:
        """The refusal of a scripted reference on a real task, with the next step: a method on real data is scored
        as outputs (`evaluate --submission`) or through a model agent (a bare refusal left the user nowhere)."""
        from .errors import UserError

        return UserError(f"the scripted reference solution covers {scope} only, not {task.id}: score your method's "
                         f"outputs with automedbench evaluate --task {task.id} --submission DIR, or run a model agent "
                         "(automedbench plugins lists the agents)")

    def scripted_variants(self) -> dict[str, str]:
        """This track's own flawed variants of its scripted solution, beside the core's (name -> what it
        damages, and which stage should lose points). Each one's steps are `ScriptedSolution.variants[name]`,
        replacing the phases they name; run one with `--agent scripted --agent-option variant=NAME`."""
        return {}

    def baselines(self) -> dict[str, str]:
        """Name -> description of baselines `write_baseline` can produce for `automedbench evaluate`."""
        return {}

    def agent_image(self) -> Path | None:
        """The folder of this track's agent image recipe (a `Dockerfile` built `FROM ${BASE}`, the default agent
        image, plus its build context), shipped as package data; None: runs use the default agent image.
        `automedbench images build` finds it through the registry, so an installed track needs no checkout."""
        return None

    def assets(self, task: TaskSpec) -> Path | None:
        """A folder of read-only files this task ships to the agent (a pinned model's weights), or None.

        The sandbox mounts it read-only at a fixed path that the brief names (also `$ASSETS_DIR`), outside the
        workspace; the run records its digest. It must never hold references: the agent reads all of it."""
        return None

    def sandbox_needs(self, task: TaskSpec) -> SandboxNeeds:
        """What the task's reference method needs inside the sandbox (modules, their install line, whether it
        needs weights): the task file's `needs` by default; a track may declare it for all its tasks. `run`
        refuses a sandbox without it in one line, `validate-task` checks it, `automedbench tasks` shows it."""
        return task.needs

    def scoring_needs(self, task: TaskSpec) -> tuple[ScoringNeed, ...]:
        """The programs `task`'s metric runs in a local evaluator process beyond Python (Java for METEOR), each with
        whether this machine has it: `automedbench tasks TASK` lists them present or missing (a user choosing a
        machine sees what scoring needs before it is missing); none by default."""
        return ()

    def scoring_gap(self, task: TaskSpec) -> str | None:
        """What this machine lacks to score `task` in a local evaluator process (a program its metric runs, such
        as Java for METEOR), as one line naming the fix; None when it has it all. `run`, `sweep` and `evaluate`
        refuse before the agent starts (a run scored without it would rate F through no fault of the agent;
        the docker evaluator brings its own), and `automedbench tasks` shows it in the Ready column. By default
        the first missing one of `scoring_needs`."""
        return next((need.gap for need in self.scoring_needs(task) if not need.found), None)

    def write_baseline(self, task: TaskSpec, name: str, staged: StagedData, dest: Path) -> None:
        raise NotImplementedError(f"track {self.name} has no baseline {name!r}")

    def evaluation_options(self) -> dict[str, str]:
        """Name -> description of the options `evaluation` accepts (`--eval-option KEY=VALUE`)."""
        return {}

    def model_graders(self) -> dict[str, str]:
        """Name -> description of this track's model graders: metrics whose `CaseScore.requests` the
        model-graded scoring step answers outside the evaluator. Each takes the evaluation options
        `<name>.provider` (a registered model backend) and `<name>.<model option>` (model, base_url, ...)."""
        return {}

    def apply_grades(self, task: TaskSpec, metric: MetricBlock, grades: list[Any]) -> MetricBlock:
        """Fold the model grades (`automedbench.api.Grade`, score None when the model could not answer)
        into the metric; called in the harness after the evaluation. The default adds each grader as a
        per-case value and a mean component (null unless every request was answered), never into Task."""
        from .grades import fold_grades

        return fold_grades(metric, grades)

    def check_evaluation_options(self, options: dict[str, str]) -> dict[str, str]:
        """Refuse unknown evaluation options before a run starts (one clear line, not an evaluator crash)."""
        from .errors import UserError, did_you_mean
        from .grades import check_grader_options

        offered = self.evaluation_options()
        graders = self.model_graders()
        for name in graders:
            check_grader_options(options, name)
        for key in options:
            if key.split(".", 1)[0] in graders and "." in key:
                continue
            if key not in offered:
                hint = did_you_mean(key, list(offered)) if offered else "; it takes none"
                raise UserError(f"track {self.name} has no evaluation option {key!r}{hint}")
        return dict(options)

    def submit_gate(self, task: TaskSpec, staged: StagedData, outputs: Path) -> str | None:
        """A track's pre-submit policy: a reason to refuse `submit_results` now, or None to accept.

        Called by the runner during the run, on the agent's live `outputs` folder: an implementation
        must open it and everything below only with no-follow opens (O_NOFOLLOW, dir_fd) and size
        limits, and must never run agent code. The default accepts every submission."""
        return None


def valid_output_gate(case_ids: list[str], min_valid: float, problem: Callable[[str], str | None], output: str,
                      valid_means: str, need: int | None = None) -> str | None:
    """A `submit_gate` on valid outputs: None once ceil(min_valid x N) cases (at least one) have one, or `need`
    where the track counts otherwise (checked in order, stopping when enough are), else the refusal the agent
    reads: how many are valid and needed, what a valid `output` is (`valid_means`) and the first problems.
    `problem(case_id)` is the case's first reason."""
    import math

    if need is None:
        need = max(1, math.ceil(round(min_valid * len(case_ids), 9)))
    valid, problems = 0, []
    for case_id in case_ids:
        if valid >= need:
            break
        reason = problem(case_id)
        if reason:
            problems.append(f"{case_id}: {reason}")
        else:
            valid += 1
    if valid >= need:
        return None
    shown = "; ".join(problems[:3]) + (" ..." if len(problems) > 3 else "")
    return (f"submission refused: {valid} of the {len(case_ids)} cases have a valid {output} ({need} needed before "
            f"you may submit; a valid output is {valid_means}). Problems: {shown}")


class PackagedTrack(Track):
    """A track whose tasks are YAML files in `<root>/tasks` and whose templates are in `<root>/templates`.

    Subclasses live in their package's folder (`root`: the folder of the module that defines the subclass,
    unless the class sets another) and say where their parts live as
    "module:attribute" references relative to the track's package (imported on first use, so listing
    plugins stays fast); the methods below call them, and a track overrides a method only where its
    wiring differs. Without a reference the method keeps the `Track` default.
    """

    root: Path  # where tasks/ and templates/ are: by default the folder of the subclass's module
    demo_stager: str = ""  # (task, dest) -> StagedData, for generated tasks (`demo: true`)
    source_stager: str = ""  # (task, dest, source) -> StagedData, for tasks staged from a download
    evaluation_class: str = ""  # a TaskEvaluation subclass, made with (task, staged, options)
    demo_solution: str = ""  # (task, tier, data_dir, workspace) -> ScriptedSolution, for demo tasks only
    demo_solution_scope: str = "the generated demo"  # what the scripted solution covers, for the refusal
    baseline_module: str = ""  # a module with BASELINES (name -> description), write_baseline(...), optional TRIVIAL

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if getattr(cls, "root", None) is None:
            import sys

            cls.root = Path(sys.modules[cls.__module__].__file__ or ".").parent

    def __init__(self) -> None:
        self._tasks: dict[str, TaskSpec] | None = None  # every task file, read on first listing
        self._unloaded: list[str] = []  # why each task file that did not load, from that listing
        self._one: dict[str, TaskSpec] = {}  # tasks read alone by `task` before any listing

    def _all(self) -> dict[str, TaskSpec]:
        if self._tasks is None:
            from .taskfile import load_task_files

            specs, self._unloaded = load_task_files(self.root / "tasks")
            self._tasks = {t.id: t for t in specs}
        return self._tasks

    def task_file_problems(self) -> list[str]:
        self._all()
        return list(self._unloaded)

    def part(self, reference: str) -> Any:
        """The object a "module:attribute" reference names, the module relative to the track's package."""
        import importlib

        module, _, attribute = reference.partition(":")
        loaded = importlib.import_module(module, type(self).__module__.rpartition(".")[0])
        return getattr(loaded, attribute) if attribute else loaded

    def tasks(self) -> list[TaskSpec]:
        return list(self._all().values())

    def task(self, task_id: str) -> TaskSpec:
        """One task by id, reading its own file (`tasks/<name>.yaml` for `<track>/<name>`) when that file
        declares it: a run reads one task file, not the track's every one (17 for segmentation, ~1 ms each).
        Any other case (no such file, another id in it) is the full listing's answer."""
        if self._tasks is None:
            if task_id in self._one:
                return self._one[task_id]
            track, _, name = task_id.partition("/")
            path = self.root / "tasks" / f"{name}.yaml"
            if track == self.name and name and "/" not in name and not name.startswith(".") and path.is_file():
                from .taskfile import load_task_file

                spec = load_task_file(path)
                if spec.id == task_id:
                    self._one[task_id] = spec
                    return spec
        return super().task(task_id)

    def template_dir(self) -> Path:
        return self.root / "templates"

    def agent_image(self) -> Path | None:
        folder = self.root / "docker"
        return folder if (folder / "Dockerfile").is_file() else None

    def stage(self, task: TaskSpec, dest: Path, source: Path | None) -> StagedData:
        if task.demo:
            return self.stage_demo(task, dest)
        if source is None:
            from .errors import UserError

            raise UserError(f"{task.id} needs the dataset's download folder (--from PATH)")
        return self.stage_source(task, dest, source)

    def stage_demo(self, task: TaskSpec, dest: Path) -> StagedData:
        if not self.demo_stager:
            raise NotImplementedError(f"track {self.name} cannot generate {task.id}")
        return self.part(self.demo_stager)(task, dest)

    def stage_source(self, task: TaskSpec, dest: Path, source: Path) -> StagedData:
        if not self.source_stager:
            raise NotImplementedError(f"track {self.name} has no stager for {task.id}")
        return self.part(self.source_stager)(task, dest, source)

    def evaluation(self, task: TaskSpec, staged: StagedData, options: dict[str, str]) -> TaskEvaluation:
        if self.evaluation_class:
            return self.part(self.evaluation_class)(task, staged, options)
        return super().evaluation(task, staged, options)

    def reference_solution(self, task: TaskSpec, tier: str, data_dir: str, workspace: str) -> ScriptedSolution:
        if not self.demo_solution:
            return super().reference_solution(task, tier, data_dir, workspace)
        if not task.demo:  # real data needs a real model: no scripted method stands in for it
            raise self.demo_only(task, self.demo_solution_scope)
        return self.part(self.demo_solution)(task, tier, data_dir, workspace)

    def baselines(self) -> dict[str, str]:
        return dict(self.part(self.baseline_module).BASELINES) if self.baseline_module else {}

    def assets(self, task: TaskSpec) -> Path | None:
        """`<root>/assets/<name>` when the task file's params name one (`assets: <name>`), else None."""
        name = str(task.params.get("assets") or "")
        if not name:
            return None
        folder = self.root / "assets" / name
        if "/" in name or name.startswith(".") or not folder.is_dir():
            raise ValueError(f"{task.id}: assets {name!r} is not a folder under {self.root / 'assets'}")
        return folder

    def trivial_baselines(self) -> dict[str, str]:
        module = self.part(self.baseline_module) if self.baseline_module else None
        if module is not None and hasattr(module, "TRIVIAL"):
            return dict(module.TRIVIAL)
        return super().trivial_baselines()

    def write_baseline(self, task: TaskSpec, name: str, staged: StagedData, dest: Path) -> None:
        if not self.baseline_module:
            super().write_baseline(task, name, staged, dest)
            return
        self.part(self.baseline_module).write_baseline(task, name, staged, dest)
