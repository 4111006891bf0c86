"""The local sandbox: one fresh process per call, in a bubblewrap namespace where the machine has it.

With bubblewrap (`bwrap`): a new mount, PID, IPC, UTS and (unless the task allows it) network
namespace; only system directories and the Python installation are mounted read-only, the public data
read-only at /data/public, the workspace read-write at /workspace, a private /tmp; private references
and the rest of the host filesystem are simply absent. Without it (`--sandbox local-plain`, or when bwrap
is missing) the process runs on the host with a scrubbed environment and limits only.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import resource
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import weakref
from collections.abc import Iterable
from pathlib import Path

from .. import sandboxcall
from ..errors import AgentError, InfrastructureError, UserError
from ..fsutil import open_dir, remove_tree
from ..harnessstate import ensure_state_dir, known_state_dirs, state_dir, user_homes
from ..needs import missing_here
from ..records import ExecResult
from ..sandbox import ASSETS_MOUNT, BWRAP_NEXT_STEP, Sandbox, SandboxSession, SandboxSpec
from ..sandboxcall import EXEC_MOUNT, CallEnd, CallFolder, OutputCapture, call_result, sandbox_env, unsupported_language
from . import netns, plainns, seccomp
from .cgroup import MemoryGroup, PidsGroup, ProcessSweep
from .limitshell import limits_prefix
from .quota import WorkspaceQuota, mount_workspace
from .reservations import ledger_dir

# Processes one session may hold at once (enforced where a pids cgroup can be made: root, cgroup v1).
PIDS_LIMIT = 1024
# /proc files that describe host-wide kernel objects (keys, locks): covered inside bubblewrap
HIDDEN_PROC = ("/proc/keys", "/proc/key-users", "/proc/locks")
# GPU device nodes every CUDA process needs besides its own /dev/nvidiaN
NVIDIA_CONTROL = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset")
KEYCTL_JOIN_SESSION_KEYRING = 1
# where the executor cluster's token (Ray) and the docker engine's TLS key and config are kept: folders of every home,
# and the variables that name others
CREDENTIAL_HOMES = (".ray", ".docker")
CREDENTIAL_ENV = ("RAY_AUTH_TOKEN_PATH", "DOCKER_CERT_PATH", "DOCKER_CONFIG")
SYS_KEYCTL = {"x86_64": 250, "aarch64": 219}


def gpu_nodes(gpus: list[str], dev: Path = Path("/dev")) -> list[Path]:
    """The device nodes of the given GPUs (by index) and the shared control nodes; never another GPU's."""
    if not gpus:
        return []
    wanted = {f"nvidia{g.strip()}" for g in gpus if g.strip().isdigit()} | set(NVIDIA_CONTROL)
    nodes = [dev / name for name in sorted(wanted) if (dev / name).exists()]
    caps = dev / "nvidia-caps"
    return nodes + ([caps] if nodes and caps.is_dir() else [])


def _keyctl_number() -> int:
    """The keyctl syscall's number on this machine; 0 where unknown."""
    import platform

    return SYS_KEYCTL.get(platform.machine(), 0)


def _session_keyring_joiner():
    """A callable for the child (before exec) that gives it a fresh, empty session keyring and returns "", or why
    it could not; None if unknown."""
    import ctypes

    from ..libc import libc

    number = _keyctl_number()
    found = libc() if number else None
    syscall = getattr(found, "syscall", None)
    if syscall is None:
        return None
    return lambda: "" if syscall(number, KEYCTL_JOIN_SESSION_KEYRING, None) >= 0 else os.strerror(ctypes.get_errno())


def bwrap_path() -> str | None:
    """The bubblewrap binary where it works here, else None; probed once per process and binary.

    Probed once so that one run never sees two answers (a brief naming the plain sandbox's paths and a session
    opened under bubblewrap); a probe that only timed out (a loaded machine) is not an answer: it is asked again
    with more time instead of silently dropping a run to the unisolated fallback."""
    found = shutil.which("bwrap")
    return found if found and not _bwrap_probe(found) else None


def bwrap_unusable() -> str:
    """Why bubblewrap is not used here ("" where it is): missing, or the probe's own error, for the warning."""
    found = shutil.which("bwrap")
    return _bwrap_probe(found) if found else "no bwrap on PATH"


def probe_command(found: str) -> list[str]:
    """The probe: namespaces and mounts as a call makes them (system folders, /proc, /dev), nothing more.

    Never the host's whole root: other runs' workspaces are mounts below it, and one unmounted and removed while
    bubblewrap remounted its copy read-only failed the probe ("Unable to apply mount flags: remount ...
    No such file or directory"), which dropped an unrelated run to the unisolated sandbox."""
    args = [found, "--unshare-all", "--die-with-parent", "--proc", "/proc", "--dev", "/dev"]
    for system in SYSTEM_DIRS:
        args += ["--ro-bind-try", system, system]
    return [*args, system_true()]


def system_true() -> str:
    """`true` from the system folders a call mounts, not from the caller's PATH: a PATH folder outside them (a
    venv's bin, a test's PATH of links) is not in the sandbox, and its exec failure read as "bubblewrap unusable"."""
    return next((p for p in ("/usr/bin/true", "/bin/true") if os.access(p, os.X_OK)), "true")


@functools.lru_cache(maxsize=4)
def _bwrap_probe(found: str) -> str:
    """"" where bubblewrap starts a call here, else its error; a failure is asked again (a set-up race) before
    it is believed, a time-out with more time."""
    why = ""
    timeouts = list(BWRAP_PROBE_TIMEOUTS)
    failures = 0
    while timeouts:
        try:
            probe = subprocess.run(probe_command(found), capture_output=True, timeout=timeouts[0])
        except subprocess.TimeoutExpired:
            timeouts.pop(0)
            continue
        except OSError as exc:
            return f"bwrap did not start ({exc.strerror or type(exc).__name__})"
        if probe.returncode == 0:
            return ""
        lines = probe.stderr.decode(errors="replace").strip().splitlines()
        why = (lines[-1][-300:] if lines else "") or f"the bubblewrap probe exited {probe.returncode}"
        failures += 1
        if failures >= BWRAP_PROBE_FAILURES:
            return why
        time.sleep(BWRAP_PROBE_PAUSE_S)
    raise RuntimeError(f"bubblewrap at {found} did not start within {sum(BWRAP_PROBE_TIMEOUTS)} s "
                       "(machine overloaded?): not falling back to the unisolated sandbox")


# Seconds for each try of the bubblewrap probe (a start takes ~10 ms on an idle machine).
BWRAP_PROBE_TIMEOUTS = (10, 60)
# A failing probe is believed after this many failures in a row, this far apart (a mount race passes)
BWRAP_PROBE_FAILURES = 3
BWRAP_PROBE_PAUSE_S = 0.2
# What the probe mounts: the system folders a call gets (`LocalSession._bwrap_args`)
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/etc")


@functools.lru_cache(maxsize=1)
def pid_namespace_prefix() -> tuple[str, ...]:
    """A command prefix that runs a plain call in its own PID namespace (and /proc) and IPC namespace, or () where
    none can be made.

    Without filesystem isolation this is what still ends every process of a call with it: when the call's
    first process exits the kernel kills the rest of the namespace, cgroup moves or re-exec'd daemons included.
    Its SysV segments, queues and semaphores go with it too (a segment made in the host's namespace outlived the
    run, readable by any later process of the harness's user)."""
    found = shutil.which("unshare")
    if not found:
        return ()
    for extra in ((), ("--user", "--map-root-user")):
        prefix = (found, *extra, "--pid", "--ipc", "--fork", "--kill-child", "--mount-proc", "--")
        try:
            if subprocess.run([*prefix, "true"], capture_output=True, timeout=10).returncode == 0:
                return prefix
        except (OSError, subprocess.TimeoutExpired):
            continue
    return ()


def service_credentials(keep: Iterable[Path | str] = (), homes: list[str] | None = None) -> list[str]:
    """What a plain call covers of the credentials of the services the harness drives over the network it shares:
    every home's ~/.ray and ~/.docker, and the files RAY_AUTH_TOKEN_PATH, DOCKER_CERT_PATH and DOCKER_CONFIG name.
    Ray 2.60's local instance asks for a token it keeps in ~/.ray/auth_token (0644): with it a plain agent joined
    the sweep's local cluster (`--executor ray`) as a node of its own and ran a task on the head, outside its
    namespace (the harness key read); a docker engine on TCP takes the TLS key in ~/.docker the same way.

    A variable naming a folder that holds the harness's own Python or anything in `keep` (what the call is given:
    its data, the track's assets, the agent's program) is left shown: covered, the call lost it too (DOCKER_CONFIG
    set to the data root: an empty DATA_DIR, Task 0.0 for the harness's setting, tests/test_review28.py).

    Only those that exist are named (`plainns` covers no other): as root, every account's two folders went into the
    call's one-argument spec, and 6000 accounts took it past Linux's 128 KB bound on one argument (no call started).
    `homes`: `user_homes()` when the caller has them already (one account enumeration a call, not two)."""
    needed = {os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix), *map(os.path.realpath, keep)}
    named = [os.path.realpath(os.environ[v]) for v in CREDENTIAL_ENV if os.environ.get(v, "").startswith("/")]
    found = [*(os.path.join(home, folder) for home in (user_homes() if homes is None else homes)
               for folder in CREDENTIAL_HOMES),
             *(path for path in named if all(os.path.commonpath([path, need]) != path for need in needed))]
    return [path for path in found if os.path.lexists(path)]


def plain_spec(workspace: Path, keyctl: int = 0, keep: Iterable[Path | str] = ()) -> str:
    """The plain call's namespace (`plainns`): its writable workspace and what it must never see (the harness's
    state, its reservations, the credentials of the services it drives, unless they hold a folder of `keep`); with
    `keyctl` (the syscall's number) it joins a fresh session keyring."""
    homes = user_homes()  # every account as root: read once for both lists
    hide = [*map(str, known_state_dirs(homes)), str(ledger_dir()), *service_credentials([workspace, *keep], homes)]
    return json.dumps({"workspace": str(workspace), "hide": hide,
                       "keyctl": keyctl,
                       "seccomp": seccomp.namespace_program().hex() if seccomp.supported() is None else ""})


@functools.lru_cache(maxsize=1)
def interpreter() -> str:
    """The harness's interpreter as a call runs it: `sys.executable` without `..` components. Python started by a
    relative path (`../venv/bin/python -m pytest` in a track's folder) keeps the folder it was started from in
    it (`/src/track/../venv/bin/python`), which a bwrap call does not mount: every call failed to start."""
    exe = sys.executable
    lexical = os.path.normpath(exe)
    if lexical != exe and not (os.path.exists(lexical) and os.path.samefile(lexical, exe)):
        # a symlink before the `..`: the folder as the kernel resolves it, the interpreter's own name kept
        lexical = os.path.join(os.path.realpath(os.path.dirname(exe)), os.path.basename(exe))
    return lexical

def plain_prefix(workspace: Path, keyctl: int = 0, keep: Iterable[Path | str] = ()) -> tuple[str, ...]:
    """The command prefix of a plain call: its own PID and mount namespaces (`pid_namespace_prefix`), then
    `plainns` hides the harness's state and makes everything but the workspace read-only before the code."""
    return (*pid_namespace_prefix(), interpreter(), "-I", "-S", plainns.__file__,
            plain_spec(workspace, keyctl, keep), "--")


@functools.lru_cache(maxsize=4)
def plain_namespace_unsupported(state: str) -> str | None:
    """Why a plain call cannot be kept from the harness's state here (None: it can), probed once per state
    folder: a call of `true` in a namespace made exactly as a run's calls are."""
    if not pid_namespace_prefix():
        return ("no PID and mount namespace can be made for a call here (util-linux `unshare`, run as root or "
                "with user namespaces allowed)")
    with tempfile.TemporaryDirectory(prefix="automedbench-plain-probe-") as folder:
        try:
            probe = subprocess.run([*plain_prefix(Path(folder)), "true"], capture_output=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"the namespace probe failed ({type(exc).__name__})"
    if probe.returncode != 0:
        return probe.stderr.decode(errors="replace").strip()[-300:] or f"the namespace probe exited {probe.returncode}"
    return None


@functools.lru_cache(maxsize=1)
def _unreadable_to_others(root: str = "/etc", limit: int = 4096) -> tuple[tuple[str, bool], ...]:
    """Files and folders under /etc that other users may not read (shadow, private keys...).

    Inside bubblewrap a root harness stays uid 0, and uid 0 reads a 0600 file whatever its capabilities,
    so each of these is covered by an empty file or folder rather than trusting its mode.
    """
    found: list[tuple[str, bool]] = []
    for folder, dirnames, filenames in os.walk(root):
        for name in list(dirnames):
            path = os.path.join(folder, name)
            with contextlib.suppress(OSError):
                info = os.lstat(path)
                if stat.S_ISDIR(info.st_mode) and (info.st_mode & 0o005) != 0o005:
                    found.append((path, True))
                    dirnames.remove(name)
        for name in filenames:
            path = os.path.join(folder, name)
            with contextlib.suppress(OSError):
                info = os.lstat(path)
                if stat.S_ISREG(info.st_mode) and not info.st_mode & 0o004:
                    found.append((path, False))
        if len(found) > limit:
            break
    return tuple(sorted(found))


class LocalSession(SandboxSession):
    def __init__(self, spec: SandboxSpec, bwrap: str | None, chosen: str = "local-plain") -> None:
        if not bwrap:  # the state and ledger folders exist before any call, so that its namespace covers them
            ensure_state_dir()
            ledger_dir().mkdir(parents=True, exist_ok=True, mode=0o700)
            why = plain_namespace_unsupported(str(state_dir()))
            if why:
                # `--sandbox local` (the default) falls back here: say so, or "local-plain" names a choice never made
                fallback = ("sandbox local: bubblewrap is not usable here and its fallback, local-plain, is refused"
                            if chosen == "local" else "local-plain refused")
                raise UserError(f"{fallback}: a call could reach the harness's key and signed state ({why}); "
                                f"{BWRAP_NEXT_STEP}, or run as root")
        self.spec = spec
        self.bwrap = bwrap
        ws = spec.workspace
        for sub in (".home", ".cache", ".tmp"):
            (ws / sub).mkdir(parents=True, exist_ok=True)
        # other host users must not reach what a call left (set-id files, device nodes from a root sandbox)
        os.chmod(ws, 0o700)
        self.exec_dir = CallFolder()  # each call's code (a read-only bind under bwrap)
        self.isolates_filesystem = bool(bwrap)
        if bwrap:
            self.data_dir, self.workspace_dir = "/data/public", "/workspace"
        else:
            self.data_dir, self.workspace_dir = str(spec.public), str(ws)
        if spec.assets is not None:  # the track's read-only files: a fixed mount, or the host folder as it is
            self.assets_dir = ASSETS_MOUNT if bwrap else str(spec.assets)
        self._live: subprocess.Popen | None = None
        # a network-enabled task gets a namespace of its own with outbound access that cannot reach host loopback
        self.net: netns.SlirpNet | None = None
        self.net_gap = ""
        if bwrap and spec.network:
            self.net_gap = netns.unsupported() or ""
            if not self.net_gap:
                try:
                    self.net = netns.SlirpNet()
                except OSError as exc:
                    self.net_gap = str(exc)
                else:
                    self.exec_dir.write_new("resolv.conf", netns.RESOLV_CONF)
        self.pids = PidsGroup(PIDS_LIMIT)
        self.memory = MemoryGroup(spec.memory_mb)
        # under bwrap a call is its own PID namespace (--unshare-all), torn down by the kernel when the call's
        # first process exits: nothing of it can outlive it, so only a plain call's processes are swept
        self.sweep = ProcessSweep(subreaper=not self.pids.available and not bwrap, active=not bwrap)
        weakref.finalize(self, self.pids.close)
        weakref.finalize(self, self.memory.close)
        self.seccomp_gap = seccomp.supported() if bwrap else None
        self._keyring = _session_keyring_joiner()

    # ---------------------------------------------------------------- environment

    def _env(self) -> dict[str, str]:
        tmp = "/tmp" if self.bwrap else f"{self.workspace_dir}/.tmp"
        path = f"{Path(interpreter()).parent}:/usr/local/bin:/usr/bin:/bin"
        extra = {"CUDA_VISIBLE_DEVICES": ",".join(self.spec.gpus), **self.spec.env, **self.sweep.env()}
        if self.assets_dir:
            extra["ASSETS_DIR"] = self.assets_dir
        return sandbox_env(self.workspace_dir, self.data_dir, tmp, path, extra)

    def _scratch(self) -> list[tuple[str, int]]:
        """Fresh per-call folders for /tmp and /dev/shm on the workspace's disk (its quota, not memory).

        Made by the harness under random names with no agent process alive, and passed to bwrap as
        descriptors: nothing the agent planted in the workspace can redirect them; removed after the call."""
        made: list[tuple[str, int]] = []
        ws = self.spec.workspace
        try:
            for kind in ("tmp", "shm"):
                name = f".amb-{kind}-{secrets.token_hex(6)}"
                os.mkdir(ws / name, 0o700)
                fd = open_dir(ws / name)
                if fd is None:
                    raise OSError(f"cannot open the call's {kind} folder")
                made.append((name, fd))
        except OSError:
            for name, fd in made:
                os.close(fd)
                remove_tree(ws / name)
            with contextlib.suppress(OSError):
                os.rmdir(ws / name)
            raise
        return made

    def _bwrap_args(self, env: dict[str, str], tmp_fd: int, shm_fd: int, seccomp_fd: int | None) -> list[str]:
        assert self.bwrap
        args = [self.bwrap, "--die-with-parent", "--new-session", "--unshare-all", "--hostname", "sandbox"]
        if os.geteuid() == 0:  # bwrap run by root keeps every capability unless told otherwise
            args += ["--cap-drop", "ALL"]
        if seccomp_fd is not None:
            args += ["--seccomp", str(seccomp_fd)]
        if self.spec.network:
            args.append("--share-net")  # the session's own namespace when self.net (entered by nsenter)
        # /tmp first: later binds may live below it (a venv or data under /tmp) and must stay visible. It and
        # /dev/shm are folders on the workspace's disk: a tmpfs would hold memory no limit counts
        args += ["--bind-fd", str(tmp_fd), "/tmp", "--proc", "/proc", "--dev", "/dev",
                 "--bind-fd", str(shm_fd), "/dev/shm"]
        if os.geteuid() == 0:  # uid 0 may write sysctls by file mode alone, capabilities or not
            args += ["--ro-bind", "/proc/sys", "/proc/sys",
                     "--ro-bind-try", "/proc/sysrq-trigger", "/proc/sysrq-trigger"]
        for hidden in HIDDEN_PROC:  # host-wide keys and lock owners are none of the sandbox's business
            if Path(hidden).exists():
                args += ["--ro-bind", "/dev/null", hidden]
        for gpu_node in gpu_nodes(self.spec.gpus):  # only the GPUs the run was given
            args += ["--dev-bind", str(gpu_node), str(gpu_node)]
        for system in SYSTEM_DIRS:
            args += ["--ro-bind-try", system, system]
        resolv = Path("/etc/resolv.conf")
        if self.net is not None and resolv.is_file() and not resolv.is_symlink():  # slirp's DNS forwarder
            args += ["--ro-bind", str(self.exec_dir.path / "resolv.conf"), "/etc/resolv.conf"]
        for hidden, is_dir in _unreadable_to_others():  # root reads any file regardless of mode: hide those
            args += ["--tmpfs", hidden, "--remount-ro", hidden] if is_dir else ["--ro-bind", "/dev/null", hidden]
        for prefix in sorted({sys.base_prefix, sys.prefix, str(Path(interpreter()).resolve().parent.parent)}):
            args += ["--ro-bind", prefix, prefix]
        args += ["--ro-bind", str(self.spec.public), "/data/public",
                 "--bind", str(self.spec.workspace), "/workspace",
                 "--ro-bind", str(self.exec_dir.path), EXEC_MOUNT]
        if self.spec.assets is not None:
            args += ["--ro-bind", str(self.spec.assets), ASSETS_MOUNT]
        for tool in self.spec.tools:  # an installed agent's program, read-only at its own path
            args += ["--ro-bind", str(tool), str(tool)]
        for inside, host in sorted(self.spec.decoys.items()):
            args += ["--ro-bind", str(host), inside]
        # bubblewrap's own root and /dev are tmpfs: read-only, so the workspace's disk is the only place to write
        args += ["--remount-ro", "/dev", "--remount-ro", "/"]
        args += ["--chdir", "/workspace", "--clearenv"]
        for key, value in sorted(env.items()):
            args += ["--setenv", key, value]
        return args

    def bound_sources(self) -> list[Path]:
        """Host directories the sandbox can read; the runner checks private data is under none of them."""
        if not self.bwrap:
            return [Path("/")]
        roots = ["/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/etc", sys.base_prefix, sys.prefix]
        assets = [self.spec.assets.resolve()] if self.spec.assets is not None else []
        tools = [Path(t).resolve() for t in self.spec.tools]
        return [Path(p).resolve() for p in roots if Path(p).exists()] + [self.spec.public.resolve(), *assets, *tools]

    # ---------------------------------------------------------------- execution

    def execute(self, language: str, code: str, timeout_s: float) -> ExecResult:
        refused = unsupported_language(language)
        if refused is not None:
            return refused
        runner = self.exec_dir.write_call(language, code, python=interpreter(), mounted=bool(self.bwrap))
        env = self._env()
        scratch: list[tuple[str, int]] = []
        pass_fds: tuple[int, ...] = ()
        if self.bwrap:
            self._restore_workspace_mode()
            try:
                scratch = self._scratch()
            except OSError as exc:  # a full workspace (its quota) leaves no room for the call's /tmp: the agent's
                return ExecResult(1, "", f"ERROR: the call could not start: no room for its /tmp and /dev/shm "
                                         f"in the workspace ({exc.strerror or exc}); free some space", 0.0)
            seccomp_fd = seccomp.program_fd() if self.seccomp_gap is None else None
            pass_fds = tuple(fd for _, fd in scratch) + ((seccomp_fd,) if seccomp_fd is not None else ())
            argv = self._bwrap_args(env, scratch[0][1], scratch[1][1], seccomp_fd) + runner
            popen_env, cwd = {"PATH": "/usr/bin:/bin"}, None
            if self.net is not None:
                argv = self.net.prefix() + argv
        else:
            # plainns joins the fresh session keyring (a syscall the shell below cannot make)
            keyctl = _keyctl_number() if self._keyring is not None else 0
            # what the call reads: a credential variable naming a folder that holds one of them leaves it shown
            given = [self.spec.public, *([self.spec.assets] if self.spec.assets is not None else []), *self.spec.tools]
            argv = [*plain_prefix(self.spec.workspace, keyctl, given), *runner]
            popen_env, cwd = env, self.spec.workspace
        limit = (self.spec.address_space_mb or self.spec.memory_mb) * 1024 * 1024
        pids, memory = self.pids, self.memory
        # the session keyring is swapped here only for bubblewrap without the seccomp filter (under it no keyring
        # call reaches the kernel; a plain call's plainns swaps it)
        keyring = self._keyring if self.bwrap and self.seccomp_gap is not None else None

        def _limits() -> None:
            pids.join()
            memory.join()
            failed = keyring() if keyring is not None else ""  # the harness's keyring (and its keys) stays behind
            if failed:  # refused as plainns refuses a plain call (`execute` ends the run on it)
                os.write(2, (plainns.keyring_refusal(failed) + "\n").encode())
                os._exit(125)
            if limit > 0:
                resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

        # without a keyring to swap (a syscall) a shell sets the rest: no fork() of this process (limitshell)
        shell = None if keyring is not None else limits_prefix(
            [g.path / "cgroup.procs" for g in (pids, memory) if g.path is not None], limit)
        started = time.monotonic()
        try:
            proc = subprocess.Popen([*shell, *argv] if shell else argv, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=popen_env, cwd=cwd,
                                    start_new_session=True, preexec_fn=None if shell else _limits,
                                    pass_fds=pass_fds)
        finally:
            for fd in pass_fds:
                os.close(fd)
        self._live = proc
        out = OutputCapture(proc.stdout, self.spec.output_cap_bytes)
        err = OutputCapture(proc.stderr, self.spec.output_cap_bytes)
        timed_out = False
        try:
            sandboxcall.wait_for(proc, timeout_s)  # sleeps on the call's pidfd: no polling
        except subprocess.TimeoutExpired:
            timed_out = True
            self._kill(proc)
            proc.wait()
        finally:
            self._live = None
            self.pids.kill_all()  # whatever the call left running (setsid'd or not) ends with it
            self.sweep.kill_all({proc.pid})
            for name, _ in scratch:  # the call's /tmp and /dev/shm go with it
                remove_tree(self.spec.workspace / name)
        end = CallEnd(proc.returncode, timed_out, timeout_s, "whole process group")
        result = call_result(end, out, err, round(time.monotonic() - started, 3))
        if self.bwrap and not timed_out and result.exit_code == 1 and result.stderr.startswith("bwrap: "):
            failed = self._mounts_fail(env)
            if failed is not None:  # not the agent's doing: a harmless call with the same mounts fails too
                raise InfrastructureError(
                    f"bubblewrap passed its start-up probe but cannot start a call with this run's mounts ({failed}); "
                    "a harmless call with the same mounts fails too, so every call of the run would: not the "
                    "agent's failure")
        if result.exit_code == 125 and result.stderr.startswith(plainns.KEYRING_REFUSED):
            # the user's key quota is full, which an agent's earlier call may have done (keys it linked outlive
            # it): the agent's failure, never a retryable one, and no later call of the run would get a keyring
            raise AgentError(result.stderr.strip().splitlines()[0][:400])
        return result

    def _restore_workspace_mode(self) -> None:
        """The workspace folder back to 0700 before a call: an earlier call may have changed its mode (its owner
        may, capabilities or not), and bubblewrap's chdir into a 000 workspace failed for every later call and for
        the harmless probe too, so an agent made its own run a retryable infrastructure failure (review 30)."""
        with contextlib.suppress(OSError):  # no agent process is alive between calls to undo it again
            os.chmod(self.spec.workspace, 0o700)

    def _mounts_fail(self, env: dict[str, str]) -> str | None:
        """Bubblewrap's error when a harmless call (`true`) with this session's mounts and namespaces cannot start
        either, else None. A call that ended with bubblewrap's own error ended every call of the run as the agent's
        failure; it is the harness's only when this probe, which the agent's code has no part in, fails too."""
        try:
            scratch = self._scratch()
        except OSError:  # a full workspace: what the agent wrote
            return None
        seccomp_fd = seccomp.program_fd() if self.seccomp_gap is None else None
        fds = tuple(fd for _, fd in scratch) + ((seccomp_fd,) if seccomp_fd is not None else ())
        try:
            argv = [*self._bwrap_args(env, scratch[0][1], scratch[1][1], seccomp_fd), system_true()]
            if self.net is not None:
                argv = self.net.prefix() + argv
            probe = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, env={"PATH": "/usr/bin:/bin"},
                                   pass_fds=fds, timeout=BWRAP_PROBE_TIMEOUTS[-1])
        except (OSError, subprocess.TimeoutExpired):  # no answer is no proof: the call's result stands
            return None
        finally:
            for fd in fds:
                os.close(fd)
            for name, _ in scratch:
                remove_tree(self.spec.workspace / name)
        lines = probe.stderr.decode(errors="replace").strip().splitlines()
        if probe.returncode == 0 or not lines or not lines[-1].startswith("bwrap: "):
            return None
        if any(full in lines[-1] for full in ("No space left", "Disk quota exceeded")):  # a mount point in /tmp, on
            return None  # the workspace's disk the agent may have filled: its doing after all
        return lines[-1][:300]

    def _joins_keyring(self) -> bool:
        """Whether a call gets a fresh, empty session keyring: not under bubblewrap with the seccomp filter, which
        refuses every keyring call (keyctl, add_key, request_key), so that no keyring is left to keep from it."""
        return self._keyring is not None and not (self.bwrap and self.seccomp_gap is None)

    def _kill(self, proc: subprocess.Popen) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        self.pids.kill_all()
        self.sweep.kill_all({proc.pid})

    def protections(self) -> tuple[list[str], list[str]]:
        space = self.spec.address_space_mb or self.spec.memory_mb
        common = ["fresh process per call", "scrubbed environment (no host secrets)",
                  "HOME and caches inside the workspace", f"address-space limit {space} MB",
                  "process-group kill on timeout", "output capped per call",
                  "inotify tripwire on private and decoy files"]
        if self.memory.available:
            common += [f"memory limit {self.spec.memory_mb} MB in total (cgroup; tmpfs, shm and memfd pages count)"]
        if self._joins_keyring():
            common += ["a fresh, empty session keyring per call"]
        if self.pids.available:
            common += [f"pids limit {PIDS_LIMIT} (cgroup)", "every process of a call killed when it ends (cgroup)"]
        elif self.bwrap or pid_namespace_prefix():
            common += ["every process of a call ends with it (its PID namespace dies with the call)"]
        else:
            common += ["every descendant of a call (the harness is a child subreaper) and every process "
                       "carrying the session token killed when the call ends"]
        common += ["each call's code written outside the workspace, through a harness-held descriptor",
                   "workspace folder mode 0700 on the host"]
        shared = ["per-user kernel state is shared with the host and other runs of the same user (inotify "
                  "limits, RLIMIT_NPROC accounting)"]
        if self.bwrap:
            prot = [
                *common,
                "bubblewrap: private references and host files not mounted",
                "read-only /data/public and system directories",
                *([f"the track's assets read-only at {ASSETS_MOUNT}"] if self.spec.assets is not None else []),
                *([f"the installed agent's program read-only ({', '.join(map(str, self.spec.tools))})"]
                  if self.spec.tools else []),
                "files under /etc that other users cannot read are hidden (root reads any mode)",
                "writable only /workspace and a per-call /tmp and /dev/shm on the workspace's disk (its quota); "
                "bubblewrap's root and /dev read-only",
                "/proc/keys, /proc/key-users and /proc/locks hidden",
                "only the given GPUs' /dev/nvidia* nodes",
                "new PID/IPC/UTS/mount namespaces", "no capabilities (bwrap --cap-drop ALL when root)",
                "network namespace (no network)" if not self.spec.network else
                "own network namespace with outbound access through slirp4netns (host loopback unreachable, "
                "abstract unix sockets private)" if self.net is not None else "network shared (task allows)",
            ]
            if self.seccomp_gap is None:
                prot.append("seccomp filter like docker's default (no keyrings, mounts, new namespaces, bpf, "
                            "io_uring...); advisory locks are no-ops (no channel between runs)")
            gaps = [f"no seccomp filter ({self.seccomp_gap})"] if self.seccomp_gap else []
            gaps += ["no CPU limit", *([] if self.memory.available else
                                       ["memory limited per process (address space), not in total"]),
                    "runs as the harness's user", *shared,
                    "/proc/self/mountinfo names the host paths of the mounted folders (not their contents)"]
            gaps += netns.network_gaps(self.net, self.spec.network, f"network shared ({self.net_gap}): host services "
                                       "on loopback, other runs and a local executor cluster are reachable (abstract "
                                       "unix sockets too)")
            return prot, gaps if self.pids.available else [*gaps, "no pids limit (needs root and cgroup v1)"]
        # a plain session exists only where its calls get the namespace (`plainns`; else it is refused)
        common += ["own PID namespace and /proc per call (unshare): host processes not visible",
                   "own IPC namespace per call: SysV segments, queues and semaphores go with the call",
                   "own mount namespace per call: the harness's state folder (key, signed caches, the disk ledger) "
                   "covered, every mount but the workspace read-only (other runs, the data root, the harness's code "
                   "and environment), unix sockets under /run and /tmp covered (docker, containerd, Ray), /proc/sys "
                   "read-only, a private 64 MB /dev/shm",
                   "every capability but root's file and own-process ones dropped for good: none that could undo "
                   "it (mount, mknod, handle opens, raw I/O, modules, ptrace, ...) or reach the host's network "
                   "(addresses, routes, firewall, raw sockets), realtime priority or leases"]
        common += ["own /dev: only null, zero, full, random, urandom, tty, the GPUs' nodes and pseudo-terminals of its "
                   "own (no block device, raw memory or console, nor any node the host makes during the call)"]
        return common, ["no filesystem isolation: the host filesystem (including private data) is readable; only "
                        "the tripwire detects opens of private/decoy files, and only while the agent runs",
                        *([f"bubblewrap not used: {self.unisolated_why}"] if self.unisolated_why else []),
                        "network not restricted: services on the host's addresses (a Ray cluster's ports too) and "
                        "abstract unix sockets are reachable",
                        *([] if self.memory.available else
                          ["memory limited per process (address space), not in total"]),
                        "runs as the harness's user",
                        *([f"the track's assets folder ({self.spec.assets}) is readable in place (read-only)"]
                          if self.spec.assets is not None else []),
                        "no seccomp filter: kernel keyrings and advisory locks shared with the host",
                        *shared,
                        *([] if self.pids.available else ["no pids limit (needs root and cgroup v1)"])]

    def close(self) -> None:
        if self._live is not None:
            self._kill(self._live)
        self.pids.close()
        self.memory.close()
        self.sweep.kill_all()
        net, self.net = self.net, None
        if net is not None:
            net.close()
        self.exec_dir.close()


class LocalSandbox(Sandbox):
    def __init__(self, isolation: str = "auto") -> None:
        self.isolation = isolation
        self.name = "local" if isolation == "auto" else "local-plain"

    def limit_workspace(self, workspace: Path, size_mb: int) -> tuple[WorkspaceQuota | None, str]:
        return mount_workspace(workspace, size_mb)

    def missing_modules(self, modules: list[str], track: str) -> tuple[list[str], str]:
        """The sandbox runs the harness's own interpreter (`sys.executable`, first on its PATH)."""
        return missing_here(modules), f"the {self.name} sandbox's Python ({interpreter()})"

    def available(self) -> tuple[bool, str]:
        if self.isolation == "none":
            return True, "plain host process (no filesystem isolation)"
        found = bwrap_path()
        if found:
            return True, f"bubblewrap at {found}"
        return True, f"bubblewrap not usable ({bwrap_unusable()}): plain host process"

    def isolates(self) -> bool:
        """Whether sessions opened here get filesystem isolation (bubblewrap found and working)."""
        return self.isolation == "auto" and bwrap_path() is not None

    def open(self, spec: SandboxSpec) -> LocalSession:
        bwrap = bwrap_path() if self.isolation == "auto" else None
        session = LocalSession(spec, bwrap, self.name)
        if self.isolation == "auto" and not bwrap:
            session.unisolated_why = bwrap_unusable()
        return session
