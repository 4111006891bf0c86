"""Where sweep runs execute: in this process, a local process pool (default) or Ray tasks.

Every executor runs the same function, `execute_payload`, which is one
`Run(RunOptions(...), registry()).execute()` and returns a small summary dict.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from automedbench.api import UserError
from automedbench.engine import STAMP

OUT_MARKER = ".sweep.lock"  # the sweep's lock file: present in the output folder while a sweep runs


def this_node() -> dict[str, str]:
    """Where this process runs: the host name, and the Ray node id inside a Ray worker."""
    node = {"host": socket.gethostname()}
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        node["ray_node_id"] = ray.get_runtime_context().get_node_id()
    return node


def unseen_paths(checks: dict[str, tuple[str, str]]) -> str | None:
    """One line naming the first shared folder this node cannot see, or None.

    `checks` maps a name to (folder, a file the driver knows is in it): an empty folder mounted over the
    path (or a missing mount) fails as clearly as a missing path."""
    for what, (folder, marker) in checks.items():
        if not (Path(folder) / marker).is_file():
            node = this_node()
            where = node["host"] + (f" (Ray node {node['ray_node_id'][:12]})" if "ray_node_id" in node else "")
            return (f"node {where} cannot see the {what} {folder}: every node must reach the data root and the "
                    "output folder through the same path (a shared file system mounted there)")
    return None


def execute_payload(payload: dict[str, Any]) -> dict[str, Any]:
    """Run one matrix entry; never raises (a crash is an infrastructure failure of this attempt)."""
    import attrs
    from automedbench.api import from_dict
    from automedbench.engine import Run, RunOptions, registry

    t0 = time.monotonic()
    node = this_node()
    summary: dict[str, Any] = {"run_id": payload["run_id"], "state": "infrastructure_failure", "overall": None,
                               "cost_usd": 0.0, "wall_s": 0.0, "error": None, "node": node}
    try:
        options = attrs.evolve(from_dict(payload["options"], RunOptions), node=node)
        checks = {"output folder": (str(options.out), OUT_MARKER)}
        if options.data_root:
            checks["data root"] = (str(options.data_root / options.task), STAMP)
        unseen = unseen_paths(checks)
        if unseen:
            summary["error"] = unseen
            return summary
        result = Run(options, registry()).execute()
        summary.update(state=result.state, end_reason=result.end_reason, overall=result.aggregate.overall,
                       rating=result.aggregate.rating, cost_usd=result.runtime.cost_usd + result.runtime.judge_cost_usd,
                       error=result.error)
    except Exception as exc:  # the runner writes its own result.json; this covers failures before that
        summary["error"] = f"{type(exc).__name__}: {exc}"
    summary["wall_s"] = round(time.monotonic() - t0, 3)
    return summary


def execute_in_worker(payload: dict[str, Any]) -> dict[str, Any]:
    """`execute_payload` in a pool worker: a SIGTERM that closed this run as cancelled is forgotten after it,
    so the worker (which goes on serving the pool) unwinds its next run on the next one."""
    from automedbench.engine import rearm_interrupt as rearm

    try:
        return execute_payload(payload)
    except KeyboardInterrupt as exc:  # outside the run's own handling (before its folder, after its record):
        return _interrupted_summary(payload, str(exc))  # never sent back raw, the sweep would stop on it
    finally:
        rearm()


def _interrupted_summary(payload: dict[str, Any], why: str) -> dict[str, Any]:
    """What an interrupted worker reports: the stored result when the run had written one, else cancelled."""
    from .sweep import run_state

    state, stored = run_state(Path(payload["options"]["out"]) / payload["run_id"])
    summary = {"run_id": payload["run_id"], "state": state or "cancelled", "overall": None, "cost_usd": 0.0,
               "wall_s": 0.0, "error": why or "cancelled by the user", "node": this_node()}
    if stored is not None:
        summary.update(overall=stored["overall"], rating=stored["rating"], wall_s=stored["wall_s"], error=None,
                       cost_usd=stored["cost_usd"] + stored["judge_cost_usd"])
    return summary


class Executor(ABC):
    name = ""

    @abstractmethod
    def submit(self, payload: dict[str, Any], cpus: float, gpus: float) -> Any:
        """Start one run; returns a handle."""

    @abstractmethod
    def wait(self, handles: list[Any]) -> list[tuple[Any, dict[str, Any]]]:
        """Block until at least one handle finishes; return (handle, summary) for each finished one."""

    def close(self, cancel: bool = False) -> None:  # noqa: B027 - optional hook, nothing to release by default
        """Release workers; `cancel` drops runs not started yet."""


class InlineExecutor(Executor):
    """Runs each payload in this process when waited for: no parallelism, easiest to debug."""

    name = "inline"

    def submit(self, payload: dict[str, Any], cpus: float, gpus: float) -> Any:
        return payload

    def wait(self, handles: list[Any]) -> list[tuple[Any, dict[str, Any]]]:
        return [(handles[0], execute_payload(handles[0]))]


class LocalExecutor(Executor):
    """A process pool of `workers` spawned interpreters (spawn: the sandbox forks, so no fork of threads).

    A worker that dies (OOM kill, segfault) breaks a ProcessPoolExecutor for good: its runs come back as
    infrastructure failures and the next submit starts a fresh pool, so the sweep can retry them."""

    name = "local"

    def __init__(self, workers: int, function: Any = None) -> None:
        self.workers = workers
        self.function = function or execute_in_worker
        self.pool = self._new_pool()

    def _new_pool(self) -> Any:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        from automedbench.engine import install_interrupt_handlers as install

        # a worker owns its run's mounts and sandbox: SIGTERM/SIGHUP close the run as cancelled, as Ctrl-C does
        return ProcessPoolExecutor(max_workers=self.workers, mp_context=multiprocessing.get_context("spawn"),
                                   initializer=install)

    def submit(self, payload: dict[str, Any], cpus: float, gpus: float) -> Any:
        from concurrent.futures.process import BrokenProcessPool

        try:
            return self.pool.submit(self.function, payload)
        except BrokenProcessPool:
            self.pool.shutdown(wait=False, cancel_futures=True)
            self.pool = self._new_pool()
            return self.pool.submit(self.function, payload)

    def wait(self, handles: list[Any]) -> list[tuple[Any, dict[str, Any]]]:
        from concurrent.futures import FIRST_COMPLETED
        from concurrent.futures import wait as wait_futures

        done, _ = wait_futures(handles, return_when=FIRST_COMPLETED)
        out = []
        for future in done:
            try:
                out.append((future, future.result()))
            except Exception as exc:  # the worker process died
                out.append((future, {"state": "infrastructure_failure", "overall": None, "cost_usd": 0.0,
                                     "wall_s": 0.0, "error": f"worker died: {type(exc).__name__}: {exc}"}))
        return out

    def close(self, cancel: bool = False) -> None:
        """On cancel: queued runs are dropped; runs in flight get CANCEL_GRACE_S to close as cancelled (a
        terminal's Ctrl-C reaches the workers too), then an interrupt of their own, then termination."""
        if not cancel:
            self.pool.shutdown(wait=True)
            return
        from automedbench.engine import interrupt_received as received

        workers = list((getattr(self.pool, "_processes", None) or {}).values())
        self.pool.shutdown(wait=False, cancel_futures=True)
        _stop_processes(workers, forward=received())


# how long a run in flight gets to close as cancelled after each step of a sweep's stop (interrupt, kill)
CANCEL_GRACE_S = float(os.environ.get("AUTOMEDBENCH_CANCEL_GRACE_S", "10"))
KILLED_WAIT_S = 5.0  # a SIGKILLed worker is gone within this; one that is not is left to the OS


def _stop_processes(workers: list[Any], grace_s: float = CANCEL_GRACE_S, forward: int | None = None) -> None:
    """Wait for pool workers to exit; interrupt (SIGINT: the run closes as cancelled) then kill laggards.

    `forward`: the signal that stopped the sweep (SIGTERM, SIGHUP), passed on to the workers at once: unlike a
    terminal's Ctrl-C it reached the sweep alone, and whoever sent it may not wait out the grace time."""
    import os
    import signal

    if forward is not None:
        for proc in workers:
            with contextlib.suppress(ProcessLookupError):  # a worker sent it too unwinds once: repeats are ignored
                os.kill(proc.pid, forward)
    for then in ("interrupt", "kill", None):
        # killed workers are waited for (briefly): the sweep then reaps the workspaces they left mounted
        deadline = time.monotonic() + (grace_s if then is not None else max(grace_s, KILLED_WAIT_S))
        for proc in workers:
            proc.join(max(0.0, deadline - time.monotonic()))
        alive = [p for p in workers if p.is_alive()]
        if not alive or then is None:
            return
        for proc in alive:
            if then == "interrupt":
                try:
                    os.kill(proc.pid, signal.SIGINT)
                except ProcessLookupError:  # it exited between the check and the signal
                    continue
            else:  # SIGTERM now unwinds like SIGINT (and a worker already unwinding ignores it): a stuck one is killed
                proc.kill()


# Before this release a process that can reach the head (a network-enabled sandbox) could join the
# harness's own cluster as a node; from it, Ray refuses unauthenticated nodes on local clusters by default.
RAY_MIN_VERSION = (2, 60)
AUTH_WORDS = ("unauthenticated", "invalidauthtoken", "authentication token", "auth_token", "invalid token")


def check_ray_version(version: str) -> None:
    """Refuse a Ray older than RAY_MIN_VERSION in one line."""
    parts = []
    for piece in version.split(".")[:2]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    if tuple(parts) < RAY_MIN_VERSION:
        need = ".".join(map(str, RAY_MIN_VERSION))
        raise UserError(f"--executor ray needs Ray >= {need} (found {version}): older releases let a network-enabled "
                        f"sandbox join the sweep's cluster as a node; pip install 'ray>={need}'")


def auth_token_file() -> Path:
    return Path(os.environ.get("RAY_AUTH_TOKEN_PATH") or Path.home() / ".ray" / "auth_token")


def auth_disabled() -> bool:
    """Whether this process asks Ray for no token authentication (RAY_AUTH_MODE=disabled)."""
    return os.environ.get("RAY_AUTH_MODE", "").lower() == "disabled"


NO_AUTH_OPTION = "--ray-allow-no-auth"


def starts_local(address: str | None) -> bool:
    """Whether `ray.init(address)` starts a Ray instance of its own: no address, or Ray's "local" (a new instance even
    beside a running one). `--ray-address local` took the cluster branch, so a tokenless instance only warned."""
    return not address or address.strip().lower() == "local"


def no_auth_refusal() -> str:
    """The one line refusing a local instance without token authentication (red team 34: an agent joined it)."""
    return ("ray: RAY_AUTH_MODE=disabled starts the local instance without token authentication: a local-plain "
            "call, or a network-enabled sandbox that reaches this host's addresses, could join it as a node and run "
            f"code as you, outside any sandbox; unset RAY_AUTH_MODE, or pass {NO_AUTH_OPTION} to accept that")


def tokenless_why(address: str | None) -> str:
    """Why this process would join the cluster at `address` presenting no Ray auth token, or "" when it presents one.

    Ray (2.6x) sends a token only in token mode: RAY_AUTH_MODE=token, or, with the mode unset, a token it finds
    (RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token) for a cluster it finds itself (no address, "auto");
    never for an address given with the mode unset."""
    mode = os.environ.get("RAY_AUTH_MODE", "").lower()
    if mode == "disabled":
        return "RAY_AUTH_MODE=disabled"
    if bool(os.environ.get("RAY_AUTH_TOKEN")) or auth_token_file().is_file():
        found = mode == "token" or not address or address.strip().lower() == "auto"
        return "" if found else "RAY_AUTH_MODE is not token: Ray sends its token to a given address only then"
    return f"no RAY_AUTH_TOKEN nor {auth_token_file()}"


def no_auth_problem(address: str | None) -> str:
    """The one line refusing Ray without token authentication, or "" when none is to be refused.

    Told before connecting: a local instance started under RAY_AUTH_MODE=disabled has no token, and a cluster that
    lets in a driver presenting none has no token authentication (one that has it refuses the driver anyway). With
    a token presented, whether the cluster checks it cannot be told from here: that is the cluster's own setting."""
    if starts_local(address):
        return no_auth_refusal() if auth_disabled() else ""
    why = tokenless_why(address)
    if not why:
        return ""
    return (f"ray: this sweep would join the cluster at {address} presenting no token ({why}), which only a cluster "
            "without token authentication lets in, where any process that reaches its head, a network-enabled "
            "sandbox's too, could join it as a node and run code as you; give the sweep the head's token "
            f"(RAY_AUTH_MODE=token and RAY_AUTH_TOKEN=<the head's token>), or pass {NO_AUTH_OPTION} to accept a "
            "cluster without one")


def ray_init_problem(exc: BaseException, address: str | None, log: str = "") -> str:
    """One line for a failed `ray.init`: token authentication named with what to set, else Ray's first line.

    Ray's exception only says it could not connect; the reason (`Unauthenticated ... InvalidAuthToken`) is in
    what its core logged meanwhile, so that is read too."""
    text = str(exc)
    first = (text.strip().splitlines() or [type(exc).__name__])[0][:200]
    where = address or "a local instance"
    if any(word in f"{text}\n{log}".lower() for word in AUTH_WORDS):
        token = auth_token_file()
        source = (f"{token} exists" if token.is_file() else
                  "RAY_AUTH_MODE=token" if os.environ.get("RAY_AUTH_MODE") == "token" else "the cluster asks for it")
        return (f"ray: {where} refused the connection: token authentication is on ({source}); give the sweep and "
                f"every node the head's token (RAY_AUTH_MODE=token and RAY_AUTH_TOKEN=<the head's token>, or the "
                f"same {token}) or start the whole cluster with RAY_AUTH_MODE=disabled ({first})")
    return f"ray: could not connect to {where}: {type(exc).__name__}: {first}"


class RayExecutor(Executor):
    """One Ray task per run, with its CPU/GPU needs, spread over the nodes; `address` None starts (or
    joins) a local instance.

    Ray's own output (worker and raylet logs, node-death errors) goes to `OUT/ray.log` instead of the
    terminal; a lost node is reported once through `notify`. Its runs fail as infrastructure failures
    and the sweep retries them on the nodes that remain."""

    name = "ray"
    POLL_S = 1.0

    def __init__(self, address: str | None = None, init_options: dict[str, Any] | None = None,
                 log_path: Path | None = None, notify: Callable[[str], None] | None = None,
                 allow_no_auth: bool = False) -> None:
        try:
            import ray
        except ImportError:
            raise UserError("--executor ray needs Ray: pip install 'automedbench[ray]' (or pip install ray)") from None
        self.ray = ray
        self.notify = notify or (lambda message: None)
        self.log_path = log_path
        self._log = None
        self._lock = threading.Lock()
        check_ray_version(getattr(ray, "__version__", "0"))
        if not ray.is_initialized():
            refusal = "" if allow_no_auth else no_auth_problem(address)
            if refusal:  # refused before Ray starts or connects
                raise UserError(refusal)
            routed = log_path is not None and self._route_output(log_path)
            try:
                with self._stderr_to_log():  # Ray's C++ core retries a refused connection loudly on fd 2
                    ray.init(address=address, include_dashboard=False, log_to_driver=routed, **(init_options or {}))
            except Exception as exc:  # Ray's own multi-line wording: one line that says what to set
                raise UserError(ray_init_problem(exc, address, self._log_tail())) from None
            if log_path is not None:
                self._route_loggers()
            if not starts_local(address) and tokenless_why(address):  # accepted by the user: we got in tokenless
                self.notify(f"ray: the cluster at {address} accepted this driver without a token ({NO_AUTH_OPTION}): "
                            "any process that reaches its head (a network-enabled sandbox too) could join it; start "
                            "every node with RAY_AUTH_MODE=token and one RAY_AUTH_TOKEN")
            elif starts_local(address) and auth_disabled():  # accepted by the user (allow_no_auth): said once
                self.notify("ray: the local instance runs without token authentication (RAY_AUTH_MODE=disabled, "
                            f"accepted by {NO_AUTH_OPTION}): a local-plain call, or a network-enabled sandbox that "
                            "reaches this host's addresses, could join it as a node and run code as you, outside any "
                            "sandbox; leave RAY_AUTH_MODE unset")
        self.remote = ray.remote(max_retries=0)(execute_payload)
        self.alive = self._alive_nodes()
        self.outstanding: set[Any] = set()

    # ------------------------------------------------------------ Ray's output

    def _write(self, text: str) -> None:
        with self._lock:
            if self._log is None:
                self._log = open(self.log_path, "a", encoding="utf-8", errors="replace")  # noqa: SIM115
            self._log.write(text if text.endswith("\n") else text + "\n")
            self._log.flush()

    @contextlib.contextmanager
    def _stderr_to_log(self) -> Iterator[None]:
        """While Ray connects, file descriptor 2 (where its C++ core logs) goes to the log file."""
        if self.log_path is None:
            yield
            return
        sys.stderr.flush()
        saved = os.dup(2)
        try:
            with open(self.log_path, "ab") as log:
                os.dup2(log.fileno(), 2)
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)

    def _log_tail(self, size: int = 65536) -> str:
        if self.log_path is None:
            return ""
        try:
            with open(self.log_path, "rb") as log:
                log.seek(max(0, os.fstat(log.fileno()).st_size - size))
                return log.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def _route_output(self, log_path: Path) -> bool:
        """Send what Ray prints for workers and raylets (and its error messages) to the log file.

        Ray has no public hook for this: its driver prints through `ray._private.worker.print_to_stdstream`,
        which is replaced before `ray.init` binds it. Where that name is missing (another Ray version),
        worker logs are simply not streamed to the driver (they stay in each node's session folder)."""
        import io

        worker = sys.modules.get("ray._private.worker")
        original = getattr(worker, "print_to_stdstream", None)
        printer = getattr(worker, "print_worker_logs", None)
        if original is None or printer is None:
            return False

        def to_file(data: dict[str, Any], ignore_prefix: bool = False, **_: Any) -> None:
            buffer = io.StringIO()
            try:
                printer(data, buffer, ignore_prefix)
            except Exception:  # a format this version does not know: keep the raw lines
                buffer.write("\n".join(str(x) for x in data.get("lines", [])))
            self._write(buffer.getvalue())

        worker.print_to_stdstream = to_file
        return True

    def _route_loggers(self) -> None:
        """Ray's Python loggers write to the log file, not the terminal."""
        import logging

        handler = logging.StreamHandler(_Sink(self._write))
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        for name in ("ray", "ray.data", "ray.tune", "ray.train", "ray.serve"):
            log = logging.getLogger(name)
            for old in list(log.handlers):
                log.removeHandler(old)
            log.addHandler(handler)
            log.propagate = False

    # ------------------------------------------------------------ nodes

    def _alive_nodes(self) -> dict[str, str]:
        try:
            nodes = self.ray.nodes()
        except Exception:
            return getattr(self, "alive", {})
        return {n["NodeID"]: n.get("NodeManagerHostname") or n.get("NodeManagerAddress", "?")
                for n in nodes if n.get("Alive")}

    def _check_nodes(self) -> None:
        now = self._alive_nodes()
        for node_id, host in self.alive.items():
            if node_id not in now:
                self.notify(f"ray: node {node_id[:12]} ({host}) lost; its runs end as infrastructure failures and "
                            f"are retried on the {len(now)} node(s) left (Ray's log: {self.log_path})")
        self.alive = now

    def probe(self, paths: dict[str, tuple[str, str]], timeout_s: float = 120) -> None:
        """Before the first run: every alive node must see the shared paths, else one UserError line.

        A node lost while it is being checked is reported once (as in a sweep) and left out: its share of
        the runs goes to the nodes left. With no node left, or a check that fails on a live node, one line."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        check = self.ray.remote(num_cpus=0, max_retries=0)(unseen_paths)
        refs = {node_id: check.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False))
                .remote(paths) for node_id in self.alive}
        for node_id, ref in refs.items():
            try:
                problem = self.ray.get(ref, timeout=timeout_s)
            except Exception as exc:
                self._write(f"pre-flight check on node {node_id} failed: {exc}")
                self._check_nodes()
                if node_id in self.alive:  # the node is up, yet its check failed: say so, never a traceback
                    first = (str(exc).strip().splitlines() or [""])[0][:200]
                    raise UserError(f"ray: the pre-flight check on node {node_id[:12]} failed "
                                    f"({type(exc).__name__}: {first}); Ray's log: {self.log_path}") from None
                continue
            if problem:
                raise UserError(problem)
        if not self.alive:
            raise UserError("ray: every node was lost during the pre-flight check; nothing was run (restart the "
                            f"cluster and rerun the same command; Ray's log: {self.log_path})")

    # ------------------------------------------------------------ runs

    def submit(self, payload: dict[str, Any], cpus: float, gpus: float) -> Any:
        ref = self.remote.options(num_cpus=cpus, num_gpus=gpus, scheduling_strategy="SPREAD").remote(payload)
        self.outstanding.add(ref)
        return ref

    def wait(self, handles: list[Any]) -> list[tuple[Any, dict[str, Any]]]:
        while True:
            ready, _ = self.ray.wait(handles, num_returns=1, timeout=self.POLL_S)
            self._check_nodes()
            if ready:
                break
        out = []
        for ref in ready:
            self.outstanding.discard(ref)
            try:
                out.append((ref, self.ray.get(ref)))
            except Exception as exc:  # the worker or node was lost
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                self._write(f"run task failed: {exc}")
                out.append((ref, {"state": "infrastructure_failure",
                                  "error": f"ray task failed: {type(exc).__name__}: {first}"[:300],
                                  "overall": None, "cost_usd": 0.0, "wall_s": 0.0}))
        return out

    def close(self, cancel: bool = False) -> None:
        """Leave a Ray instance we joined running; the driver's own local instance stops with the process.
        On cancel, runs in flight are interrupted (they close as cancelled) and given CANCEL_GRACE_S."""
        if cancel and self.outstanding:
            refs = list(self.outstanding)
            for ref in refs:
                self.ray.cancel(ref)
            self.ray.wait(refs, num_returns=len(refs), timeout=CANCEL_GRACE_S)
        with self._lock:
            if self._log is not None:
                self._log.close()
                self._log = None


class _Sink:
    """A file-like object for logging.StreamHandler that hands each record to a function."""

    def __init__(self, write: Callable[[str], None]) -> None:
        self.write = write

    def flush(self) -> None:
        pass


EXECUTORS = ("local", "ray", "inline")


def make_executor(name: str, workers: int, ray_address: str | None = None, log_path: Path | None = None,
                  notify: Callable[[str], None] | None = None, ray_allow_no_auth: bool = False) -> Executor:
    if name == "local":
        return LocalExecutor(workers)
    if name == "ray":
        return RayExecutor(ray_address, log_path=log_path, notify=notify, allow_no_auth=ray_allow_no_auth)
    if name == "inline":
        return InlineExecutor()
    raise UserError(f"unknown executor {name!r}; choose {', '.join(EXECUTORS)}")
