"""The chat backends' watch over their provider: the installed agents' `ProviderHealth`, fed by the SDK's HTTP client.

A provider that resolves but never answers (it stalls, refuses, resets, or answers everything 5xx) held a chat agent
or an LLM judge for `timeout_s` (600 s) on each of `max_retries` + 1 attempts: an hour. The SDK is given an httpx
client whose transport tells the health watch when each request starts, when it is sent on an open connection, and
when its status line arrives or it fails. After `outage_after` seconds with no answer the harness asks the provider
something of its own (a GET of its base URL through the same proxies as the SDK); a model slow to reply leaves that
answered and the wait goes on (a CPU llama.cpp server may take minutes: no short read timeout decides). If that
fails too, the connections are shut down, the retry loop stops and `ProviderDown` says why, in one line.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import itertools
import socket
import threading
import urllib.request
from collections.abc import Callable
from types import ModuleType
from typing import Any

from automedbench.api import AgentError
from automedbench.engine import mask_value

from .providerhealth import PROBE_LIMIT_S, ProviderHealth, probe_answer, transport_error

MAX_SOCKETS = 64  # connections remembered for cutting; closed ones are forgotten first


class ProviderDown(AgentError):
    """The provider did not answer for `outage_after` seconds (or every call failed) and the harness's own request
    to it failed too. `never_answered`: no call of this backend ever got an answer (status below 500), so a chat
    agent's model cannot have run anything yet: an outage (`ProviderUnavailable`), not the agent's doing."""

    def __init__(self, message: str, never_answered: bool) -> None:
        super().__init__(message)
        self.never_answered = never_answered


class ProviderWatch:
    """One backend's `ProviderHealth`, the sockets of its client's connections (to cut), and a pause the retry loop
    waits in that ends when the provider is declared down."""

    def __init__(self, outage_after: float) -> None:
        self.outage_after = outage_after
        self.base_url = ""  # the SDK's effective base URL, set once its client exists
        self.health = ProviderHealth(self.probe, self.cut, outage_after)
        self.downed = threading.Event()
        self.keys = itertools.count(1)
        self.lock = threading.Lock()
        self.sockets: list[socket.socket] = []
        self.http: ModuleType | None = None  # the SDK's HTTP library (httpx, or its successor httpx2)

    # ---------------------------------------------------------------- the SDK's client

    def sdk_options(self, sdk: ModuleType, timeout_s: float) -> dict[str, Any]:
        """`http_client=` and `timeout=` for an official SDK's client: its own default client class (`sdk.
        DefaultHttpxClient`, over whichever httpx it is built on) with a transport that reports to the watch, and
        `timeout_s` to read, but a connection never accepted given up well before (the watch probes after
        `outage_after`; connecting takes milliseconds when the host is alive)."""
        client_class = sdk.DefaultHttpxClient
        base = next(c for c in client_class.__mro__ if c.__name__ == "Client")
        self.http = http = importlib.import_module(base.__module__.partition(".")[0])
        return {"http_client": client_class(transport=_watched_transport(http)(self)),
                "timeout": http.Timeout(timeout_s, connect=min(timeout_s, self.outage_after + PROBE_LIMIT_S))}

    def _remember(self, stream: Any) -> None:
        sock = stream.get_extra_info("socket") if stream is not None else None
        if not isinstance(sock, socket.socket):
            return
        with self.lock:
            open_ = [s for s in self.sockets if s.fileno() != -1]
            self.sockets = [*open_[-(MAX_SOCKETS - 1):], sock]

    # ---------------------------------------------------------------- the health watch's hooks

    def probe(self) -> str:
        """A GET of the base URL, no key, through the SDK's HTTP library (its proxies): "" when answered (a 404 or 401
        is something answering HTTP: `probe_answer`), else what went wrong."""
        http = self.http
        if http is None:  # a backend whose client does not report to the watch: nothing is ever suspected
            return ""
        try:
            with http.Client(timeout=min(PROBE_LIMIT_S, self.outage_after)) as client:
                response = client.get(self.base_url, headers={"accept-encoding": "identity"})
        except (http.HTTPError, OSError) as exc:
            return transport_error(exc)
        return probe_answer(response.status_code, response.reason_phrase)

    def cut(self) -> None:
        """The provider is down: shut the client's connections (a read waiting on one ends now) and end the pause."""
        self.downed.set()
        with self.lock:
            sockets = list(self.sockets)
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    # ---------------------------------------------------------------- one call with its retries

    def begin(self) -> None:
        """A call (with its retries) starts: the watch runs; an outage declared in an earlier call is forgotten."""
        with self.health.lock:
            self.health.down = ""
        self.downed.clear()
        self.health.start()

    def end(self) -> None:
        self.health.stop()

    def pause(self, seconds: float) -> None:
        """The retry loop's back-off: cut short when the provider is declared down."""
        self.downed.wait(seconds)

    def stopped(self) -> bool:
        return bool(self.health.down)

    def outage(self) -> ProviderDown | None:
        """Why the retry loop's final error is an outage: the watch declared the provider down, or calls failed with
        no answer since and the harness's own request fails now (the retries ran out before `outage_after`)."""
        waited = bool(self.health.down)  # declared by the watch, not after retries that gave up sooner
        down = self.health.confirm()
        if not down:
            return None
        ended = f"; the call was ended (the wait is outage_after={self.outage_after:g} s)" if waited else ""
        # the URL as a shared record may show it: a user:password or ?api_key= in it masked
        return ProviderDown(f"the model provider at {mask_value('base_url', self.base_url)} did not answer: "
                            f"{down}{ended}",
                            not self.health.answered_once)


@functools.cache
def _watched_transport(http: ModuleType) -> type:
    """A transport of the HTTP library that reports each request to the watch through httpcore's trace hook. It
    delegates to the library's own transport, through the proxy the environment names for the request's URL as the
    SDK's client would (a client given a transport reads no proxy variables itself)."""

    class WatchedTransport(http.BaseTransport):  # type: ignore[name-defined,misc]
        def __init__(self, watch: ProviderWatch) -> None:
            self.watch = watch
            self.routes: dict[str | None, Any] = {}  # proxy URL (None: direct) -> the library's transport
            self.lock = threading.Lock()

        def _route(self, url: Any) -> Any:
            proxies = urllib.request.getproxies_environment()
            proxy = None if urllib.request.proxy_bypass_environment(url.host, proxies) else \
                proxies.get(url.scheme) or proxies.get("all")
            with self.lock:
                if proxy not in self.routes:
                    self.routes[proxy] = http.HTTPTransport(proxy=proxy) if proxy else http.HTTPTransport()
                return self.routes[proxy]

        def handle_request(self, request: Any) -> Any:
            watch, key = self.watch, next(self.watch.keys)
            health = watch.health
            health.waits(key, "connect")

            def trace(event: str, info: dict[str, Any]) -> None:
                if event in ("connection.connect_tcp.complete", "connection.start_tls.complete"):
                    watch._remember(info.get("return_value"))
                elif event.endswith("send_request_headers.started"):  # a connection is open: the reply is awaited
                    health.waits(key, "reply")

            request.extensions = {**request.extensions, "trace": _chain(request.extensions.get("trace"), trace)}
            try:
                response = self._route(request.url).handle_request(request)
            except Exception as exc:
                health.failed(key, transport_error(exc))
                raise
            health.answered(key, response.status_code, response.reason_phrase)
            return response

        def close(self) -> None:
            with self.lock:
                routes, self.routes = list(self.routes.values()), {}
            for transport in routes:
                transport.close()

    return WatchedTransport


def _chain(first: Callable[[str, dict[str, Any]], None] | None,
           second: Callable[[str, dict[str, Any]], None]) -> Callable[[str, dict[str, Any]], None]:
    """Both trace hooks, the caller's first (an SDK or a user may have set one)."""
    if first is None:
        return second

    def both(event: str, info: dict[str, Any]) -> None:
        first(event, info)
        second(event, info)

    return both
