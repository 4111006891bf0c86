"""What one sandboxed call is made of, whatever runs it: one implementation for every sandbox backend.

The local sandbox, the docker sandbox and a third party's share these parts so that a call looks the same to
an agent wherever it runs: the languages a call may be written in, the call's code written by the harness
outside the workspace (mounted read-only at EXEC_MOUNT), the scrubbed environment, the capture of its
output (head and tail kept past the cap) and the `ExecResult` with its timeout said.
"""

from __future__ import annotations

import os
import secrets
import select
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import IO

from attrs import define

from .fsutil import HarnessDir
from .records import ExecResult

# Where the harness's own copy of each call's code is mounted read-only (never inside the workspace).
EXEC_MOUNT = "/run/automedbench/exec"
# Host variables a call inherits: locale and CPU hints only, never a secret.
PASSTHROUGH_ENV = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "LANG", "TZ")
# Languages a call may be written in -> its file's suffix.
LANGUAGES = {"python": ".py", "bash": ".sh"}


def sandbox_env(ws: str, data_dir: str, tmp: str, path: str, extra: dict[str, str]) -> dict[str, str]:
    """The whole environment of sandboxed code: nothing of the host's but locale hints, caches in the workspace."""
    env = {k: os.environ[k] for k in PASSTHROUGH_ENV if k in os.environ}
    env.setdefault("LANG", "C.UTF-8")
    cache = f"{ws}/.cache"
    env.update({
        "PATH": path,
        "HOME": f"{ws}/.home",
        "TMPDIR": tmp,
        "PYTHONUNBUFFERED": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "WORKSPACE_DIR": ws,
        "DATA_DIR": data_dir,
        "XDG_CACHE_HOME": cache,
        "PIP_CACHE_DIR": f"{cache}/pip",
        "HF_HOME": f"{cache}/huggingface",
        "TORCH_HOME": f"{cache}/torch",
        "MPLCONFIGDIR": f"{cache}/matplotlib",
        "MONAI_DATA_DIRECTORY": f"{cache}/monai",
    })
    env.update(extra)
    return env


def wait_for(proc: subprocess.Popen, timeout_s: float) -> None:
    """`proc.wait(timeout)` without polling: sleep on the process's pidfd until it ends or the time is up.

    Popen.wait with a timeout polls, sleeping at most 50 ms at a time: a call's whole run costs the harness a
    wake-up every 50 ms. Raises subprocess.TimeoutExpired as Popen.wait does; polls where there is no pidfd."""
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # no pidfd here (kernel < 5.3, not Linux)
        proc.wait(timeout=timeout_s)
        return
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        ended = poller.poll(max(0, int(timeout_s * 1000)))  # readable once the process has exited
    finally:
        os.close(fd)
    if not ended:
        raise subprocess.TimeoutExpired(proc.args, timeout_s)
    proc.wait()


def unsupported_language(language: str) -> ExecResult | None:
    """The refusal of a call in a language no sandbox runs (the agent's mistake, said to it); None if runnable."""
    if language in LANGUAGES:
        return None
    return ExecResult(2, "", f"unsupported language {language!r}: use 'python' or 'bash'", 0.0)


class CallFolder(HarnessDir):
    """Each call's code, where the agent cannot write: a fresh folder outside the workspace, one new file per
    call written through the harness's descriptor with O_EXCL, so a symlink planted anywhere redirects nothing."""

    def __init__(self) -> None:
        super().__init__(Path(tempfile.gettempdir()) / f"automedbench-exec-{secrets.token_hex(8)}")
        self.calls = 0

    def write_call(self, language: str, code: str, *, python: str, mounted: bool = True) -> list[str]:
        """Write the next call's code and return the argv that runs it: from EXEC_MOUNT when this folder is
        mounted there, else from its host path. `language` must be one of LANGUAGES."""
        self.calls += 1
        name = f"call_{self.calls:04d}{LANGUAGES[language]}"
        host = self.write_new(name, code.encode("utf-8"))
        script = f"{EXEC_MOUNT}/{name}" if mounted else str(host)
        return [python, "-u", script] if language == "python" else ["bash", script]


class OutputCapture:
    """One output stream of a call, keeping the head and the tail when it runs past the cap.

    Given a pipe it reads it on its own thread; without one the caller feeds chunks (a docker exec stream)."""

    def __init__(self, stream: IO[bytes] | None, cap: int) -> None:
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        self.cap = cap
        self.thread: threading.Thread | None = None
        if stream is not None:
            self.thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
            self.thread.start()

    def _pump(self, stream: IO[bytes]) -> None:
        for chunk in iter(lambda: stream.read1(65536), b""):  # type: ignore[attr-defined]
            self.feed(chunk)
        stream.close()

    def feed(self, chunk: bytes) -> None:
        half = self.cap // 2
        self.total += len(chunk)
        room = half - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            if len(self.tail) > half:
                del self.tail[: len(self.tail) - half]

    def text(self) -> tuple[str, bool]:
        """(the text kept, with the dropped middle said; whether anything was dropped)."""
        if self.thread is not None:
            self.thread.join(timeout=5)
        capped = self.total > len(self.head) + len(self.tail)
        middle = f"\n[... {self.total - len(self.head) - len(self.tail)} bytes dropped ...]\n" if capped else ""
        return (self.head.decode("utf-8", "replace") + middle + self.tail.decode("utf-8", "replace")), capped


@define(frozen=True)
class CallEnd:
    """How a call ended: its exit code (None when the backend could not tell), whether the timeout ended
    it and what the kill reached, a note for the agent (a restarted container, a kill by memory)."""

    exit_code: int | None
    timed_out: bool
    timeout_s: float
    killed: str
    note: str = ""


def call_result(end: CallEnd, out: OutputCapture, err: OutputCapture, duration: float) -> ExecResult:
    """The call's `ExecResult`: output as captured, the note and the timeout said on stderr; exit -9 when
    the timeout ended it or no exit code is known."""
    stdout, capped_out = out.text()
    stderr, capped_err = err.text()
    stderr += end.note
    if end.timed_out:
        stderr += f"\nTIMEOUT: killed after {end.timeout_s:.0f} s ({end.killed})"
    exit_code = -9 if end.timed_out or end.exit_code is None else end.exit_code
    return ExecResult(exit_code, stdout, stderr, duration, end.timed_out, out.total, err.total,
                      capped_out or capped_err)
