"""The agent phase's turns: the agent's replies and the calls they ask for, until it stops, submits or runs out
of budget.

The runner opens the sandbox, briefs the agent and arms the tripwire, then hands the working set (`AgentLoop`)
to a `Conversation`, whose `events` yield every trajectory event as it happens (with the output streams a tool
event spills to side files); the runner writes each at once, so the turn logic reads without the writes and a
crash still keeps every turn so far. What the turns change of the run (counters, the end reason, breach
evidence) goes into its `RunState`.
"""

from __future__ import annotations

import json
import os
import stat
import time
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any

from attrs import Factory, define

from . import errors, repeats
from .agent import TOOLS, Agent, AgentContext, execute_code_example, generic_hint, normalise_turn, turn_problem
from .fsutil import open_path
from .observed import ObservedSteps, outputs_change, outputs_snapshot
from .options import RunOptions
from .pilot import PilotTracker
from .plugins import Registry
from .records import AgentTurn, BreachEvidence, Runtime, TaskSpec, ToolCall
from .repeats import RepeatWatch
from .runfolder import RunFolder
from .runstate import RunState
from .sandbox import SandboxSession
from .steptimer import CpuLedger
from .track import StagedData, Track
from .trajectory import MODEL_STDERR_TAIL, MODEL_STDOUT_TAIL, tail
from .tripwire import Tripwire

# Tool calls one reply may make; the rest are answered with an error, never run (limits hold per call).
MAX_CALLS_PER_REPLY = 32

# A trajectory event as the agent phase makes it, with the output streams a tool event spills to side files.
Event = tuple[dict[str, Any], dict[str, str]]
Events = Generator[Event, None, None]


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


@define
class Conversation:
    """One run's agent phase, turn by turn (`events`), with what it reads of the run."""

    run_id: str
    task: TaskSpec
    track: Track
    o: RunOptions
    agent: Agent
    reg: Registry
    folder: RunFolder
    pilots: PilotTracker  # notes each call's one-case outputs (a pilot candidate)
    observed: ObservedSteps  # the steps inside an agent program's session
    cpu: CpuLedger
    progress: Callable[[dict[str, Any]], None]

    def events(self, st: RunState, loop: AgentLoop, context: AgentContext) -> Events:
        """The agent phase's trajectory: its start, then the agent started and its turns."""
        session = loop.session
        yield {"type": "start", "run_id": self.run_id, "task": self.task.id, "tier": self.o.tier,
               "agent": self.o.agent, "sandbox": self.o.sandbox, "brief_sha256": st.header.hashes["brief"],
               "data_dir": session.data_dir, "workspace_dir": session.workspace_dir}, {}
        self.agent.start(context)
        yield from self._turns(st, loop)

    def _turns(self, st: RunState, loop: AgentLoop) -> Events:
        """The agent's replies and what they ask for, until the loop ends (st.end_reason says why): every trajectory
        event, with the output streams a tool event spills, yielded as it happens."""
        while True:
            if loop.turn >= loop.max_turns:
                st.end_reason = errors.END_TURN_LIMIT
                return
            if loop.elapsed() >= loop.time_limit:
                st.end_reason = errors.END_TIME_LIMIT
                return
            loop.turn += 1
            reply = yield from self._reply(st, loop)
            if not reply.tool_calls:
                yield from _drained(self.agent, loop.turn, st.runtime)
                if (yield from self._text_reply(st, loop, reply)):
                    continue
                return
            stop = yield from self._tool_calls(st, loop, reply.tool_calls)
            # an installed agent's own replies are numbered from this turn on: the next turn comes after them
            last = yield from _drained(self.agent, loop.turn, st.runtime, loop.max_turns)
            loop.turn = st.runtime.turns = max(loop.turn, last)
            if stop:
                return

    def _reply(self, st: RunState, loop: AgentLoop) -> Generator[Event, None, AgentTurn]:
        """Ask the agent for its next turn and record it (trajectory, runtime counters, conversation)."""
        t_agent = time.monotonic()
        try:
            reply: AgentTurn = self.agent.next_turn(loop.messages)
        except (errors.AgentError, errors.ProviderUnavailable):
            yield from _drained(self.agent, loop.turn, st.runtime)  # the retries that led here are recorded too
            raise
        except Exception as exc:
            raise errors.AgentError(f"agent {self.o.agent} raised {type(exc).__name__}: {exc}") from exc
        finally:  # a reply, a failed or timed-out model call, an interrupt: the wait is the agent's, not the harness's
            _charge_model_time(st, loop, t_agent)
        problem = turn_problem(reply)
        if problem:
            raise errors.AgentError(f"agent {self.o.agent} returned a malformed turn: {problem}")
        reply = normalise_turn(reply)
        runtime, turn = st.runtime, loop.turn
        runtime.turns = turn
        runtime.tokens_in += reply.tokens_in
        runtime.tokens_out += reply.tokens_out
        runtime.cost_usd += reply.cost_usd
        yield {"type": "assistant", "turn": turn, "content": reply.content, "reasoning": reply.reasoning,
               "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments,
                               **({"source": c.source} if c.source else {})} for c in reply.tool_calls],
               "tokens_in": reply.tokens_in, "tokens_out": reply.tokens_out, "tokens_cached": reply.tokens_cached,
               "cost_usd": reply.cost_usd, "finish_reason": reply.finish_reason,
               "latency_s": round(time.monotonic() - t_agent, 3)}, {}
        loop.messages.append(_assistant_message(reply))
        tools = [c.name for c in reply.tool_calls]
        # a program's whole session is one call: shown as the session, not as the turn its first step is
        session = self.agent.session_calls and "execute_code" in tools
        self.progress({"kind": "turn", "turn": turn, "content": reply.content, "tools": tools,
                       **({"session": True} if session else {})})
        runtime.recovered_calls += sum(1 for c in reply.tool_calls if c.source)
        return reply

    def _text_reply(self, st: RunState, loop: AgentLoop, reply: AgentTurn) -> Generator[Event, None, bool]:
        """A reply without a tool call: stop (final, or out of continues) or answer with a continue message;
        True to go on."""
        runtime = st.runtime
        if reply.final:
            st.end_reason = errors.END_AGENT_STOPPED
            return False
        runtime.text_replies += 1
        # what was wrong (a near-miss call, an echo, an XML plan: a hint plugin's), told back with one valid call
        prompt = "\n".join(str(m.get("content") or "") for m in loop.messages[:2])
        data_dir = loop.session.data_dir
        try:
            hint = self.reg.pm.hook.automedbench_reply_hint(reply=reply.content, tools=TOOLS, prompt=prompt,
                                                            data_dir=data_dir) or generic_hint(data_dir)
        except Exception as exc:  # a hint plugin's bug on the agent's text: the generic message, no harness failure
            hint = generic_hint(data_dir)
            hint.detail = f"no tool call found (the reply-hint plugin failed: {type(exc).__name__})"
        stop = runtime.text_replies > loop.continues
        event = {"type": "no_tool_call", "turn": loop.turn, "action": "stop" if stop else "continue",
                 "text_replies": runtime.text_replies, "continues": loop.continues, "hint": hint.kind,
                 "detail": hint.detail}
        if stop:
            st.end_reason = errors.END_NO_TOOL_CALL if loop.continues else errors.END_AGENT_STOPPED
        else:
            event["message"] = hint.message
            loop.messages.append({"role": "user", "content": hint.message})
        yield event, {}
        return not stop

    def _tool_calls(self, st: RunState, loop: AgentLoop, calls: list[ToolCall]) -> Generator[Event, None, bool]:
        """Run a reply's calls in order, each within what is left of the budget; True when the run stops."""
        stop = False
        for index, call in enumerate(calls):
            if index >= MAX_CALLS_PER_REPLY or loop.elapsed() >= loop.time_limit:
                # limits hold per call: calls past the budget are answered, never run
                why = ("the time limit is reached" if index < MAX_CALLS_PER_REPLY
                       else f"more than {MAX_CALLS_PER_REPLY} calls in one reply")
                yield {"type": "tool", "turn": loop.turn, "call_id": call.id, "name": call.name, "error": "not_run",
                       "reason": why}, {}
                loop.messages.append({"role": "tool", "tool_call_id": call.id, "content": f"ERROR: not run: {why}"})
                if index < MAX_CALLS_PER_REPLY:
                    st.end_reason, stop = errors.END_TIME_LIMIT, True
                continue
            st.runtime.tool_calls += 1
            remaining = max(1.0, loop.time_limit - loop.elapsed())
            timeout = remaining if self.agent.long_calls else min(loop.exec_timeout, remaining)
            content, event, is_submit, streams = yield from self._tool(call, loop.session, loop.staged, timeout,
                                                                       loop.turn)
            if event.get("duration_s"):
                st.runtime.exec_s += event["duration_s"]
            touched = self._check_breach(st, loop, call, event)
            if touched:
                yield {"type": "breach", "turn": loop.turn, "paths": touched}, {}
            yield event, streams  # long streams go to side files, the event keeps head and tail
            content, repeated = yield from self._repeated(loop, call, event, content)
            self.pilots.note(event)  # a one-case output is copied now, contract-checked after the run
            if event.get("session"):
                yield from self._observed_steps(st, loop, event)
            loop.messages.append({"role": "tool", "tool_call_id": call.id, "content": content})
            self.progress({"kind": "tool", "turn": loop.turn, **{k: event.get(k) for k in
                                                                ("name", "exit_code", "duration_s")}})
            if st.isolation.breached:
                st.end_reason = errors.END_BREACH
                return True
            if is_submit:
                st.submitted, st.end_reason = True, errors.END_SUBMITTED
                return True
            if repeated:
                st.end_reason = errors.END_REPEATED_CALLS
                return True
        return stop

    def _repeated(self, loop: AgentLoop, call: ToolCall, event: dict[str, Any],
                  content: str) -> Generator[Event, None, tuple[str, bool]]:
        """Count the call into the streak of identical calls with the same outcome; from the notice on, tell the
        agent under the answer and record a `repeated_call` event. (answer, True when the run stops here)."""
        outcome = f"{event.get('exit_code')}/{event.get('timed_out')}/{event.get('error')}/{event.get('refused')}"
        streak = loop.repeats.see(call.name, call.arguments, outcome)
        if streak < repeats.NOTICE_AT:
            return content, False
        stop = bool(loop.repeat_limit) and streak >= loop.repeat_limit
        yield {"type": "repeated_call", "turn": loop.turn, "call_id": call.id, "name": call.name,
               "streak": streak, "limit": loop.repeat_limit, "action": "stop" if stop else "notice"}, {}
        return content + repeats.notice(streak, loop.repeat_limit), stop

    def _observed_steps(self, st: RunState, loop: AgentLoop, session: dict[str, Any]) -> Events:
        """The steps the harness observed inside an agent program's session (`observed.ObservedSteps`), as its
        own turns numbered as the model made them (up to the turn budget); the session call itself is no step,
        and the model time inside it is the agent's, not the tools'."""
        observed = self.observed
        st.runtime.tool_calls -= 1
        last = loop.turn
        for event in observed.drain():
            own = event.get("turn")
            turn = own if type(own) is int and loop.turn <= own <= max(loop.turn, loop.max_turns) else last
            last = max(last, turn)
            if event.get("type") == "assistant":  # a reply's tokens and cost, counted as a chat agent's turn
                st.runtime.tokens_in += event.get("tokens_in", 0)
                st.runtime.tokens_out += event.get("tokens_out", 0)
                st.runtime.cost_usd += event.get("cost_usd", 0.0)
            streams = {}
            if event.get("type") == "tool":
                st.runtime.tool_calls += 1
                streams = {stream: event.pop(stream, "") for stream in ("stdout", "stderr")}
            yield {**event, "turn": turn}, streams
        moved = min(observed.model_s, session.get("duration_s") or 0.0)
        observed.model_s -= moved
        st.runtime.exec_s -= moved
        st.runtime.agent_s += moved
        loop.model_s += moved
        loop.turn = st.runtime.turns = last

    def _check_breach(self, st: RunState, loop: AgentLoop, call: ToolCall, event: dict[str, Any]) -> list[str]:
        """Record every private or decoy path the call opened as breach evidence (the run then stops); the paths."""
        touched = loop.tripwire.drain()
        if not touched:
            return touched
        st.isolation.breached = True
        command = event.get("code", call.arguments)[:2000]
        for path in touched:
            kind = ("read of decoy references (mounted at " + ", ".join(sorted(loop.decoys)) + ")"
                    if path.startswith(str(loop.decoy)) else "read of private references")
            if path in loop.tripwire.modified:
                kind = kind.replace("read of", "change to", 1)
            st.isolation.evidence.append(BreachEvidence(loop.turn, kind, path, command))
        return touched

    def _tool(self, call, session: SandboxSession, staged: StagedData, timeout: float,
              turn: int) -> Generator[Event, None, tuple[str, dict[str, Any], bool, dict[str, str]]]:
        """(what the agent is told, the trajectory event, whether it submitted, the call's output streams)."""
        base = {"type": "tool", "turn": turn, "call_id": call.id, "name": call.name}

        def refused(msg: str, error: str) -> tuple[str, dict[str, Any], bool, dict[str, str]]:
            return msg, {**base, "error": error, "arguments": call.arguments[:2000]}, False, {}

        try:
            args = json.loads(call.arguments) if call.arguments.strip() else {}
            if not isinstance(args, dict):
                raise ValueError("arguments must be a JSON object")
        except RecursionError:  # arguments nested deeper than the parser's stack
            return refused(f"ERROR: the arguments of {call.name} are nested too deeply to parse", "malformed_arguments")
        except (json.JSONDecodeError, ValueError) as exc:
            return refused(f"ERROR: the arguments of {call.name} are not a valid JSON object ({exc}). "
                           'Send {"language": "python"|"bash", "code": "..."}.', "malformed_arguments")
        if call.name == "submit_results":
            refusal = yield from self._submit_gate(staged)
            if refusal:  # the track's policy: the run goes on, the agent is told why
                reply = {"accepted": False, "reason": refusal}
                return json.dumps(reply), {**base, "result": reply, "refused": True}, False, {}
            missing = self._missing_outputs(staged)
            reply = {"accepted": True, "complete": not missing, "missing": missing[:50],
                     "missing_count": len(missing)}
            shared = self._shared_outputs_present() if missing else []
            if shared:  # cases it answers have no folder of their own: whether they are answered is the evaluation's
                reply.update(complete=None, shared_outputs=shared,
                             note=f"{', '.join(shared)} answers for several cases; a case listed as missing counts "
                                  "as answered when its row there is, as the evaluation reads it")
            return json.dumps(reply), {**base, "result": reply}, True, {}
        if call.name != "execute_code":
            return (f"ERROR: unknown tool {call.name[:80]!r}; tools are execute_code and submit_results. "
                    f"A valid call:\n{execute_code_example(session.data_dir)}",
                    {**base, "error": "unknown_tool"}, False, {})
        language, code = args.get("language"), args.get("code")
        if language not in ("python", "bash") or not isinstance(code, str) or not code.strip():
            return refused("ERROR: execute_code needs language ('python' or 'bash') and non-empty code",
                           "bad_arguments")
        if not _is_utf8(code):  # a JSON escape like \ud800 decodes to text no script file can hold
            return refused("ERROR: the code contains a lone surrogate (e.g. \\ud800) and cannot be saved as UTF-8",
                           "bad_arguments")
        before = outputs_snapshot(self.folder.outputs)
        with self.cpu.exclude("exec"):
            result = session.execute(language, code, timeout)
        changed, cases = outputs_change(before, outputs_snapshot(self.folder.outputs), set(staged.case_ids))
        event = {**base, "language": language, "code": code, "exit_code": result.exit_code,
                 "duration_s": result.duration_s, "timed_out": result.timed_out, "capped": result.capped,
                 "stdout_bytes": result.stdout_bytes, "stderr_bytes": result.stderr_bytes,
                 "changed_cases": changed, "cases_with_outputs": cases}
        if self.agent.session_calls:  # the agent's program ran here: its steps are the observed events after it
            event["session"] = True
        content = (f"exit_code: {result.exit_code}\nstdout:\n{tail(result.stdout, MODEL_STDOUT_TAIL)}\n"
                   f"stderr:\n{tail(result.stderr, MODEL_STDERR_TAIL)}")
        return content, event, False, {"stdout": result.stdout, "stderr": result.stderr}

    def _submit_gate(self, staged: StagedData) -> Generator[Event, None, str | None]:
        """The track's pre-submit refusal, if any; a gate that fails on odd agent files accepts (fails open)."""
        try:
            refusal = self.track.submit_gate(self.task, staged, self.folder.outputs)
        except Exception as exc:
            yield {"type": "note", "note": f"submit gate error: {type(exc).__name__}: {exc}"}, {}
            return None
        return str(refusal)[:2000] if refusal else None

    def _shared_outputs_present(self) -> list[str]:
        """The track's several-case files (`Track.shared_outputs`) the agent left at the outputs folder's top."""
        fd = open_path(self.folder.workspace, "outputs")
        if fd is None:
            return []
        try:
            return [name for name in self.track.shared_outputs(self.task) if _regular_at(fd, name)]
        finally:
            os.close(fd)

    def _missing_outputs(self, staged: StagedData) -> list[str]:
        missing = []
        for case in staged.case_ids:
            fd = open_path(self.folder.workspace, f"outputs/{case}")  # never through a symlink the agent planted
            for name in self.task.output_files:
                if fd is None or not _regular_at(fd, name):
                    missing.append(f"{case}/{name}")
            if fd is not None:
                os.close(fd)
        return missing


def _drained(agent: Agent, turn: int, runtime: Runtime, max_turns: int = 0) -> Generator[Event, None, int]:
    """The events only the agent saw (retries, context trimming, an installed agent's own steps) after its turn,
    for the trajectory; count overflows; return the last turn they name. An event may name a turn from this one
    up to the turn budget (an installed agent's replies, numbered as the model made them); any other is recorded
    at this turn.
    An event that is not a JSON object the trajectory can hold is the agent's failure, never the harness's."""
    who = agent.name or type(agent).__name__
    try:
        events = list(agent.drain_events())
    except Exception as exc:
        raise errors.AgentError(f"agent {who} raised {type(exc).__name__} in drain_events: {str(exc)[:200]}") from exc
    last = turn
    for extra in events:
        try:
            if not isinstance(extra, dict):
                raise TypeError(f"an event is {type(extra).__name__}, not a JSON object")
            own = extra.get("turn")
            at = own if type(own) is int and turn <= own <= max(turn, max_turns) else turn
            last = max(last, at)
            record = {**extra, "turn": at, "imported": True}
            json.dumps(record, ensure_ascii=False)  # refused before a byte of it is written
        except (TypeError, ValueError, RecursionError) as exc:
            raise errors.AgentError(f"agent {who} drained an event the trajectory cannot hold "
                                    f"({type(exc).__name__}: {str(exc)[:200]})") from None
        runtime.context_retries += extra.get("type") == "context_overflow"
        yield record, {}
    return last


def _charge_model_time(st: RunState, loop: AgentLoop, since: float) -> None:
    """The wait for the agent's reply since `since` is the agent's (model) time, whether the reply came or not."""
    waited = time.monotonic() - since
    st.runtime.agent_s += waited
    loop.model_s += waited


def _assistant_message(reply: AgentTurn) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.tool_calls:
        msg["tool_calls"] = [{"id": c.id, "type": "function",
                              "function": {"name": c.name, "arguments": c.arguments}} for c in reply.tool_calls]
    return msg


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _regular_at(dir_fd: int, name: str) -> bool:
    try:
        return stat.S_ISREG(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False
