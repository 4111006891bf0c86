"""Whether an installed agent's model provider answers at all: the gateway's watch over its upstream.

A provider host that resolves but never answers (it accepts and stalls, refuses or resets connections, or answers
every call with a server error) left each program retrying for minutes until the run's time limit. The gateway
tells this watch when each forwarded request starts, when its reply's status line arrives and when it fails in
transport. Once the provider has gone `timeout_s` seconds with no answer (a request waiting that long, or calls
failing for that long with no good reply between), the harness asks the provider something of its own: a GET
of its base URL, with no key and nothing the sandbox sent. A model slow to answer (a long non-streamed reply) or
calls the provider rejects one by one (whatever the program sent) leave that GET answered, and the wait goes on;
so does a GET answered 5xx while a reply sent on an accepted connection is still due (a proxy before a slow model).
If it fails too, the provider is down: the waiting requests are cut, and every later call is refused with an
error the programs treat as final, so the session ends within about `timeout_s` plus the probe's own time.
"""

from __future__ import annotations

import http.client
import threading
import time
from collections.abc import Callable

PROBE_LIMIT_S = 10.0  # the longest the harness's own request may take


class ProviderHealth:
    """The provider's answers as the gateway saw them, and the monitor that declares it down (`down`, the reason).

    `probe()` returns "" when the provider answered the harness's own request, else what went wrong; `cut()` drops
    the requests still waiting upstream. `answered_once` says whether any call got a status below 500: a provider
    that never answered before anything the model asked for could run cannot have been the agent's doing."""

    def __init__(self, probe: Callable[[], str], cut: Callable[[], None], timeout_s: float) -> None:
        self.probe, self.cut, self.timeout_s = probe, cut, timeout_s
        self.lock = threading.Lock()
        self.waiting: dict[int, tuple[float, str]] = {}  # request id -> (since, what it waits for)
        self.failing_since: float | None = None  # the first failure since the provider last answered
        self.last_alive = time.monotonic()
        self.last_failure = ""
        self.failures = 0
        self.answered_once = False
        self.down = ""
        self.stopped = threading.Event()
        self.thread: threading.Thread | None = None

    # ---------------------------------------------------------------- what the gateway reports

    def waits(self, key: int, what: str) -> None:
        """Request `key` is waiting for the provider: "connect" (its connection) or "reply" (its status line)."""
        with self.lock:
            since = self.waiting.get(key, (time.monotonic(), ""))[0]
            self.waiting[key] = (since, what)

    def answered(self, key: int, status: int, reason: str) -> None:
        """Request `key` got its status line: below 500 the provider answers; a server error is a failure."""
        if status >= 500:
            self.failed(key, f"HTTP {status} {reason}".strip())
            return
        with self.lock:
            self.waiting.pop(key, None)
            self.failing_since, self.last_alive, self.answered_once = None, time.monotonic(), True
            self.failures = 0  # counted since the provider last answered

    def failed(self, key: int, why: str) -> None:
        """Request `key` failed before any answer (refused, reset, a server error)."""
        with self.lock:
            since, _ = self.waiting.pop(key, (time.monotonic(), ""))
            if self.failing_since is None:
                self.failing_since = max(since, self.last_alive)
            self.last_failure, self.failures = why, self.failures + 1

    def done(self, key: int) -> None:
        with self.lock:
            self.waiting.pop(key, None)

    # ---------------------------------------------------------------- the monitor

    def start(self) -> None:
        """Watch in a thread of its own until `stop()` (a stopped watch may be started again)."""
        self.stopped.clear()
        self.thread = threading.Thread(target=self._watch, name="automedbench-provider-health", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.stopped.set()
        if self.thread is not None:
            self.thread.join(timeout=PROBE_LIMIT_S + 2)

    def _failing(self, now: float) -> str:
        """The calls failed since the provider last answered, in a line (called holding the lock)."""
        return (f"{self.failures} call(s) failed over {now - (self.failing_since or now):.0f} s with no answer "
                f"between, the last: {self.last_failure}")

    def _suspect(self) -> str:
        """What has gone on for `timeout_s` without an answer from the provider, or ""."""
        now = time.monotonic()
        with self.lock:
            if self.down:
                return ""
            if self.failing_since is not None and now - self.failing_since >= self.timeout_s:
                return self._failing(now)
            for since, what in self.waiting.values():
                if now - max(since, self.last_alive) >= self.timeout_s:
                    return (f"a connection to it was not accepted in {self.timeout_s:g} s" if what == "connect" else
                            f"it accepted the connection but sent no reply in {self.timeout_s:g} s")
        return ""

    def confirm(self) -> str:
        """Why the provider is down ("" if it is not): declared by the watch, or, when calls failed with no answer
        since and their caller gave up before `timeout_s`, the harness's own request failing now too."""
        with self.lock:
            if self.down or self.failing_since is None:
                return self.down
            suspect = self._failing(time.monotonic())
        return self._judge(suspect)

    def _judge(self, suspect: str) -> str:
        """Ask the provider (`probe`): answered, the wait goes on (""); not, it is down and the waiting calls cut.
        A server error to the harness's GET decides nothing while a request sent on an accepted connection has
        waited `timeout_s` for its reply and still does (a slow honest reply, bounded by that request's own
        timeout): a host that serves a 5xx on its base URL is no proof the model server behind it stopped."""
        asked = time.monotonic()
        why = self.probe()
        with self.lock:
            now = time.monotonic()
            replying = any(what == "reply" and asked - since >= self.timeout_s for since, what in self.waiting.values())
            if not why or (isinstance(why, ServerError) and replying):
                # the provider answers the harness (the model is slow, or the calls are refused), or a reply is due
                self.last_alive, self.failing_since = now, None
                return ""
            self.down = f"{suspect}; a request of the harness's own to it failed too ({why})"
        self.cut()
        return self.down

    def _watch(self) -> None:
        tick = max(0.05, min(1.0, self.timeout_s / 4))
        while not self.stopped.wait(tick):
            suspect = self._suspect()
            if suspect:
                self._judge(suspect)


class ServerError(str):
    """A probe's failure that is a status line (a 5xx): something there answers HTTP, unlike a transport failure."""


def probe_answer(status: int, reason: str) -> str:
    """The harness's own request answered with `status`: "" when something there answers HTTP (any status below 500,
    and 501: a server that does not take a GET on that path is up), else the failure in a few words."""
    return "" if status < 500 or status == 501 else ServerError(f"HTTP {status} {reason}".strip())


TRANSPORT_WORDS: tuple[tuple[type[BaseException], str], ...] = (
    (ConnectionRefusedError, "the connection was refused"), (ConnectionResetError, "the connection was reset"),
    (TimeoutError, "no answer before the timeout"),
    (http.client.RemoteDisconnected, "it closed the connection without a reply"),
    (BrokenPipeError, "the connection was closed"))


def transport_error(exc: BaseException) -> str:
    """A failed connection in a few words: refused, reset, timed out, or the exception itself. An SDK's or HTTP
    library's wrapper (httpx's ConnectError over a ConnectionRefusedError) is read through its causes."""
    cause: BaseException | None = exc
    for _ in range(8):
        if cause is None:
            break
        for kind, words in TRANSPORT_WORDS:
            if isinstance(cause, kind):
                return f"{words} ({type(cause).__name__})"
        cause = cause.__cause__ or cause.__context__
    from automedbench.engine import mask_value  # an error only (a URL it quotes keeps no credential)

    return f"{type(exc).__name__}: {mask_value('message', str(exc))[:200]}"
