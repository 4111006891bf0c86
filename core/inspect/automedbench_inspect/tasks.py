"""AutoMedBench's tasks as inspect tasks, its submit tool, its scorer, and a solver that replays a scripted agent.

Every installed task (`automedbench tasks`) is registered as `automedbench_inspect/<track>_<task>` (segmentation/demo
-> `automedbench_inspect/segmentation_demo`; `automedbench_inspect/automedbench -T task=ID` names any task). One
sample per task: its input is replaced by the run's own brief (system) and kickoff (user) once the sandbox has
opened, since the brief names the sandbox's paths. The default solver is inspect's `react` agent with its `bash`
and `python` tools and `submit_results`; `--solver` takes any other, `--model` any provider.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import anyio
from inspect_ai import Task, task
from inspect_ai.agent import AgentState, as_solver, react
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import ChatMessageSystem, ChatMessageUser, ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import Metric, SampleScore, Score, Scorer, Target, metric, scorer
from inspect_ai.solver import Generate, Solver, TaskState, solver

try:  # inspect prints this error's message alone, no traceback (a private module of the pinned 0.3.285)
    from inspect_ai._util.error import PrerequisiteError
except ImportError:  # an inspect_ai that moved it: the same message, after inspect's traceback

    class PrerequisiteError(RuntimeError):  # type: ignore[no-redef]
        """A task or tier the bridge does not know."""
from inspect_ai.tool import Tool, bash, python, tool
from inspect_ai.util import SandboxEnvironmentSpec, sandbox

from .bridge import RunEnded
from .engine import Result, UserError, registry
from .sandboxenv import AutoMedBenchSandbox, BridgeConfig
from .turns import model_turn

STAGES = ("S1", "S2", "S3", "S4", "S5")
KEYS = (*STAGES, "Agentic", "Task", "Overall")
PLACEHOLDER = "AutoMedBench task {task} ({tier}): the brief is set when its sandbox opens."


def task_name(task_id: str) -> str:
    """The inspect name of an AutoMedBench task id: segmentation/demo -> segmentation_demo."""
    return re.sub(r"[^A-Za-z0-9_]", "_", task_id)


def _run_sandbox() -> AutoMedBenchSandbox:
    return sandbox().as_type(AutoMedBenchSandbox)


# ---------------------------------------------------------------- the brief and the tools


@solver
def automedbench_brief() -> Solver:
    """The run's brief as the system message and its kickoff as the user message (the task's setup step)."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        env = _run_sandbox()
        context = env.channel.context
        state.messages = [ChatMessageSystem(content=context.brief), ChatMessageUser(content=context.kickoff)]
        state.metadata["run_dir"] = str(env.channel.run_dir)
        return state

    return solve


@tool
def submit_results() -> Tool:
    async def execute() -> str:
        """Declare the outputs final. Ends the run; call it once, after verifying the outputs.

        Returns:
          Whether the submission was accepted (and which outputs are missing), or why it was refused.
        """
        channel = _run_sandbox().channel
        try:
            return await anyio.to_thread.run_sync(channel.submit, model_turn(), abandon_on_cancel=True)
        except RunEnded as exc:
            return f"not submitted: {exc}"

    return execute


@tool
def execute_code() -> Tool:
    async def execute(language: str, code: str) -> str:
        """Run code in a fresh process inside the sandbox (cwd = the workspace). State does not persist between
        calls; write files to keep it.

        Args:
          language: "python" or "bash".
          code: The code to run.

        Returns:
          The exit code, stdout and stderr.
        """
        result = await _run_sandbox().run_code(language, code)
        return f"exit_code: {result.exit_code}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"

    return execute


def automedbench_tools() -> list[Tool]:
    """The run's own tools, as the brief names them: execute_code and submit_results."""
    return [execute_code(), submit_results()]


def inspect_tools() -> list[Tool]:
    """inspect's standard bash and python tools (their calls keep their code in the trajectory), and submit_results."""
    return [bash(), python(), submit_results()]


async def run_still_open(state: AgentState) -> bool:
    """react's loop goes on while the model calls tools and the run is open. Once the run has ended (its submission
    accepted, a limit) every later call is refused: a model that kept calling tools kept inspect going for ever,
    the run long scored (measured: 10 min, 50% of a core, until killed)."""
    return bool(state.output.message.tool_calls) and not _run_sandbox().channel.done.is_set()


@solver
def automedbench_agent() -> Solver:
    """inspect's react agent with the run's tools; it ends when the model stops calling tools or the run ends."""
    return as_solver(react(tools=automedbench_tools(), submit=False, on_continue=run_still_open))


# ---------------------------------------------------------------- replaying a scripted AutoMedBench agent


def scripted_outputs(agent_name: str, context: Any, model: str = "mockllm/model") -> list[ModelOutput]:
    """A scripted AutoMedBench agent's turns as model outputs calling the run's inspect tools, in order."""
    agent = registry().create("agent", agent_name)
    agent.start(context)
    outputs: list[ModelOutput] = []
    for _ in range(1000):
        turn = agent.next_turn([])
        if not turn.tool_calls:
            break
        for call in turn.tool_calls:
            try:
                args = json.loads(call.arguments or "{}")
            except ValueError:
                continue  # a deliberately malformed call has no inspect shape: left out
            if call.name == "submit_results":
                outputs.append(ModelOutput.for_tool_call(model, "submit_results", {}, content=turn.content))
            elif args.get("language") == "python":
                outputs.append(ModelOutput.for_tool_call(model, "python", {"code": args["code"]},
                                                         content=turn.content))
            else:
                outputs.append(ModelOutput.for_tool_call(model, "bash", {"command": args["code"]},
                                                         content=turn.content))
    agent.close()
    return [*outputs, ModelOutput.from_content(model, "All steps are done.")]


@solver
def replay(agent: str = "reference") -> Solver:
    """inspect's mockllm model scripted with an AutoMedBench scripted agent's steps (`reference` or a flawed
    variant), driven by inspect's react agent with its standard bash and python tools: the same transcript scores
    the same through `automedbench run --agent NAME` and `inspect eval`."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        context = _run_sandbox().channel.context
        outputs = iter(scripted_outputs(agent, context))

        def next_output(messages: list[Any], *_: Any) -> ModelOutput:
            output = next(outputs, None) or ModelOutput.from_content("mockllm/model", "All steps are done.")
            # usage given (characters / 4, the core's estimate): mockllm would count with a tokenizer it downloads
            sent = sum(len(m.text) for m in messages) // 4
            said = len(output.completion) // 4
            output.usage = ModelUsage(input_tokens=sent, output_tokens=said, total_tokens=sent + said)
            return output

        model = get_model("mockllm/model", custom_outputs=next_output)
        return await as_solver(react(tools=inspect_tools(), model=model, submit=False,
                                           on_continue=run_still_open))(state, generate)

    return solve


# ---------------------------------------------------------------- scoring


@metric
def scored_mean() -> Metric:
    """Each score key's mean over the samples whose value for it is a number (a stage that could not be scored is
    None, never 0), as one metric named by key: inspect's results table shows "S1 1.000", where a metric per key
    showed its package-qualified name, cut to "automedben…" in an 80-column terminal."""

    def compute(scores: list[SampleScore]) -> dict[str, float]:
        means: dict[str, float] = {}
        for key in KEYS:
            values = [float(v) for v in (_value_of(s, key) for s in scores) if v is not None]
            means[key] = sum(values) / len(values) if values else math.nan
        return means

    return compute


def _value_of(sample: SampleScore, key: str) -> float | None:
    """A sample's number for `key`, or None (not scored, or not a number)."""
    value = sample.score.value
    got = value.get(key) if isinstance(value, dict) else None
    return float(got) if isinstance(got, int | float) and not isinstance(got, bool) else None


def score_of(result: Result, run_dir: Path) -> Score:
    """A run's result as an inspect score: S1-S5, Agentic, Task (the value Overall uses) and Overall as values, the
    rating as the answer, the rest (and the run folder, its result.json and view.html) as metadata."""
    stages = {s.stage: s.score for s in result.stages}
    values: dict[str, float | None] = {key: stages.get(key) for key in STAGES}
    agg = result.aggregate
    values.update(Agentic=agg.agentic, Task=agg.task, Overall=agg.overall)
    view = run_dir / "view.html"
    explanation = (f"{result.state}, {result.end_reason}; rating {agg.rating}; "
                   + ", ".join(f"{k} {'null' if v is None else f'{v:.3f}'}" for k, v in values.items())
                   + (f"; error: {result.error}" if result.error else ""))
    metric = result.task
    return Score(value=values, answer=agg.rating, explanation=explanation, metadata={
        "run_dir": str(run_dir), "result_json": str(run_dir / "result.json"),
        "view_html": str(view) if view.exists() else None, "run_id": result.header.run_id,
        "state": result.state, "end_reason": result.end_reason, "rating": agg.rating,
        "rating_reason": agg.rating_reason, "metric": metric.name if metric else None,
        "task_strict": metric.strict if metric else None, "task_partial": metric.partial if metric else None,
        "task_used": metric.used if metric else None,
        "error_codes": [{"code": c.code, "message": c.message, "turns": c.evidence_turns} for c in result.error_codes],
        "items": {i.id: i.value for s in result.stages for i in s.items},
        "breached": result.isolation.breached, "verified": result.isolation.verified,
        "turns": result.runtime.turns, "tool_calls": result.runtime.tool_calls})


@scorer(metrics=[scored_mean()])
def automedbench_scorer() -> Scorer:
    """Ends the run (without submitting: only `submit_results` submits) and scores it with AutoMedBench's isolated
    evaluator and judge, as `automedbench run` does."""

    async def score(state: TaskState, target: Target) -> Score:
        channel = _run_sandbox().channel
        result = await anyio.to_thread.run_sync(channel.finish, False, abandon_on_cancel=True)
        return score_of(result, channel.run_dir)

    return score


# ---------------------------------------------------------------- the tasks


def automedbench_task(task_id: str, tier: str = "lite", sandbox: str = "local", judge: str = "rules",
                      out: str = "runs", data_root: str | None = None, max_turns: int | None = None,
                      time_limit: float | None = None, exec_timeout: float | None = None,
                      repeat_limit: int | None = None, keep_workspace: bool = False,
                      judge_options: dict[str, str] | None = None, solver: Solver | None = None) -> Task:
    """One AutoMedBench task as an inspect Task (checked now: an unknown task or tier fails before any sample)."""
    try:
        _, spec = registry().task(task_id)
    except UserError as exc:  # `inspect eval` printed this one line at the end of an 80-line traceback
        raise PrerequisiteError(f"automedbench: {exc}") from exc
    if tier not in spec.tiers:
        raise PrerequisiteError(f"automedbench: task {task_id} has no {tier!r} tier; it offers "
                                f"{', '.join(spec.tiers)}")
    config = BridgeConfig(task=task_id, tier=tier, sandbox=sandbox, judge=judge, out=out, data_root=data_root,
                          judge_options=tuple(sorted((judge_options or {}).items())), max_turns=max_turns,
                          time_limit_s=time_limit, exec_timeout_s=exec_timeout, repeat_limit=repeat_limit,
                          keep_workspace=keep_workspace)
    sample = Sample(id=task_name(task_id), input=PLACEHOLDER.format(task=task_id, tier=tier),
                    metadata={"automedbench_task": task_id, "tier": tier})
    return Task(dataset=MemoryDataset([sample], name=task_id), setup=automedbench_brief(),
                solver=solver or automedbench_agent(), scorer=automedbench_scorer(),
                sandbox=SandboxEnvironmentSpec("automedbench", config), name=task_name(task_id),
                metadata={"automedbench_task": task_id, "tier": tier, "sandbox": sandbox, "judge": judge})


def _register(task_id: str) -> Any:
    def factory(tier: str = "lite", sandbox: str = "local", judge: str = "rules", out: str = "runs",
                data_root: str | None = None, max_turns: int | None = None, time_limit: float | None = None,
                exec_timeout: float | None = None, repeat_limit: int | None = None,
                keep_workspace: bool = False) -> Task:
        return automedbench_task(task_id, tier, sandbox, judge, out, data_root, max_turns, time_limit, exec_timeout,
                                 repeat_limit, keep_workspace)

    factory.__name__ = factory.__qualname__ = task_name(task_id)
    factory.__doc__ = f"AutoMedBench task {task_id} (tiers: -T tier=lite|standard|pro)."
    return task(name=task_name(task_id))(factory)


@task(name="automedbench")
def automedbench(task: str = "segmentation/demo", tier: str = "lite", sandbox: str = "local", judge: str = "rules",
                 out: str = "runs", data_root: str | None = None, max_turns: int | None = None,
                 time_limit: float | None = None, exec_timeout: float | None = None,
                 repeat_limit: int | None = None, keep_workspace: bool = False) -> Task:
    """Any installed AutoMedBench task by its id: -T task=segmentation/demo."""
    return automedbench_task(task, tier, sandbox, judge, out, data_root, max_turns, time_limit, exec_timeout,
                             repeat_limit, keep_workspace)


REGISTERED: dict[str, Any] = {}


def register_all() -> dict[str, Any]:
    """Register every installed AutoMedBench task with inspect (once); inspect name -> task function."""
    if not REGISTERED:
        for task_id in sorted(registry().tasks()):
            name = task_name(task_id)
            if name != "automedbench" and name not in REGISTERED:
                REGISTERED[name] = _register(task_id)
    return REGISTERED
