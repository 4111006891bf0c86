"""The runner's end of the bridge: one AutoMedBench run per inspect sample, driven turn by turn from inspect.

The run executes in its own thread, exactly as `automedbench run` does (staging, sandbox, tripwires, budgets,
freeze, isolated evaluator, judge, result.json, view.html). Its agent is `BridgeAgent`: each `next_turn` hands
the answer of the previous call back to inspect and waits for inspect's next sandbox call, which it returns
as one `execute_code` call; the inspect model's text, reasoning and tokens since the last call go into that
turn. The sandbox session is tapped so inspect gets each call's whole output (the runner shows a model only
the tail). Ending: inspect asks to submit (`submit_results`) or to stop; a run that ends by itself (time or
turn limit, repeated calls, a breach) refuses further calls with the reason.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import queue
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import attrs
from attrs import Factory, define

from .engine import (
    END_AGENT_STOPPED,
    NOTICE_MARK,
    Agent,
    AgentContext,
    AgentError,
    AgentTurn,
    ExecResult,
    Result,
    Run,
    RunOptions,
    Sandbox,
    SandboxSession,
    ToolCall,
    UserError,
    registry,
)

# How long `finish` waits for a run to score after the agent stopped (evaluation, judge, error codes).
FINISH_TIMEOUT_S = 3600
_current = threading.local()  # the channel of the run this thread executes (read by the agent's factory)


class RunEnded(Exception):
    """The AutoMedBench run is over (its end reason says why): no further call is run."""


@define
class Turn:
    """What inspect's model said since the last call, carried into the next turn of the run."""

    content: str = ""
    reasoning: str = ""
    tokens_in: int = 0
    tokens_out: int = 0
    tokens_cached: int = 0
    model: str = ""


@define
class Request:
    """One thing inspect asks of the run: `exec` (language, code), `submit`, `stop` or `cancel`."""

    kind: str
    language: str = ""
    code: str = ""
    turn: Turn = Factory(Turn)
    future: Future = Factory(Future)


class Channel:
    """One run and the queue between it and one inspect sample."""

    def __init__(self, options: RunOptions) -> None:
        self.options = options
        self.requests: queue.Queue[Request] = queue.Queue()
        self.ready = threading.Event()  # the agent has started (the brief is known), or the run ended first
        self.done = threading.Event()
        self.context: AgentContext | None = None
        self.result: Result | None = None
        self.run_dir: Path | None = None
        self.error: BaseException | None = None
        self.pending: Request | None = None
        self.last_exec: ExecResult | None = None
        self.lock = threading.Lock()
        self.ids = itertools.count(1)
        self.thread = threading.Thread(target=self._execute, name=f"automedbench-{options.task}", daemon=True)

    # ------------------------------------------------------------ the run's thread

    def start(self) -> Channel:
        self.thread.start()
        return self

    def _execute(self) -> None:
        _current.channel = self
        try:
            run = Run(self.options, registry())
            self.run_dir = run.run_dir
            run.sandbox = TapSandbox(run.sandbox, self)  # the run made its sandbox when it was set up
            self.result = run.execute()
        except BaseException as exc:  # a refusal before the run (UserError) or the harness's own failure
            self.error = exc
        finally:
            _current.channel = None
            with self.lock:  # a request is either queued before this (and answered below) or refused after
                self.done.set()
            self.ready.set()
            self._end_waiting()

    def _end_waiting(self) -> None:
        """Answer whatever still waits: the call in flight gets its result and why the run ended (it ran, and
        the run stopped after it: a repeat limit, a breach, the time limit), every queued request the reason."""
        reason = self.end_reason()
        pending, self.pending = self.pending, None
        if pending is not None and pending.kind == "exec" and self.last_exec is not None \
                and not pending.future.done():
            pending.future.set_result(attrs.evolve(self.last_exec, stderr=self.last_exec.stderr + f"\n\n{reason}"))
        waiting = [pending] if pending is not None else []
        while True:
            try:
                waiting.append(self.requests.get_nowait())
            except queue.Empty:
                break
        for request in waiting:
            if not request.future.done():
                request.future.set_exception(RunEnded(reason))

    def end_reason(self) -> str:
        if self.result is not None:
            return f"the AutoMedBench run ended ({self.result.end_reason})"
        if self.error is not None:
            return f"the AutoMedBench run failed: {type(self.error).__name__}: {self.error}"
        return "the AutoMedBench run ended"

    # ------------------------------------------------------------ inspect's side (blocking; run in a worker thread)

    def wait_ready(self) -> AgentContext:
        """Block until the run's agent has started; its context (brief, kickoff, paths)."""
        self.ready.wait()
        if self.context is None:
            if isinstance(self.error, UserError):
                raise self.error
            raise RuntimeError(self.end_reason())
        return self.context

    def call(self, language: str, code: str, turn: Turn) -> ExecResult:
        """Run one call in the run's sandbox as the agent's next turn; its whole result."""
        request = Request("exec", language, code, turn)
        self._send(request)
        return request.future.result()

    def _send(self, request: Request) -> None:
        with self.lock:
            if self.done.is_set():
                raise RunEnded(self.end_reason())
            self.requests.put(request)

    def submit(self, turn: Turn | None = None) -> str:
        """Submit the outputs as the agent's next turn: the track's refusal (the run goes on), or the acceptance
        once the run is scored."""
        request = Request("submit", turn=turn or Turn())
        self._send(request)
        try:
            return str(request.future.result())
        except RunEnded:
            if self.result is not None and self.result.submission.submitted:
                return json.dumps({"accepted": True, "end_reason": self.result.end_reason})
            raise

    def finish(self, submit: bool) -> Result:
        """End the agent's part (submitting its outputs or not) and wait for the scored result."""
        if not self.done.is_set():
            with contextlib.suppress(RunEnded):
                self._send(Request("submit" if submit else "stop"))
        self.thread.join(FINISH_TIMEOUT_S)
        if self.result is None:
            raise RuntimeError(self.end_reason())
        return self.result

    def cancel(self) -> None:
        """The sample is gone (cancelled, errored): end the run as the agent's failure and wait for its record."""
        if not self.done.is_set():
            with contextlib.suppress(RunEnded):
                self._send(Request("cancel"))
        self.thread.join(FINISH_TIMEOUT_S)


def current_channel() -> Channel | None:
    return getattr(_current, "channel", None)


class BridgeAgent(Agent):
    """The `inspect` agent: an inspect solver's sandbox calls, turn by turn. Only `inspect eval` starts it."""

    name = "inspect"
    continues = 0  # inspect's agent decides what follows a reply; the runner never prods it

    def __init__(self, model: str = "", solver: str = "", **options: Any) -> None:
        channel = current_channel()
        if channel is None:
            raise UserError("the inspect agent is driven by inspect_ai: run `inspect eval automedbench_inspect/TASK "
                            "--model PROVIDER/MODEL` (pip install 'automedbench[inspect]')")
        self.channel = channel
        self.model, self.solver = model, solver  # recorded in the header (and its options hash)

    def start(self, context: AgentContext) -> None:
        self.channel.context = context
        self.channel.ready.set()

    def next_turn(self, messages: list[dict[str, Any]]) -> AgentTurn:
        channel = self.channel
        self._answer(messages)
        request = channel.requests.get()
        call_id = f"inspect_{next(channel.ids):04d}"
        turn = request.turn
        base = {"content": turn.content, "reasoning": turn.reasoning, "tokens_in": turn.tokens_in,
                "tokens_out": turn.tokens_out, "tokens_cached": turn.tokens_cached}
        if request.kind == "cancel":
            request.future.set_result(None)
            raise AgentError("inspect ended the sample before the agent finished (cancelled or failed)")
        if request.kind == "stop":
            request.future.set_result(None)
            return AgentTurn(**{**base, "content": base["content"] or "The inspect agent finished."}, final=True)
        channel.pending, channel.last_exec = request, None
        if request.kind == "submit":
            return AgentTurn(**base, tool_calls=[ToolCall(call_id, "submit_results", "{}")])
        arguments = json.dumps({"language": request.language, "code": request.code})
        return AgentTurn(**base, tool_calls=[ToolCall(call_id, "execute_code", arguments)])

    def _answer(self, messages: list[dict[str, Any]]) -> None:
        """Give the call in flight its result: the tapped session's whole output, plus any harness notice."""
        channel, request = self.channel, self.channel.pending
        if request is None:
            return
        channel.pending = None
        told = str(messages[-1].get("content") or "") if messages and messages[-1].get("role") == "tool" else ""
        if request.kind == "submit":  # refused by the track's submit gate: the run goes on
            request.future.set_result(told)
            return
        result = channel.last_exec
        if result is None:  # refused before it ran (never for calls the bridge writes): the runner's words
            result = ExecResult(1, "", told, 0.0)
        if NOTICE_MARK in told:  # the last one is the runner's (the agent's own output may print the words)
            result = attrs.evolve(result, stderr=result.stderr + told[told.rindex(NOTICE_MARK):])
        request.future.set_result(result)


class TapSession(SandboxSession):
    """The run's sandbox session as it is, keeping each call's whole result for inspect."""

    def __init__(self, inner: SandboxSession, channel: Channel) -> None:
        self.inner, self.channel = inner, channel
        self.data_dir, self.workspace_dir = inner.data_dir, inner.workspace_dir
        self.isolates_filesystem, self.assets_dir = inner.isolates_filesystem, inner.assets_dir
        self.unisolated_why = inner.unisolated_why

    def execute(self, language: str, code: str, timeout_s: float) -> ExecResult:
        result = self.inner.execute(language, code, timeout_s)
        self.channel.last_exec = result
        return result

    def protections(self) -> tuple[list[str], list[str]]:
        return self.inner.protections()

    def bound_sources(self) -> list[Path]:
        return self.inner.bound_sources()

    def close(self) -> None:
        self.inner.close()


class TapSandbox(Sandbox):
    """The chosen sandbox backend, its sessions tapped."""

    def __init__(self, inner: Sandbox, channel: Channel) -> None:
        self.inner, self.channel = inner, channel
        self.name, self.evaluator = inner.name, inner.evaluator

    def available(self) -> tuple[bool, str]:
        return self.inner.available()

    def open(self, spec: Any) -> SandboxSession:
        return TapSession(self.inner.open(spec), self.channel)

    def limit_workspace(self, workspace: Path, size_mb: int) -> Any:
        return self.inner.limit_workspace(workspace, size_mb)

    def __getattr__(self, name: str) -> Any:  # whatever else the runner asks of its sandbox, the backend answers
        return getattr(self.inner, name)


def start_run(options: RunOptions) -> Channel:
    """Start one bridged run (its own thread); the caller waits with `wait_ready`."""
    if options.agent != BridgeAgent.name:
        raise UserError(f"a bridged run's agent is {BridgeAgent.name!r}, not {options.agent!r}")
    return Channel(options).start()


__all__ = ["END_AGENT_STOPPED", "BridgeAgent", "Channel", "RunEnded", "Turn", "start_run"]
