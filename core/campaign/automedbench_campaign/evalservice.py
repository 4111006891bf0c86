"""A warm evaluator for sweeps: one long-lived isolated evaluator process that serves runs one at a time.

A cold evaluation starts `python -I -S`, imports the track and its scorers (report_gen: METEOR's JVM)
for every run: seconds each. The service starts the same process the same way (the harness's import path,
scrubbed environment, the same rlimits) and keeps it: interpreters, imported tracks and scorers a track
caches at module level stay warm. It talks to its parent only over the inherited stdin/stdout pipes (no
socket, no file, so no sandbox can reach it); each request gets a fresh, private working directory and is
validated before it is served. The parent enforces each request's wall timeout (kill the process group,
start afresh on the next request); any other failure (a crash, an error reply, a garbled answer) discards
the process and the request is scored on the cold path, so such a submission ends exactly as it would cold.
The service is restarted after `max_requests` evaluations and whenever the import path changes.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, BinaryIO

from automedbench.api import Evaluation, SubmissionError, from_dict, read_json, to_dict
from automedbench.engine import (
    EvalRequest,
    evaluate_in_process,
    evaluator_env,
    evaluator_path,
    limited_command,
    request_exclude,
    serve_request,
)

MAX_REQUESTS_ENV = "AUTOMEDBENCH_WARM_EVAL_MAX"
MAX_REQUESTS = 50  # evaluations per process before a fresh one (MAX_REQUESTS_ENV changes it)
MAX_LINE = 1 << 20  # a request or a reply: both small JSON lines
STOP_GRACE_S = 10.0

# Started like the cold evaluator (see evaluator.BOOT), running this module's `serve` instead. Its arguments: the
# import path (popped by the boot line) and the number of requests to serve (the parent's cap: the process's own
# environment is scrubbed, so a cap set there never reached it, and a parent allowed more than it served scored the
# extra request cold after a dead process).
SERVE_BOOT = ("import sys, json; sys.path[:] = json.loads(sys.argv.pop(1)); import runpy; "
              "runpy.run_module('automedbench_campaign.evalservice', run_name='__main__', alter_sys=True)")


def max_requests_setting() -> int:
    """The evaluations a warm process serves before a fresh one starts: MAX_REQUESTS_ENV when it is a positive
    whole number (read when a service is made, so a test session's setting applies), else MAX_REQUESTS."""
    return _whole(os.environ.get(MAX_REQUESTS_ENV, "")) or MAX_REQUESTS


def _whole(raw: str) -> int:
    """A positive whole number of at most seven digits, else 0."""
    return int(raw) if raw.isascii() and raw.isdigit() and len(raw) <= 7 else 0


class ServiceBroken(Exception):
    """The service process died, answered garbage or reported an error: discard it, score cold."""


def _read_line(fd: int, deadline: float | None, buffer: bytearray) -> bytes | None:
    """One newline-terminated line from `fd` (None on EOF); TimeoutError past `deadline`; bounded size."""
    while b"\n" not in buffer:
        if len(buffer) > MAX_LINE:
            raise ServiceBroken("reply longer than the line limit")
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError
        chunk = os.read(fd, 65536)
        if not chunk:
            return None
        buffer += chunk
    line, _, rest = bytes(buffer).partition(b"\n")
    buffer[:] = rest
    return line


class EvalService:
    """The parent's handle on one warm evaluator process (started lazily, one request at a time)."""

    def __init__(self, max_requests: int | None = None) -> None:
        self.max_requests = max(1, max_requests if max_requests is not None else max_requests_setting())
        self.proc: subprocess.Popen[bytes] | None = None
        self.path: list[str] = []
        self.served = 0  # requests served by the current process
        self.started = 0  # processes started over the service's life (a restart adds one)
        self.lock = threading.Lock()
        self._buffer = bytearray()
        self._stderr: collections.deque[str] = collections.deque(maxlen=20)

    # ---------------------------------------------------------------- process life

    def _start(self, path: list[str]) -> None:
        self._buffer.clear()
        self._stderr.clear()
        argv, preexec = limited_command(
            [sys.executable, "-I", "-S", "-c", SERVE_BOOT, json.dumps(path), str(self.max_requests)])
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=evaluator_env(),
            cwd="/", preexec_fn=preexec, start_new_session=True, close_fds=True)
        self.path, self.served = path, 0
        self.started += 1
        threading.Thread(target=self._drain_stderr, args=(self.proc.stderr,), daemon=True).start()

    def _drain_stderr(self, stream: BinaryIO) -> None:
        for raw in iter(stream.readline, b""):
            self._stderr.append(raw.decode("utf-8", "replace").rstrip()[:500])

    def kill(self) -> None:
        """Stop the process and everything it started (its own session: METEOR's JVM too)."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            proc.wait(STOP_GRACE_S)
        for stream in (proc.stdin, proc.stdout):
            with contextlib.suppress(Exception):
                stream.close()

    def close(self) -> None:
        """Ask the process to exit (end of its input: it closes its scorers), then make sure it did."""
        proc = self.proc
        if proc is None:
            return
        with contextlib.suppress(Exception):
            proc.stdin.close()
            proc.wait(STOP_GRACE_S)
        self.kill()

    # ---------------------------------------------------------------- requests

    def evaluate(self, request: EvalRequest, timeout_s: float) -> Evaluation:
        """Score one request warm; a timeout is the submission's (as cold); any other failure scores it cold."""
        with self.lock:
            path = evaluator_path(request_exclude(request))
            if self.proc is not None and (self.served >= self.max_requests or path != self.path
                                          or self.proc.poll() is not None):
                self.close()
            if self.proc is None:
                self._start(path)
            workdir = tempfile.mkdtemp(prefix="automedbench-eval-")  # 0700, new for every request
            try:
                self._ask(request, workdir, timeout_s)
                return read_json(Path(request.out), Evaluation)
            except TimeoutError:
                self.kill()
                # only trusted code runs there, over the agent's files: a stall is the submission's doing
                raise SubmissionError(f"the evaluator did not finish this submission within {timeout_s:.0f} s") \
                    from None
            except (ServiceBroken, OSError, ValueError):
                self.kill()
            finally:
                shutil.rmtree(workdir, ignore_errors=True)
        Path(request.out).unlink(missing_ok=True)  # nothing half-written by the broken process is read
        return evaluate_in_process(request, timeout_s)

    def _ask(self, request: EvalRequest, workdir: str, timeout_s: float) -> None:
        assert self.proc is not None and self.proc.stdin is not None and self.proc.stdout is not None
        Path(request.out).unlink(missing_ok=True)
        line = json.dumps({"request": to_dict(request), "cwd": workdir}).encode() + b"\n"
        deadline = time.monotonic() + timeout_s
        try:
            self.proc.stdin.write(line)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            raise ServiceBroken(f"could not send the request: {exc}") from None
        reply = _read_line(self.proc.stdout.fileno(), deadline, self._buffer)
        if reply is None:
            raise ServiceBroken("the evaluator service exited: " + " | ".join(list(self._stderr)[-5:]))
        answer = json.loads(reply)
        if not isinstance(answer, dict) or answer.get("ok") is not True:
            raise ServiceBroken(f"the evaluator service failed: {str(answer)[:500]}")
        self.served += 1


_SERVICE: EvalService | None = None
_SERVICE_LOCK = threading.Lock()


def service() -> EvalService:
    """This process's evaluator service (one per sweep worker process), closed when the process exits."""
    global _SERVICE
    with _SERVICE_LOCK:
        if _SERVICE is None:
            _SERVICE = EvalService()
            atexit.register(_SERVICE.close)
        return _SERVICE


def evaluate_warm(request: EvalRequest, timeout_s: float) -> Evaluation:
    """The "warm" evaluator backend: this process's service."""
    return service().evaluate(request, timeout_s)


# ---------------------------------------------------------------- the service process


def validate_request(message: Any, served_dirs: set[str]) -> tuple[EvalRequest, str]:
    """The request and its working directory, or ValueError: absolute paths, the run's own folder for its
    outputs, references beside its public inputs, and a fresh, empty working directory never used before."""
    if not isinstance(message, dict) or set(message) != {"request", "cwd"}:
        raise ValueError("malformed request")
    request = from_dict(message["request"], EvalRequest)
    cwd = message["cwd"]
    paths = [request.submission, request.public, request.private, request.manifest, request.out, cwd]
    if not all(isinstance(p, str) and os.path.isabs(p) for p in paths):
        raise ValueError("request paths must be absolute")
    if Path(request.public).parent != Path(request.private).parent:
        raise ValueError("private references must sit beside the run's public inputs")
    if not (Path(request.out).parent == Path(request.manifest).parent == Path(request.submission).parent):
        raise ValueError("evaluation, manifest and submission must be in the same run folder")
    if cwd in served_dirs or not os.path.isdir(cwd) or os.listdir(cwd):
        raise ValueError("the working directory must be new and empty")
    return request, cwd


def serve(channel_in: BinaryIO, channel_out: BinaryIO, max_requests: int = MAX_REQUESTS) -> int:
    """Answer requests until the input ends or `max_requests` were served; exit after any failure."""
    served_dirs: set[str] = set()
    buffer = bytearray()
    while len(served_dirs) < max(1, max_requests):
        line = _read_line(channel_in.fileno(), None, buffer)
        if line is None:
            return 0
        try:
            request, cwd = validate_request(json.loads(line), served_dirs)
            served_dirs.add(cwd)
            os.chdir(cwd)
            serve_request(request)
            os.chdir("/")
        except BaseException as exc:
            answer = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:500]}
            channel_out.write(json.dumps(answer).encode() + b"\n")
            channel_out.flush()
            return 1
        channel_out.write(b'{"ok": true}\n')
        channel_out.flush()
    return 0


def main() -> int:
    # the protocol gets private copies of stdin/stdout; a track's prints go to stderr, its reads see nothing
    channel_in = os.fdopen(os.dup(0), "rb", buffering=0)
    channel_out = os.fdopen(os.dup(1), "wb")
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    cap = sys.argv[1] if len(sys.argv) > 1 else ""
    return serve(channel_in, channel_out, _whole(cap) or MAX_REQUESTS)


if __name__ == "__main__":
    raise SystemExit(main())
