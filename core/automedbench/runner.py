"""One run, end to end: stage → brief → sandboxed agent loop → freeze → isolated evaluation → judge → score.

Every run ends in exactly one state (scored, agent_failure, infrastructure_failure, cancelled) and
always leaves a `result.json`, written atomically, even when it fails.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import secrets
import shutil
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from attrs import Factory, define

from . import __version__, errors, scoring, staging
from .agent import CONTINUE_MESSAGE, TOOLS, Agent, AgentContext
from .brief import KICKOFF, render_brief
from .evaluator import run_isolated
from .freeze import freeze
from .fsutil import atomic_write_text, printable, sha256_text
from .judge import Judge, JudgeInput
from .plugins import Registry
from .records import (
    AgentTurn,
    BreachEvidence,
    Evaluation,
    FiredCode,
    Header,
    Isolation,
    JudgeVerdict,
    Result,
    Runtime,
    SubmissionManifest,
    TaskSpec,
)
from .sandbox import SandboxSession, SandboxSpec
from .serialize import dumps, write_json
from .track import StagedData, Track
from .trajectory import MODEL_STDERR_TAIL, MODEL_STDOUT_TAIL, TrajectoryWriter, read_events, tail
from .tripwire import Tripwire, plant_decoys

PLAN_FILES = ("plan.md", "plan.png")
MAX_PLAN_BYTES = 20 << 20


@define
class RunOptions:
    task: str
    tier: str = "lite"
    agent: str = "reference"
    sandbox: str = "local"
    judge: str = "rules"
    out: Path = Path("runs")
    data_root: Path | None = None
    agent_options: dict[str, Any] = Factory(dict)
    judge_options: dict[str, Any] = Factory(dict)
    max_turns: int | None = None
    time_limit_s: float | None = None
    exec_timeout_s: float | None = None
    memory_mb: int = 8192
    task_score: str | None = None  # None: the task's own default (TaskSpec.task_score)
    run_id: str | None = None
    keep_workspace: bool = False
    gpus: str = ""
    eval_options: dict[str, str] = Factory(dict)
    node: dict[str, str] = Factory(dict)  # where a sweep executor ran it (host, Ray node id)


Progress = Callable[[dict[str, Any]], None]


def new_run_id() -> str:
    return datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(3)


def versions(registry: Registry, track_name: str) -> dict[str, str]:
    comp = registry.get("track", track_name)
    return {"automedbench": __version__, "python": platform.python_version(),
            f"track:{comp.distribution}": comp.version, "platform": platform.platform()}


class Run:
    """Holds the state of one run while it executes; `execute()` returns the final Result."""

    def __init__(self, options: RunOptions, registry: Registry, progress: Progress | None = None) -> None:
        self.o = options
        self.reg = registry
        self.progress = progress or (lambda event: None)
        if options.tier not in ("lite", "standard", "pro"):
            raise errors.UserError(f"unknown tier {options.tier!r}; choose lite, standard or pro")
        if options.task_score not in (None, "strict", "partial"):
            raise errors.UserError("--task-score must be strict or partial")
        self.track: Track
        self.track, self.task = registry.task(options.task)
        if options.tier not in self.task.tiers:
            raise errors.UserError(f"task {self.task.id} has no {options.tier} tier; it offers "
                                   f"{', '.join(self.task.tiers)}")
        self.eval_options = self.track.check_evaluation_options(options.eval_options)
        self.agent_comp = registry.get("agent", options.agent)
        self.sandbox_comp = registry.get("sandbox", options.sandbox)
        self.judge_comp = registry.get("judge", options.judge)
        # Built here so that a bad option or a missing API key fails before any run folder exists.
        self.agent: Agent = self.agent_comp.factory(**options.agent_options)
        self.judge: Judge = self.judge_comp.factory(**options.judge_options)
        self.data_root = options.data_root or staging.default_data_root()
        self.run_id = options.run_id or new_run_id()
        self.run_dir = options.out.expanduser().resolve() / self.run_id
        self.workspace = self.run_dir / "workspace"
        self.evaluator_backend = "process"  # a sandbox may ask for another ("docker": a container)

    # ------------------------------------------------------------------ main

    def execute(self) -> Result:
        t0 = time.monotonic()
        staged = staging.ensure(self.track, self.task, self.data_root)
        if self.run_dir.exists():
            raise errors.UserError(f"run directory {self.run_dir} already exists")
        self.run_dir.mkdir(parents=True)
        self.progress({"kind": "run_started", "run_id": self.run_id, "run_dir": str(self.run_dir)})
        runtime = Runtime(node=dict(self.o.node))
        header = Header(self.run_id, self.task.id, self.task.track, self.o.tier, self.o.agent, self.o.sandbox,
                        self.o.judge, datetime.now(timezone.utc).isoformat(timespec="seconds"),
                        versions(self.reg, self.task.track), {"task": sha256_text(dumps(self.task)),
                                                             "options": sha256_text(dumps(self._options_record())),
                                                             **staging.digests(self.task, self.data_root)})
        isolation = Isolation(self.o.sandbox)
        state, end_reason, error = "scored", errors.END_AGENT_STOPPED, None
        evaluation: Evaluation | None = None
        verdict: JudgeVerdict | None = None
        manifest = SubmissionManifest()
        traj = self.traj = TrajectoryWriter(self.run_dir / "trajectory.jsonl")
        codes: list[FiredCode] = []
        try:
            try:
                end_reason, submitted = self._agent_phase(staged, header, runtime, isolation, traj, codes)
            except errors.AgentError as exc:
                state, end_reason, error, submitted = "agent_failure", errors.END_AGENT_ERROR, str(exc), False
                codes.append(FiredCode("H-AGENT", str(exc)))
            traj.write({"type": "end", "reason": end_reason})
            manifest = freeze(self.workspace / "outputs", self.run_dir / "submission", submitted=submitted)
            write_json(self.run_dir / "submission_manifest.json", manifest)
            self._copy_plan()
            t_eval = time.monotonic()
            self.progress({"kind": "phase", "phase": "evaluate", "cases": len(staged.case_ids)})
            evaluation = run_isolated(self.task.id, staged, self.run_dir / "submission",
                                      self.run_dir / "submission_manifest.json", self.run_dir / "evaluation.json",
                                      options=self.eval_options, backend=self.evaluator_backend)
            runtime.eval_s = round(time.monotonic() - t_eval, 3)
            if not isolation.breached:
                t_judge = time.monotonic()
                self.progress({"kind": "phase", "phase": "judge", "judge": self.o.judge})
                verdict = self._judge(header)
                runtime.judge_s = round(time.monotonic() - t_judge, 3)
                runtime.judge_cost_usd = verdict.cost_usd
                write_json(self.run_dir / "judge.json", verdict)
        except KeyboardInterrupt:
            state, end_reason, error = "cancelled", errors.END_CANCELLED, "cancelled by the user"
            if not traj.ended:  # interrupted in the agent phase: the trajectory still gets its closing event
                traj.write({"type": "end", "reason": end_reason})
        except errors.UserError:
            if runtime.turns == 0:  # refused before the agent did anything: leave no half-made run folder
                traj.close()
                shutil.rmtree(self.run_dir, ignore_errors=True)
            raise
        except Exception as exc:  # anything else is the harness's fault: retryable
            state, end_reason = "infrastructure_failure", errors.END_INFRA_ERROR
            error = f"{type(exc).__name__}: {exc}"
        finally:
            traj.close()
        runtime.wall_s = round(time.monotonic() - t0, 3)
        runtime.harness_s = round(runtime.wall_s - runtime.agent_s - runtime.exec_s, 3)
        runtime.peak_rss_mb = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
        result = self._score(header, state, end_reason, error, runtime, isolation, evaluation, verdict,
                             manifest, codes)
        self._tag_codes(result)
        write_json(self.run_dir / "result.json", result)
        if not self.o.keep_workspace:
            shutil.rmtree(self.workspace, ignore_errors=True)
        return result

    def _options_record(self) -> dict[str, Any]:
        """The run's configuration as hashed into the header (paths excluded: they differ per machine)."""
        o = self.o
        return {"tier": o.tier, "agent": o.agent, "agent_options": o.agent_options, "sandbox": o.sandbox,
                "judge": o.judge, "judge_options": o.judge_options, "max_turns": o.max_turns,
                "time_limit_s": o.time_limit_s, "exec_timeout_s": o.exec_timeout_s, "memory_mb": o.memory_mb,
                "task_score": o.task_score}

    # ------------------------------------------------------------------ agent loop

    def _agent_phase(self, staged: StagedData, header: Header, runtime: Runtime, isolation: Isolation,
                     traj: TrajectoryWriter, codes: list[FiredCode]) -> tuple[str, bool]:
        for sub in ("plan", "outputs"):
            (self.workspace / sub).mkdir(parents=True, exist_ok=True)
        info = self.task.tiers[self.o.tier]
        if self.o.tier == "lite" and info.requirements:
            atomic_write_text(self.workspace / "requirements.txt", "\n".join(info.requirements) + "\n")
        decoy = plant_decoys(staged.private, self.run_dir / ".decoy")
        decoys = {"/data/private": decoy, "/private": decoy, str(staged.private.resolve()): decoy}
        sandbox = self.sandbox_comp.factory()
        spec = SandboxSpec(self.workspace, staged.public, network=self.task.network, memory_mb=self.o.memory_mb,
                           decoys=decoys, gpus=[g for g in self.o.gpus.split(",") if g.strip()],
                           track=self.task.track)
        self.evaluator_backend = getattr(sandbox, "evaluator", "process")
        session: SandboxSession = sandbox.open(spec)
        isolation.protections, isolation.gaps = session.protections()
        bound = getattr(session, "bound_sources", lambda: [])()
        private = staged.private.resolve()
        if any(private == b or b in private.parents for b in bound) and Path("/") not in bound:
            session.close()
            raise errors.UserError(f"private data {private} lies under a directory the sandbox mounts; "
                                   "move the data root (--data-root) elsewhere")
        brief = render_brief(self.task, self.o.tier, self.track.template_dir(), data_dir=session.data_dir,
                             workspace_dir=session.workspace_dir, case_ids=staged.case_ids)
        atomic_write_text(self.run_dir / "brief.md", brief)
        header.hashes["brief"] = sha256_text(brief)
        kickoff = KICKOFF[self.o.tier]
        agent = self.agent
        context = AgentContext(self.task, self.o.tier, brief, kickoff, TOOLS, session.data_dir,
                               session.workspace_dir, self.track, dict(self.o.agent_options), str(self.workspace))
        tripwire = Tripwire()
        tripwire.watch_tree(decoy)
        if not session.isolates_filesystem:
            # the agent could reach the real references: any open of them during the agent phase is a breach
            tripwire.watch_tree(staged.private)
        if not tripwire.active:
            isolation.gaps.append("inotify unavailable: reads of private files are not detected")
        elif tripwire.unwatched:
            isolation.gaps.append(f"inotify watch limit: {tripwire.unwatched} private/decoy path(s) unwatched")
        traj.write({"type": "start", "run_id": self.run_id, "task": self.task.id, "tier": self.o.tier,
                    "agent": self.o.agent, "sandbox": self.o.sandbox, "brief_sha256": header.hashes["brief"],
                    "data_dir": session.data_dir, "workspace_dir": session.workspace_dir})
        messages: list[dict[str, Any]] = [{"role": "system", "content": brief}, {"role": "user", "content": kickoff}]
        max_turns = self.o.max_turns or self.task.max_turns
        time_limit = self.o.time_limit_s or self.task.time_limit_s
        exec_timeout = self.o.exec_timeout_s or self.task.exec_timeout_s
        started = time.monotonic()
        submitted, end_reason, turn = False, errors.END_AGENT_STOPPED, 0
        continues = agent.continues if agent.continues is not None else self.task.text_reply_continues
        try:
            agent.start(context)
            while True:
                elapsed = time.monotonic() - started
                if turn >= max_turns:
                    end_reason = errors.END_TURN_LIMIT
                    break
                if elapsed >= time_limit:
                    end_reason = errors.END_TIME_LIMIT
                    break
                turn += 1
                t_agent = time.monotonic()
                try:
                    reply: AgentTurn = agent.next_turn(messages)
                except errors.AgentError:
                    raise
                except Exception as exc:
                    raise errors.AgentError(f"agent {self.o.agent} raised {type(exc).__name__}: {exc}") from exc
                runtime.agent_s += time.monotonic() - t_agent
                runtime.turns = turn
                runtime.tokens_in += reply.tokens_in
                runtime.tokens_out += reply.tokens_out
                runtime.cost_usd += reply.cost_usd
                traj.write({"type": "assistant", "turn": turn, "content": reply.content,
                            "reasoning": reply.reasoning,
                            "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments,
                                            **({"source": c.source} if c.source else {})}
                                           for c in reply.tool_calls],
                            "tokens_in": reply.tokens_in, "tokens_out": reply.tokens_out,
                            "tokens_cached": reply.tokens_cached,
                            "cost_usd": reply.cost_usd, "finish_reason": reply.finish_reason,
                            "latency_s": round(time.monotonic() - t_agent, 3)})
                messages.append(_assistant_message(reply))
                self.progress({"kind": "turn", "turn": turn, "content": reply.content,
                               "tools": [c.name for c in reply.tool_calls]})
                runtime.recovered_calls += sum(1 for c in reply.tool_calls if c.source)
                if not reply.tool_calls:
                    _drain(agent, traj, turn, runtime)
                    if reply.final:
                        end_reason = errors.END_AGENT_STOPPED
                        break
                    runtime.text_replies += 1
                    if runtime.text_replies > continues:
                        end_reason = errors.END_NO_TOOL_CALL if continues else errors.END_AGENT_STOPPED
                        traj.write({"type": "no_tool_call", "turn": turn, "action": "stop",
                                    "text_replies": runtime.text_replies, "continues": continues})
                        break
                    traj.write({"type": "no_tool_call", "turn": turn, "action": "continue",
                                "text_replies": runtime.text_replies, "continues": continues,
                                "message": CONTINUE_MESSAGE})
                    messages.append({"role": "user", "content": CONTINUE_MESSAGE})
                    continue
                stop = False
                for call in reply.tool_calls:
                    runtime.tool_calls += 1
                    remaining = max(1.0, time_limit - (time.monotonic() - started))
                    content, event, is_submit = self._tool(call, session, staged, min(exec_timeout, remaining), turn)
                    if event.get("duration_s"):
                        runtime.exec_s += event["duration_s"]
                    touched = tripwire.drain()
                    if touched:
                        isolation.breached = True
                        command = event.get("code", call.arguments)[:2000]
                        for path in touched:
                            kind = ("read of decoy references (mounted at " + ", ".join(sorted(decoys)) + ")"
                                    if path.startswith(str(decoy)) else "read of private references")
                            if path in tripwire.modified:
                                kind = kind.replace("read of", "change to", 1)
                            isolation.evidence.append(BreachEvidence(turn, kind, path, command))
                        traj.write({"type": "breach", "turn": turn, "paths": touched})
                    traj.write(event)
                    messages.append({"role": "tool", "tool_call_id": call.id, "content": content})
                    self.progress({"kind": "tool", "turn": turn, **{k: event.get(k) for k in
                                                                   ("name", "exit_code", "duration_s")}})
                    if isolation.breached:
                        end_reason, stop = errors.END_BREACH, True
                        break
                    if is_submit:
                        submitted, end_reason, stop = True, errors.END_SUBMITTED, True
                        break
                _drain(agent, traj, turn, runtime)
                if stop:
                    break
        finally:
            session.close()
            tripwire.close()
            agent.close()
            runtime.agent_s = round(runtime.agent_s, 3)
            runtime.exec_s = round(runtime.exec_s, 3)
        if end_reason in (errors.END_TURN_LIMIT, errors.END_TIME_LIMIT):
            codes.append(FiredCode("H-BUDGET", f"run stopped: {end_reason}"))
        return end_reason, submitted

    def _tool(self, call, session: SandboxSession, staged: StagedData, timeout: float,
              turn: int) -> tuple[str, dict[str, Any], bool]:
        base = {"type": "tool", "turn": turn, "call_id": call.id, "name": call.name}
        try:
            args = json.loads(call.arguments) if call.arguments.strip() else {}
            if not isinstance(args, dict):
                raise ValueError("arguments must be a JSON object")
        except (json.JSONDecodeError, ValueError) as exc:
            msg = (f"ERROR: the arguments of {call.name} are not a valid JSON object ({exc}). "
                   'Send {"language": "python"|"bash", "code": "..."}.')
            return msg, {**base, "error": "malformed_arguments", "arguments": call.arguments[:2000]}, False
        if call.name == "submit_results":
            missing = self._missing_outputs(staged)
            reply = {"accepted": True, "complete": not missing, "missing": missing[:50],
                     "missing_count": len(missing)}
            return json.dumps(reply), {**base, "result": reply}, True
        if call.name != "execute_code":
            return (f"ERROR: unknown tool {call.name!r}; tools are execute_code and submit_results",
                    {**base, "error": "unknown_tool"}, False)
        language, code = args.get("language"), args.get("code")
        if language not in ("python", "bash") or not isinstance(code, str) or not code.strip():
            msg = "ERROR: execute_code needs language ('python' or 'bash') and non-empty code"
            return msg, {**base, "error": "bad_arguments", "arguments": call.arguments[:2000]}, False
        if not _is_utf8(code):  # a JSON escape like \ud800 decodes to text no script file can hold
            msg = "ERROR: the code contains a lone surrogate (e.g. \\ud800) and cannot be saved as UTF-8"
            return msg, {**base, "error": "bad_arguments", "arguments": call.arguments[:2000]}, False
        before = _snapshot(self.workspace / "outputs")
        result = session.execute(language, code, timeout)
        after = _snapshot(self.workspace / "outputs")
        changed = sorted({p.split("/", 1)[0] for p, meta in after.items() if before.get(p) != meta})
        cases = {p.split("/", 1)[0] for p in after} & set(staged.case_ids)
        event = {**base, "language": language, "code": code, "exit_code": result.exit_code,
                 "duration_s": result.duration_s, "timed_out": result.timed_out, "capped": result.capped,
                 "stdout_bytes": result.stdout_bytes, "stderr_bytes": result.stderr_bytes,
                 "changed_cases": changed[:200], "cases_with_outputs": len(cases)}
        traj_fields = {}
        traj_fields.update(self.traj.stream_field(turn, call.id, "stdout", result.stdout))
        traj_fields.update(self.traj.stream_field(turn, call.id, "stderr", result.stderr))
        event.update(traj_fields)
        content = (f"exit_code: {result.exit_code}\nstdout:\n{tail(result.stdout, MODEL_STDOUT_TAIL)}\n"
                   f"stderr:\n{tail(result.stderr, MODEL_STDERR_TAIL)}")
        return content, event, False

    def _missing_outputs(self, staged: StagedData) -> list[str]:
        out = self.workspace / "outputs"
        return [f"{case}/{name}" for case in staged.case_ids for name in self.task.output_files
                if not (out / case / name).is_file()]

    # ------------------------------------------------------------------ after the agent

    def _copy_plan(self) -> None:
        dest = self.run_dir / "artefacts"
        dest.mkdir(exist_ok=True)
        plan = self.workspace / "plan"
        if plan.is_symlink() or not plan.is_dir():  # a symlink would point the harness at a host folder
            return
        for name in PLAN_FILES:
            src = plan / name
            if src.is_file() and not src.is_symlink() and src.stat().st_size <= MAX_PLAN_BYTES:
                shutil.copyfile(src, dest / name)

    def _judge(self, header: Header) -> JudgeVerdict:
        judge = self.judge
        inp = judge_input(self.run_dir, self.track, self.task, self.o.tier)
        try:
            return judge.grade(inp)
        except Exception as exc:  # an unavailable judge leaves S1–S3 null, never 0
            return JudgeVerdict(judge.name, judge.version, [], error=f"{type(exc).__name__}: {exc}")

    def _tag_codes(self, result: Result) -> None:
        """Post-run error codes E1–E5 from the registered detectors (diagnostic: scores are untouched)."""
        from .codes import tag_run

        try:
            tag_run(self.run_dir, result, self.reg, self.task.output_files)
        except Exception as exc:
            result.error_codes.append(FiredCode("H-DETECTOR", f"tagging failed: {type(exc).__name__}: {exc}"))

    def _score(self, header, state, end_reason, error, runtime, isolation, evaluation, verdict, manifest,
               codes) -> Result:
        return score_result(self.track, self.task, header, state, end_reason, error, runtime, isolation,
                            evaluation, verdict, manifest, codes, self.o.task_score, self.o.tier)


def judge_input(run_dir: Path, track: Track, task: TaskSpec, tier: str) -> JudgeInput:
    """What a judge sees of a stored run: plan artefacts, trajectory and brief (never the metric)."""
    art = run_dir / "artefacts"
    plan_md = (art / "plan.md").read_text("utf-8", "replace") if (art / "plan.md").exists() else None
    plan_png = (art / "plan.png").read_bytes() if (art / "plan.png").exists() else None
    events = read_events(run_dir / "trajectory.jsonl")
    brief = (run_dir / "brief.md").read_text() if (run_dir / "brief.md").exists() else ""
    return JudgeInput(task, tier, track.rubric(task), plan_md, plan_png, events, brief)


def score_result(track: Track, task: TaskSpec, header: Header, state: str, end_reason: str, error: str | None,
                 runtime: Runtime, isolation: Isolation, evaluation: Evaluation | None,
                 verdict: JudgeVerdict | None, manifest: SubmissionManifest, codes: list[FiredCode],
                 task_score: str | None, tier: str, judged: bool = True) -> Result:
    """Combine evaluator facts and judge verdicts into the final record (shared by run, evaluate, rejudge)."""
    metric = evaluation.metric if evaluation is not None else None
    if metric is not None:
        metric.used = task_score or task.task_score
    stages = []
    if judged:
        stages += scoring.judged_stages(track.rubric(task), verdict, tier)
    else:
        stages += scoring.judged_stages([], None, tier)
        for stage in stages:
            stage.rule = "not graded: no agent run"
    if evaluation is not None:
        stages += scoring.deterministic_stages(evaluation, manifest.submitted)
    if state in ("infrastructure_failure", "cancelled"):
        stages, metric = [], None
    if isolation.breached:
        stages, metric = scoring.zero_for_breach(stages, metric)
    rating = scoring.rate(evaluation, metric, task.rating, isolation.breached)
    agg = scoring.aggregate(stages, metric, rating) if stages else scoring.Aggregate(
        None, None, None, "F" if state != "cancelled" else "-", state.replace("_", " "), scoring.RULE)
    if isolation.breached:
        agg.agentic, agg.overall, agg.task = 0.0, 0.0, 0.0
        codes.append(FiredCode("H-BREACH", f"{len(isolation.evidence)} read(s) of private/decoy paths",
                               evidence_turns=sorted({e.turn for e in isolation.evidence})))
    return Result(header, state, end_reason, runtime, stages, metric, agg, isolation, manifest,
                  evaluation.cases if evaluation else [], codes, verdict, error)


def _drain(agent: Agent, traj: TrajectoryWriter, turn: int, runtime: Runtime) -> None:
    """Write the events only the agent saw (retries, context trimming) after its turn; count overflows."""
    for extra in agent.drain_events():
        runtime.context_retries += extra.get("type") == "context_overflow"
        traj.write({**extra, "turn": turn, "imported": True})


def _assistant_message(reply: AgentTurn) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.tool_calls:
        msg["tool_calls"] = [{"id": c.id, "type": "function",
                              "function": {"name": c.name, "arguments": c.arguments}} for c in reply.tool_calls]
    return msg


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """Size and mtime of every file under outputs/, keyed by a printable relative path.

    A symlinked outputs/ is not followed (the harness would walk a host tree the agent chose), and
    names that are not UTF-8 are shown with backslash escapes so the trajectory can hold them.
    """
    if root.is_symlink() or not root.is_dir():
        return {}
    snap = {}
    for folder, dirnames, filenames in os.walk(root, followlinks=False):
        here = Path(folder)
        for name in [*filenames, *(d for d in dirnames if (here / d).is_symlink())]:
            path = here / name
            try:
                info = path.lstat()
            except OSError:
                continue
            snap[printable(path.relative_to(root).as_posix())] = (info.st_size, info.st_mtime_ns)
    return snap
