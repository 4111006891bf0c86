"""The sandbox conformance suite: what every Sandbox backend must do, checked against a live session.

Like inspect_ai's sandbox self-check, a backend runs `check_sandbox(MySandbox(), folder)` against
itself (`automedbench.testing` re-exports it). Each check returns a one-line failure reason, or "" when
it passes; a backend with a known gap declares it (its test marks that check as an expected failure
with the reason) instead of leaving it out. The red-team suite (tests/test_redteam.py) goes further:
escape attempts; these are the plain contract.
"""

from __future__ import annotations

import fcntl
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path

from attrs import define
from automedbench.api import Sandbox, SandboxSession, SandboxSpec

OUTPUT_CAP = 1 << 16
ENV_SECRET_VAR = "AUTOMEDBENCH_CHECK_SECRET"


@define
class Probe:
    """One check's world: an open session and the host-side things it must not reach."""

    session: SandboxSession
    spec: SandboxSpec
    root: Path
    private: Path
    hostonly: Path
    secret: str
    host_secret: str
    env_secret: str
    port: int

    def run(self, language: str, code: str, timeout_s: float = 30):
        return self.session.execute(language, code, timeout_s)


@define
class CheckResult:
    id: str
    description: str
    passed: bool
    reason: str = ""


def _exec_round_trip(p: Probe) -> str:
    token = uuid.uuid4().hex
    r = p.run("python", f"print('{token}')")
    if r.exit_code != 0 or r.stdout.strip() != token:
        return f"python print came back as exit {r.exit_code}, stdout {r.stdout[-200:]!r}"
    r = p.run("bash", f"echo {token}; echo problem >&2; exit 3")
    if (r.exit_code, r.stdout.strip()) != (3, token) or "problem" not in r.stderr:
        return f"bash exit 3 came back as exit {r.exit_code}, stdout {r.stdout!r}, stderr {r.stderr[-200:]!r}"
    p.run("python", "import os\nos.environ['AMB_STATE'] = '1'\nleft_over = 5")
    r = p.run("python", "import os\nprint(os.environ.get('AMB_STATE'), 'left_over' in globals())")
    if r.stdout.strip() != "None False":
        return f"process state survived between calls: {r.stdout.strip()!r}"
    return ""


def _timeout(p: Probe) -> str:
    started = time.monotonic()
    r = p.run("bash", "sleep 60 & sleep 60 & wait", 2)
    elapsed = time.monotonic() - started
    if not r.timed_out:
        return f"a 60 s sleep under a 2 s timeout was not reported as timed out (exit {r.exit_code})"
    if elapsed > 20:
        return f"the timed-out call returned only after {elapsed:.0f} s"
    return ""


def _output_cap(p: Probe) -> str:
    r = p.run("python", "import sys\nfor i in range(20000):\n    sys.stdout.write('y' * 99 + '\\n')\nprint('END')")
    if not r.capped:
        return f"2 MB of output under a {OUTPUT_CAP} byte cap was not reported as capped"
    if len(r.stdout) > OUTPUT_CAP + 8192:
        return f"{len(r.stdout)} characters of stdout kept under a {OUTPUT_CAP} byte cap"
    return ""


def _workspace(p: Probe) -> str:
    token = uuid.uuid4().hex
    r = p.run("bash", f"mkdir -p \"$WORKSPACE_DIR/outputs/c1\" && echo {token} > \"$WORKSPACE_DIR/outputs/c1/x.txt\" "
                      "&& cat \"$DATA_DIR/c1/input.txt\"")
    if r.exit_code != 0 or "public input" not in r.stdout:
        return f"writing the workspace / reading DATA_DIR failed: exit {r.exit_code}, {r.stderr[-200:]!r}"
    r = p.run("python", "import os\nprint(open(os.environ['WORKSPACE_DIR'] + '/outputs/c1/x.txt').read())")
    if r.stdout.strip() != token:
        return f"a file written in one call was not there in the next: {r.stdout.strip()!r}"
    host = p.spec.workspace / "outputs" / "c1" / "x.txt"
    if not host.is_file() or host.read_text().strip() != token:
        return f"the workspace file did not reach the host at {host}"
    if p.session.workspace_dir not in p.run("bash", "pwd").stdout:
        return "calls do not start in the workspace"
    return ""


def _public_read_only(p: Probe) -> str:
    before = (p.spec.public / "c1" / "input.txt").read_text()
    p.run("bash", "echo changed > \"$DATA_DIR/c1/input.txt\"; echo new > \"$DATA_DIR/new.txt\"")
    if (p.spec.public / "c1" / "input.txt").read_text() != before or (p.spec.public / "new.txt").exists():
        return "public data is writable from the sandbox"
    return ""


def _no_write_outside(p: Probe) -> str:
    target = p.root / "outside.txt"
    p.run("bash", f"echo escaped > {target}; echo escaped > \"$WORKSPACE_DIR/../outside-ws.txt\"")
    leaked = [str(t) for t in (target, p.spec.workspace.parent / "outside-ws.txt") if t.exists()]
    return f"wrote outside the workspace: {', '.join(leaked)}" if leaked else ""


def _private_hidden(p: Probe) -> str:
    r = p.run("bash", f"cat {p.private}/c1/ref.txt; ls -R {p.private}; cat /data/private/c1/ref.txt")
    return "the private reference is readable from the sandbox" if p.secret in r.stdout + r.stderr else ""


def _host_paths_hidden(p: Probe) -> str:
    r = p.run("bash", f"cat {p.hostonly}/canary.txt; ls {p.hostonly}")
    if p.host_secret in r.stdout + r.stderr:
        return f"a host folder outside the bound sources ({p.hostonly}) is readable"
    return ""


def _environment_scrubbed(p: Probe) -> str:
    r = p.run("bash", "env; cat /proc/self/environ | tr '\\0' '\\n'")
    return f"the harness's environment ({ENV_SECRET_VAR}) reached the sandbox" if p.env_secret in r.stdout else ""


def _network_off(p: Probe) -> str:
    r = p.run("python", "import socket\ns = socket.socket()\ns.settimeout(3)\n"
                        f"print(s.connect_ex(('127.0.0.1', {p.port})))\nprint(open('/proc/net/dev').read())")
    lines = r.stdout.splitlines()
    if not lines or lines[0].strip() == "0":
        return "a host listener on loopback was reachable with network off"
    up = [line.split(":")[0].strip() for line in lines[3:] if ":" in line and not line.strip().startswith("lo:")]
    return f"network interfaces besides loopback: {up}" if up else ""


WRITABLE_PROBE = r"""
import os
ws = os.stat(os.environ['WORKSPACE_DIR']).st_dev
limit = int(os.environ.get('AMB_MEMORY_MB', '0')) << 20
bad = []
for place in ('/', '/tmp', '/var/tmp', '/dev', '/dev/shm', '/run', '/run/lock', '/home', '/root', '/mnt', '/opt',
              '/data', '/var/lib', os.environ.get('HOME', '/')):
    probe = os.path.join(place, '.amb-writable-probe')
    try:
        with open(probe, 'w') as fh:
            fh.write('x')
        os.unlink(probe)
    except OSError:
        continue
    info = os.statvfs(place)
    size = info.f_blocks * info.f_frsize
    if os.stat(place).st_dev != ws and not (0 < size <= max(limit, 1)):
        bad.append(f'{place} ({size >> 20} MB)')
print('UNBOUNDED', ' '.join(bad))
"""


def _writable_bounded(p: Probe) -> str:
    r = p.run("python", f"import os\nos.environ['AMB_MEMORY_MB'] = '{p.spec.memory_mb}'\n" + WRITABLE_PROBE)
    line = next((x for x in r.stdout.splitlines() if x.startswith("UNBOUNDED")), None)
    if line is None:
        return f"the probe did not run: exit {r.exit_code}, {r.stderr[-200:]!r}"
    places = line.split(" ", 1)[1].strip() if " " in line else ""
    return (f"writable outside the workspace's disk and not a tmpfs within the memory limit: {places}"
            if places else "")


KEYRING_PROBE = r"""
import ctypes, platform
numbers = {'x86_64': (248, 250), 'aarch64': (217, 219)}.get(platform.machine())
libc = ctypes.CDLL(None, use_errno=True)
if numbers:
    add_key, keyctl = numbers
    # add a key to the session keyring (-3) and look for the harness's keys through the user keyring (-4)
    made = libc.syscall(add_key, b'user', b'amb-probe', b'payload', 7, -3)
    print('ADD', made)
    print('READ_USER', libc.syscall(keyctl, 11, -4, None, 0))
try:
    print('PROC_KEYS', len(open('/proc/keys').read().splitlines()))
except OSError:
    print('PROC_KEYS 0')
"""


def _keyring_closed(p: Probe) -> str:
    import platform

    if platform.machine() not in ("x86_64", "aarch64"):
        return ""
    r = p.run("python", KEYRING_PROBE)
    values = dict(line.split(" ", 1) for line in r.stdout.splitlines() if " " in line)
    if "PROC_KEYS" not in values:
        return f"the probe did not run: exit {r.exit_code}, {r.stderr[-200:]!r}"
    if int(values.get("ADD", "-1")) > 0:
        return "a key could be added to a kernel keyring from the sandbox"
    if int(values.get("READ_USER", "-1")) >= 0:
        return "the user keyring (shared with the host and every run of this user) is readable"
    if int(values["PROC_KEYS"]) > 0:
        return f"/proc/keys lists {values['PROC_KEYS']} host key(s)"
    return ""


def _locks_private(p: Probe) -> str:
    """A lock the sandbox takes on a public file must not be visible to (or block) the host or other runs."""
    target = p.spec.public / "c1" / "input.txt"
    marker = p.spec.workspace / "locks-taken"  # written once both locks are held: the host probes from then on
    code = ("import fcntl, os, time\nfh = open(os.environ['DATA_DIR'] + '/c1/input.txt')\n"
            "fcntl.flock(fh, fcntl.LOCK_EX)\nfh2 = open(os.environ['DATA_DIR'] + '/c1/input.txt')\n"
            "fcntl.lockf(fh2, fcntl.LOCK_SH)\nprint('LOCKED', flush=True)\n"
            "open(os.environ['WORKSPACE_DIR'] + '/locks-taken', 'w').close()\ntime.sleep(2)\n")
    call = threading.Thread(target=p.run, args=("python", code, 30))
    call.start()
    held = []
    try:
        deadline = time.monotonic() + 25
        while time.monotonic() < deadline and call.is_alive() and not marker.exists():
            time.sleep(0.05)
        while time.monotonic() < deadline and call.is_alive() and not held:
            with open(target, "rb+") as fh:
                try:
                    fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    fcntl.flock(fh, fcntl.LOCK_UN)
                except BlockingIOError:
                    held.append("flock")
                try:
                    fcntl.lockf(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    fcntl.lockf(fh, fcntl.LOCK_UN)
                except OSError:
                    held.append("fcntl")
            time.sleep(0.2)
    finally:
        call.join()
    return (f"a lock taken in the sandbox on a public file held on the host ({', '.join(held)}): a channel "
            "between runs" if held else "")


def _gpu_nodes(p: Probe) -> str:
    r = p.run("bash", "ls -1 /dev | grep -E '^nvidia[0-9]+$' || true")
    given = {f"nvidia{g}" for g in p.spec.gpus}
    extra = sorted(set(r.stdout.split()) - given)
    return f"GPU device nodes the run was not given: {extra}" if extra else ""


def _no_new_namespaces(p: Probe) -> str:
    r = p.run("bash", "unshare --user --map-root-user true 2>/dev/null && echo USERNS; "
                      "unshare --mount true 2>/dev/null && echo MOUNTNS; true")
    made = [w for w in ("USERNS", "MOUNTNS") if w in r.stdout]
    return f"new namespaces can be made inside the sandbox: {made}" if made else ""


CHECKS: dict[str, tuple[str, Callable[[Probe], str]]] = {
    "exec-round-trip": ("python and bash run; stdout, stderr and exit code come back; no state between calls",
                        _exec_round_trip),
    "timeout": ("a call over its timeout is killed (with its children) and reported", _timeout),
    "output-cap": ("output beyond the cap is cut and reported", _output_cap),
    "workspace-write-read": ("the workspace is writable, persists between calls and is the host's folder",
                             _workspace),
    "public-read-only": ("public data is readable, not writable", _public_read_only),
    "no-write-outside-workspace": ("nothing lands on the host outside the workspace", _no_write_outside),
    "private-hidden": ("the private references are not readable", _private_hidden),
    "host-paths-hidden": ("host folders outside the bound sources are not readable", _host_paths_hidden),
    "environment-scrubbed": ("the harness's environment (keys) does not reach the sandbox", _environment_scrubbed),
    "network-off": ("with network off, host loopback listeners and outside interfaces are unreachable",
                    _network_off),
    "writable-places-bounded": ("every writable place is on the workspace's disk (its quota) or a tmpfs within "
                                "the memory limit", _writable_bounded),
    "keyring-closed": ("kernel keyrings (the host's keys, a channel between runs) are out of reach", _keyring_closed),
    "advisory-locks-private": ("a lock taken on a public file does not reach the host or other runs",
                               _locks_private),
    "gpu-nodes-given-only": ("no /dev/nvidiaN node of a GPU the run was not given", _gpu_nodes),
    "no-new-namespaces": ("no new user or mount namespace can be made inside (docker's default seccomp rule)",
                          _no_new_namespaces),
    # run by check_sandbox in a session of its own (it closes it): the callable here is never used
    "cleanup": ("close() stops everything the session started, background processes included", lambda p: ""),
}


def _layout(root: Path) -> tuple[Path, Path, Path, str, str]:
    """workspace, public, private and host-only folders with fresh secrets under `root`."""
    secret, host_secret = f"AMB-SECRET-{uuid.uuid4().hex}", f"AMB-HOST-{uuid.uuid4().hex}"
    for sub in ("ws/outputs", "public/c1", "private/c1", "hostonly", "decoy"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    os.chmod(root, 0o755)
    (root / "public" / "c1" / "input.txt").write_text("public input\n")
    (root / "private" / "c1" / "ref.txt").write_text(secret + "\n")
    (root / "hostonly" / "canary.txt").write_text(host_secret + "\n")
    return root / "ws", root / "public", root / "private", secret, host_secret


def _check_cleanup(sandbox: Sandbox, root: Path, track: str) -> str:
    """A detached heartbeat started in a session must stop once the session is closed."""
    ws, public, *_ = _layout(root)
    session = sandbox.open(SandboxSpec(ws, public, track=track, decoys={"/data/private": root / "decoy"}))
    try:
        session.execute("bash", "nohup setsid sh -c 'while true; do echo x >> \"$WORKSPACE_DIR/beat\"; sleep 0.2; "
                                "done' >/dev/null 2>&1 &\nsleep 1", 20)
    finally:
        session.close()
    time.sleep(1.0)
    beat = ws / "beat"
    first = beat.stat().st_size if beat.exists() else 0
    time.sleep(1.5)
    second = beat.stat().st_size if beat.exists() else 0
    return f"a background process outlived close() (heartbeat {first} -> {second} bytes)" if second > first else ""


def check_sandbox(sandbox: Sandbox, root: Path, checks: Iterable[str] | None = None,
                  track: str = "") -> list[CheckResult]:
    """Run the conformance checks (default: all) against `sandbox` in fresh folders under `root`.

    One session serves every check but `cleanup`, which opens and closes its own. Raises only when the
    backend cannot open a session at all; a failing check is a result with its reason."""
    wanted = list(checks) if checks is not None else list(CHECKS)
    unknown = [c for c in wanted if c not in CHECKS]
    if unknown:
        raise ValueError(f"unknown sandbox checks {unknown}; known: {sorted(CHECKS)}")
    results: dict[str, CheckResult] = {}
    main = [c for c in wanted if c != "cleanup"]
    if main:
        ws, public, private, secret, host_secret = _layout(root / "main")
        env_secret = f"AMB-ENV-{uuid.uuid4().hex}"
        previous = os.environ.get(ENV_SECRET_VAR)
        os.environ[ENV_SECRET_VAR] = env_secret
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        spec = SandboxSpec(ws, public, output_cap_bytes=OUTPUT_CAP, track=track,
                           decoys={"/data/private": root / "main" / "decoy"})
        session = sandbox.open(spec)
        try:
            probe = Probe(session, spec, root / "main", private, root / "main" / "hostonly", secret, host_secret,
                          env_secret, listener.getsockname()[1])
            for check_id in main:
                description, check = CHECKS[check_id]
                try:
                    reason = check(probe)
                except Exception as exc:  # a check that cannot even run is a failure with its cause
                    reason = f"{type(exc).__name__}: {exc}"
                results[check_id] = CheckResult(check_id, description, not reason, reason)
        finally:
            session.close()
            listener.close()
            if previous is None:
                os.environ.pop(ENV_SECRET_VAR, None)
            else:
                os.environ[ENV_SECRET_VAR] = previous
    if "cleanup" in wanted:
        reason = _check_cleanup(sandbox, root / "cleanup", track)
        results["cleanup"] = CheckResult("cleanup", CHECKS["cleanup"][0], not reason, reason)
    return [results[c] for c in wanted]
