"""The Sandbox interface: where agent code runs, and what it can and cannot see."""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path

from attrs import Factory, define

from .records import ExecResult


@define
class SandboxSpec:
    """What a run needs: a writable workspace, read-only public data, and decoys to catch snooping."""

    workspace: Path
    public: Path
    network: bool = False
    memory_mb: int = 8192
    output_cap_bytes: int = 8 << 20
    # Host directories mounted read-only at the given in-sandbox paths as tripwires (never real data).
    decoys: dict[str, Path] = Factory(dict)
    env: dict[str, str] = Factory(dict)
    # Which track the run belongs to (a backend may pick an image per track), and the GPUs this run may
    # use, e.g. ["0"]; empty = none. Each run gets its GPU explicitly.
    track: str = ""
    gpus: list[str] = Factory(list)


class SandboxSession(ABC):
    data_dir: str
    workspace_dir: str
    # True when the sandbox cannot see the host's private folder at all (bubblewrap, containers). Then
    # only the per-run decoys are watched, so other runs' evaluators reading the shared private data
    # are not mistaken for this agent.
    isolates_filesystem: bool = False

    @abstractmethod
    def execute(self, language: str, code: str, timeout_s: float) -> ExecResult:
        """Run one snippet in a fresh process; kill its whole process tree on timeout."""

    @abstractmethod
    def protections(self) -> tuple[list[str], list[str]]:
        """(what this session enforces, what it does not), for the result's isolation block."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Kill anything left running and release resources."""


class Sandbox(ABC):
    name: str = ""

    @abstractmethod
    def available(self) -> tuple[bool, str]:
        """Whether this backend can run here, and why not."""

    @abstractmethod
    def open(self, spec: SandboxSpec) -> SandboxSession:
        ...
