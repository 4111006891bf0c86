"""The model gateway: how an installed agent inside the sandbox reaches its model, and how the harness counts it.

The sandbox has no network (or one without the host's loopback), so a CLI cannot reach a model server itself.
The harness listens on a unix socket it binds in a folder of the workspace before any agent process exists (the
workspace is mounted into every sandbox); a small relay inside the sandbox (`RELAY`, started by the run script)
turns a TCP port on the sandbox's own loopback into connections to that socket, so a CLI that only takes a URL
works. Nothing else becomes reachable: the relay only ever connects to the socket, and the gateway only ever
forwards to the one provider the run was configured with.

Every request is forwarded with the real key put in by the harness (the sandbox only holds a dummy one) and to
the run's model: whatever model a request names (a helper model such as Claude Code's small one, or any other), the
configured one serves it, so a run's result names the model that did its work; the other names asked for are
counted (`other_models`). A body longer than MAX_REQUEST_BYTES is refused at once, naming that bound; up to it the
body is read to pin its model, and one whose model cannot be read (no JSON, over MAX_REQUEST_ITEMS values, or no
`model` field) is refused with an error naming why. The gateway counts what the run's budgets need from outside:
model calls (the agent's turns), tokens, cost and the time spent waiting for the model. A call past the turn
budget or the time limit is refused with an error every client treats as final. Each exchange is kept as a
`ModelCall` (no prompt or reply text); a `watcher` (`gatewaysteps.StepLedger`) sees each request as it arrives and
each reply once forwarded, and so the steps the program took in between. Anything in the sandbox can talk to the
socket, so it is bounded: a few requests at a time (more are answered 429 at once), an idle connection is dropped,
and past a number of records calls are counted, not kept.

The socket is a file of the run's workspace, so anything that can reach that path can connect: a `local-plain`
call of another run could (it sees the host's files; it covers the sockets that existed when it started, not a
gateway started later), and was served on this run's key and budget, its requests in this run's step ledger. A
gateway whose run has a sandbox with a root of its own (`host_peers=False`: bubblewrap, docker) therefore answers
only peers whose root folder is not the harness's (the peer's, by SO_PEERCRED); a plain call keeps the harness's
and cannot change it (`plainns` drops the chroot capability and loads a seccomp filter against new namespaces).
Refused connections are counted (`foreign_peers`). That check sees the relay, always inside: where the sandbox
shares the host's network (plain calls; bubblewrap on a network task without a namespace of its own) the relay's
port is on the host's loopback, so the relay itself serves only a peer whose socket a process of its own PID
namespace holds (`ours`, through /proc/net/tcp); another run's agent or another user is closed on.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import socket
import socketserver
import struct
import threading
import time
import urllib.parse
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any

from attrs import asdict, define
from automedbench.api import OUTAGE_AFTER_S

from .providerhealth import PROBE_LIMIT_S, ProviderHealth, probe_answer, transport_error
from .wiremessages import parse_bounded, too_large

SOCKET_NAME = "model.sock"
STOP_NAME = "session.stop"  # made beside the socket when the provider is down: the session script ends the program
MAX_ACTIVE = 8  # requests served at once; more are answered 429 (clients retry) and never forwarded
IDLE_TIMEOUT_S = 60.0  # a connection that sends nothing for this long is dropped
MAX_RECORDS = 2_000  # ModelCall records kept; later calls are counted in the totals only
MAX_OTHER_MODELS = 50  # distinct other model names counted by name; more are counted under OTHER_NAMES
OTHER_NAMES = "(other names)"
MAX_MODEL_NAME = 200
OVERLOADED = (b"HTTP/1.1 429 Too Many Requests\r\ncontent-type: application/json\r\nretry-after: 1\r\n"
              b"connection: close\r\ncontent-length: 0\r\n\r\n")
# The one bound on a request's body: larger is refused at once (413), and up to it the body is read to pin its model.
# A long conversation with images stays below it (the providers' own caps are 20-32 MB of request).
MAX_REQUEST_BYTES = 64 << 20
# `{`, `[` and `,` in a request pinned: a bound on the values its parse makes. The worst body stays what it was at the
# 16 MB parse bound: 16 MB of short strings (3.4 million) took the harness 264 MB to parse and re-serialise, 64 MB
# with this many 263 MB (4 million: 397 MB). Base64 images are long strings and count nothing.
MAX_REQUEST_ITEMS = 2_000_000
TOO_LARGE = (f"over {MAX_REQUEST_BYTES >> 20} MB, or over {MAX_REQUEST_ITEMS:,} objects, arrays and values "
             f"(`{{`, `[` and `,`)")
MAX_USAGE_SCAN_BYTES = 16 << 20  # how much of a reply is kept to read its token counts
HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade",
              "host", "content-length", "accept-encoding"}
KEY_HEADERS = {"authorization", "x-api-key", "x-goog-api-key", "api-key"}
# Which header carries the key for each wire format (the dummy key inside the sandbox is replaced, never passed on).
KEY_HEADER = {"anthropic": ("x-api-key", "{}"), "gemini": ("x-goog-api-key", "{}"),
              "openai": ("authorization", "Bearer {}")}

# The relay run inside the sandbox: 127.0.0.1:<free port> -> the gateway's unix socket. It writes the port to a
# file, then copies bytes both ways per connection. Only the Python standard library (any sandbox has Python).
RELAY = r'''
import os, socket, struct, sys, threading
sock_path, port_file = sys.argv[1], sys.argv[2]
srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", 0)); srv.listen(64)
tmp = port_file + ".tmp"
with open(tmp, "w") as f: f.write(str(srv.getsockname()[1]))
os.replace(tmp, port_file)
def pipe(a, b):
    try:
        while True:
            data = a.recv(65536)
            if not data: break
            b.sendall(data)
    except OSError: pass
    finally:
        for s in (a, b):
            try: s.shutdown(socket.SHUT_RDWR)
            except OSError: pass
def _addr(text):
    ip, port = text.split(":")
    return socket.inet_ntoa(struct.pack("=I", int(ip, 16))), int(port, 16)
def ours(client):
    # a sandbox sharing the host's network shares its loopback: only a peer whose socket a process of this PID
    # namespace (this sandbox) holds is relayed, never another run's agent or another user's process
    try:
        peer, me = client.getpeername(), client.getsockname()
        with open("/proc/net/tcp") as table:
            rows = [line.split() for line in list(table)[1:]]
        inodes = {r[9] for r in rows if len(r) > 9 and _addr(r[1]) == peer and _addr(r[2]) == me}
    except (OSError, ValueError):
        return False
    wanted = {"socket:[%s]" % i for i in inodes if i != "0"}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fds = os.listdir("/proc/%s/fd" % pid)
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink("/proc/%s/fd/%s" % (pid, fd)) in wanted:
                    return True
            except OSError:
                pass
    return False
def serve(client):
    if not ours(client):
        client.close(); return
    upstream = socket.socket(socket.AF_UNIX)
    try: upstream.connect(sock_path)
    except OSError: client.close(); return
    threading.Thread(target=pipe, args=(upstream, client), daemon=True).start()
    pipe(client, upstream)
while True:
    conn, _ = srv.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
'''


@define
class ModelCall:
    """One request the gateway saw: when, how long, what it cost."""

    n: int
    path: str
    model: str
    status: int
    started_s: float
    latency_s: float
    tokens_in: int = 0
    tokens_out: int = 0
    tokens_cached: int = 0
    cost_usd: float = 0.0
    refused: str = ""
    error: str = ""
    asked: str = ""  # the model the request named, when not the run's (`model` served it)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def read_usage(body: bytes) -> tuple[int, int, int]:
    """(input, output, cached) tokens from a reply in any of the four wire formats, streamed (SSE) or whole.

    Streams repeat or accumulate their counts (Anthropic's message_delta, Gemini's chunks), so the largest value of
    each field wins. Unreadable parts count nothing."""
    tokens_in = tokens_out = cached = 0
    pieces = [body]
    if b"data:" in body[:2048] or body.lstrip().startswith(b"event:"):
        pieces = [line[5:].strip() for line in body.splitlines() if line.startswith(b"data:")]
    for piece in pieces:
        data = parse_bounded(piece)
        stack, seen = [data], 0
        while stack and seen < 10_000:
            node = stack.pop()
            seen += 1
            if isinstance(node, list):
                stack.extend(node[:1000])
                continue
            if not isinstance(node, dict):
                continue
            usage = node.get("usage") if isinstance(node.get("usage"), dict) else None
            meta = node.get("usageMetadata") if isinstance(node.get("usageMetadata"), dict) else None
            if usage is not None:
                details = usage.get("prompt_tokens_details") or usage.get("input_tokens_details") or {}
                fresh = _int(usage.get("input_tokens"))
                if "cache_read_input_tokens" in usage or "cache_creation_input_tokens" in usage:
                    # Anthropic counts cached and cache-written prompt tokens apart from input_tokens
                    fresh += _int(usage.get("cache_read_input_tokens")) + _int(usage.get("cache_creation_input_tokens"))
                tokens_in = max(tokens_in, _int(usage.get("prompt_tokens")), fresh)
                tokens_out = max(tokens_out, _int(usage.get("completion_tokens")), _int(usage.get("output_tokens")))
                cached = max(cached, _int(usage.get("cache_read_input_tokens")),
                             _int(details.get("cached_tokens")) if isinstance(details, dict) else 0)
            if meta is not None:
                tokens_in = max(tokens_in, _int(meta.get("promptTokenCount")))
                tokens_out = max(tokens_out, _int(meta.get("candidatesTokenCount")) +
                                 _int(meta.get("thoughtsTokenCount")))
                cached = max(cached, _int(meta.get("cachedContentTokenCount")))
            stack.extend(v for v in node.values() if isinstance(v, dict | list))
    return tokens_in, tokens_out, cached


GEMINI_MODEL_PATH = "/models/"


def pin_model(wire: str, method: str, path: str, body: bytes, model: str) -> tuple[str, bytes, str, str]:
    """(path, body) with the run's `model` in place of the one the request names, the name it gave, and why it
    cannot be pinned ("" when it can). Gemini names the model in its path (`/models/NAME:method`); the other
    formats in the JSON body's `model`. A POST whose model cannot be read is refused: it would reach the provider
    naming whatever it names. A GET (a model list, a model's facts) generates nothing and passes as it is.

    Only the path `_forward` sends is read (its query and fragment are not the route), and a path with a `.` or
    `..` segment (plain or percent-encoded) is refused: a provider resolving it routed past the pinned name. A
    body is forwarded as the gateway read it (one `model`: a provider taking the first of two read another)."""
    parts = urllib.parse.urlsplit(path if path.startswith("/") else "/" + path)
    if any(segment in (".", "..") for segment in urllib.parse.unquote(parts.path).split("/")):
        return path, body, "", "automedbench gateway: a path with `.` or `..` segments is not forwarded"
    if wire == "gemini" and GEMINI_MODEL_PATH in parts.path:
        head, tail = parts.path.split(GEMINI_MODEL_PATH, 1)
        cut = min((at for at in (tail.find(":"), tail.find("/")) if at >= 0), default=len(tail))
        asked = urllib.parse.unquote(tail[:cut])
        pinned = f"{head}{GEMINI_MODEL_PATH}{urllib.parse.quote(model, safe='')}{tail[cut:]}"
        return pinned + (f"?{parts.query}" if parts.query else ""), body, asked, ""
    if method != "POST":
        return path, body, "", ""
    data = parse_bounded(body, MAX_REQUEST_BYTES, MAX_REQUEST_ITEMS)
    if not isinstance(data, dict):
        why = (f"{TOO_LARGE}, for the gateway to read" if too_large(body, MAX_REQUEST_BYTES, MAX_REQUEST_ITEMS)
               else "no JSON object")
        return path, body, "", (f"automedbench gateway: the request's body cannot be read ({why}), so the model it "
                                f"names is unknown; this run's model is {model!r}")
    asked = data.get("model")
    if not isinstance(asked, str):
        return path, body, "", (f"automedbench gateway: the request names no model (no `model` text field); this "
                                f"run's model is {model!r}")
    data["model"] = model
    # a lone surrogate the request escaped (\\ud800) goes out as the same escape, never an encoding error
    return path, json.dumps(data, ensure_ascii=False).encode("utf-8", "backslashreplace"), asked, ""


def refusal_body(message: str) -> bytes:
    """An error every client reads as final (not retried): the shapes of all three providers in one object."""
    return json.dumps({"type": "error", "error": {"type": "invalid_request_error", "code": 400,
                                                  "status": "INVALID_ARGUMENT", "message": message}}).encode()


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    """A thread per request, at most MAX_ACTIVE at once: a flood from the sandbox costs the harness no more."""

    daemon_threads = True
    allow_reuse_address = False
    request_queue_size = 64

    def __init__(self, *args: Any, admit: Callable[[socket.socket], bool] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.slots = threading.BoundedSemaphore(MAX_ACTIVE)
        self.overloaded = 0
        self.admit = admit

    def verify_request(self, request: Any, client_address: Any) -> bool:
        return self.admit is None or self.admit(request)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.slots.acquire(blocking=False):
            self.overloaded += 1
            with contextlib.suppress(OSError):
                request.settimeout(1.0)
                request.sendall(OVERLOADED)
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()


def peer_in_own_sandbox(request: socket.socket) -> bool:
    """Whether the process at the other end of a unix socket has a root folder of its own (a sandbox's: bubblewrap
    and docker give each call one), by the credentials the kernel recorded when it connected. A `local-plain`
    call keeps the harness's root and can make no other (no chroot capability, no new namespaces). A process
    this harness may not inspect counts as a sandbox's only if it runs as another user (docker's); one of this
    user's that hides itself (not dumpable) does not. One outside this PID namespace (pid 0) is no plain call
    either: those run in namespaces below the harness's."""
    try:
        pid, uid, _ = struct.unpack("3i", request.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                             struct.calcsize("3i")))
        own = os.stat("/proc/self/root")
    except OSError:
        return False
    if pid <= 0:
        return True
    try:
        peer = os.stat(f"/proc/{pid}/root")
    except PermissionError:
        return uid != os.geteuid()
    except OSError:  # gone already
        return False
    return (peer.st_dev, peer.st_ino) != (own.st_dev, own.st_ino)


class ModelGateway:
    """Forward the sandbox's model requests to `upstream` (scheme://host[:port][/prefix]) with the real key.

    `model` is the run's model: every request is forwarded naming it (`pin_model`). `max_calls` and `deadline` (a
    `time.monotonic()` value) are the run's budgets; `price(model, tokens_in,
    tokens_out, cached)` is the cost of one call; `watcher.request(body)` is called as each request arrives
    (before it is forwarded or refused) and `watcher.reply(request_body, status, reply_body, usage)` once a reply
    was forwarded. `host_peers=False`: only peers with another root folder than the harness's are served (the
    run's sandbox has a root of its own; see the module's docstring)."""

    def __init__(self, upstream: str, wire: str, api_key: str | None, *, model: str, max_calls: int, deadline: float,
                 price: Callable[[str, int, int, int], float] | None = None, watcher: Any = None,
                 host_peers: bool = True, provider_timeout: float = OUTAGE_AFTER_S) -> None:
        parsed = urllib.parse.urlsplit(upstream)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            from automedbench.engine import mask_value  # an error only: no click import on every start

            raise ValueError(f"the model base URL {mask_value('base_url', upstream)!r} is not an http(s) URL")
        self.scheme, self.host, self.port = parsed.scheme, parsed.hostname, parsed.port
        self.wire, self.api_key, self.model = wire, api_key, model
        self.other_models: dict[str, int] = {}  # names requests asked for, not the run's model: served by it
        self.max_calls, self.deadline = max_calls, deadline
        self.price, self.watcher = price, watcher
        self.calls: list[ModelCall] = []
        self.host_peers = host_peers
        self.counts = {"calls": 0, "refused": 0, "tokens_in": 0, "tokens_out": 0, "tokens_cached": 0,
                       "cost_usd": 0.0, "model_s": 0.0, "unmetered": 0, "foreign_peers": 0}
        self.watch_errors: list[str] = []
        self.lock = threading.Lock()
        self.started = time.monotonic()
        self.server: _Server | None = None
        self.thread: threading.Thread | None = None
        self.overloaded_final = 0
        self.upstream: set[http.client.HTTPConnection] = set()  # requests being forwarded now
        self.prefix = parsed.path.rstrip("/")
        self.health = ProviderHealth(self.probe, self._provider_down, provider_timeout)
        self.dir_fd: int | None = None

    # ---------------------------------------------------------------- life cycle

    def start(self, dir_fd: int) -> None:
        """Listen on `SOCKET_NAME` in the folder `dir_fd` (opened by the caller, no-follow); serve in a thread."""
        path = f"/proc/self/fd/{dir_fd}/{SOCKET_NAME}"  # short, and never through a path the agent could redirect
        self.dir_fd = dir_fd
        gateway = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                gateway._handle(self)

            do_GET = do_POST

            def log_message(self, *args: Any) -> None:
                pass

            timeout = IDLE_TIMEOUT_S

        server = _Server(path, Handler, bind_and_activate=False, admit=None if self.host_peers else self._admit)
        try:
            server.server_bind()
            server.server_activate()
        except OSError:
            server.server_close()
            raise
        os.chmod(path, 0o666)  # the sandbox may run the CLI as another uid (docker's user)
        self.server = server
        self.thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True)
        self.thread.start()
        self.health.start()

    def _admit(self, request: socket.socket) -> bool:
        if peer_in_own_sandbox(request):
            return True
        with self.lock:
            self.counts["foreign_peers"] += 1
        return False

    def close(self) -> None:
        server, self.server = self.server, None
        if server is not None:
            self.overloaded_final = server.overloaded
            server.shutdown()
            server.server_close()
        self.health.stopped.set()
        with self.lock:  # the session is over: a reply still being made is dropped (a local server stops on it)
            pending, self.upstream = list(self.upstream), set()
        self._cut(pending)
        if self.thread is not None:
            self.thread.join(timeout=5)
        self.health.stop()
        with self.lock:  # a probe that outlasts the join finds no folder: its descriptor is the caller's to close
            self.dir_fd = None

    def _cut(self, pending: list[http.client.HTTPConnection] | None = None) -> None:
        """Drop requests being forwarded (all of them by default): the session is over, or the provider is down."""
        if pending is None:
            with self.lock:
                pending = list(self.upstream)
        for conn in pending:
            with contextlib.suppress(OSError, AttributeError):
                conn.sock.shutdown(socket.SHUT_RDWR)

    def _provider_down(self) -> None:
        """The provider is down: cut the requests waiting for it, and ask the session to end (`STOP_NAME`, made in
        the session folder through the caller's descriptor, never following a link; one the sandbox made already
        is left as it is)."""
        self._cut()
        with self.lock, contextlib.suppress(OSError):  # `close` may be forgetting the descriptor: never after it
            if self.dir_fd is not None:
                os.close(os.open(STOP_NAME, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644,
                                 dir_fd=self.dir_fd))

    def probe(self) -> str:
        """A request of the harness's own to the provider (a GET of its base URL, no key): "" when it was answered
        (404 and 401 included: something there answers HTTP; `probe_answer`), else what went wrong."""
        conn_class = http.client.HTTPSConnection if self.scheme == "https" else http.client.HTTPConnection
        conn = conn_class(self.host, self.port, timeout=min(PROBE_LIMIT_S, self.health.timeout_s))
        try:
            conn.request("GET", self.prefix or "/", headers={"accept-encoding": "identity"})
            response = conn.getresponse()
            return probe_answer(response.status, response.reason)
        except (OSError, http.client.HTTPException) as exc:
            return transport_error(exc)
        finally:
            conn.close()

    def outage(self) -> tuple[str, bool]:
        """Why the provider did not answer ("" when it did) and whether that is an outage no call of the session
        got past (no answer below 500 at all). The health watch's rule (`ProviderHealth.confirm`), as a chat agent's:
        declared by the watch, or calls failed with no answer since (the program gave up before the wait ran out)
        and the harness's own request fails now too."""
        down = self.health.confirm()
        return (down, not self.health.answered_once) if down else ("", False)

    # ---------------------------------------------------------------- totals

    def totals(self) -> dict[str, Any]:
        with self.lock:
            counts = dict(self.counts)
        overloaded = self.server.overloaded if self.server is not None else self.overloaded_final
        return {**counts, "cost_usd": round(counts["cost_usd"], 6), "model_s": round(counts["model_s"], 3),
                "overloaded": overloaded, "records_left_out": max(0, counts["calls"] + counts["refused"] -
                                                                   MAX_RECORDS)}

    def asked_for(self) -> dict[str, int]:
        """The model names requests asked for other than the run's, each with how many (all served by the run's)."""
        with self.lock:
            return dict(self.other_models)

    def _note_other(self, asked: str) -> None:
        name = asked[:MAX_MODEL_NAME]
        if name not in self.other_models and len(self.other_models) >= MAX_OTHER_MODELS:
            name = OTHER_NAMES
        self.other_models[name] = self.other_models.get(name, 0) + 1

    def records(self) -> list[dict[str, Any]]:
        with self.lock:
            return [asdict(c) for c in self.calls]

    # ---------------------------------------------------------------- one request

    def _refusal(self) -> str:
        if self.health.down:
            return (f"automedbench gateway: the model provider {self.host} does not answer ({self.health.down}); "
                    "the session ends now")
        if self.counts["calls"] >= self.max_calls:
            return f"automedbench: the run's turn budget ({self.max_calls} model calls) is spent; stop now"
        if time.monotonic() >= self.deadline:
            return "automedbench: the run's time limit is reached; stop now"
        return ""

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        t0 = time.monotonic()
        length = handler.headers.get("content-length")
        try:
            size = int(length) if length else 0
        except ValueError:
            size = -1
        if size < 0 or size > MAX_REQUEST_BYTES:
            self._reply(handler, 413, refusal_body(f"automedbench gateway: a request's body is at most "
                                                   f"{MAX_REQUEST_BYTES >> 20} MB ({MAX_REQUEST_BYTES} bytes); "
                                                   f"this one's length is {str(length)[:40]!r}"))
            return
        body = handler.rfile.read(size) if size else b""
        if len(body) < size:
            return  # the connection went away mid-request: nothing was asked
        self._watch("request", body)  # the steps this request's answers complete (the program is waiting now)
        path, sent, asked, unpinned = pin_model(self.wire, handler.command, handler.path, body, self.model)
        with self.lock:
            refused = self._refusal() or unpinned
            n = self.counts["calls"] + self.counts["refused"] + 1
            call = ModelCall(n, handler.path[:300], "" if unpinned else self.model, 0, round(t0 - self.started, 3),
                             0.0, refused=refused, asked=asked[:MAX_MODEL_NAME] if asked != self.model else "")
            self.counts["refused" if refused else "calls"] += 1
            if asked and asked != self.model:
                self._note_other(asked)
            if n <= MAX_RECORDS:
                self.calls.append(call)
        if refused:
            call.status = 400
            self._reply(handler, 400, refusal_body(refused))
            return
        try:
            status, received = self._forward(handler, path, sent, n)
        except (OSError, http.client.HTTPException) as exc:
            self.health.failed(n, transport_error(exc))
            call.status, call.error = 502, f"{type(exc).__name__}: {str(exc)[:300]}"
            call.latency_s = round(time.monotonic() - t0, 3)
            self._count(call)
            self._watch("reply", body, 502, b"", {"latency_s": call.latency_s})
            with contextlib.suppress(OSError):
                self._reply(handler, 502, refusal_body(f"automedbench gateway: the model is unreachable "
                                                       f"({call.error})"))
            return
        call.status = status
        call.latency_s = round(time.monotonic() - t0, 3)
        call.tokens_in, call.tokens_out, call.tokens_cached = read_usage(received)
        if self.price is not None and status < 400:
            call.cost_usd = self.price(call.model, call.tokens_in, call.tokens_out, call.tokens_cached)
        self._count(call)
        self._watch("reply", body, status, received,
                    {"tokens_in": call.tokens_in, "tokens_out": call.tokens_out, "tokens_cached": call.tokens_cached,
                     "cost_usd": call.cost_usd, "latency_s": call.latency_s})

    def _count(self, call: ModelCall) -> None:
        with self.lock:
            for name in ("tokens_in", "tokens_out", "tokens_cached", "cost_usd"):
                self.counts[name] += getattr(call, name)
            self.counts["model_s"] += call.latency_s
            # a reply with no token counts (llama-cpp-python's stream has none): its tokens are unknown, not 0
            self.counts["unmetered"] += call.status < 400 and not (call.tokens_in or call.tokens_out)

    def _watch(self, moment: str, *args: Any) -> None:
        """Tell the watcher; its failure (on whatever the sandbox sent) is noted, never the call's."""
        if self.watcher is None:
            return
        try:
            getattr(self.watcher, moment)(*args)
        except Exception as exc:
            with self.lock:
                if len(self.watch_errors) < 20:
                    self.watch_errors.append(f"{moment}: {type(exc).__name__}: {str(exc)[:200]}")

    def _forward(self, handler: BaseHTTPRequestHandler, path: str, body: bytes, key: int) -> tuple[int, bytes]:
        """Send the request (`path`, `body`: the run's model pinned) upstream with the real key; stream the reply
        back; return its status and body."""
        path = path if path.startswith("/") else "/" + path
        parts = urllib.parse.urlsplit(path)
        query = [(k, v) for k, v in urllib.parse.parse_qsl(parts.query, keep_blank_values=True) if k != "key"]
        target = parts.path + ("?" + urllib.parse.urlencode(query) if query else "")
        headers = {k: v for k, v in handler.headers.items() if k.lower() not in HOP_BY_HOP | KEY_HEADERS}
        if self.api_key:
            name, template = KEY_HEADER.get(self.wire, KEY_HEADER["openai"])
            headers[name] = template.format(self.api_key)
        headers["accept-encoding"] = "identity"  # the token counts are read from the reply
        timeout = max(5.0, self.deadline - time.monotonic())
        conn_class = http.client.HTTPSConnection if self.scheme == "https" else http.client.HTTPConnection
        conn = conn_class(self.host, self.port, timeout=timeout)
        with self.lock:
            if self.server is None:
                raise OSError("the gateway is closed")
            self.upstream.add(conn)
        try:
            # a host that never accepts is cut by the health watch (or by this timeout), not after the whole run
            self.health.waits(key, "connect")
            conn.timeout = min(timeout, self.health.timeout_s + PROBE_LIMIT_S)
            conn.connect()
            conn.sock.settimeout(timeout)
            self.health.waits(key, "reply")
            conn.request(handler.command, target, body=body, headers=headers)
            response = conn.getresponse()
            self.health.answered(key, response.status, response.reason)
            handler.send_response(response.status, response.reason)
            out_headers = [(k, v) for k, v in response.getheaders() if k.lower() not in HOP_BY_HOP]
            for key, value in out_headers:
                handler.send_header(key, value)
            handler.send_header("connection", "close")  # the body ends when the connection does
            handler.end_headers()
            kept = bytearray()
            while True:
                chunk = response.read1(65536)
                if not chunk:
                    break
                if len(kept) < MAX_USAGE_SCAN_BYTES:
                    kept += chunk[:MAX_USAGE_SCAN_BYTES - len(kept)]
                with contextlib.suppress(OSError):  # a client that went away still gets its call counted
                    handler.wfile.write(chunk)
                    handler.wfile.flush()
            handler.close_connection = True
            return response.status, bytes(kept)
        finally:
            self.health.done(key)
            with self.lock:
                self.upstream.discard(conn)
            conn.close()

    @staticmethod
    def _reply(handler: BaseHTTPRequestHandler, status: int, data: bytes) -> None:
        handler.send_response(status)
        handler.send_header("content-type", "application/json")
        handler.send_header("content-length", str(len(data)))
        handler.send_header("connection", "close")
        handler.end_headers()
        handler.wfile.write(data)
        handler.close_connection = True


def socket_reachable(path: str, timeout: float = 2.0) -> bool:
    """Whether something listens on the unix socket `path` (a test helper and a sanity check)."""
    with socket.socket(socket.AF_UNIX) as probe:
        probe.settimeout(timeout)
        try:
            probe.connect(path)
        except OSError:
            return False
    return True
