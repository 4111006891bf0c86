"""Outbound networking for a network-enabled task without the host's loopback: slirp4netns in a namespace.

Sharing the host's network namespace would let the agent reach every service listening on the host's
loopback (other runs, the harness's own executor cluster) and every abstract unix socket. Instead a session
gets a network namespace of its own, and slirp4netns (user-mode TCP/IP: the agent's connections are made by
a host process, so no bridge or firewall rule is needed) gives it outbound access with
`--disable-host-loopback`: 10.0.2.2 does not lead to the host's 127.0.0.1, and 127.0.0.1 inside is the
namespace's own. Services that listen on the host's other addresses stay reachable, as from any machine on
the network. Needs root (to enter a namespace the harness did not create as a user namespace).
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import subprocess
import time

# slirp4netns's fixed addresses: its DNS forwarder, and the gateway (the host, loopback excluded here)
SLIRP_DNS = "10.0.2.3"
RESOLV_CONF = f"nameserver {SLIRP_DNS}\n".encode()
# What a session with a slirp4netns network still reaches, for every sandbox's list of gaps.
REMAINING_GAP = ("services listening on the host's non-loopback addresses are reachable, as from any machine "
                 "on its network")


def network_gaps(net: SlirpNet | None, network: bool, fallback: str) -> list[str]:
    """What a session's network leaves open, for its list of gaps: the slirp namespace's remaining gap, or
    `fallback` (the backend's words for the shared network it fell back to), or nothing without network."""
    if net is not None:
        return [REMAINING_GAP]
    return [fallback] if network else []


def unsupported() -> str | None:
    """Why no private network namespace with outbound access can be made here, or None."""
    if os.geteuid() != 0:
        return "needs root to give a run its own network namespace"
    for tool in ("slirp4netns", "unshare", "nsenter"):
        if shutil.which(tool) is None:
            return f"{tool} not found (apt-get install slirp4netns)"
    return None


class SlirpNet:
    """One session's network namespace, held by a process (ours, or a container's init), wired by slirp4netns."""

    def __init__(self, pid: int | None = None, timeout_s: float = 10.0) -> None:
        self.holder: subprocess.Popen | None = None
        self.slirp: subprocess.Popen | None = None
        if pid is None:
            self.holder = subprocess.Popen(["unshare", "--net", "--", "sleep", "infinity"],
                                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                           stderr=subprocess.DEVNULL, start_new_session=True)
            pid = self.holder.pid
        self.pid = pid
        try:
            self._wait_for_own_namespace(timeout_s)
            self._start_slirp(timeout_s)
        except Exception:
            self.close()
            raise

    @property
    def path(self) -> str:
        return f"/proc/{self.pid}/ns/net"

    def prefix(self) -> list[str]:
        """argv prefix that runs a command inside this namespace."""
        return ["nsenter", f"--net={self.path}", "--"]

    def _wait_for_own_namespace(self, timeout_s: float) -> None:
        """slirp4netns must never be pointed at the host's own namespace (it would add a route there)."""
        own = os.readlink("/proc/self/ns/net")
        deadline = time.monotonic() + timeout_s
        while True:
            with contextlib.suppress(OSError):
                if os.readlink(self.path) != own:
                    return
            if time.monotonic() > deadline:
                raise OSError(f"process {self.pid} has no network namespace of its own")
            time.sleep(0.01)

    def _start_slirp(self, timeout_s: float) -> None:
        ready_r, ready_w = os.pipe()
        try:
            self.slirp = subprocess.Popen(
                ["slirp4netns", "--configure", "--mtu=65520", "--disable-host-loopback", "--enable-sandbox",
                 "--enable-seccomp", f"--ready-fd={ready_w}", str(self.pid), "tap0"],
                pass_fds=(ready_w,), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, start_new_session=True)
            os.close(ready_w)
            ready_w = -1
            readable, _, _ = select.select([ready_r], [], [], timeout_s)
            if not readable or os.read(ready_r, 1) != b"1":
                raise OSError(f"slirp4netns did not come up (exit code {self.slirp.poll()})")
        finally:
            os.close(ready_r)
            if ready_w >= 0:
                os.close(ready_w)

    def close(self) -> None:
        for proc in (self.slirp, self.holder):
            if proc is not None and proc.poll() is None:
                proc.kill()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=5)
        self.slirp = self.holder = None
