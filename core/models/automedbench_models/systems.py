"""The installed agent systems' declarations: each one's program, install line, model wire format and how to start
it. Light on purpose: the plugin registers every system from these at each start (a run of another agent imports
no more), while the agent itself (`installed.InstalledAgent`: gateway, relay, transcript parsers) is imported
only by a run that uses one."""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable
from pathlib import Path

from attrs import define

AGENTS_HOME_ENV = "AUTOMEDBENCH_AGENTS"
# Node reserves ~10 GB of address space per WebAssembly memory: under the sandbox's default 8 GB limit its HTTP
# client cannot start (measured), and Qwen Code holds several. Address space only: the memory limit stays the run's.
NODE_ADDRESS_SPACE_MB = 1 << 20


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
    python: str = "python3"  # the interpreter a private virtualenv is made with (OpenHands needs 3.12 or later)
    tested: tuple[str, ...] = ()  # the releases this harness was run against (README's table), oldest first

    def private_binary(self) -> Path:
        folder = agents_home() / self.name
        return folder / ("node_modules/.bin" if self.kind == "npm" else "bin") / self.binary

    def private_install(self) -> str:
        folder = shlex.quote(str(agents_home() / self.name))
        if self.kind == "npm":
            return f"npm install --prefix {folder} {self.package}"
        return f"{self.python} -m venv {folder} && {folder}/bin/pip install {self.package}"

    def pinned_install(self) -> str:
        """The private install of the newest tested release."""
        if not self.tested:
            return self.private_install()
        pin = "@" if self.kind == "npm" else "=="
        return self.private_install().removesuffix(self.package) + f"{self.package}{pin}{self.tested[-1]}"

    def options(self) -> tuple[str, ...]:
        """The --agent-option names this system takes: the common ones, then those only some systems read (a name
        another system reads would otherwise be silently ignored)."""
        extra = (("provider",) if self.wire == "provider" else ()) + (("wire_api",) if self.name == "codex" else ()) \
            + (("config",) if self.name == "mini-swe-agent" else ())
        return ("model", "base_url", "api_key_env", "bin", "args", "prices", "outage_after", *extra)

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
    # the native program without its Node launcher: the launcher's PATH entry (ripgrep) and its marker
    tools = f'export PATH="$(dirname "$(dirname {v["bin"]})")/codex-path:$PATH" CODEX_MANAGED_BY_NPM=1\n'
    return (tools + 'export AMB_MODEL_KEY="$AMB_KEY" CODEX_HOME="$HOME/.codex"; mkdir -p "$CODEX_HOME"\n'
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
    # 0.24 warns on every start that YOLO runs "with no sandbox": the harness's sandbox is around it
    return (f'export OPENAI_API_KEY="$AMB_KEY" OPENAI_BASE_URL="$AMB_URL" OPENAI_MODEL={v["model"]} '
            'QWEN_CODE_NO_RELAUNCH=true QWEN_CODE_SUPPRESS_YOLO_WARNING=1\n'
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
                "claude-sonnet-4-5", "transcript.jsonl", "claude-stream-json", _claude,
                tested=("2.1.197", "2.1.337")),
    AgentSystem("codex", "Codex CLI", "codex", "npm install -g @openai/codex", "npm", "@openai/codex",
                "openai", "https://api.openai.com/v1", "OPENAI_API_KEY", "gpt-5", "transcript.jsonl",
                "codex-json", _codex, tested=("0.171.0",)),
    AgentSystem("gemini-cli", "Gemini CLI", "gemini", "npm install -g @google/gemini-cli", "npm",
                "@google/gemini-cli", "gemini", "https://generativelanguage.googleapis.com", "GEMINI_API_KEY",
                "gemini-2.5-pro", "transcript.jsonl", "gemini-stream-json", _gemini, NODE_ADDRESS_SPACE_MB,
                tested=("0.61.0",)),
    AgentSystem("qwen-code", "Qwen Code", "qwen", "npm install -g @qwen-code/qwen-code", "npm",
                "@qwen-code/qwen-code", "openai", "https://dashscope-intl.aliyuncs.com/compatible-mode/v1",
                "DASHSCOPE_API_KEY", "qwen3-coder-plus", "transcript.jsonl", "qwen-stream-json", _qwen,
                NODE_ADDRESS_SPACE_MB, tested=("0.15.10", "0.24.4")),
    AgentSystem("openhands", "OpenHands (headless)", "openhands",
                "uv tool install --compile-bytecode openhands --python 3.12", "pypi", "openhands", "provider",
                "https://api.openai.com/v1", "OPENAI_API_KEY", "gpt-5", "transcript.jsonl", "openhands-json",
                _openhands, python="python3.12", tested=("1.16.0",)),
    AgentSystem("mini-swe-agent", "mini-swe-agent", "mini", "pip install mini-swe-agent", "pypi", "mini-swe-agent",
                "provider", "https://api.openai.com/v1", "OPENAI_API_KEY", "gpt-5", "trajectory.json",
                "mini-trajectory", _mini, tested=("2.4.6",)),
)}
