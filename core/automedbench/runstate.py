"""What one run changes while it executes, as records the runner's steps read and write."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from attrs import Factory, define

from . import errors
from .records import Evaluation, FiredCode, Header, Isolation, JudgeVerdict, Runtime, SubmissionManifest
from .repeats import RepeatWatch
from .sandbox import SandboxSession
from .track import StagedData
from .tripwire import Tripwire


@define
class RunState:
    """Everything one run changes as it goes, from the header to the last error code.

    The steps of `Run` read and write this record instead of passing (and mutating) a handful of
    arguments; `Run.execute` turns it into the Result at the end."""

    header: Header
    runtime: Runtime
    isolation: Isolation
    state: str = "scored"
    end_reason: str = errors.END_AGENT_STOPPED
    error: str | None = None
    submitted: bool = False
    evaluation: Evaluation | None = None
    verdict: JudgeVerdict | None = None
    manifest: SubmissionManifest = Factory(SubmissionManifest)
    codes: list[FiredCode] = Factory(list)
    plots: list[str] = Factory(list)  # summary plots collected with the plan artefacts

    def fail(self, state: str, end_reason: str, error: str, code: str | None = None) -> None:
        """End the run in `state`; `code` names the harness code that records why (H-AGENT, H-DISK, ...)."""
        self.state, self.end_reason, self.error = state, end_reason, error
        if code is not None:
            self.codes.append(FiredCode(code, error))


@define
class AgentLoop:
    """The agent phase's working set: the open sandbox session, the tripwire, the conversation, the budget."""

    staged: StagedData
    session: SandboxSession
    tripwire: Tripwire
    decoy: Path
    decoys: dict[str, Path]
    messages: list[dict[str, Any]]
    max_turns: int
    time_limit: float
    exec_timeout: float
    continues: int
    started: float = Factory(time.monotonic)
    turn: int = 0
    count_model_time: bool = True  # False: the task's limit counts tool time only (model replies excluded)
    model_s: float = 0.0
    repeat_limit: int = 0  # identical calls with identical answers in a row that stop the run (0: never)
    repeats: RepeatWatch = Factory(RepeatWatch)

    def elapsed(self) -> float:
        """Time charged to the budget: wall time, less the model's replies where the task says so."""
        wall = time.monotonic() - self.started
        return wall if self.count_model_time else wall - self.model_s
