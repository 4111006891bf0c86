"""The run matrix: agents × tasks × tiers × repeats, resumable, with retries of infrastructure failures.

Run ids are deterministic in (agent, task, tier, repeat), so a second invocation finds what the first
finished: a run whose result.json says scored or agent_failure is skipped; an infrastructure failure is
retried (up to `retries` more attempts per invocation); a missing, torn or cancelled run is run again.
The folder of a failed attempt is moved to `OUT/.attempts/` (nothing is lost). `OUT/sweep.json` is the
manifest: the matrix, the options and every run's state, attempts, Overall, cost and wall time.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import shutil
import time
from collections import deque
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import attrs
from attrs import Factory, asdict, define, field
from automedbench.api import UserError, atomic_write_text, read_json_object, to_dict
from automedbench.engine import (
    STAMP,
    RunOptions,
    check_interrupt,
    check_options,
    default_data_root,
    ensure_staged,
    reap_stale_workspaces,
    sandbox_gap,
    task_dir,
)

from .executors import OUT_MARKER, Executor, make_executor, no_auth_problem
from .slots import slot_root
from .store import FINISHED, RESULT, read_summary

# how long the sweep's end waits for a killed worker's workspace lock to drop (seen > 5 s on a loaded 2-core host)
REAP_WAIT_S = 20.0

MANIFEST = "sweep.json"
LOCK = OUT_MARKER
RAY_LOG = "ray.log"
MANIFEST_EVERY_S = 2.0
ATTEMPTS = ".attempts"


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "x"


@define(frozen=True)
class RunSpec:
    agent: str
    task: str
    tier: str
    repeat: int

    @property
    def run_id(self) -> str:
        """Readable and collision-free: slugs for humans, a short hash of the exact tuple for uniqueness."""
        digest = hashlib.sha1(f"{self.agent}\0{self.task}\0{self.tier}\0{self.repeat}".encode()).hexdigest()[:6]
        return f"{_slug(self.agent)}.{_slug(self.task)}.{self.tier}.r{self.repeat:03d}-{digest}"


# RunOptions fields each run of a sweep sets for itself; the sweep's template sets every other one for all its runs.
PER_RUN = ("task", "tier", "agent", "run_id", "node", "sweep")


def run_template(**fields: Any) -> RunOptions:
    """The options every run of a sweep shares, as a RunOptions with the sweep's defaults: isolation required and
    one evaluator per worker kept warm (a run's own defaults are neither); its task is set per run."""
    return RunOptions(**{"task": "", "require_isolation": True, "warm_evaluator": True, **fields})


@define
class SweepConfig:
    """The matrix (agents × tasks × tiers × repeats), how it is executed, and `run`: every run's options, one
    RunOptions whose per-run fields (`PER_RUN`) each run sets for itself."""

    agents: list[str]
    tasks: list[str]
    tiers: list[str]
    repeats: int = 1
    workers: int = 1
    executor: str = "local"
    retries: int = 2
    cpus_per_run: float = 1.0  # what Ray reserves per run (a task's params.resources overrides)
    gpus_per_run: float = 0.0  # Ray's reservation; the devices a run's sandbox sees are `run.gpus`
    ray_address: str | None = None
    ray_allow_no_auth: bool = False  # Ray without token authentication (a local instance or a cluster), accepted
    run: RunOptions = Factory(run_template)

    @classmethod
    def of(cls, agents: list[str], tasks: list[str], tiers: list[str], **fields: Any) -> SweepConfig:
        """A config from one flat set of keyword fields, as a command line gives them: the sweep's own fields go
        to the config, RunOptions' to its run template."""
        own = set(attrs.fields_dict(cls)) - {"agents", "tasks", "tiers", "run"}
        return cls(agents, tasks, tiers, **{k: v for k, v in fields.items() if k in own},
                   run=run_template(**{k: v for k, v in fields.items() if k not in own}))

    def specs(self) -> list[RunSpec]:
        return [RunSpec(a, t, tier, r) for a in self.agents for t in self.tasks for tier in self.tiers
                for r in range(self.repeats)]

    def options(self, spec: RunSpec, out: Path, data_root: Path | None) -> RunOptions:
        """One run's options: the template with the run's cell, id and folders."""
        return attrs.evolve(self.run, task=spec.task, tier=spec.tier, agent=spec.agent, run_id=spec.run_id, out=out,
                            data_root=data_root)


@define
class RunRecord:
    agent: str
    task: str
    tier: str
    repeat: int
    state: str = "pending"
    attempts: int = 0
    overall: float | None = None
    cost_usd: float = 0.0
    wall_s: float = 0.0
    error: str | None = None
    node: dict[str, str] = Factory(dict)  # where the last attempt ran (host; Ray node id on Ray)


@define
class SweepReport:
    total: int
    skipped: int
    ran: int
    retried: int
    states: dict[str, int]
    cost_usd: float
    wall_s: float
    overhead_s_per_run: float | None
    manifest: Path
    records: dict[str, RunRecord] = field(factory=dict)


Progress = Callable[[dict[str, Any]], None]


def validate(config: SweepConfig, registry: Any) -> None:
    """Fail before the first run on any unknown name or impossible number."""
    if not (config.agents and config.tasks and config.tiers):
        raise UserError("a sweep needs at least one agent, one task and one tier")
    if config.repeats < 1 or config.workers < 1 or config.retries < 0:
        raise UserError("--repeats and --workers must be >= 1 and --retries >= 0")
    refusal = no_auth_problem(config.ray_address) if config.executor == "ray" and not config.ray_allow_no_auth else ""
    if refusal:
        raise UserError(refusal)  # before any run or manifest: as the executor itself would refuse
    for agent in config.agents:  # every agent gets the same --agent-option: each must take them all
        try:
            check_options(registry.get("agent", agent), config.run.agent_options)
        except UserError as exc:
            if len(config.agents) == 1:
                raise
            raise UserError(f"{exc}; every agent of a sweep gets the same --agent-option: sweep {agent} "
                            "in a sweep of its own") from None
    sandbox = registry.get("sandbox", config.run.sandbox)
    check_options(registry.get("judge", config.run.judge), config.run.judge_options)
    backend = sandbox.factory()
    if config.run.require_isolation and not getattr(backend, "isolates", lambda: True)():
        raise UserError(f"sandbox {config.run.sandbox} gives no filesystem isolation here (bubblewrap missing or "
                        "unusable); a sweep requires it: install bubblewrap, use --sandbox docker, or pass "
                        "--no-require-isolation")
    for task_id in config.tasks:
        track, task = registry.task(task_id)
        track.check_evaluation_options(config.run.eval_options)  # one line now, not a failure in every run
        # the track's install or the sandbox lacks what the task's method needs: say so once
        gap = sandbox_gap(track, task, backend, registry.distribution("track", track.name))
        if gap is not None:
            raise UserError(gap)
        for tier in config.tiers:
            if tier not in task.tiers:
                raise UserError(f"task {task_id} has no {tier} tier; it offers {', '.join(task.tiers)}")


def run_state(run_dir: Path) -> tuple[str | None, dict[str, Any] | None]:
    """The stored state of a run folder: None if absent, without a readable result.json, or with one the
    harness did not write (`resultproof`: the run is done again, never taken as finished)."""
    if not (run_dir / RESULT).is_file():
        return None, None
    try:
        summary = read_summary(run_dir)
    except UserError:
        return None, None
    if not summary["genuine"]:
        return None, None
    return summary["state"], summary


MAX_MANIFEST_BYTES = 256 << 20  # sweep.json: a few hundred bytes a run
SWEEP_ID = re.compile(r"[0-9a-f]{16}")  # secrets.token_hex(8), as `Sweep` makes one


def _read_manifest(path: Path) -> dict[str, Any]:
    """The manifest an earlier invocation wrote; {} when there is none, or it is no JSON object within its bound
    (read as every bounded file is: a regular file, no symlink followed)."""
    return read_json_object(path.parent, path.name, MAX_MANIFEST_BYTES) or {}


class OutLock:
    """One sweep per output folder: an exclusive flock on OUT/.sweep.lock, held for the whole sweep (the
    kernel drops it when the process dies, so a crashed sweep never leaves a stale lock)."""

    def __init__(self, out: Path) -> None:
        self.path = out / LOCK
        self.fd: int | None = None

    def __enter__(self) -> OutLock:
        import fcntl
        import os
        import socket

        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.read(fd, 200).decode("utf-8", "replace").strip() or "unknown"
            os.close(fd)
            raise UserError(f"another sweep is writing to {self.path.parent} ({holder}); wait for it to finish "
                            "or choose another --out") from None
        os.ftruncate(fd, 0)
        stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
        os.write(fd, f"pid {os.getpid()} on {socket.gethostname()} since {stamp}".encode())
        self.fd = fd
        return self

    def __exit__(self, *exc: object) -> None:
        import os

        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _move_aside(out: Path, run_id: str, label: str) -> None:
    src = out / run_id
    if not src.exists():
        return
    dest_root = out / ATTEMPTS / run_id
    dest_root.mkdir(parents=True, exist_ok=True)
    n = len(list(dest_root.iterdir())) + 1
    shutil.move(str(src), str(dest_root / f"{n:02d}-{label}"))


class Sweep:
    def __init__(self, config: SweepConfig, registry: Any, progress: Progress | None = None) -> None:
        self.c = config
        self.reg = registry
        self.progress = progress or (lambda event: None)
        self.out = config.run.out.expanduser().resolve()
        self.manifest_path = self.out / MANIFEST
        self.records: dict[str, RunRecord] = {}
        self.started = datetime.now(timezone.utc).isoformat(timespec="seconds")
        self._written = 0.0
        self._resources: dict[str, tuple[float, float]] = {}
        # signed by each run with the sweep's planned size: run ids repeat across sweeps, this id does not, so a
        # folder holding some of a sweep's runs shows as partly present (a resumed sweep keeps its id)
        kept = _read_manifest(self.manifest_path).get("sweep_id")  # signed by every run: never any text found there
        self.sweep_id = kept if isinstance(kept, str) and SWEEP_ID.fullmatch(kept) else secrets.token_hex(8)

    # ------------------------------------------------------------ manifest

    def write_manifest(self, force: bool = True) -> None:
        """Rewrite sweep.json atomically; unforced writes happen at most every MANIFEST_EVERY_S seconds so
        that a 10 000-run sweep does not rewrite a large file after every run."""
        import json

        now = time.monotonic()
        if not force and now - self._written < MANIFEST_EVERY_S:
            return
        self._written = now

        states: dict[str, int] = {}
        for record in self.records.values():
            states[record.state] = states.get(record.state, 0) + 1
        body = {
            "schema": 1, "sweep_id": self.sweep_id, "started_at": self.started,
            "updated_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "matrix": {"agents": self.c.agents, "tasks": self.c.tasks, "tiers": self.c.tiers,
                       "repeats": self.c.repeats},
            "options": self.manifest_options(),
            "totals": {"runs": len(self.records), "states": states,
                       "cost_usd": round(sum(r.cost_usd for r in self.records.values()), 4)},
            "runs": {rid: asdict(r) for rid, r in sorted(self.records.items())},
        }
        atomic_write_text(self.manifest_path, json.dumps(body, indent=1) + "\n")

    # ------------------------------------------------------------ planning

    def plan(self) -> tuple[list[RunSpec], list[RunSpec]]:
        """Split the matrix into finished runs (skipped) and runs to do; fills `records` from disk."""
        previous = _read_manifest(self.manifest_path).get("runs", {})
        done, todo = [], []
        for spec in self.c.specs():
            record = RunRecord(spec.agent, spec.task, spec.tier, spec.repeat,
                               attempts=int(previous.get(spec.run_id, {}).get("attempts", 0)))
            state, summary = run_state(self.out / spec.run_id)
            if (self.out / spec.run_id).exists():  # the folder is an attempt, whatever the manifest says
                record.attempts = max(record.attempts, 1)
            if state is not None and state not in FINISHED:
                record.state = state  # cancelled / infrastructure_failure: to do again, shown as it is on disk
            if state in FINISHED and summary is not None:
                record.state, record.overall = state, summary["overall"]
                record.cost_usd = summary["cost_usd"] + summary["judge_cost_usd"]
                record.wall_s = summary["wall_s"]
                record.attempts = max(record.attempts, 1)
                done.append(spec)
            else:
                todo.append(spec)
            self.records[spec.run_id] = record
        return done, todo

    def manifest_options(self) -> dict[str, Any]:
        """The options sweep.json records, in one flat map: how the sweep ran and what its runs share."""
        own = {k: v for k, v in asdict(self.c, recurse=False).items()
               if k not in ("agents", "tasks", "tiers", "repeats", "run")}
        shared = {k: v for k, v in to_dict(self.c.run).items() if k not in PER_RUN}
        return {**own, **shared}

    def payload(self, spec: RunSpec, data_root: Path | None = None) -> dict[str, Any]:
        """What a worker needs for one run, as plain JSON (a process pool or Ray ships it): the run's RunOptions
        (the sweep's template with this run's cell, id and folders), unstructured."""
        options = attrs.evolve(self.c.options(spec, self.out, data_root or self.c.run.data_root),
                               sweep={"id": self.sweep_id, "size": len(self.c.specs())})
        return {"run_id": spec.run_id, "options": to_dict(options)}

    def resources(self, spec: RunSpec) -> tuple[float, float]:
        """CPU/GPU needs of one run: the sweep's defaults, or the task's `params.resources` when it sets them."""
        if spec.task not in self._resources:
            _, task = self.reg.task(spec.task)
            wanted = task.params.get("resources") if isinstance(task.params.get("resources"), dict) else {}
            self._resources[spec.task] = (float(wanted.get("cpus", self.c.cpus_per_run)),
                                          float(wanted.get("gpus", self.c.gpus_per_run)))
        return self._resources[spec.task]

    def needs_line(self, tasks: list[Any]) -> str:
        """What the sweep will take, said before it stages or runs anything (as `run`'s first line is): the runs,
        how many at once, the disk their workspaces reserve together and the longest budget. A sweep said nothing
        before its first result, so `--workers 4` of 1 GB workspaces reserved 4 GB unannounced."""
        runs = len(self.c.specs())
        at_once = max(1, min(self.c.workers, runs))
        o = self.c.run
        disk = [o.workspace_quota_mb if o.workspace_quota_mb is not None else t.workspace_mb for t in tasks]
        budget = max((o.time_limit_s or t.time_limit_s for t in tasks), default=0)
        space = (f"each run's workspace reserves up to {max(disk)} MB before its agent starts ({at_once * max(disk)} "
                 f"MB at once)" if disk and all(disk) else "no workspace size limit")
        return (f"sweep plan: {runs} run(s) over {len(tasks)} task(s), {at_once} at a time; {space}; budget up to "
                f"{budget:g} s per run; sandbox {o.sandbox}; each task's data is checked as staged (a demo's is "
                "generated) first")

    def note(self, message: str) -> None:
        """A one-line message for the terminal (a lost Ray node)."""
        self.progress({"kind": "note", "message": message})

    def settle(self, specs: list[RunSpec]) -> None:
        """After an interrupt, record what each run in flight left on disk (so sweep.json and the run
        folders agree); a run that left no result.json was cancelled before it could write one."""
        for spec in specs:
            record = self.records[spec.run_id]
            state, summary = run_state(self.out / spec.run_id)
            record.state = state or "cancelled"
            if summary is not None:
                record.overall, record.wall_s = summary["overall"], summary["wall_s"]
                record.cost_usd = summary["cost_usd"] + summary["judge_cost_usd"]
            record.error = record.error or ("cancelled by the user" if record.state == "cancelled" else None)

    def reap_mounts(self) -> None:
        """Unmount workspaces that killed runs left mounted in this output folder on this host (a lost Ray
        node's workers, a worker stopped after the grace): nothing else would, since the next run that reaps
        them may never come. Only mounts whose owner's lock is free are touched; one still held is waited for
        a little (a worker killed moments ago may be dying slowly), since no other run uses this folder."""
        reaped = reap_stale_workspaces(self.out, wait_s=REAP_WAIT_S)
        if reaped:
            self.note(f"sweep: unmounted {len(reaped)} workspace(s) left mounted by runs whose process was killed")

    # ------------------------------------------------------------ running

    def run(self, executor: Executor | None = None) -> SweepReport:
        validate(self.c, self.reg)
        self.out.mkdir(parents=True, exist_ok=True)
        with OutLock(self.out):
            return self._run(executor)

    def _run(self, executor: Executor | None) -> SweepReport:
        t0 = time.monotonic()
        base = (self.c.run.data_root or default_data_root()).expanduser().resolve()
        specs_by_task = []
        tasks = [self.reg.task(t)[1] for t in self.c.tasks]
        if all(t.demo or (task_dir(base, t) / STAMP).is_file() for t in tasks):  # else refused in one line, next
            self.note(self.needs_line(tasks))
        for task_id in self.c.tasks:  # stage once here, not concurrently in every worker
            track, task = self.reg.task(task_id)
            ensure_staged(track, task, base)
            specs_by_task.append(task)
        in_flight = max(self.c.workers, 1)
        roots = [base] if in_flight == 1 else [slot_root(base, k, specs_by_task) for k in range(in_flight)]
        free = list(range(len(roots)))
        done, todo = self.plan()
        self.write_manifest()
        cost = sum(self.records[s.run_id].cost_usd for s in done)
        self.progress({"kind": "start", "total": len(done) + len(todo), "skipped": len(done), "todo": len(todo),
                       "cost_usd": cost})
        own = executor is None
        executor = executor or make_executor(self.c.executor, self.c.workers, self.c.ray_address,
                                             log_path=self.out / RAY_LOG, notify=self.note,
                                             ray_allow_no_auth=self.c.ray_allow_no_auth)
        probe = getattr(executor, "probe", None)
        if probe is not None:  # a cluster: every node must see the shared folders before anything runs
            probe({"output folder": (str(self.out), LOCK),
                   "data root": (str(task_dir(base, specs_by_task[0])), STAMP)})
        pending: list[tuple[Any, RunSpec, int]] = []
        tries: dict[str, int] = {}
        retried = 0
        run_walls: list[float] = []
        queue = deque(todo)
        try:
            while queue or pending:
                check_interrupt()  # after a SIGTERM closed a run in this process (inline), start no other
                while queue and free:
                    spec = queue.popleft()
                    _move_aside(self.out, spec.run_id, run_state(self.out / spec.run_id)[0] or "incomplete")
                    record = self.records[spec.run_id]
                    record.state, record.attempts = "running", record.attempts + 1
                    tries[spec.run_id] = tries.get(spec.run_id, 0) + 1
                    cpus, gpus = self.resources(spec)
                    slot = free.pop(0)
                    pending.append((executor.submit(self.payload(spec, roots[slot]), cpus, gpus), spec, slot))
                    self.progress({"kind": "started", "run_id": spec.run_id})
                for handle, summary in executor.wait([h for h, _, _ in pending]):
                    index = next(i for i, (h, _, _) in enumerate(pending) if h is handle)
                    _, spec, slot = pending.pop(index)
                    free.append(slot)
                    record = self.records[spec.run_id]
                    record.state = summary["state"]
                    record.overall, record.error = summary.get("overall"), summary.get("error")
                    record.cost_usd, record.wall_s = summary.get("cost_usd", 0.0), summary.get("wall_s", 0.0)
                    record.node = summary.get("node") or {}
                    run_walls.append(record.wall_s)
                    cost += record.cost_usd
                    retry = record.state == "infrastructure_failure" and tries[spec.run_id] <= self.c.retries
                    if retry:
                        retried += 1
                        queue.append(spec)
                    self.write_manifest(force=False)
                    self.progress({"kind": "done", "run_id": spec.run_id, "state": record.state,
                                   "overall": record.overall, "rating": summary.get("rating") or "",
                                   "end_reason": summary.get("end_reason") or "",
                                   "wall_s": record.wall_s, "retry": retry, "cost_usd": cost, "error": record.error})
        except KeyboardInterrupt:
            executor.close(cancel=True)  # runs in flight end as cancelled and write their result.json
            self.settle([spec for _, spec, _ in pending])
            self.reap_mounts()
            self.write_manifest()
            raise
        if own:
            executor.close()
        self.reap_mounts()
        self.write_manifest()
        states: dict[str, int] = {}
        for record in self.records.values():
            states[record.state] = states.get(record.state, 0) + 1
        wall = time.monotonic() - t0
        ran = len(run_walls)
        overhead = None
        if ran and self.c.workers == 1:
            overhead = round((wall - sum(run_walls)) / ran, 4)
        return SweepReport(len(done) + len(todo), len(done), ran, retried, states, round(cost, 4), round(wall, 3),
                           overhead, self.manifest_path, dict(self.records))
