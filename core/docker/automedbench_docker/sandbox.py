"""The docker sandbox: one long-lived container per run, one `exec` per call, and an evaluator container.

The agent container runs the track's image as a non-root user with a read-only root, a tmpfs /tmp,
`/data/public` read-only, `/workspace` read-write and the decoys read-only at their paths (so the
host's inotify tripwire sees reads through the bind mounts). It has no capabilities,
no-new-privileges, pids/memory/CPU limits, and no network unless the task allows it. After every
call (and on timeout) every process but the container's init is killed and /tmp is emptied, so
nothing outlives a call. A call costs about 0.12 s as an exec (sweep included) against about 0.28 s
as a container per call (measured with the SDK on 2 cores), which is why the container is kept.

The evaluator container (`--network none`, read-only) sees only the frozen submission, the public
inputs and `private/` (all read-only), a copy of the trusted harness code, and one writable folder
for the result.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import tempfile
import threading
import time
from pathlib import Path

from automedbench.api import (
    ASSETS_MOUNT,
    EXEC_MOUNT,
    CallEnd,
    CallFolder,
    Evaluation,
    ExecResult,
    InfrastructureError,
    OutputCapture,
    Sandbox,
    SandboxSession,
    SandboxSpec,
    SubmissionError,
    UserError,
    call_result,
    read_json,
    sandbox_env,
    unsupported_language,
    write_json,
)
from automedbench.engine import (
    SLIRP_DNS,
    HarnessDir,
    SlirpNet,
    WorkspaceQuota,
    copy_pictures,
    mount_workspace,
    network_gaps,
    network_unsupported,
)

from .images import EVALUATOR_IMAGE, agent_image, client, run_in_image, stage_harness

SANDBOX_UID = 10001
# PID 1 of the agent container: reaps orphans so zombies never fill the pids limit.
REAPER = ("import os, time\nwhile True:\n    try:\n        os.wait()\n"
          "    except ChildProcessError:\n        time.sleep(0.5)\n")
# Run by the sandbox user after each call: kill(-1) reaches every process but init and the shell itself.
SWEEP = "kill -9 -1 2>/dev/null; find /tmp -xdev -mindepth 1 -delete 2>/dev/null; true"


def container_user() -> tuple[int, int]:
    """The harness's own uid/gid, or a fixed unprivileged one when the harness runs as root."""
    uid, gid = os.getuid(), os.getgid()
    return (SANDBOX_UID, SANDBOX_UID) if uid == 0 else (uid, gid)


def grant(path: Path, uid: int, gid: int) -> None:
    """Give the container user a host folder (only needed, and only possible, when the harness is root)."""
    if os.getuid() != 0:
        return
    for folder, dirs, files in os.walk(path):
        for name in [*dirs, *files]:
            with contextlib.suppress(OSError):
                os.lchown(os.path.join(folder, name), uid, gid)
    os.lchown(path, uid, gid)


def world_readable(root: Path) -> bool:
    """Whether every folder below `root` is o+rx and every file o+r (so uid 10001 can read it all)."""
    import stat

    for folder, _dirs, files in os.walk(root):
        if os.stat(folder).st_mode & (stat.S_IROTH | stat.S_IXOTH) != (stat.S_IROTH | stat.S_IXOTH):
            return False
        if any(not os.stat(os.path.join(folder, f)).st_mode & stat.S_IROTH for f in files):
            return False
    return True


def evaluator_user(private: Path) -> tuple[int, int]:
    """The unprivileged sandbox user where it can read the references, else their owner (no capabilities)."""
    uid, gid = container_user()
    if os.getuid() == 0 and not world_readable(private):
        info = private.stat()
        return info.st_uid, info.st_gid
    return uid, gid


# Folders of the image only root may enter (Debian's /root is 0700): an installed agent's program bound below one
# (a root harness's ~/.cache/automedbench/agents) would be out of the container user's reach. Such a folder is
# replaced by a read-only skeleton (`program_skeleton`: empty folders, 0755, down to each program's mount point).
PRIVATE_IN_IMAGE = {"/root"}


def program_skeleton(tools: list[Path]) -> HarnessDir | None:
    """Empty 0755 folders on the way to each program bound below a PRIVATE_IN_IMAGE folder, or None if none is."""
    below = [Path(t) for t in tools if len(Path(t).parts) > 2 and "/" + Path(t).parts[1] in PRIVATE_IN_IMAGE]
    if not below:
        return None
    skeleton = HarnessDir(Path(tempfile.gettempdir()) / f"automedbench-programs-{secrets.token_hex(8)}")
    for tool in below:
        folder = skeleton.path
        for part in tool.parts[1:]:
            folder = folder / part
            folder.mkdir(mode=0o755, exist_ok=True)
            os.chmod(folder, 0o755)
    return skeleton
# /dev/shm of the agent container: a tmpfs whose pages count against the memory limit, like /tmp's.
SHM_MB = 64


def container_config(spec: SandboxSpec, image: str, *, cpus: float, pids_limit: int, tmp_mb: int,
                     user: tuple[int, int], exec_dir: Path | None = None, slirp: bool = False,
                     skeleton: Path | None = None) -> dict:
    """Keyword arguments of `containers.create` for the agent container (pure, so tests can read it).

    `slirp`: a network-enabled task starts with no network and gets slirp4netns wired into the container's
    own namespace after start (outbound only, no host loopback, no docker bridge to the host's services)."""
    from docker.types import DeviceRequest, Mount

    mounts = [Mount("/data/public", str(spec.public.resolve()), type="bind", read_only=True),
              Mount("/workspace", str(spec.workspace.resolve()), type="bind", read_only=False)]
    if exec_dir is not None:  # the harness's copies of each call's code, read-only, outside the workspace
        mounts.append(Mount(EXEC_MOUNT, str(exec_dir.resolve()), type="bind", read_only=True))
    for inside, host in sorted(spec.decoys.items()):
        mounts.append(Mount(inside, str(Path(host).resolve()), type="bind", read_only=True))
    extra = dict(spec.env)
    if spec.assets is not None:  # the track's read-only files (a model's weights), outside the workspace
        mounts.append(Mount(ASSETS_MOUNT, str(spec.assets.resolve()), type="bind", read_only=True))
        extra["ASSETS_DIR"] = ASSETS_MOUNT
    if skeleton is not None:  # in place of the image's private folders: the way to the programs below them
        mounts += [Mount(top, str(skeleton / top.lstrip("/")), type="bind", read_only=True)
                   for top in sorted(PRIVATE_IN_IMAGE) if (skeleton / top.lstrip("/")).is_dir()]
    for tool in spec.tools:  # an installed agent's program (the same Debian base as the host's), read-only
        mounts.append(Mount(str(tool), str(Path(tool).resolve()), type="bind", read_only=True))
    env = sandbox_env("/workspace", "/data/public", "/tmp", "/usr/local/bin:/usr/bin:/bin", extra)
    config = {
        "image": image, "command": ["python3", "-c", REAPER], "detach": True, "user": f"{user[0]}:{user[1]}",
        "read_only": True, "tmpfs": {"/tmp": f"rw,nosuid,nodev,size={tmp_mb}m,mode=1777"},
        "network_mode": "bridge" if spec.network and not slirp else "none", "hostname": "sandbox",
        "security_opt": ["no-new-privileges"], "cap_drop": ["ALL"], "pids_limit": pids_limit,
        "mem_limit": f"{spec.memory_mb}m" if spec.memory_mb > 0 else None,
        "memswap_limit": f"{spec.memory_mb}m" if spec.memory_mb > 0 else None,
        "nano_cpus": int(cpus * 1e9), "mounts": mounts, "working_dir": "/workspace", "environment": env,
        "ipc_mode": "private", "shm_size": f"{SHM_MB}m", "labels": {"org.automedbench.role": "agent"},
    }
    if slirp:
        config["dns"] = [SLIRP_DNS]
    if spec.gpus:
        config["device_requests"] = [DeviceRequest(device_ids=[str(g) for g in spec.gpus],
                                                   capabilities=[["gpu"]])]
    return {k: v for k, v in config.items() if v is not None}


START_ATTEMPTS = 2


def start_container(cli, config: dict, image: str, role: str = "agent"):
    """Create and start a container (`role`: the agent's or the evaluator's). A start the engine refuses is tried
    once more on a new container (seen under load: runc found no python3 in the image, the next container
    started), the refused one removed; nothing has run in it yet, so the retry repeats no work."""
    create = {k: v for k, v in config.items() if k != "detach"}
    for attempt in range(1, START_ATTEMPTS + 1):
        container = None
        try:
            container = cli.containers.create(**create)
            container.start()
            return container
        except Exception as exc:
            if container is not None:
                with contextlib.suppress(Exception):
                    container.remove(force=True)
            if attempt == START_ATTEMPTS or type(exc).__name__ == "ImageNotFound":
                raise InfrastructureError(f"could not start the {role} container from {image}: {exc}") from None
    raise AssertionError("unreachable")


class DockerSession(SandboxSession):
    data_dir = "/data/public"
    workspace_dir = "/workspace"
    isolates_filesystem = True  # the host's private folder is not mounted (only decoys are)

    def __init__(self, spec: SandboxSpec, cli, image: str, *, cpus: float, pids_limit: int, tmp_mb: int) -> None:
        self.spec, self.cli, self.image = spec, cli, image
        self.assets_dir = ASSETS_MOUNT if spec.assets is not None else ""
        self.pids_limit, self.cpus, self.tmp_mb = pids_limit, cpus, tmp_mb
        self.uid, self.gid = container_user()
        ws = spec.workspace
        for sub in (".home", ".cache"):
            (ws / sub).mkdir(parents=True, exist_ok=True)
        grant(ws, self.uid, self.gid)
        self.exec_dir = CallFolder()  # 0644 files in a 0755 folder the container cannot write
        self.skeleton = program_skeleton(list(spec.tools))
        self.net: SlirpNet | None = None
        self.net_gap = (network_unsupported() or "") if spec.network else ""
        config = container_config(spec, image, cpus=cpus, pids_limit=pids_limit, tmp_mb=tmp_mb,
                                  user=(self.uid, self.gid), exec_dir=self.exec_dir.path,
                                  slirp=spec.network and not self.net_gap,
                                  skeleton=self.skeleton.path if self.skeleton is not None else None)
        self.container = start_container(cli, config, image)
        if spec.network and not self.net_gap:
            try:
                self.container.reload()
                self.net = SlirpNet(int(self.container.attrs["State"]["Pid"]))
            except (OSError, KeyError, ValueError) as exc:
                self.close()
                raise InfrastructureError(f"could not give the agent container its network: {exc}") from None

    def _exec(self, argv: list[str]) -> str:
        return self.cli.api.exec_create(self.container.id, argv, stdout=True, stderr=True,
                                        user=f"{self.uid}:{self.gid}", workdir="/workspace")["Id"]

    def _ensure_running(self) -> str:
        """Restart the container if something (the OOM killer) ended its init; returns a note if so."""
        self.container.reload()
        if self.container.status == "running":
            return ""
        self.container.start()
        if self.net is not None:  # a restarted container has a new init and a new network namespace
            self.net.close()
            self.container.reload()
            self.net = SlirpNet(int(self.container.attrs["State"]["Pid"]))
        return "\nNOTE: the sandbox container had stopped (out of memory?) and was restarted; /tmp is empty"

    def _sweep(self) -> None:
        with contextlib.suppress(Exception):
            self.cli.api.exec_start(self._exec(["sh", "-c", SWEEP]))

    def execute(self, language: str, code: str, timeout_s: float) -> ExecResult:
        refused = unsupported_language(language)
        if refused is not None:
            return refused
        argv = self.exec_dir.write_call(language, code, python="python3")
        note = self._ensure_running()
        out = OutputCapture(None, self.spec.output_cap_bytes)
        err = OutputCapture(None, self.spec.output_cap_bytes)
        started = time.monotonic()
        exec_id = self._exec(argv)
        stream = self.cli.api.exec_start(exec_id, stream=True, demux=True)

        def pump() -> None:
            with contextlib.suppress(Exception):
                for chunk_out, chunk_err in stream:
                    if chunk_out:
                        out.feed(chunk_out)
                    if chunk_err:
                        err.feed(chunk_err)

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        reader.join(timeout_s)
        timed_out = reader.is_alive()
        self._sweep()  # on timeout the kill; otherwise it ends stragglers a call left behind
        reader.join(10)
        duration = round(time.monotonic() - started, 3)
        exit_code = self.cli.api.exec_inspect(exec_id).get("ExitCode")
        if exit_code == 137 and not timed_out:
            note += f"\nKILLED: the call was killed (out of memory at {self.spec.memory_mb} MB?)"
        end = CallEnd(exit_code, timed_out, timeout_s, "every process in the sandbox", note)
        return call_result(end, out, err, duration)

    def protections(self) -> tuple[list[str], list[str]]:
        prot = [
            f"docker container from {self.image}, one exec per call",
            "private references not mounted; decoys read-only at their paths (inotify tripwire)",
            "read-only root filesystem; writable only /workspace and a tmpfs /tmp "
            f"({self.tmp_mb} MB, emptied after each call) and /dev/shm ({SHM_MB} MB), both counted in the memory "
            "limit",
            "docker's default seccomp profile (no kernel keyrings, mounts or new namespaces; /proc/keys masked)",
            "only the given GPUs (device requests by id)",
            "read-only /data/public", f"non-root user {self.uid}", "no capabilities, no-new-privileges",
            *([f"the track's assets read-only at {ASSETS_MOUNT}"] if self.spec.assets is not None else []),
            f"memory limit {self.spec.memory_mb} MB (cgroup)", f"pids limit {self.pids_limit}",
            f"CPU limit {self.cpus:g}", "own PID/IPC/UTS/mount namespaces; every process killed after each call",
            "no network (--network none)" if not self.spec.network else
            "own network namespace with outbound access through slirp4netns (no docker bridge, host loopback "
            "unreachable)" if self.net is not None else "bridge network (task allows)",
            "scrubbed environment (no host secrets)", "output capped per call",
        ]
        if self.spec.gpus:
            prot.append(f"GPUs passed through: {', '.join(map(str, self.spec.gpus))}")
        gaps = ["no seccomp profile beyond docker's default",
                "advisory locks on the read-only public files are shared with the host and other runs (the "
                "same inode): a lock channel between runs"]
        gaps += network_gaps(self.net, self.spec.network, f"bridge network ({self.net_gap}): the host's "
                                   "services listening on the docker bridge address and the internet are reachable")
        return prot, gaps

    def bound_sources(self) -> list[Path]:
        return [self.spec.public.resolve(), self.spec.workspace.resolve(),
                *(Path(p).resolve() for p in self.spec.decoys.values()),
                *([self.spec.assets.resolve()] if self.spec.assets is not None else []),
                *(Path(t).resolve() for t in self.spec.tools)]

    def close(self) -> None:
        net, self.net = getattr(self, "net", None), None
        if net is not None:
            net.close()
        container, self.container = getattr(self, "container", None), None
        if container is not None:
            with contextlib.suppress(Exception):
                container.remove(force=True)
        for folder in (getattr(self, "exec_dir", None), getattr(self, "skeleton", None)):
            if folder is not None:
                folder.close()


class DockerSandbox(Sandbox):
    name = "docker"
    evaluator = "docker"  # the runner then scores in the evaluator container too

    def __init__(self, image: str | None = None, cpus: float | None = None, pids_limit: int = 512,
                 tmp_mb: int | None = None) -> None:
        self.image = image
        self.cpus = cpus or float(os.cpu_count() or 1)
        self.pids_limit, self.tmp_mb = pids_limit, tmp_mb

    def limit_workspace(self, workspace: Path, size_mb: int) -> tuple[WorkspaceQuota | None, str]:
        return mount_workspace(workspace, size_mb)

    def available(self) -> tuple[bool, str]:
        try:
            cli = client(timeout=10)
        except UserError as exc:
            return False, str(exc)
        image = self.image or agent_image("default")
        try:
            cli.images.get(image)
        except Exception:
            return False, f"engine reachable but no image {image}: run `automedbench images build`"
        return True, f"docker engine {cli.version().get('Version', '?')}"

    def missing_modules(self, modules: list[str], track: str) -> tuple[list[str], str] | None:
        """Asked of the image the track's runs use, in a network-less throwaway container (cached per image
        id); None when there is no engine or image yet (the run then says that itself)."""
        try:
            cli = client(timeout=10)
            image = self.image or agent_image(track)
            if not _has_image(cli, image):
                image = agent_image("default")
            ident = cli.images.get(image).id
        except Exception:
            return None
        key = (ident, tuple(modules))
        if key not in _MISSING_CACHE:
            probe = ("import importlib.util as u, json, sys\n"
                     "print(json.dumps([m for m in sys.argv[1:] if u.find_spec(m) is None]))")
            try:
                _MISSING_CACHE[key] = json.loads(run_in_image(cli, image, ["python3", "-c", probe, *modules]))
            except Exception:
                return None
        return list(_MISSING_CACHE[key]), f"the docker image {image}"

    def open(self, spec: SandboxSpec) -> DockerSession:
        if not spec.gpus and os.environ.get("AUTOMEDBENCH_GPUS", "").strip():
            # GPUs are never passed through implicitly: the ids are named in the spec or this variable.
            spec.gpus = [g.strip() for g in os.environ["AUTOMEDBENCH_GPUS"].split(",") if g.strip()]
        cli = client()
        image = self.image
        if image is None:
            image = agent_image(spec.track) if spec.track else agent_image("default")
            if not _has_image(cli, image):
                image = agent_image("default")
        if not _has_image(cli, image):
            raise UserError(f"no docker image {image}: run `automedbench images build` first")
        # tmpfs pages count against the memory limit: a full /tmp must not leave the container nothing.
        tmp_mb = self.tmp_mb or (max(64, min(1024, spec.memory_mb // 2)) if spec.memory_mb > 0 else 1024)
        return DockerSession(spec, cli, image, cpus=self.cpus, pids_limit=self.pids_limit, tmp_mb=tmp_mb)


# (image id, modules) -> the modules that image's Python lacks: one container per image and question
_MISSING_CACHE: dict[tuple[str, tuple[str, ...]], list[str]] = {}


def _has_image(cli, name: str) -> bool:
    try:
        cli.images.get(name)
    except Exception:
        return False
    return True


# ---------------------------------------------------------------- evaluator container


def evaluate_in_container(request, timeout_s: float, image: str = EVALUATOR_IMAGE) -> Evaluation:
    """Run `python -I -m automedbench.evaluator` in a network-less, read-only container; read its verdict."""
    from automedbench.engine import EVAL_CPU_S, EVAL_FILE_BYTES, EVAL_MEMORY_MB, submission_failure
    from docker.types import Mount, Ulimit

    cli = client()
    if not _has_image(cli, image):
        raise InfrastructureError(f"no docker image {image}: run `automedbench images build` first")
    uid, gid = evaluator_user(Path(request.private))
    out = Path(request.out)
    with tempfile.TemporaryDirectory(prefix="automedbench-eval-") as tmp:
        work = Path(tmp)
        stage_harness(work / "site")
        (work / "out").mkdir()
        (work / "request").mkdir()
        shutil.copyfile(request.manifest, work / "request" / "manifest.json")
        inside = {**{k: getattr(request, k) for k in ("task_id", "case_ids")},
                  "submission": "/submission", "public": "/data/public", "private": "/data/private",
                  "manifest": "/request/manifest.json", "out": "/out/evaluation.json",
                  "pictures": bool(getattr(request, "pictures", False))}
        (work / "request" / "request.json").write_text(json.dumps(inside))
        os.chmod(work, 0o755)
        grant(work / "out", uid, gid)
        mounts = [Mount("/submission", request.submission, type="bind", read_only=True),
                  Mount("/data/public", request.public, type="bind", read_only=True),
                  Mount("/data/private", request.private, type="bind", read_only=True),
                  Mount("/opt/automedbench/site", str(work / "site"), type="bind", read_only=True),
                  Mount("/request", str(work / "request"), type="bind", read_only=True),
                  Mount("/out", str(work / "out"), type="bind", read_only=False)]
        config = dict(
            image=image, command=["python3", "-I", "-m", "automedbench.evaluator", "/request/request.json"],
            user=f"{uid}:{gid}", network_mode="none", read_only=True, mounts=mounts, cap_drop=["ALL"],
            security_opt=["no-new-privileges"], pids_limit=256, tmpfs={"/tmp": "rw,nosuid,nodev,size=256m"},
            environment={"LANG": "C.UTF-8", "HOME": "/tmp"}, labels={"org.automedbench.role": "evaluator"},
            # the same limits as the local evaluator process: memory (the whole container), CPU time, file size
            mem_limit=f"{EVAL_MEMORY_MB}m" if EVAL_MEMORY_MB > 0 else None,
            memswap_limit=f"{EVAL_MEMORY_MB}m" if EVAL_MEMORY_MB > 0 else None,
            ulimits=[Ulimit(name="cpu", soft=EVAL_CPU_S, hard=EVAL_CPU_S + 60),
                     Ulimit(name="fsize", soft=EVAL_FILE_BYTES, hard=EVAL_FILE_BYTES)])
        container = start_container(cli, config, image, role="evaluator")
        try:
            try:
                status = container.wait(timeout=timeout_s)
            except Exception:
                raise SubmissionError(f"the evaluator did not finish this submission within {timeout_s:.0f} s") \
                    from None
            logs = container.logs(stdout=True, stderr=True).decode("utf-8", "replace")
        finally:
            with contextlib.suppress(Exception):
                container.remove(force=True)
        result = work / "out" / "evaluation.json"
        code = status.get("StatusCode")
        tail = logs.strip().splitlines()[-5:]
        failure = submission_failure(code - 128 if code and code > 128 else 0, tail) if code else None
        if failure:  # 137: the container's memory limit (SIGKILL); 152/153: CPU time, file size
            raise SubmissionError(failure)
        if code != 0 or not result.is_file():
            raise InfrastructureError("evaluator container failed: " + " | ".join(tail))
        evaluation = read_json(result, Evaluation)
        copy_pictures(work / "out" / "pictures", out.parent / "pictures")
    write_json(out, evaluation)
    return evaluation
