"""inspect's sandbox calls as AutoMedBench tool calls: what `execute_code` runs for an `exec`, a `read_file`, a
`write_file`. Pure functions (no inspect_ai, no I/O), so the mapping is tested on its own.

inspect's own tools keep their shape in the trajectory: its `python` tool (`bash --login -c "python3 -"` with
the code on stdin) becomes `execute_code(python, code)` and its `bash` tool (`bash --login -c CMD`) becomes
`execute_code(bash, CMD)`, so the judge and the error-code detectors read the agent's code as they read the
built-in agents'. Any other command runs from a bash script the harness writes: `cd`, the exported variables,
stdin from a file the harness put in the workspace, an optional `timeout`, then the argv, each word quoted.
"""

from __future__ import annotations

import json
import shlex

from attrs import define

# Exit code of coreutils `timeout` when the limit ended the command: the call timed out.
TIMEOUT_EXIT = 124
# Exit code of bash when the command exists but is not executable (inspect: PermissionError).
NOT_EXECUTABLE_EXIT = 126
# Marks the status line a file helper prints last (JSON after it).
FILE_STATUS = "AMB_FILE_STATUS "
# Prefix of the transfer files the harness writes into (or reads from) the workspace's top folder.
TRANSFER_PREFIX = ".inspect-xfer-"
PYTHON_STDIN = {"python3 -", "python3", "python -", "python"}
SHELLS = {"bash", "sh", "/bin/bash", "/bin/sh", "/usr/bin/bash"}


@define
class Call:
    """One `execute_code` call: its language and code, and whether a `timeout` wraps the command."""

    language: str
    code: str
    timed: bool = False


def shell_script(cmd: list[str], stdin_file: str | None, cwd: str | None, env: dict[str, str] | None,
                 timeout: int | None) -> str:
    """A bash script that runs `cmd` as inspect asked: in `cwd`, with `env`, stdin from `stdin_file` (a path
    relative to the workspace, removed once open) or empty, bounded by `timeout` seconds."""
    lines = ["set -u"]
    if stdin_file:
        lines += [f"exec 0<{shlex.quote(stdin_file)}", f"rm -f -- {shlex.quote(stdin_file)}"]
    else:
        lines.append("exec 0</dev/null")
    if cwd:
        lines.append(f"cd -- {shlex.quote(cwd)} || exit 1")
    for key, value in (env or {}).items():
        lines.append(f"export {key}={shlex.quote(value)}")
    argv = " ".join(shlex.quote(word) for word in cmd)
    if timeout:
        # KILL after a grace second: the whole call's process tree goes when the call ends anyway
        argv = f"timeout -k 1 {int(timeout)} {argv}"
    lines.append(argv)
    return "\n".join(lines) + "\n"


def valid_env_name(name: str) -> bool:
    return bool(name) and (name[0].isalpha() or name[0] == "_") and all(c.isalnum() or c == "_" for c in name)


def exec_call(cmd: list[str], has_input: bool, input_text: str | None, cwd: str | None,
              env: dict[str, str] | None, timeout: int | None, stdin_file: str | None) -> Call:
    """The `execute_code` call for one inspect `exec`. `input_text` is stdin when it is text; `stdin_file` names
    the workspace file holding stdin for any other command (None when there is no input)."""
    plain = not cwd and not env and not timeout
    shell = len(cmd) >= 3 and cmd[0] in SHELLS and cmd[-2] == "-c" and set(cmd[1:-2]) <= {"--login", "-l"}
    if plain and shell and cmd[-1].strip() in PYTHON_STDIN and input_text is not None:
        return Call("python", input_text)  # inspect's python tool
    if plain and shell and cmd[0] in ("bash", "/bin/bash", "/usr/bin/bash") and not has_input:
        return Call("bash", cmd[-1])  # inspect's bash tool
    return Call("bash", shell_script(cmd, stdin_file if has_input else None, cwd, env, timeout), bool(timeout))


def write_helper(target: str, transfer: str) -> str:
    """Python run in the sandbox for `write_file`: copy the transfer file into `target` (making its folders)
    through an ordinary open, so the sandbox's own rules decide (permissions, a folder in the way)."""
    return f"""import json, os, shutil
target, transfer = {json.dumps(target)}, {json.dumps(transfer)}
try:
    folder = os.path.dirname(target)
    if folder:
        os.makedirs(folder, exist_ok=True)
    with open(transfer, "rb") as src, open(target, "wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
    status = {{"ok": True}}
except OSError as exc:
    status = {{"error": type(exc).__name__, "message": exc.strerror or str(exc)}}
finally:
    try:
        os.unlink(transfer)
    except OSError:
        pass
print({json.dumps(FILE_STATUS)} + json.dumps(status))
"""


def read_helper(target: str, transfer: str, limit: int) -> str:
    """Python run in the sandbox for `read_file`: copy `target` (a regular file of at most `limit` bytes) to
    the transfer file the harness then reads; the status says the size or why not."""
    return f"""import json, os, shutil, stat
target, transfer, limit = {json.dumps(target)}, {json.dumps(transfer)}, {int(limit)}
try:
    with open(target, "rb") as src:
        info = os.fstat(src.fileno())
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(21, "Is a directory")
        if info.st_size > limit:
            status = {{"error": "OutputLimitExceededError", "message": str(info.st_size)}}
        else:
            with open(transfer, "xb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
            status = {{"ok": True, "size": info.st_size}}
except OSError as exc:
    status = {{"error": type(exc).__name__, "message": exc.strerror or str(exc)}}
print({json.dumps(FILE_STATUS)} + json.dumps(status))
"""


def file_status(stdout: str) -> dict[str, object] | None:
    """The status a file helper printed (its last marked line), or None when there is none."""
    for line in reversed(stdout.splitlines()[-20:]):
        if line.startswith(FILE_STATUS):
            try:
                value = json.loads(line[len(FILE_STATUS):])
            except ValueError:
                return None
            return value if isinstance(value, dict) else None
    return None
