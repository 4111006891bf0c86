"""One run, end to end, as named steps, in the order `execute` takes them:

    stage → open the run folder → agent phase (workspace, sandbox, brief, tripwire, the conversation)
    → freeze → evaluation → grading → pilot checks → judge → scoring → run_finished hooks → result.json

Each step is a block or a method named for it (`RunState.step`, `steptimer.timed`: its time goes to
`runtime.harness_steps`), and each calls into the one module that does its work: staging, tripwire, brief,
conversation (the agent's turns, yielded as trajectory events that the agent phase writes at once, so a crash
still keeps every turn so far), freeze, evaluator, pilot, scoring, resultproof.
Every run ends in exactly one state (scored, agent_failure, infrastructure_failure, cancelled) and
always leaves a `result.json`, written atomically, even when it fails. What the run changes as it goes
lives in one `RunState`; each step below reads and writes it, and the folder's names are `RunFolder`'s.
"""

from __future__ import annotations

import contextlib
import copy
import errno
import os
import resource
import secrets
import shutil
import time
import traceback
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from . import attempts, errors, interrupt, plan_artefacts, staging, steptimer
from .agent import TOOLS, Agent, AgentContext, agent_program, other_models
from .brief import KICKOFF, render_brief
from .conversation import AgentLoop, Conversation
from .evaluator import (
    environment_snapshot,
    evaluator_path,
    failed_evaluation,
    grade_evaluation,
    run_isolated,
    snapshot_changes,
)
from .freeze import disk_full, freeze
from .fsutil import (
    atomic_write_text,
    current_umask,
    printable,
    remove_tree,
    sha256_text,
    tree_digest,
)
from .harnessstate import known_state_dirs, state_dir
from .judge import Judge
from .needs import sandbox_gap
from .observed import ObservedSteps
from .options import RunOptions, changed_options, conditions_record, score_record, warm_wanted
from .ownedpaths import check_runs_folder
from .pilot import PilotTracker
from .plugins import Registry, call_hook, check_options
from .provenance import scoring_record, versions
from .records import (
    BreachEvidence,
    FiredCode,
    Header,
    Isolation,
    Result,
    Runtime,
)
from .resultproof import write_result
from .runfolder import RunFolder
from .runstate import RunState
from .sandbox import BWRAP_NEXT_STEP, SandboxSession, SandboxSpec
from .scoring import ScoreInputs, judge_input, run_rubric, score_result
from .serialize import dumps, write_json
from .track import StagedData, Track
from .trajectory import MAX_AGENT_PHASE_BYTES, TrajectoryWriter
from .tripwire import Tripwire, plant_decoys, run_decoy_dir
from .verdictcaps import graded

# Why a run without filesystem isolation is never a trusted score (result.json, terminal, reports)
UNVERIFIED_PLAIN = ("no filesystem isolation (local-plain): the agent could read the references and the host's "
                    "files; the score is not verified")
# Disk space set aside at the start of a run so its result.json can be written even if the agent fills the disk.
RESULT_RESERVE_BYTES = 8 << 20


Progress = Callable[[dict[str, Any]], None]


def new_run_id() -> str:
    return datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(3)


class Run:
    """One run while it executes; `execute()` returns the final Result."""

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
        self.sandbox = self.sandbox_comp.factory()
        # before any folder: one line naming the install
        gap = sandbox_gap(self.track, self.task, self.sandbox, registry.distribution("track", self.track.name))
        if gap is not None:
            raise errors.UserError(gap)
        if options.warm_evaluator:  # the warm evaluator is a plugin's (the campaign's): missing, say so now
            registry.get("evaluator", "warm")
        self.warm = warm_wanted(options, "warm" in registry.components["evaluator"])
        # Built here so that a bad option or a missing API key fails before any run folder exists.
        check_options(self.agent_comp, options.agent_options)
        check_options(self.judge_comp, options.judge_options)
        self.agent: Agent = self.agent_comp.factory(**options.agent_options)
        self.agent.check_task(self.track, self.task, options.tier)
        self.judge: Judge = self.judge_comp.factory(**options.judge_options)
        self.data_root = options.data_root or staging.default_data_root()
        # the track's read-only files for the agent (a pinned model's weights), mounted read-only; digested
        assets = self.track.assets(self.task)
        self.assets = Path(assets).resolve() if assets is not None else None
        self.run_id = options.run_id or new_run_id()
        self.folder = RunFolder(options.out.expanduser().resolve() / self.run_id)
        self.run_dir = self.folder.path
        self.workspace = self.folder.workspace
        # the workspace quota: as the run says, else the task's declared need
        self.workspace_mb = (options.workspace_quota_mb if options.workspace_quota_mb is not None
                             else self.task.workspace_mb)
        self.evaluator_backend = "process"  # a sandbox may ask for another ("docker": a container)
        self.quota = None
        self.made_folder = False
        # True once every place the agent can write is on its reserved workspace image (quota + isolation):
        # a full host disk is then never the agent's doing
        self.confined = False
        # without filesystem isolation: the evaluator's import path and its state before the agent ran
        self.env_paths: list[str] = []
        self.env_skip: list[str] = []
        self.env_before: dict[str, tuple[int, ...]] | None = None

    # ------------------------------------------------------------------ main

    def execute(self) -> Result:
        t0 = time.monotonic()
        self.cpu = steptimer.CpuLedger()  # the harness's own CPU (start-up included for a process's first run)
        needs = self._needs_line()
        if needs:  # a real task not staged is refused next, in one line of its own
            self.progress({"kind": "preparing", "needs": needs})
        staged = staging.ensure(self.track, self.task, self.data_root)
        self.pilots = PilotTracker(self.folder.outputs, self.folder.pilot, staged.case_ids)
        t_staged = time.monotonic()
        st: RunState | None = None
        try:
            reserve = self._open_folder()
            st = self._new_state()
            self.traj = TrajectoryWriter(self.folder.trajectory)
        except BaseException:  # an interrupt, or the attempt ledger or trajectory failing (a full disk): before the
            # agent did anything, so nothing stays mounted, no half-made folder and no attempt read as left out
            self._abandon_folder()
            if st is not None and st.header.attempt:
                with contextlib.suppress(Exception):
                    attempts.release(st.header.attempt)
            raise
        steptimer.add(st.runtime, "staging", t_staged - t0)
        steptimer.add(st.runtime, "workspace_quota", time.monotonic() - t_staged)
        try:
            self._record(st, staged)
        except KeyboardInterrupt:  # Ctrl-C, or SIGTERM/SIGHUP where the command line turned it into one
            st.fail("cancelled", errors.END_CANCELLED, interrupt.reason())
            if not self.traj.ended:  # interrupted in the agent phase: the trajectory still gets its closing event
                self.traj.write({"type": "end", "reason": st.end_reason})
        except errors.UserError:
            self._release_workspace(keep=self.o.keep_workspace and st.runtime.turns > 0)
            if st.runtime.turns == 0:  # refused before the agent did anything: leave no half-made run folder
                self.traj.close()
                shutil.rmtree(self.run_dir, ignore_errors=True)
                if st.header.attempt:  # nor an attempt a leaderboard would call made and left out
                    with contextlib.suppress(OSError):  # a ledger that cannot be written never hides the refusal
                        attempts.release(st.header.attempt)
            raise
        except OSError as exc:
            if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG) and self.confined:
                # every place the agent could write is on its reserved image: another run or the host filled it
                st.fail("infrastructure_failure", errors.END_INFRA_ERROR, f"disk full while recording the run "
                        f"({exc.strerror}); the agent's writes were confined to its workspace quota, so another "
                        "process on the host filled the disk")
            elif exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):  # a disk the agent could have filled
                st.fail("agent_failure", errors.END_AGENT_ERROR, f"disk full while recording the run "
                        f"({exc.strerror})", "H-DISK")
            else:
                st.fail("infrastructure_failure", errors.END_INFRA_ERROR, f"{type(exc).__name__}: {exc}")
        except errors.ProviderUnavailable as exc:  # the agent's provider was down before its model said anything
            st.fail("infrastructure_failure", errors.END_PROVIDER_DOWN, str(exc))
        except errors.SubmissionError as exc:  # the submission made the evaluator fail: the agent's doing
            st.fail("agent_failure", errors.END_AGENT_ERROR, str(exc), "H-EVAL")
        except Exception as exc:  # anything else is the harness's fault: retryable
            st.fail("infrastructure_failure", errors.END_INFRA_ERROR, f"{type(exc).__name__}: {exc}")
        finally:
            with contextlib.suppress(OSError):
                self.traj.close()
        try:
            # an interrupt waits until the record is written and the workspace released (a second acts at once)
            with interrupt.held():
                return self._finish(st, t0, reserve)
        except KeyboardInterrupt:
            if self.folder.result.exists():  # the record is written: only releasing the workspace was cut short
                self._release_workspace(keep=self.o.keep_workspace)
                raise
            # interrupted twice while scoring: the run is recorded as cancelled all the same, never half-scored
            st.fail("cancelled", errors.END_CANCELLED, interrupt.reason())
            return self._finish(st, t0, reserve)
        except Exception as exc:
            # a fault while scoring or writing the record (a track hook's bug) is the harness's: the run is still
            # recorded, as an infrastructure failure naming it (its traceback on stderr), without the evaluation
            # the fault came from; if even that record cannot be made, the fault propagates, and it never leaves
            # the workspace image mounted on the host
            traceback.print_exc()
            if not self.folder.result.exists():
                st.fail("infrastructure_failure", errors.END_INFRA_ERROR,
                        f"fault while recording the run: {type(exc).__name__}: {exc}"[:500])
                st.evaluation = None
                with contextlib.suppress(Exception):
                    return self._finish(st, t0, reserve)
            with contextlib.suppress(Exception):
                self._release_workspace(keep=self.o.keep_workspace)
            raise

    def _needs_line(self) -> str:
        """What the run will take, said before staging or the agent does any work: its budget, the disk its
        workspace reserves, its sandbox and its data (a demo's first run generates it). "" for a real task that is
        not staged: the run is refused before any work."""
        counted = ("model replies excluded" if self.task.time_limit_counts == "tools"
                   else "every second from the first turn")
        time_s = self.o.time_limit_s or self.task.time_limit_s
        per_call = self.o.exec_timeout_s or self.task.exec_timeout_s
        disk = (f"a {self.workspace_mb} MB workspace, reserved before the agent starts" if self.workspace_mb
                else "no workspace size limit")
        line = (f"budget {time_s:g} s ({counted}), {self.o.max_turns or self.task.max_turns} turns, {per_call:g} s "
                f"per call; disk: {disk}; sandbox {self.o.sandbox}")
        try:
            staged = (staging.task_dir(self.data_root, self.task) / staging.STAMP).is_file()
        except OSError:  # an unreadable data root: staging, next, refuses it in its own line
            return ""
        if staged:
            return f"{line}; data staged under {self.data_root}"
        return f"{line}; data: {self.task.case_count} case(s) generated now (no download)" if self.task.demo else ""

    def _open_folder(self) -> Path:
        """Make the run folder (refusing an existing one) and reserve the space its result.json needs."""
        if self.run_dir.exists():
            raise errors.UserError(f"run directory {self.run_dir} already exists")
        # 0700 while a workspace exists below it: set-id files or device nodes a call left (the agent owns its
        # workspace and may chmod it) are out of reach of every other user on the host
        self.run_dir.parent.mkdir(parents=True, exist_ok=True)
        check_runs_folder(self.run_dir.parent)  # no other user can swap the run folder the harness will sign
        self.run_dir.mkdir(mode=0o700)
        self.made_folder = True
        os.chmod(self.run_dir, 0o700)
        reserve = _reserve_space(self.folder.reserve)
        try:
            self.quota, self.quota_gap = self.sandbox.limit_workspace(self.workspace, self.workspace_mb)
        except errors.UserError:  # refused before anything ran (no room to reserve): no half-made run folder
            shutil.rmtree(self.run_dir, ignore_errors=True)
            raise
        self.progress({"kind": "run_started", "run_id": self.run_id, "run_dir": str(self.run_dir)})
        return reserve

    def _abandon_folder(self) -> None:
        """Undo `_open_folder` after an interrupt: unmount the workspace, remove the run folder."""
        if self.made_folder:  # never a folder this run did not make (an existing one is refused, not removed)
            self._release_workspace(keep=False)
            shutil.rmtree(self.run_dir, ignore_errors=True)

    def _new_state(self) -> RunState:
        task_digest, software = sha256_text(dumps(self.task)), versions(self.reg, self.task.track)
        hashes = {"task": task_digest, "options": sha256_text(dumps(score_record(self.o))),
                  **staging.digests(self.task, self.data_root)}
        if self.assets is not None:  # a changed weight file shows in the record, as changed data does
            hashes["assets"] = tree_digest(self.assets)
        # a leaderboard never pools runs whose conditions differ (budgets, task score, judge...), nor runs of
        # one task scored differently (the task's definition, the harness's and track's versions, the weights)
        hashes["conditions"] = sha256_text(dumps(conditions_record(self.o)))
        hashes["scoring"] = sha256_text(dumps(scoring_record(task_digest, software, hashes.get("assets", ""))))
        header = Header(self.run_id, self.task.id, self.task.track, self.o.tier, self.o.agent, self.o.sandbox,
                        self.o.judge, datetime.now(timezone.utc).isoformat(timespec="seconds"), software, hashes,
                        public_source=self.task.public_source if self.task.network else "",
                        options=changed_options(self.o))
        # drawn before the agent does anything, whatever the run ends as: a run that went badly counts as made
        header.attempt = attempts.draw(self.o.agent, self.task.id, self.o.tier, hashes["conditions"])
        if self.o.sweep:
            header.attempt.update(sweep=str(self.o.sweep.get("id", "")), sweep_size=int(self.o.sweep.get("size", 0)))
        return RunState(header, Runtime(node=dict(self.o.node)), Isolation(self.o.sandbox))

    def _record(self, st: RunState, staged: StagedData) -> None:
        """The run's steps once its folder is open, in order, each writing its file into the folder: the agent
        phase, then freeze, evaluation, grading, pilot checks and judge, each a block named for its step."""
        try:
            self._agent_phase(st, staged)
        except errors.AgentError as exc:
            st.fail("agent_failure", errors.END_AGENT_ERROR, str(exc), "H-AGENT")
            st.submitted = False
        self.traj.write({"type": "end", "reason": st.end_reason})
        with st.step("freeze"):
            # the outputs frozen into submission/ (its manifest beside); plan.md, plan.png and summary plots
            # (collected at every tier, reported at Pro) into artefacts/
            reserve = {"disk_reserve": 0} if self.confined else {}  # the copy's space is in the run's reservation
            st.manifest = freeze(self.folder.outputs, self.folder.submission, submitted=st.submitted, **reserve)
            left = disk_full(st.manifest)
            if self.confined and left:  # never the agent's missing outputs: it could fill nothing but its image
                raise OSError(errno.ENOSPC, f"the disk filled while the outputs were frozen ({len(left)} file(s) "
                                            "not copied)")
            write_json(self.folder.manifest, st.manifest)
            st.plots = plan_artefacts.collect(self.folder.plan, self.folder.artefacts)
            # the scripts the agent's calls named, for the run page's evidence links (no stage reads them)
            plan_artefacts.collect_scripts(self.workspace, self.folder.events(), self.folder.artefacts)
        t_eval = time.monotonic()
        self.progress({"kind": "phase", "phase": "evaluate", "cases": len(staged.case_ids)})
        try:
            with st.step("evaluation"):
                # the frozen submission scored in the isolated evaluator (its CPU not the harness's)
                with self.cpu.exclude("evaluation"):
                    st.evaluation = run_isolated(self.task.id, staged, self.folder.submission, self.folder.manifest,
                                                 self.folder.evaluation, options=self.eval_options,
                                                 backend=self._evaluator(), pictures=self.o.pictures)
                if st.evaluation.tampered:  # only a process that escaped the sandbox can change the frozen files
                    st.isolation.breached = True
                    st.isolation.evidence += [BreachEvidence(st.runtime.turns, "change to the frozen submission "
                                                             "after the freeze", path)
                                              for path in st.evaluation.tampered[:20]]
            with st.step("grading"):  # grade requests answered by the model-graded step, folded into the metric
                st.evaluation = grade_evaluation(self.reg, self.track, self.task, st.evaluation, self.eval_options,
                                                 self.run_dir, trusted=st.isolation.verified)
        except errors.SubmissionError as exc:  # the submission made the evaluator fail: the agent's doing, Task 0
            st.fail("agent_failure", errors.END_AGENT_ERROR, str(exc), "H-EVAL")
            st.evaluation = failed_evaluation(self.task.id, staged, st.manifest, str(exc))
            write_json(self.folder.evaluation, st.evaluation)
        else:
            st.runtime.eval_s = round(time.monotonic() - t_eval, 3)
        if st.isolation.breached:
            return
        with st.step("pilot_checks"):  # the one-case outputs copied during the run, contract-checked (S3)
            with self.cpu.exclude("evaluation"):
                checks = self.pilots.check_contracts(self.task.id, staged, self._evaluator())
            write_json(self.folder.checks, checks)
        with st.step("judge"):  # the judge's verdict on the stored run; an unavailable judge leaves S1-S3 null
            t_judge = time.monotonic()
            self.progress({"kind": "phase", "phase": "judge", "judge": self.o.judge})
            judge = self.judge
            # bounded by what the harness observed: a judge cannot grade above the run's own facts
            verdict = graded(judge, judge_input(self.folder, self.track, self.task, self.o.tier))
            st.runtime.judge_s = round(time.monotonic() - t_judge, 3)
            st.runtime.judge_cost_usd = verdict.cost_usd
            st.verdict = verdict
            write_json(self.folder.judge, verdict)

    def _evaluator(self) -> str:
        """The sandbox's evaluator backend, or the warm service in place of a fresh process when asked."""
        warm = self.warm and self.evaluator_backend == "process"  # docker keeps its container
        return "warm" if warm else self.evaluator_backend

    def _finish(self, st: RunState, t0: float, reserve: Path) -> Result:
        """Score the state, tell the subscribers, write result.json and drop the workspace."""
        result = self._score(st)
        self._seal_times(result.runtime, t0)  # the subscribers (the run page among them) see the times so far
        self._run_finished(result)  # the error codes (E1-E5) and other subscribers
        # measured after the rubric and the post-run analysis (error-code detectors): their time is the
        # harness's; sealed here: writing result.json and releasing the workspace come after and are not in it
        self._seal_times(result.runtime, t0)
        steptimer.close(result.runtime)
        reserve.unlink(missing_ok=True)  # its space is now free for the record
        unsigned = write_result(self.folder, result)  # with the proof that the harness wrote it
        if result.state == "infrastructure_failure" and st.header.attempt:
            # its retry takes the number again: one attempt, lost by the harness; a ledger that cannot be written
            # (a full or read-only disk) leaves the number drawn, never the recorded run's end undone
            with contextlib.suppress(OSError):
                attempts.void(st.header.attempt)
        if unsigned:
            self.progress({"kind": "warning", "text": f"WARNING: {unsigned}: the result will not count"})
        self._release_workspace(keep=self.o.keep_workspace)
        if not self.o.keep_workspace:
            os.chmod(self.run_dir, 0o777 & ~current_umask() | 0o700)
        self._result_written(result)
        return result

    @steptimer.timed("scoring")
    def _score(self, st: RunState) -> Result:
        """The run's record from its state: stages, Task, Agentic, Overall and the rating (`score_result`)."""
        result = score_result(ScoreInputs(
            track=self.track, task=self.task, header=st.header, state=st.state, end_reason=st.end_reason,
            runtime=st.runtime, isolation=st.isolation, manifest=st.manifest, evaluation=st.evaluation,
            verdict=st.verdict, error=st.error, codes=st.codes, task_score=self.o.task_score,
            resolved=run_rubric(self.track, self.task, self.o.tier, self.folder.events())))
        if self.o.tier == "pro":  # the Pro brief asks for them; they enter no stage (the paper scores none)
            result.summary_plots = list(st.plots)
        return result

    def _seal_times(self, runtime: Runtime, t0: float) -> None:
        """The run's wall, harness and CPU times up to now."""
        runtime.wall_s = round(time.monotonic() - t0, 3)
        runtime.harness_s = round(runtime.wall_s - runtime.agent_s - runtime.exec_s, 3)
        runtime.startup_s, runtime.harness_cpu_s = self.cpu.startup_s, self.cpu.harness()
        runtime.peak_rss_mb = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)

    def _release_workspace(self, keep: bool) -> None:
        """Unmount a quota'd workspace (kept as `workspace.img` when asked), or remove a plain one unless kept."""
        quota = self.quota
        if quota is not None:
            quota.release(keep=keep)
            self.quota = None  # only once released: a release an interrupt cut short is done again
        elif not keep:
            remove_tree(self.workspace)  # iterative and no-follow: any depth, symlinks never followed

    # ------------------------------------------------------------------ agent phase: set-up

    def _agent_phase(self, st: RunState, staged: StagedData) -> None:
        """Open the sandbox, brief the agent and run its turns until it stops, submits or runs out of budget. The
        decoys are the run's own, in the harness state folder, where no other run's agent can open them (trip
        this run's wire), and go with the agent phase."""
        with run_decoy_dir() as decoy:  # removed with the phase; a killed harness's, by the next run
            self._prepare_workspace(st, staged, decoy)
            self._agent_session(st, staged, decoy)

    def _agent_session(self, st: RunState, staged: StagedData, decoy: Path) -> None:
        """The agent phase in its sandbox, the decoys planted in `decoy` mounted where the references would be."""
        decoys = {"/data/private": decoy, "/private": decoy, str(staged.private.resolve()): decoy}
        session = self._open_sandbox(st, staged, decoys)
        try:  # a failure before the turns' own try below must not leave the session (and its call folder) open
            with st.step("brief"):  # as the agent sees it (its paths inside the sandbox), stored and hashed
                brief = render_brief(self.task, self.o.tier, self.track.template_dir(), data_dir=session.data_dir,
                                     workspace_dir=session.workspace_dir, case_ids=staged.case_ids,
                                     extra={"assets_dir": session.assets_dir})
                atomic_write_text(self.folder.brief, brief)
                st.header.hashes["brief"] = sha256_text(brief)
            kickoff = KICKOFF[self.o.tier]
            with st.step("tripwire"):  # the decoy (and, without filesystem isolation, the real references) watched
                tripwire = Tripwire()
                tripwire.watch_tree(decoy)
                if not session.isolates_filesystem:
                    # the agent could reach the real references: any open of them during the agent phase is a breach
                    tripwire.watch_tree(staged.private)
                why = ("inotify unavailable: reads of private files are not detected" if not tripwire.active else
                       f"inotify watch limit: {tripwire.unwatched} private/decoy path(s) unwatched"
                       if tripwire.unwatched else "")
                if why:
                    st.isolation.gaps.append(why)
                    if not session.isolates_filesystem:  # the tripwire is all that stands between agent and references
                        st.isolation.distrust(f"the tripwire could not arm ({why})")
            agent = self.agent
            loop = AgentLoop(staged, session, tripwire, decoy, decoys,
                             [{"role": "system", "content": brief}, {"role": "user", "content": kickoff}],
                             self.o.max_turns or self.task.max_turns, self.o.time_limit_s or self.task.time_limit_s,
                             self.o.exec_timeout_s or self.task.exec_timeout_s,
                             agent.continues if agent.continues is not None else self.task.text_reply_continues,
                             count_model_time=self.task.time_limit_counts == "wall", repeat_limit=self.o.repeat_limit)
            st.runtime.time_limit_counts = self.task.time_limit_counts
            self.observed = ObservedSteps(self.folder.outputs, staged.case_ids, self.pilots, self.progress)
            context = AgentContext(self.task, self.o.tier, brief, kickoff, TOOLS, session.data_dir,
                                   session.workspace_dir, self.track, dict(self.o.agent_options), str(self.workspace),
                                   max_turns=loop.max_turns, time_limit_s=loop.time_limit, steps=self.observed)
        except BaseException:
            session.close()
            raise
        try:
            conversation = Conversation(run_id=self.run_id, task=self.task, track=self.track, o=self.o,
                                        agent=agent, reg=self.reg, folder=self.folder, pilots=self.pilots,
                                        observed=self.observed, cpu=self.cpu, progress=self.progress)
            events = conversation.events(st, loop, context)
            # each as it happens (a crash keeps every turn so far), within what the agent phase may write
            self.traj.write_all(events, limit=MAX_AGENT_PHASE_BYTES)
        finally:
            t_close = time.monotonic()
            session.close()
            if self.env_before is not None:
                changed = snapshot_changes(self.env_before, environment_snapshot(self.env_paths, skip=self.env_skip))
                if changed:
                    st.isolation.distrust(f"the harness's Python environment changed during the agent phase "
                                          f"({len(changed)} path(s), e.g. {printable(max(changed, key=len))[:200]})")
            if self.assets is not None and tree_digest(self.assets) != st.header.hashes.get("assets"):
                st.isolation.distrust(f"the track's assets ({self.assets}) changed during the agent phase")
            if tripwire.overflowed:
                st.isolation.distrust("the tripwire's event queue overflowed: opens of references may have gone unseen")
            tripwire.close()
            st.runtime.other_models = other_models(agent)  # the agent phase is over: its counts are final
            st.runtime.agent_program = agent_program(agent)
            agent.close()
            steptimer.add(st.runtime, "sandbox_close", time.monotonic() - t_close)
            st.runtime.agent_s = round(st.runtime.agent_s, 3)
            st.runtime.exec_s = round(st.runtime.exec_s, 3)
        if st.end_reason in (errors.END_TURN_LIMIT, errors.END_TIME_LIMIT):
            st.codes.append(FiredCode("H-BUDGET", f"run stopped: {st.end_reason}"))

    @steptimer.timed("workspace_quota")
    def _prepare_workspace(self, st: RunState, staged: StagedData, decoy: Path) -> None:
        """plan/ and outputs/ (and Lite's requirements.txt) in the workspace; the decoy references in `decoy`."""
        for sub in (self.folder.plan, self.folder.outputs):
            sub.mkdir(parents=True, exist_ok=True)
        info = self.task.tiers[self.o.tier]
        if self.o.tier == "lite" and info.requirements:
            atomic_write_text(self.workspace / "requirements.txt", "\n".join(info.requirements) + "\n")
        plant_decoys(staged.private, decoy)

    @steptimer.timed("sandbox_open")
    def _open_sandbox(self, st: RunState, staged: StagedData, decoys: dict[str, Path]) -> SandboxSession:
        """A session of the chosen backend; refused (UserError) when it cannot keep the references out."""
        sandbox = self.sandbox
        self._check_assets(staged)
        tools = self._agent_binds(staged)
        # an agent's runtime may reserve far more address space than it uses (Node: ~10 GB per WebAssembly memory)
        space = max(self.o.memory_mb, self.agent.address_space_mb) if self.o.memory_mb > 0 else 0
        spec = SandboxSpec(self.workspace, staged.public, network=self.task.network, memory_mb=self.o.memory_mb,
                           address_space_mb=space, decoys=decoys, gpus=[g for g in self.o.gpus.split(",") if g.strip()],
                           track=self.task.track, assets=self.assets, tools=tools)
        self.evaluator_backend = sandbox.evaluator
        session: SandboxSession = sandbox.open(spec)
        isolation = st.isolation
        self.unisolated = not session.isolates_filesystem
        if not session.isolates_filesystem:
            if self.o.require_isolation:
                session.close()
                raise errors.UserError(f"sandbox {self.o.sandbox} gives no filesystem isolation here (bubblewrap "
                                       "missing or unusable) and isolation is required; install bubblewrap, use "
                                       "--sandbox docker, or pass --no-require-isolation")
            if self.o.sandbox == "local":
                st.header.sandbox = isolation.sandbox = "local-plain"  # the backend that actually ran
                why = f" ({session.unisolated_why})" if session.unisolated_why else ""
                self.progress({"kind": "warning", "text": f"WARNING: bubblewrap is not usable here{why}: the agent "
                               "runs as a plain host process with no filesystem isolation (sandbox local-plain); "
                               f"for an isolated, verified run {BWRAP_NEXT_STEP}"})
            isolation.distrust(UNVERIFIED_PLAIN)
            self.progress({"kind": "warning", "text": "UNVERIFIED: " + UNVERIFIED_PLAIN})
            # the agent runs as the harness's user: what the evaluator will import is watched for changes
            self.env_paths = evaluator_path([self.run_dir.resolve(), staged.root.resolve()])
            # where harness processes write during any run: never imported, and below a checkout on the path
            self.env_skip = [str(p) for p in (*known_state_dirs(), self.data_root, self.run_dir.parent)]
            self.env_before = environment_snapshot(self.env_paths, skip=self.env_skip)
        isolation.protections, isolation.gaps = session.protections()
        if self.quota is not None:
            isolation.protections.append(self.quota.describe())
            # every backend keeps the agent's writes on its image now (local-plain calls: everything else is
            # read-only in their namespace), and the image's copies are reserved with it: a full disk is
            # another process's doing, never the agent's
            self.confined = True
            self.pilots.disk_reserve = 0
        else:
            isolation.gaps.append(self.quota_gap + "; the result is still written: space is reserved for it")
        bound = session.bound_sources()
        private = staged.private.resolve()
        if any(private == b or b in private.parents for b in bound) and Path("/") not in bound:
            session.close()
            raise errors.UserError(f"private data {private} lies under a directory the sandbox mounts; "
                                   "move the data root (--data-root) elsewhere")
        state = state_dir().resolve()
        if any(state == b or b in state.parents for b in bound) and Path("/") not in bound:
            session.close()
            raise errors.UserError(f"the harness state folder {state} lies under a directory the sandbox mounts; "
                                   "set AUTOMEDBENCH_STATE to a folder elsewhere")
        return session

    def _agent_binds(self, staged: StagedData) -> list[Path]:
        """The installed agent's program folders, refused when they share a tree with data, references, the run
        folder or the harness state (everything under them becomes readable to the agent)."""
        try:
            binds = [Path(p).resolve() for p in self.agent.sandbox_binds()]
        except Exception as exc:
            raise errors.AgentError(f"agent {self.o.agent} raised {type(exc).__name__} in sandbox_binds: "
                                    f"{str(exc)[:200]}") from exc
        for bind in binds:
            if not bind.is_dir() or bind == Path("/"):
                raise errors.UserError(f"the agent's program folder {bind} is not a folder that can be mounted")
            for name, other in (("staged task", staged.root), ("data root", self.data_root),
                                ("run folder", self.run_dir), ("harness state", state_dir())):
                other = Path(other).resolve()
                if other == bind or other in bind.parents or bind in other.parents:
                    raise errors.UserError(f"the agent's program folder {bind} overlaps the {name} {other}: "
                                           "install the agent elsewhere")
        return binds

    def _check_assets(self, staged: StagedData) -> None:
        """Refuse assets that share a tree with the staged task (its private references), the data root, the run
        folder or the harness state: the agent reads every file of the folder."""
        if self.assets is None:
            return
        if not self.assets.is_dir():
            raise errors.UserError(f"the track's assets {self.assets} are not a folder")
        for name, other in (("staged task", staged.root), ("data root", self.data_root), ("run folder", self.run_dir),
                            ("harness state", state_dir())):
            other = Path(other).resolve()
            if other == self.assets or other in self.assets.parents or self.assets in other.parents:
                raise errors.UserError(f"the track's assets {self.assets} overlap the {name} {other}: "
                                       "assets must lie apart from data, references and runs")

    # ------------------------------------------------------------------ after the agent

    @steptimer.timed("run_finished_hooks")
    def _run_finished(self, result: Result) -> None:
        """Tell every `automedbench_run_finished` subscriber (e.g. the error-code tagger), each in its own try."""
        # pluggy's own call order (tryfirst first, trylast last): the list it returns runs the other way
        for impl in reversed(self.reg.pm.hook.automedbench_run_finished.get_hookimpls()):
            try:
                call_hook(impl, result=result, run_dir=self.run_dir, registry=self.reg,
                          output_names=list(self.task.output_files))
            except Exception as exc:
                result.error_codes.append(
                    FiredCode("H-HOOK", f"{impl.plugin_name}: {type(exc).__name__}: {exc}"))

    def _result_written(self, result: Result) -> None:
        """Tell every `automedbench_result_written` subscriber (the run page), each in its own try: the result is
        written, so a failure is a warning of the run's progress, not a code in the record. Each gets a copy: what
        one changes never reaches the next nor what `execute` returns (the command's summary and exit status)."""
        for impl in reversed(self.reg.pm.hook.automedbench_result_written.get_hookimpls()):
            try:
                call_hook(impl, result=copy.deepcopy(result), run_dir=self.run_dir)
            except Exception as exc:
                text = f"WARNING: {impl.plugin_name}: {type(exc).__name__}: {exc}"
                self.progress({"kind": "warning", "text": text[:600]})


def _reserve_space(path: Path, size: int = RESULT_RESERVE_BYTES) -> Path:
    """Hold `size` real bytes on the run folder's disk until the result is written (freed just before)."""
    with contextlib.suppress(OSError), path.open("wb") as handle:
        try:
            os.posix_fallocate(handle.fileno(), 0, size)
        except (OSError, AttributeError):
            handle.write(b"\0" * size)
    return path
