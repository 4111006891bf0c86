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
import stat
import time
import urllib.parse
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from attrs import define
from automedbench.api import (
    AgentContext,
    AgentError,
    AgentTurn,
    ToolCall,
    UserError,
    open_path,
    read_regular,
    walk_fd,
)

from .cli_agent import CLI_DIR, CliAgent, CliAgentSpec, session_exit_code
from .gateway import RELAY, SOCKET_NAME, ModelGateway
from .pricing import price_table
from .transcripts import MAX_TRANSCRIPT_BYTES, PARSERS, Transcript

AGENTS_HOME_ENV = "AUTOMEDBENCH_AGENTS"
DUMMY_KEY = "automedbench-gateway"  # what the sandbox holds in place of the key
# Node reserves ~10 GB of address space per WebAssembly memory: under the sandbox's default 8 GB limit its HTTP
# client cannot start (measured), and Qwen Code holds several. Address space only: the memory limit stays the run's.
NODE_ADDRESS_SPACE_MB = 1 << 20
GATEWAY_MARGIN_S = 5.0  # model calls stop this long before the time limit, so the session can end cleanly
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc")  # mounted by the local sandbox already
CLI_NOTE = ("\n\n---\nYou work through this command-line session: there is no `submit_results` tool here. When your "
            "outputs are complete and verified, end the session; the harness then submits the outputs.\n")


def agents_home() -> Path:
    """Where `automedbench` looks for agents installed apart from the system (npm prefixes, virtualenvs)."""
    return Path(os.environ.get(AGENTS_HOME_ENV) or Path.home() / ".cache" / "automedbench" / "agents")


@define(frozen=True)
class AgentSystem:
    """One installed agent system: its program, how to install it, its model wire format, how to start it."""

    name: str
    title: str
    binary: str
    install: str  # the one command that installs it
    kind: str  # "npm" or "pypi": where the agents home keeps a private install
    package: str
    wire: str  # "anthropic", "openai" (chat completions or responses), "gemini"; "provider" for litellm systems
    base_url: str  # the provider's default
    key_env: str
    model: str
    transcript: str  # file name in the session folder
    parser: str  # key of transcripts.PARSERS
    start: Callable[[dict[str, str]], str]  # bash that starts it; sees {bin} {model} {turns} {wire_api} ...
    address_space_mb: int = 0  # Node reserves ~10 GB of address space per WebAssembly memory (Agent.address_space_mb)

    def private_binary(self) -> Path:
        folder = agents_home() / self.name
        return folder / ("node_modules/.bin" if self.kind == "npm" else "bin") / self.binary

    def private_install(self) -> str:
        folder = shlex.quote(str(agents_home() / self.name))
        if self.kind == "npm":
            return f"npm install --prefix {folder} {self.package}"
        return f"python3 -m venv {folder} && {folder}/bin/pip install {self.package}"

    def missing(self) -> str:
        """The one line a user reads when the program is not installed."""
        return (f"{self.name}: the `{self.binary}` command ({self.title}) is not installed; install it with "
                f"`{self.install}` (or `{self.private_install()}`), or name it with --agent-option bin=PATH")


def _claude(v: dict[str, str]) -> str:
    return (f'export ANTHROPIC_BASE_URL="$AMB_URL" ANTHROPIC_API_KEY="$AMB_KEY" ANTHROPIC_MODEL={v["model"]} '
            f'ANTHROPIC_SMALL_FAST_MODEL={v["model"]} ANTHROPIC_DEFAULT_HAIKU_MODEL={v["model"]} IS_SANDBOX=1 '
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_AUTOUPDATER=1 DISABLE_TELEMETRY=1 "
            "DISABLE_ERROR_REPORTING=1\n"
            f'{v["bin"]} -p --output-format stream-json --verbose --dangerously-skip-permissions '
            f'--model {v["model"]} --max-turns {v["turns"]} {v["args"]} < "$AMB_DIR/prompt.md"')


def _codex(v: dict[str, str]) -> str:
    provider = (f'model_providers.amb={{name="automedbench", base_url="\'"$AMB_URL"\'", env_key="AMB_MODEL_KEY", '
                f'wire_api="{v["wire_api"]}"}}')
    return ('export AMB_MODEL_KEY="$AMB_KEY" CODEX_HOME="$HOME/.codex"; mkdir -p "$CODEX_HOME"\n'
            f'{v["bin"]} exec --json --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox '
            f"-m {v['model']} -c model_provider=amb -c allow_login_shell=false -c '{provider}' {v['args']} "
            '- < "$AMB_DIR/prompt.md"')


def _gemini(v: dict[str, str]) -> str:
    settings = ('{"security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": false}}, '
                f'"model": {{"maxSessionTurns": {v["turns"]}}}, "privacy": {{"usageStatisticsEnabled": false}}}}')
    return (f'mkdir -p "$HOME/.gemini" && printf %s {shlex.quote(settings)} > "$HOME/.gemini/settings.json"\n'
            'export GEMINI_API_KEY="$AMB_KEY" GOOGLE_GEMINI_BASE_URL="$AMB_URL" GEMINI_CLI_NO_RELAUNCH=true\n'
            f'{v["bin"]} -p "$(cat "$AMB_DIR/prompt.md")" --output-format stream-json --yolo -m {v["model"]} '
            f'{v["args"]} < /dev/null')


def _qwen(v: dict[str, str]) -> str:
    return (f'export OPENAI_API_KEY="$AMB_KEY" OPENAI_BASE_URL="$AMB_URL" OPENAI_MODEL={v["model"]} '
            'QWEN_CODE_NO_RELAUNCH=true\n'
            f'{v["bin"]} -p "$(cat "$AMB_DIR/prompt.md")" --output-format stream-json --yolo --auth-type openai '
            f'-m {v["model"]} --max-session-turns {v["turns"]} {v["args"]} < /dev/null')


def _openhands(v: dict[str, str]) -> str:
    return ('export LLM_API_KEY="$AMB_KEY" LLM_BASE_URL="$AMB_URL" '
            f'LLM_MODEL={v["litellm_model"]} OPENHANDS_SUPPRESS_BANNER=1 LITELLM_LOCAL_MODEL_COST_MAP=True '
            "TTY_INTERACTIVE=0\n"
            f'{v["bin"]} --headless --json --override-with-envs -f "$AMB_DIR/prompt.md" {v["args"]} < /dev/null')


def _mini(v: dict[str, str]) -> str:
    key = "ANTHROPIC_API_KEY" if v["provider"] == "anthropic" else "OPENAI_API_KEY"
    base = "ANTHROPIC_API_BASE" if v["provider"] == "anthropic" else "OPENAI_API_BASE"
    config = "mini_textbased.yaml" if v["config"] == "textbased" else "mini.yaml"
    return (f'export {key}="$AMB_KEY" {base}="$AMB_URL" MSWEA_CONFIGURED=true MSWEA_COST_TRACKING=ignore_errors '
            "LITELLM_LOCAL_MODEL_COST_MAP=True\n"
            f'{v["bin"]} -t "$(cat "$AMB_DIR/prompt.md")" -y --exit-immediately -m {v["litellm_model"]} -l 0 '
            f'-c {config} -c agent.step_limit={v["turns"]} -o "$AMB_DIR/trajectory.json" {v["args"]} < /dev/null')


SYSTEMS: dict[str, AgentSystem] = {s.name: s for s in (
    AgentSystem("claude-code", "Claude Code", "claude", "npm install -g @anthropic-ai/claude-code", "npm",
                "@anthropic-ai/claude-code", "anthropic", "https://api.anthropic.com", "ANTHROPIC_API_KEY",
                "claude-sonnet-4-5", "transcript.jsonl", "claude-stream-json", _claude),
    AgentSystem("codex", "Codex CLI", "codex", "npm install -g @openai/codex", "npm", "@openai/codex",
                "openai", "https://api.openai.com/v1", "OPENAI_API_KEY", "gpt-5", "transcript.jsonl",
                "codex-json", _codex),
    AgentSystem("gemini-cli", "Gemini CLI", "gemini", "npm install -g @google/gemini-cli", "npm",
                "@google/gemini-cli", "gemini", "https://generativelanguage.googleapis.com", "GEMINI_API_KEY",
                "gemini-2.5-pro", "transcript.jsonl", "gemini-stream-json", _gemini, NODE_ADDRESS_SPACE_MB),
    AgentSystem("qwen-code", "Qwen Code", "qwen", "npm install -g @qwen-code/qwen-code", "npm",
                "@qwen-code/qwen-code", "openai", "https://dashscope-intl.aliyuncs.com/compatible-mode/v1",
                "DASHSCOPE_API_KEY", "qwen3-coder-plus", "transcript.jsonl", "qwen-stream-json", _qwen,
                NODE_ADDRESS_SPACE_MB),
    AgentSystem("openhands", "OpenHands (headless)", "openhands",
                "uv tool install openhands --python 3.12", "pypi", "openhands", "provider",
                "https://api.openai.com/v1", "OPENAI_API_KEY", "gpt-5", "transcript.jsonl", "openhands-json",
                _openhands),
    AgentSystem("mini-swe-agent", "mini-swe-agent", "mini", "pip install mini-swe-agent", "pypi", "mini-swe-agent",
                "provider", "https://api.openai.com/v1", "OPENAI_API_KEY", "gpt-5", "trajectory.json",
                "mini-trajectory", _mini),
)}


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
    responses or chat), config= (mini-swe-agent: textbased), args= (more arguments for the program)."""

    long_calls = True

    def __init__(self, system: AgentSystem, *, model: str = "", base_url: str = "", api_key_env: str = "",
                 bin: str = "", provider: str = "openai", wire_api: str = "responses", config: str = "",
                 args: str = "", prices: str = "") -> None:
        if provider not in ("openai", "anthropic"):
            raise UserError(f"{system.name}: provider must be openai or anthropic, not {provider!r}")
        if wire_api not in ("responses", "chat"):
            raise UserError(f"{system.name}: wire_api must be responses or chat, not {wire_api!r}")
        self.system = system
        self.address_space_mb = system.address_space_mb
        self.binary = find_binary(system, bin)
        self.model = model or system.model
        self.wire = provider if system.wire == "provider" else system.wire
        default_url = "https://api.anthropic.com" if self.wire == "anthropic" and system.wire == "provider" \
            else system.base_url
        self.base_url = (base_url or default_url).rstrip("/")
        parsed = urllib.parse.urlsplit(self.base_url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise UserError(f"{system.name}: base_url {self.base_url!r} is not an http(s) URL")
        key_env = api_key_env or (("ANTHROPIC_API_KEY" if self.wire == "anthropic" else system.key_env)
                                  if system.wire == "provider" else system.key_env)
        self.api_key: str | None = None
        if key_env.lower() != "none":
            self.api_key = os.environ.get(key_env)
            if not self.api_key:
                raise UserError(f"{system.name}: the key variable {key_env} is not set (set it, or pass "
                                "--agent-option api_key_env=none for a server without a key)")
        self.prices = price_table([Path(prices).expanduser()] if prices else None)
        self.values = {"bin": shlex.quote(str(self.binary)), "model": shlex.quote(self.model),
                       "litellm_model": shlex.quote(f"{self.wire if self.wire == 'anthropic' else 'openai'}/"
                                                    f"{self.model}"),
                       "provider": self.wire, "wire_api": wire_api, "config": config,
                       "args": " ".join(shlex.quote(a) for a in shlex.split(args))}
        super().__init__(CliAgentSpec(system.name, command="", log="{dir}/" + system.transcript, log_format="none"))
        self.gateway: ModelGateway | None = None
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
        turns = max(1, (context.max_turns or 100) - 1)  # the last turn is the harness's submit
        deadline = time.monotonic() + max(1.0, (context.time_limit_s or 3600) - GATEWAY_MARGIN_S)
        self.gateway = ModelGateway(self.base_url, "openai" if self.wire == "openai" else self.wire, self.api_key,
                                    max_calls=turns, deadline=deadline, price=self._price, observe=self._observe)
        self.gateway.start(self.dir_fd)
        self.values["turns"] = str(turns)

    def _price(self, model: str, tokens_in: int, tokens_out: int, cached: int) -> float:
        from automedbench.api import Usage

        return self.prices.cost(model or self.model, Usage(tokens_in, tokens_out, cached)).usd

    def _observe(self) -> dict[str, Any]:
        """The outputs as the harness sees them when a model call arrives (after the steps before it ran)."""
        assert self.context is not None
        fd = open_path(Path(self.context.host_workspace), "outputs")
        if fd is None:
            return {"cases_with_outputs": 0, "files": 0}
        cases, files = set(), 0
        try:
            for rel, dir_fd, _name, info in walk_fd(fd, max_entries=20_000):
                if dir_fd >= 0 and info is not None and "/" in rel and stat.S_ISREG(info.st_mode):
                    cases.add(rel.split("/", 1)[0])
                    files += 1
        finally:
            os.close(fd)
        return {"cases_with_outputs": len(cases), "files": files}

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
            "set +e",
            "(",
            self.system.start(self.values),
            f') > "$AMB_DIR/{"stdout.txt" if self.system.transcript != "transcript.jsonl" else "transcript.jsonl"}"'
            ' 2> "$AMB_DIR/stderr.txt"',
            "status=$?",
            "kill $amb_relay 2>/dev/null",
            f'echo "[installed agent {self.system.name} exited $status]"',
            'tail -c 3000 "$AMB_DIR/stderr.txt" >&2',
            "exit $status",
        ]
        return "\n".join(lines) + "\n"

    def next_turn(self, messages: list[dict[str, Any]]) -> AgentTurn:
        self.turn += 1
        if self.turn == 1:
            args = json.dumps({"language": "bash", "code": self.script()})
            return AgentTurn(f"Running {self.system.title} inside the sandbox with the brief (model {self.model}).",
                             [ToolCall("cli_run", "execute_code", args)], finish_reason="cli")
        code = self.exit_code = session_exit_code(messages)
        totals = self.gateway.totals() if self.gateway is not None else {}
        usage = {"tokens_in": totals.get("tokens_in", 0), "tokens_out": totals.get("tokens_out", 0),
                 "tokens_cached": totals.get("tokens_cached", 0), "cost_usd": totals.get("cost_usd", 0.0)}
        problem = self.transcript.problem if self.transcript is not None else "no transcript was read"
        if problem:
            raise AgentError(f"{self.system.name} exited {code}; its transcript could not be read: {problem}")
        if self.turn == 2 and code == 0:
            return AgentTurn(f"{self.system.title} finished; submitting.",
                             [ToolCall("cli_submit", "submit_results", "{}")], finish_reason="cli", **usage)
        return AgentTurn(f"{self.system.title} exited {code}; stopping.", [], finish_reason="cli", final=True,
                         **(usage if self.turn == 2 else {}))

    def drain_events(self) -> list[dict[str, Any]]:
        if self.turn != 1:
            return []
        if self.gateway is not None:
            self.gateway.close()  # the session is over: nothing in the sandbox may use the model any more
        raw = self._read_transcript()
        self.transcript = PARSERS[self.system.parser](raw)
        events = list(self.transcript.events)
        calls = self.gateway.records() if self.gateway is not None else []
        answered = [c for c in calls if not c["refused"] and c["status"] < 400]
        replies = [e for e in events if e["type"] == "assistant"]
        if answered and len(answered) == len(replies):  # one transcript reply per model call: the harness's counts
            for reply, call in zip(replies, answered, strict=True):
                reply.update(tokens_in=call["tokens_in"], tokens_out=call["tokens_out"],
                             tokens_cached=call["tokens_cached"], cost_usd=call["cost_usd"],
                             latency_s=call["latency_s"])
        for index, reply in enumerate(replies):  # what the outputs were when the next model call came
            after = answered[index + 1]["observed"] if index + 1 < len(answered) else self._observe()
            for event in events:
                if event["type"] == "tool" and event["turn"] == reply["turn"] and isinstance(after, dict):
                    event["observed_outputs"] = after
        summary = {"type": "model_gateway", "turn": 1, "system": self.system.name, "model": self.model,
                   **(self.gateway.totals() if self.gateway is not None else {}),
                   "reported": {"turns": self.transcript.turns, "tokens_in": self.transcript.tokens_in,
                                "tokens_out": self.transcript.tokens_out, "cost_usd": self.transcript.cost_usd,
                                "errors": self.transcript.errors[:20],
                                "unreadable_lines": self.transcript.skipped_lines},
                   "records": calls[:500]}
        return [summary, *events]

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


def factories() -> dict[str, tuple[Callable[..., InstalledAgent], str]]:
    """name -> (factory, one-line description) for the plugin's registration."""
    return {name: (partial(InstalledAgent, system),
                   f"{system.title} run inside the sandbox ({system.install}): model=, base_url=, api_key_env=, bin=")
            for name, system in SYSTEMS.items()}

