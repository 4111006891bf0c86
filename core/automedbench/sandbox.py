"""The Sandbox interface: where agent code runs, and what it can and cannot see."""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import Protocol

from attrs import Factory, define

from .records import DEFAULT_WORKSPACE_MB, ExecResult

# Size limit of a run's workspace where its task declares none (room for a model's weights, a pip cache and a real
# task's outputs), for sandboxes that can limit it (`Sandbox.limit_workspace`); a task's `workspace_mb` sets its own.
DEFAULT_QUOTA_MB = DEFAULT_WORKSPACE_MB
# Where a track's read-only assets (`Track.assets`: a model's weights) appear inside an isolating sandbox: outside
# the workspace and away from /data, where the decoy references sit. Code finds it through $ASSETS_DIR too.
ASSETS_MOUNT = "/assets"
# The next step where bubblewrap is missing or unusable (the local sandbox's isolation): the package, or docker.
BWRAP_NEXT_STEP = ("install bubblewrap (apt-get install bubblewrap; dnf install bubblewrap) or use "
                   "--sandbox docker")


class WorkspaceLimit(Protocol):
    """A size limit a sandbox put on a run's workspace; released when the run ends."""

    def describe(self) -> str: ...

    def release(self, keep: bool = False) -> None: ...


@define
class SandboxSpec:
    """What a run needs: a writable workspace, read-only public data, and decoys to catch snooping."""

    workspace: Path
    public: Path
    network: bool = False
    memory_mb: int = 8192
    # The per-process address-space limit where it differs from memory_mb (an agent runtime's reservations); 0: same.
    address_space_mb: int = 0
    output_cap_bytes: int = 8 << 20
    # Host directories mounted read-only at the given in-sandbox paths as tripwires (never real data).
    decoys: dict[str, Path] = Factory(dict)
    env: dict[str, str] = Factory(dict)
    # Which track the run belongs to (a backend may pick an image per track), and the GPUs this run may
    # use, e.g. ["0"]; empty = none. Each run gets its GPU explicitly.
    track: str = ""
    gpus: list[str] = Factory(list)
    # The track's read-only assets folder on the host (`Track.assets`), mounted read-only at ASSETS_MOUNT; None: none.
    assets: Path | None = None
    # Host folders an installed agent's program lives in (`Agent.sandbox_binds`), mounted read-only at the same
    # path (so their absolute links and interpreters resolve); never data, references or the harness's state.
    tools: list[Path] = Factory(list)


class SandboxSession(ABC):
    """One run's open sandbox. Every capability is declared here, abstract or with a default, so the
    runner never probes for optional attributes (as inspect_ai's SandboxEnvironment declares its own).

    Errors: `execute` raises `InfrastructureError` only for faults of the backend itself (engine gone);
    anything the agent's code does (crash, timeout, OOM) is reported in the returned `ExecResult`."""

    data_dir: str
    workspace_dir: str
    # True when the sandbox cannot see the host's private folder at all (bubblewrap, containers). Then
    # only the per-run decoys are watched, so other runs' evaluators reading the shared private data
    # are not mistaken for this agent.
    isolates_filesystem: bool = False
    # Why a backend that isolates where it can did not here (bubblewrap's probe error), for the run's warning.
    unisolated_why: str = ""
    # Where the track's read-only assets are inside the sandbox ("" when the run has none).
    assets_dir: str = ""

    @abstractmethod
    def execute(self, language: str, code: str, timeout_s: float) -> ExecResult:
        """Run one snippet in a fresh process; kill its whole process tree on timeout."""

    @abstractmethod
    def protections(self) -> tuple[list[str], list[str]]:
        """(what this session enforces, what it does not), for the result's isolation block."""

    def bound_sources(self) -> list[Path]:
        """Host directories this session makes visible inside the sandbox (the runner refuses a run whose
        private data lies under one of them). Default: none; `[Path("/")]` means the whole host."""
        return []

    def close(self) -> None:  # noqa: B027 - optional hook
        """Kill anything left running and release resources."""


class Sandbox(ABC):
    """A sandbox backend, registered through `automedbench_register_sandboxes`."""

    name: str = ""
    # Which evaluator backend scores this sandbox's runs: "process" (a local `python -I` subprocess)
    # or "docker" (a network-less container), so a containerised agent is scored in a container too.
    evaluator: str = "process"

    @abstractmethod
    def available(self) -> tuple[bool, str]:
        """Whether this backend can run here, and why not."""

    @abstractmethod
    def open(self, spec: SandboxSpec) -> SandboxSession:
        ...

    def missing_modules(self, modules: list[str], track: str) -> tuple[list[str], str] | None:
        """(the `modules` the Python of this backend's sandbox for `track` cannot import, where that Python
        is), for the check before a run (`TaskSpec.needs`); None when the backend cannot tell (then the run
        is not refused). Decided without importing the modules."""
        return None

    def limit_workspace(self, workspace: Path, size_mb: int) -> tuple[WorkspaceLimit | None, str]:
        """Limit the not yet existing `workspace` folder to `size_mb` before the run: (limit, "") or
        (None, the gap for the result's isolation block). Default: no limit."""
        return None, f"no disk quota on /workspace (the {self.name or 'chosen'} sandbox offers none)"
