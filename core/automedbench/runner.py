"""One run, end to end: stage → brief → sandboxed agent loop → freeze → isolated evaluation → judge → score.

Every run ends in exactly one state (scored, agent_failure, infrastructure_failure, cancelled) and
always leaves a `result.json`, written atomically, even when it fails.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import platform
import resource
import secrets
import shutil
import stat
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from . import __version__, errors, plan_artefacts, scoring, staging
from .agent import CONTINUE_MESSAGE, TOOLS, Agent, AgentContext
from .brief import KICKOFF, render_brief
from .evaluator import run_isolated
from .freeze import freeze
from .fsutil import (
    atomic_write_text,
    current_umask,
    open_dir,
    open_path,
    printable,
    remove_tree,
    sha256_text,
    walk_fd,
)
from .grading import GRADE_CACHE, grade_evaluation
from .judge import Judge, JudgeInput
from .options import RunOptions, score_record
from .pilot import CHECKS_FILE, PilotTracker, read_checks
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
from .rubric import Resolved, describe_conditions
from .rubric import resolve as resolve_rubric
from .sandbox import SandboxSession, SandboxSpec
from .sandboxes.quota import mount_workspace
from .serialize import dumps, write_json
from .track import StagedData, Track
from .trajectory import MODEL_STDERR_TAIL, MODEL_STDOUT_TAIL, TrajectoryWriter, read_events, tail
from .tripwire import Tripwire, plant_decoys

# Tool calls one reply may make; the rest are answered with an error, never run (limits hold per call).
MAX_CALLS_PER_REPLY = 32
# Disk space set aside at the start of a run so its result.json can be written even if the agent fills the disk.
RESULT_RESERVE_BYTES = 8 << 20


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
        self._plots: list[str] = []  # summary plots collected with the plan artefacts
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
        self.pilots = PilotTracker(self.workspace / "outputs", self.run_dir / "pilot", staged.case_ids)
        if self.run_dir.exists():
            raise errors.UserError(f"run directory {self.run_dir} already exists")
        # 0700 while a workspace exists below it: set-id files or device nodes a call left (the agent owns its
        # workspace and may chmod it) are out of reach of every other user on the host
        self.run_dir.mkdir(parents=True, mode=0o700)
        os.chmod(self.run_dir, 0o700)
        reserve = _reserve_space(self.run_dir / ".result-reserve")
        self.quota, self.quota_gap = mount_workspace(self.workspace, self.o.workspace_quota_mb)
        self.progress({"kind": "run_started", "run_id": self.run_id, "run_dir": str(self.run_dir)})
        runtime = Runtime(node=dict(self.o.node))
        header = Header(self.run_id, self.task.id, self.task.track, self.o.tier, self.o.agent, self.o.sandbox,
                        self.o.judge, datetime.now(timezone.utc).isoformat(timespec="seconds"),
                        versions(self.reg, self.task.track), {"task": sha256_text(dumps(self.task)),
                                                             "options": sha256_text(dumps(score_record(self.o))),
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
            evaluation = grade_evaluation(self.track, self.task, evaluation, self.eval_options, self.run_dir,
                                          staged.root / GRADE_CACHE, self.reg)
            runtime.eval_s = round(time.monotonic() - t_eval, 3)
            if not isolation.breached:
                write_json(self.run_dir / CHECKS_FILE, self.pilots.check(self.task.id, staged,
                                                                        self.evaluator_backend))
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
            self._release_workspace(keep=self.o.keep_workspace and runtime.turns > 0)
            if runtime.turns == 0:  # refused before the agent did anything: leave no half-made run folder
                traj.close()
                shutil.rmtree(self.run_dir, ignore_errors=True)
            raise
        except OSError as exc:
            if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):  # a disk the agent could have filled
                state, end_reason = "agent_failure", errors.END_AGENT_ERROR
                error = f"disk full while recording the run ({exc.strerror})"
                codes.append(FiredCode("H-DISK", error))
            else:
                state, end_reason = "infrastructure_failure", errors.END_INFRA_ERROR
                error = f"{type(exc).__name__}: {exc}"
        except errors.SubmissionError as exc:  # the submission made the evaluator fail: the agent's doing
            state, end_reason, error = "agent_failure", errors.END_AGENT_ERROR, str(exc)
            codes.append(FiredCode("H-EVAL", str(exc)))
        except Exception as exc:  # anything else is the harness's fault: retryable
            state, end_reason = "infrastructure_failure", errors.END_INFRA_ERROR
            error = f"{type(exc).__name__}: {exc}"
        finally:
            with contextlib.suppress(OSError):
                traj.close()
        runtime.wall_s = round(time.monotonic() - t0, 3)
        runtime.harness_s = round(runtime.wall_s - runtime.agent_s - runtime.exec_s, 3)
        runtime.peak_rss_mb = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
        result = self._score(header, state, end_reason, error, runtime, isolation, evaluation, verdict,
                             manifest, codes)
        if self.o.tier == "pro":  # the Pro brief asks for them; they enter no stage (the paper scores none)
            result.summary_plots = list(self._plots)
        self._run_finished(result)
        reserve.unlink(missing_ok=True)  # its space is now free for the record
        write_json(self.run_dir / "result.json", result)
        self._release_workspace(keep=self.o.keep_workspace)
        if not self.o.keep_workspace:
            os.chmod(self.run_dir, 0o777 & ~current_umask() | 0o700)
        return result

    def _release_workspace(self, keep: bool) -> None:
        """Unmount a quota'd workspace (kept as `workspace.img` when asked), or remove a plain one unless kept."""
        quota, self.quota = self.quota, None
        if quota is not None:
            quota.release(keep=keep)
        elif not keep:
            remove_tree(self.workspace)  # iterative and no-follow: any depth, symlinks never followed

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
        self.evaluator_backend = sandbox.evaluator
        session: SandboxSession = sandbox.open(spec)
        if not session.isolates_filesystem:
            if self.o.require_isolation:
                session.close()
                raise errors.UserError(f"sandbox {self.o.sandbox} gives no filesystem isolation here (bubblewrap "
                                       "missing or unusable) and isolation is required; install bubblewrap, use "
                                       "--sandbox docker, or pass --no-require-isolation")
            if self.o.sandbox == "local":
                header.sandbox = isolation.sandbox = "local-plain"  # the backend that actually ran
                self.progress({"kind": "warning", "text": "WARNING: bubblewrap is not usable here: the agent "
                               "runs as a plain host process with no filesystem isolation (sandbox local-plain)"})
        isolation.protections, isolation.gaps = session.protections()
        if self.quota is not None:
            isolation.protections.append(self.quota.describe())
        else:
            isolation.gaps.append(self.quota_gap + "; the result is still written: space is reserved for it")
        bound = session.bound_sources()
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
                for index, call in enumerate(reply.tool_calls):
                    if index >= MAX_CALLS_PER_REPLY or time.monotonic() - started >= time_limit:
                        # limits hold per call: calls past the budget are answered, never run
                        why = ("the time limit is reached" if index < MAX_CALLS_PER_REPLY
                               else f"more than {MAX_CALLS_PER_REPLY} calls in one reply")
                        traj.write({"type": "tool", "turn": turn, "call_id": call.id, "name": call.name,
                                    "error": "not_run", "reason": why})
                        messages.append({"role": "tool", "tool_call_id": call.id,
                                         "content": f"ERROR: not run: {why}"})
                        if index < MAX_CALLS_PER_REPLY:
                            end_reason, stop = errors.END_TIME_LIMIT, True
                        continue
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
                    self.pilots.note(event)  # a one-case output is copied now, contract-checked after the run
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
        except RecursionError:  # arguments nested deeper than the parser's stack
            msg = f"ERROR: the arguments of {call.name} are nested too deeply to parse"
            return msg, {**base, "error": "malformed_arguments", "arguments": call.arguments[:2000]}, False
        except (json.JSONDecodeError, ValueError) as exc:
            msg = (f"ERROR: the arguments of {call.name} are not a valid JSON object ({exc}). "
                   'Send {"language": "python"|"bash", "code": "..."}.')
            return msg, {**base, "error": "malformed_arguments", "arguments": call.arguments[:2000]}, False
        if call.name == "submit_results":
            refusal = self._submit_gate(staged)
            if refusal:  # the track's policy: the run goes on, the agent is told why
                reply = {"accepted": False, "reason": refusal}
                return json.dumps(reply), {**base, "result": reply, "refused": True}, False
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

    def _submit_gate(self, staged: StagedData) -> str | None:
        """The track's pre-submit refusal, if any; a gate that fails on odd agent files accepts (fails open)."""
        try:
            refusal = self.track.submit_gate(self.task, staged, self.workspace / "outputs")
        except Exception as exc:
            self.traj.write({"type": "note", "note": f"submit gate error: {type(exc).__name__}: {exc}"})
            return None
        return str(refusal)[:2000] if refusal else None

    def _missing_outputs(self, staged: StagedData) -> list[str]:
        missing = []
        for case in staged.case_ids:
            fd = open_path(self.workspace, f"outputs/{case}")  # never through a symlink the agent planted
            for name in self.task.output_files:
                if fd is None or not _regular_at(fd, name):
                    missing.append(f"{case}/{name}")
            if fd is not None:
                os.close(fd)
        return missing

    # ------------------------------------------------------------------ after the agent

    def _copy_plan(self) -> None:
        """plan.md, plan.png and (collected at every tier, reported at Pro) summary plots, into artefacts/."""
        self._plots = plan_artefacts.collect(self.workspace / "plan", self.run_dir / "artefacts")

    def _judge(self, header: Header) -> JudgeVerdict:
        judge = self.judge
        inp = judge_input(self.run_dir, self.track, self.task, self.o.tier)
        try:
            return judge.grade(inp)
        except Exception as exc:  # an unavailable judge leaves S1–S3 null, never 0
            return JudgeVerdict(judge.name, judge.version, [], error=f"{type(exc).__name__}: {exc}")

    def _run_finished(self, result: Result) -> None:
        """Tell every `automedbench_run_finished` subscriber (e.g. the error-code tagger), each in its own try."""
        for impl in self.reg.pm.hook.automedbench_run_finished.get_hookimpls():
            try:
                impl.function(result=result, run_dir=self.run_dir, registry=self.reg,
                              output_names=list(self.task.output_files))
            except Exception as exc:
                result.error_codes.append(
                    FiredCode("H-HOOK", f"{impl.plugin_name}: {type(exc).__name__}: {exc}"))

    def _score(self, header, state, end_reason, error, runtime, isolation, evaluation, verdict, manifest,
               codes) -> Result:
        events = read_events(self.run_dir / "trajectory.jsonl")
        return score_result(self.track, self.task, header, state, end_reason, error, runtime, isolation,
                            evaluation, verdict, manifest, codes, self.o.task_score, self.o.tier,
                            resolved=run_rubric(self.track, self.task, self.o.tier, events))


def run_rubric(track: Track, task: TaskSpec, tier: str, events: list[dict[str, Any]]) -> Resolved:
    """The track's rubric settled for one run (tier rules, conditions on the trajectory)."""
    return resolve_rubric(track.rubric(task), tier, events, track.rubric_conditions(task))


def judge_input(run_dir: Path, track: Track, task: TaskSpec, tier: str) -> JudgeInput:
    """What a judge sees of a stored run: plan artefacts, trajectory and brief (never the metric).

    `rubric` holds only the items to grade; auto-passed, excluded and not-applicable ones are settled
    by the rubric, the same for every judge."""
    art = run_dir / "artefacts"
    plan_md = (art / "plan.md").read_text("utf-8", "replace") if (art / "plan.md").exists() else None
    plan_png = (art / "plan.png").read_bytes() if (art / "plan.png").exists() else None
    events = read_events(run_dir / "trajectory.jsonl")
    brief = (run_dir / "brief.md").read_text() if (run_dir / "brief.md").exists() else ""
    resolved = run_rubric(track, task, tier, events)
    checks = read_checks(run_dir)
    extra = {} if checks is None else {"pilot_checks": checks}
    return JudgeInput(task, tier, resolved.graded, plan_md, plan_png, events, brief, extra, resolved=resolved)


def positive_cases(track: Track, task: TaskSpec, evaluation: Evaluation) -> int:
    """Valid cases whose metric row the track counts as positive evidence (S5)."""
    rows = {r.get("case_id"): r for r in evaluation.metric.per_case if isinstance(r, dict)}
    return sum(1 for c in evaluation.cases if c.valid and track.positive_case(task, rows.get(c.case_id, {})))


def score_result(track: Track, task: TaskSpec, header: Header, state: str, end_reason: str, error: str | None,
                 runtime: Runtime, isolation: Isolation, evaluation: Evaluation | None,
                 verdict: JudgeVerdict | None, manifest: SubmissionManifest, codes: list[FiredCode],
                 task_score: str | None, tier: str, judged: bool = True,
                 resolved: Resolved | None = None) -> Result:
    """Combine evaluator facts and judge verdicts into the final record (shared by run, evaluate, rejudge).

    `resolved` is the rubric as settled for this run (`run_rubric`); it is stored in the result."""
    metric = evaluation.metric if evaluation is not None else None
    if metric is not None:
        metric.used = task_score or task.task_score
    stages = []
    if judged:
        if resolved is None:
            resolved = run_rubric(track, task, tier, [])
        stages += scoring.judged_stages(resolved, verdict, tier)
    else:
        stages += scoring.judged_stages(None, None, tier)
        for stage in stages:
            stage.rule = "not graded: no agent run"
    if evaluation is not None:
        stages += scoring.deterministic_stages(evaluation, positive_cases(track, task, evaluation),
                                               track.positive_evidence(task), manifest.submitted)
    if state in ("infrastructure_failure", "cancelled"):
        stages, metric = [], None
    if isolation.breached:
        stages, metric = scoring.zero_for_breach(stages, metric)
    rating = scoring.rate(evaluation, metric, track.rating_thresholds(task, metric), isolation.breached)
    agg = scoring.aggregate(stages, metric, rating) if stages else scoring.Aggregate(
        None, None, None, "F" if state != "cancelled" else "-", state.replace("_", " "), scoring.RULE)
    if isolation.breached:
        agg.agentic, agg.overall, agg.task = 0.0, 0.0, 0.0
        codes.append(FiredCode("H-BREACH", f"{len(isolation.evidence)} read(s) of private/decoy paths",
                               evidence_turns=sorted({e.turn for e in isolation.evidence})))
    return Result(header, state, end_reason, runtime, stages, metric, agg, isolation, manifest,
                  evaluation.cases if evaluation else [], codes, verdict, error,
                  describe_conditions(resolved.rubric) if judged and resolved is not None else None)


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


def _snapshot(root: Path, max_entries: int = 50_000) -> dict[str, tuple[int, int]]:
    """Size and mtime of every file under outputs/, keyed by a printable relative path.

    Walked through no-follow descriptors (a symlinked outputs/ or sub-folder is never followed), bounded in
    depth and entries, and names that are not UTF-8 are shown with backslash escapes.
    """
    fd = open_dir(root)
    if fd is None:
        return {}
    snap = {}
    try:
        for rel, dir_fd, _name, info in walk_fd(fd, max_entries=max_entries):
            if dir_fd < 0 or info is None:
                continue
            snap[printable(rel)] = (info.st_size, info.st_mtime_ns)
    finally:
        os.close(fd)
    return snap


def _regular_at(dir_fd: int, name: str) -> bool:
    try:
        return stat.S_ISREG(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _reserve_space(path: Path, size: int = RESULT_RESERVE_BYTES) -> Path:
    """Hold `size` real bytes on the run folder's disk until the result is written (freed just before)."""
    with contextlib.suppress(OSError), path.open("wb") as handle:
        try:
            os.posix_fallocate(handle.fileno(), 0, size)
        except (OSError, AttributeError):
            handle.write(b"\0" * size)
    return path
