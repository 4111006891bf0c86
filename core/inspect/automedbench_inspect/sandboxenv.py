"""The `automedbench` sandbox environment of inspect_ai: each sample's calls run as turns of one AutoMedBench run.

`sample_init` starts the run (its own thread: staging, the sandbox backend of the task's choice, tripwires) and
returns once the run's agent has its brief; `exec`, `read_file` and `write_file` become `execute_code` calls of
that run (see `commands`), so everything the inspect agent does is a recorded, budgeted, sandboxed turn;
`sample_cleanup` ends a run the scorer did not finish. Files cross between the host and the sandbox only as
fresh, randomly named files in the workspace's top folder, opened through its descriptor without following
links: the harness never opens another path the agent can write.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import threading
from pathlib import Path
from typing import Any, Literal, overload

import anyio
from inspect_ai.util import (
    ExecResult,
    OutputLimitExceededError,
    SandboxEnvironment,
    SandboxEnvironmentConfigType,
    SandboxEnvironmentLimits,
    SandboxUnavailableError,
    SandboxUserUnsupportedError,
    sandboxenv,
)
from pydantic import BaseModel

from . import commands
from .bridge import Channel, RunEnded, Turn, start_run
from .engine import RunOptions, open_dir, read_regular
from .loglevels import name_every_level
from .turns import model_turn

# What a file helper reports -> what inspect's contract raises (with the errno the OS would give)
ERRORS: dict[str, tuple[type[OSError], int]] = {
    "FileNotFoundError": (FileNotFoundError, errno.ENOENT), "IsADirectoryError": (IsADirectoryError, errno.EISDIR),
    "PermissionError": (PermissionError, errno.EACCES), "NotADirectoryError": (NotADirectoryError, errno.ENOTDIR)}


class BridgeConfig(BaseModel, frozen=True):
    """One task's run settings, as the inspect task was given them (`-T name=value`)."""

    task: str
    tier: str = "lite"
    sandbox: str = "local"
    judge: str = "rules"
    out: str = "runs"
    data_root: str | None = None
    # (key, value) pairs: inspect hashes a sandbox's configuration, and a dict cannot be hashed
    agent_options: tuple[tuple[str, str], ...] = ()
    judge_options: tuple[tuple[str, str], ...] = ()
    max_turns: int | None = None
    time_limit_s: float | None = None
    exec_timeout_s: float | None = None
    repeat_limit: int | None = None
    keep_workspace: bool = False

    def run_options(self, model: str = "") -> RunOptions:
        """The run's options; the inspect model's name is an option of the `inspect` agent (in the header)."""
        extra: dict[str, Any] = {"repeat_limit": self.repeat_limit} if self.repeat_limit is not None else {}
        agent_options = {**({"model": model} if model else {}), **dict(self.agent_options)}
        return RunOptions(self.task, self.tier, "inspect", self.sandbox, self.judge, Path(self.out).expanduser(),
                          Path(self.data_root).expanduser() if self.data_root else None, agent_options,
                          dict(self.judge_options), self.max_turns, self.time_limit_s, self.exec_timeout_s,
                          keep_workspace=self.keep_workspace, **extra)


def _model_name() -> str:
    """The sample's model as inspect names it (provider/model), or "" outside an eval."""
    try:
        from inspect_ai.model import ModelName, get_model

        return str(ModelName(get_model()))
    except Exception:
        return ""


@sandboxenv(name="automedbench")
class AutoMedBenchSandbox(SandboxEnvironment):
    """One AutoMedBench run, seen as an inspect sandbox."""

    def __init__(self, channel: Channel) -> None:
        super().__init__()
        self.channel = channel

    # ------------------------------------------------------------ lifecycle

    @classmethod
    async def sample_init(cls, task_name: str, config: SandboxEnvironmentConfigType | None,
                          metadata: dict[str, str]) -> dict[str, SandboxEnvironment]:
        if not isinstance(config, BridgeConfig):
            raise ValueError("the automedbench sandbox is configured by its task (automedbench_inspect/<task>)")
        name_every_level()  # the run's own checks log through inspect's handler from here on
        channel = start_run(config.run_options(model=_model_name()))
        try:
            await anyio.to_thread.run_sync(channel.wait_ready, abandon_on_cancel=True)
        except BaseException:  # refused, failed or cancelled: no cleanup will come for it, so end the run here
            threading.Thread(target=channel.cancel, daemon=True).start()
            raise
        return {"default": cls(channel)}

    @classmethod
    async def sample_cleanup(cls, task_name: str, config: SandboxEnvironmentConfigType | None,
                             environments: dict[str, SandboxEnvironment], interrupted: bool) -> None:
        for environment in environments.values():
            if isinstance(environment, AutoMedBenchSandbox):
                await anyio.to_thread.run_sync(environment.channel.cancel)

    @classmethod
    def config_deserialize(cls, config: dict[str, Any]) -> BaseModel:
        return BridgeConfig(**config)

    @classmethod
    def default_concurrency(cls) -> int | None:
        return 2  # each sample is a whole run: staging, a sandbox, an evaluator process

    def default_polling_interval(self) -> float:
        return 0.2

    # ------------------------------------------------------------ calls

    async def _call(self, language: str, code: str) -> Any:
        turn = model_turn()
        try:
            return await anyio.to_thread.run_sync(self.channel.call, language, code, turn, abandon_on_cancel=True)
        except RunEnded as exc:  # a tool error the model reads (inspect: sandbox_unavailable); the sample goes on
            raise SandboxUnavailableError(f"{exc}: no further calls run; stop and let the run be scored") from None

    async def run_code(self, language: str, code: str) -> Any:
        """One `execute_code(language, code)` call of the run, as the brief names it; its result (a call the runner
        refused, e.g. an unknown language, has exit code 1 and the runner's reason on stderr)."""
        return await self._call(language, code)

    async def exec(self, cmd: list[str], input: str | bytes | None = None, cwd: str | None = None,
                   env: dict[str, str] | None = None, user: str | None = None, timeout: int | None = None,
                   timeout_retry: bool = True, concurrency: bool = True) -> ExecResult[str]:
        if user is not None:
            raise SandboxUserUnsupportedError(f"the AutoMedBench sandbox runs every call as its one user, not {user!r}")
        if not cmd:
            raise ValueError("exec needs a command")
        if any("\x00" in word for word in [*cmd, *(env or {}).values(), cwd or ""]):
            raise ValueError("embedded null byte")  # as a subprocess would say (inspect tells the model)
        bad = [k for k in (env or {}) if not commands.valid_env_name(k)]
        if bad:
            raise ValueError(f"not a variable name: {bad[0]!r}")
        stdin_name = commands.TRANSFER_PREFIX + secrets.token_hex(8) if input is not None else None
        text = input if isinstance(input, str) else None
        call = commands.exec_call(cmd, input is not None, text, cwd, env, timeout, stdin_name)
        if stdin_name and stdin_name in call.code:
            data = input.encode("utf-8") if isinstance(input, str) else bytes(input or b"")
            await anyio.to_thread.run_sync(self._put, stdin_name, data)
        result = await self._call(call.language, call.code)
        exit_code = result.exit_code
        if result.timed_out or (call.timed and exit_code == commands.TIMEOUT_EXIT):
            raise TimeoutError(f"the command timed out: {cmd[0]}")
        if call.language == "bash" and exit_code == commands.NOT_EXECUTABLE_EXIT and \
                "Permission denied" in result.stderr and call.code.startswith("set -u"):
            raise PermissionError(errno.EACCES, "Permission denied", cmd[0])
        if result.capped:
            raise OutputLimitExceededError("the call's output cap", truncated_output=result.stdout)
        return ExecResult(exit_code == 0, exit_code, result.stdout, result.stderr)

    async def write_file(self, file: str, contents: str | bytes) -> None:
        name = commands.TRANSFER_PREFIX + secrets.token_hex(8)
        data = contents.encode("utf-8") if isinstance(contents, str) else bytes(contents)
        await anyio.to_thread.run_sync(self._put, name, data)
        result = await self._call("python", commands.write_helper(file, name))
        self._raise_for(commands.file_status(result.stdout), file, result)

    @overload
    async def read_file(self, file: str, text: Literal[True] = True) -> str: ...

    @overload
    async def read_file(self, file: str, text: Literal[False]) -> bytes: ...

    async def read_file(self, file: str, text: bool = True) -> str | bytes:
        name = commands.TRANSFER_PREFIX + secrets.token_hex(8)
        limit = SandboxEnvironmentLimits.MAX_READ_FILE_SIZE
        result = await self._call("python", commands.read_helper(file, name, limit))
        status = commands.file_status(result.stdout)
        if status is not None and status.get("error") == "OutputLimitExceededError":
            raise OutputLimitExceededError(SandboxEnvironmentLimits.MAX_READ_FILE_SIZE_STR, None)
        self._raise_for(status, file, result)
        data = await anyio.to_thread.run_sync(self._take, name, limit)
        return data.decode("utf-8") if text else data

    # ------------------------------------------------------------ host side: fresh files in the workspace's top

    def _workspace_fd(self) -> int:
        context = self.channel.context
        fd = open_dir(context.host_workspace) if context is not None else None
        if fd is None:
            raise RunEnded(self.channel.end_reason())
        return fd

    def _put(self, name: str, data: bytes) -> None:
        fd = self._workspace_fd()
        try:
            handle = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644,
                             dir_fd=fd)
            with os.fdopen(handle, "wb") as out:
                out.write(data)
        finally:
            os.close(fd)

    def _take(self, name: str, limit: int) -> bytes:
        fd = self._workspace_fd()
        try:
            data = read_regular(fd, name, limit)
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=fd)
        finally:
            os.close(fd)
        if data is None:
            raise PermissionError(errno.EACCES, "the transfer file was replaced or grew past the limit", name)
        return data

    @staticmethod
    def _raise_for(status: dict[str, Any] | None, file: str, result: Any) -> None:
        if status is None:
            raise RuntimeError(f"the file helper gave no status (exit {result.exit_code}): {result.stderr[-300:]}")
        if status.get("ok"):
            return
        kind, number = ERRORS.get(str(status.get("error")), (OSError, errno.EIO))
        raise kind(number, str(status.get("message")), file)


__all__ = ["AutoMedBenchSandbox", "BridgeConfig", "Turn"]
