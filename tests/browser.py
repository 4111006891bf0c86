"""A small Chrome DevTools Protocol client over `--remote-debugging-pipe` (fds 3 and 4: JSON messages ending in a
NUL byte), for the browser tests: load a page in headless Chromium at a given width, collect console errors,
exceptions and failed loads, and read the rendered DOM's links, ids and layout. Standard library only: the pipe
needs no websocket, and no browser is downloaded (Debian's /usr/bin/chromium, installed by scripts/test.sh)."""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# The flags that work on this machine (no sandbox for root, no network at all, nothing phoning home)
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
         "--mute-audio", "--remote-debugging-pipe"]

# Evaluated in each loaded page: what the tests check, as one JSON value
PAGE_FACTS = """(() => {
  const width = document.documentElement.clientWidth;
  const wide = [];
  for (const el of document.querySelectorAll('body *')) {
    const r = el.getBoundingClientRect();
    if (r.width === 0 && r.height === 0) continue;
    if (r.right > width + 1 || r.left < -1) {
      wide.push(`${el.tagName.toLowerCase()}.${el.className} right=${Math.round(r.right)}: `
                + (el.textContent || '').trim().slice(0, 60));
    }
  }
  return {title: document.title, width, scrollWidth: document.documentElement.scrollWidth,
          wide: wide.slice(0, 8), wideCount: wide.length,
          links: [...document.querySelectorAll('a[href]')].map(a => a.getAttribute('href')),
          ids: [...document.querySelectorAll('[id]')].map(e => e.id),
          images: [...document.images].map(i => [i.getAttribute('src') || '', i.complete && i.naturalWidth > 0]),
          svgs: document.querySelectorAll('svg').length, text: document.body.innerText.length};
})()"""


class Browser:
    """One headless Chromium with one page, driven over the DevTools pipe; `close()` ends it."""

    def __init__(self, profile: Path, width: int = 1366, height: int = 900, timeout_s: float = 60.0) -> None:
        if CHROMIUM is None:
            raise RuntimeError("chromium is not installed")
        self.timeout_s = timeout_s
        to_child, self._out = os.pipe()  # we write commands; Chromium reads them on fd 3
        self._in, from_child = os.pipe()  # Chromium writes replies and events on fd 4

        def wire() -> None:  # in the child, before exec: the pipe ends on the fds Chromium expects
            os.dup2(to_child, 3)
            os.dup2(from_child, 4)

        self.proc = subprocess.Popen([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     preexec_fn=wire, pass_fds=(3, 4))
        os.close(to_child)
        os.close(from_child)
        self._buffer = b""
        self._next = 0
        self.events: list[dict[str, Any]] = []
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable", session=True)
        self.call("Emulation.setDeviceMetricsOverride", {"width": width, "height": height, "deviceScaleFactor": 1,
                                                        "mobile": False}, session=True)

    # ------------------------------------------------------------ the pipe

    def _send(self, message: dict[str, Any]) -> None:
        os.write(self._out, json.dumps(message).encode() + b"\0")

    def _receive(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._in], [], [], left)[0]:
                raise TimeoutError("no answer from Chromium")
            chunk = os.read(self._in, 1 << 20)
            if not chunk:
                raise RuntimeError(f"Chromium closed the pipe (exit {self.proc.poll()})")
            self._buffer += chunk
        message, _, self._buffer = self._buffer.partition(b"\0")
        return json.loads(message)

    def call(self, method: str, params: dict[str, Any] | None = None, session: bool = False) -> dict[str, Any]:
        self._next += 1
        message: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self.session
        self._send(message)
        deadline = time.monotonic() + self.timeout_s
        while True:
            reply = self._receive(deadline)
            if reply.get("id") == self._next:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def _wait_event(self, method: str, deadline: float) -> None:
        while True:
            reply = self._receive(deadline)
            self.events.append(reply)
            if reply.get("method") == method and reply.get("sessionId") == self.session:
                return

    # ------------------------------------------------------------ pages

    def load(self, url: str) -> dict[str, Any]:
        """Navigate to `url` and wait for its load event; returns the page's facts (PAGE_FACTS) and its errors:
        console errors, uncaught exceptions, log entries at error level and a failed navigation."""
        self.events.clear()
        nav = self.call("Page.navigate", {"url": url}, session=True)
        errors = [f"navigation: {nav['errorText']}"] if nav.get("errorText") else []
        if not errors:
            self._wait_event("Page.loadEventFired", time.monotonic() + self.timeout_s)
        facts = self.call("Runtime.evaluate", {"expression": PAGE_FACTS, "returnByValue": True},
                          session=True)["result"].get("value") or {}
        for event in self.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                errors.append("console: " + " ".join(str(a.get("value", a.get("description"))) for a in params["args"]))
            elif method == "Runtime.exceptionThrown":
                errors.append("exception: " + str(params.get("exceptionDetails", {}).get("text")))
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                errors.append("log: " + str(params["entry"].get("text")))
        facts["errors"] = errors
        return facts

    def close(self) -> None:
        try:
            self._send({"id": self._next + 1, "method": "Browser.close", "params": {}})
            self.proc.wait(timeout=15)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
        finally:
            os.close(self._out)
            os.close(self._in)
