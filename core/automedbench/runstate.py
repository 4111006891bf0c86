"""What one run changes while it executes, as records the runner's steps read and write."""

from __future__ import annotations

import contextlib

from attrs import Factory, define

from . import errors, steptimer
from .records import Evaluation, FiredCode, Header, Isolation, JudgeVerdict, Runtime, SubmissionManifest


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

    def step(self, name: str) -> contextlib.AbstractContextManager[None]:
        """A named step of the run: the block's wall time goes to `runtime.harness_steps[name]` (`steptimer`)."""
        return steptimer.step(self.runtime, name)

    def fail(self, state: str, end_reason: str, error: str, code: str | None = None) -> None:
        """End the run in `state`; `code` names the harness code that records why (H-AGENT, H-DISK, ...)."""
        self.state, self.end_reason, self.error = state, end_reason, error
        if code is not None:
            self.codes.append(FiredCode(code, error))
