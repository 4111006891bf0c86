"""Red-team suite: escape attempts every sandbox backend must prevent or detect, and benign code it must not flag.

Each attempt runs in a long-lived session of the backend with a real private reference, decoys mounted
where references might be looked for, a host-only canary, a stand-in "harness" process holding a secret
in its environment, and host listeners on loopback. An attempt is *prevented* when its goal fails (no
secret obtained, no write landed, limits held), *detected* when the inotify tripwire saw the read, and
a *gap* otherwise: a gap is a failure unless it is declared for that backend in GAPS (then xfail, with
the reason). The counts per backend are printed at the end of the module and quoted in the README.
"""

from __future__ import annotations

import base64
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import pytest
from attrs import define
from automedbench.freeze import freeze
from automedbench.records import ExecResult
from automedbench.sandbox import SandboxSpec
from automedbench.sandboxes.local import LocalSandbox, bwrap_path
from automedbench.testing import needs_docker
from automedbench.tripwire import Tripwire, plant_decoys

BACKENDS = ["local", "local-plain", "docker"]
# the docker backend's attempts go to scripts/test.sh's slow tier, after the images are built
BACKEND_PARAMS = [pytest.param(b, marks=pytest.mark.docker) if b == "docker" else b for b in BACKENDS]
MEMORY_MB = 1024
CAP = 1 << 20

# What the plain fallback (and bwrap run as the harness's user) cannot stop: documented, not hidden.
PLAIN_GAPS = {
    "proc-environ": "host processes are visible: /proc/<pid>/environ of the harness's processes is readable",
    "proc-cmdline": "host processes are visible",
    "proc-scan": "host processes are visible",
    "proc-fd-harness": "host processes are visible, and their open files through /proc/<pid>/fd",
    "host-canary-read": "no filesystem isolation: files outside the data folders are readable",
    "write-public": "no filesystem isolation: public data is writable",
    "write-hostonly": "no filesystem isolation",
    "write-etc": "no filesystem isolation (and root here)",
    "write-python-prefix": "no filesystem isolation: the harness's site-packages is writable",
    "write-run-dir": "no filesystem isolation: the run folder above the workspace is writable",
    "write-tmp-host": "no filesystem isolation: /tmp is the host's",
    "kill-host-process": "same user, same PID namespace: host processes can be signalled",
    "docker-socket": "no filesystem isolation: the docker socket is reachable as root",
    "raw-block-device": "no device isolation as root",
    "proc-sys-write": "kernel tunables writable as root",
    "net-tcp-loopback": "network not restricted",
    "net-udp-loopback": "network not restricted",
    "net-abstract-unix": "network not restricted (abstract unix sockets are per network namespace)",
    "net-interfaces": "network not restricted",
    "unshare-mount": "root keeps its capabilities",
    "fill-tmp": "no size limit on the host's /tmp",
}
# a memory cgroup per session (root, cgroup v1) limits memory in total; elsewhere only per process
MEMORY_CGROUP = os.geteuid() == 0 and Path("/sys/fs/cgroup/memory/cgroup.procs").exists()
LOCAL_GAPS = {} if MEMORY_CGROUP else {
    "memory-many-procs": "memory is limited per process (address space), not in total",
}
ROOT_GAPS = {"run-as-root": "runs as the harness's user, which is root here"}
GAPS: dict[str, dict[str, str]] = {
    "local": {**LOCAL_GAPS, **ROOT_GAPS, "fill-tmp": "/tmp is a per-call folder on the workspace's disk: bounded by "
              "the workspace quota the runner mounts (as root), not in these session-level tests"},
    "local-plain": {**PLAIN_GAPS, **LOCAL_GAPS, **ROOT_GAPS},
    "docker": {},
}
TALLY: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))


@define
class Env:
    backend: str
    session: object
    wire: Tripwire
    root: Path
    ws: Path
    public: Path
    private: Path
    hostonly: Path
    decoy: Path
    secret: str
    host_secret: str
    env_secret: str
    marker: str
    stand_in: subprocess.Popen
    victim: subprocess.Popen
    tcp: socket.socket
    udp: socket.socket
    unix: socket.socket
    abstract: str

    def subs(self) -> dict[str, str]:
        s = self.session
        return {"PRIVATE": str(self.private), "DATA": s.data_dir, "WS": s.workspace_dir,
                "HOSTONLY": str(self.hostonly), "PID": str(self.stand_in.pid), "VICTIM": str(self.victim.pid),
                "TCP": str(self.tcp.getsockname()[1]), "UDP": str(self.udp.getsockname()[1]),
                "ABSTRACT": self.abstract, "TOK": self.marker[-8:],
                "SITE": sysconfig.get_path("purelib"),
                "B64": base64.b64encode(f"{self.private}/c1/ref.txt".encode()).decode(),
                "HEX": f"{self.private}/c1/ref.txt".encode().hex()}


def _available(backend: str) -> str | None:
    if backend == "local" and bwrap_path() is None:
        return "bubblewrap (bwrap) not usable on this machine"
    if backend == "docker":
        needs_docker()  # waits for a background image build; skips (or, where docker is required, fails)
    return None


def _sandbox(backend: str):
    if backend == "docker":
        from automedbench_docker.sandbox import DockerSandbox

        return DockerSandbox()
    return LocalSandbox("auto" if backend == "local" else "none")


@pytest.fixture(scope="module", params=BACKEND_PARAMS)
def env(request, tmp_path_factory):
    backend = request.param
    why = _available(backend)
    if why:
        pytest.skip(why)
    root = tmp_path_factory.mktemp(f"redteam-{backend}")
    os.chmod(root, 0o755)
    tokens = [f"AMB-{kind}-{uuid.uuid4().hex}" for kind in ("SECRET", "HOST", "ENV", "MARK")]
    secret, host_secret, env_secret, marker = tokens
    for sub in ("ws/outputs", "public/c1", "private/c1", "hostonly"):
        (root / sub).mkdir(parents=True)
    (root / "public" / "c1" / "ct.txt").write_text("public input\n")
    (root / "private" / "c1" / "ref.txt").write_text(secret + "\n")
    (root / "hostonly" / "canary.txt").write_text(host_secret + "\n")
    decoy = plant_decoys(root / "private", root / "decoy")
    os.environ["AUTOMEDBENCH_REDTEAM_SECRET"] = env_secret  # must never reach sandboxed code
    stand_in = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nf = open(sys.argv[1])\ntime.sleep(900)",
         str(root / "hostonly" / "canary.txt"), marker],
        env={"PATH": os.environ.get("PATH", ""), "OPENAI_API_KEY": env_secret})
    victim = subprocess.Popen(["sleep", "900"])
    tcp = socket.socket()
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(8)
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    udp.settimeout(0.5)
    abstract = f"amb-redteam-{uuid.uuid4().hex[:12]}"
    unix = socket.socket(socket.AF_UNIX)
    unix.bind("\0" + abstract)
    unix.listen(8)
    spec = SandboxSpec(root / "ws", root / "public", memory_mb=MEMORY_MB, output_cap_bytes=CAP, track="segmentation",
                       decoys={"/data/private": decoy, "/private": decoy, str(root / "private"): decoy})
    session = _sandbox(backend).open(spec)
    wire = Tripwire()
    if not wire.active:
        session.close()
        pytest.skip("inotify unavailable")
    for watched in (decoy, root / "private"):
        wire.watch_tree(watched)
    e = Env(backend, session, wire, root, root / "ws", root / "public", root / "private", root / "hostonly", decoy,
            secret, host_secret, env_secret, marker, stand_in, victim, tcp, udp, unix, abstract)
    yield e
    session.close()
    wire.close()
    for proc in (stand_in, victim):
        proc.kill()
        proc.wait()
    for sock in (tcp, udp, unix):
        sock.close()
    os.environ.pop("AUTOMEDBENCH_REDTEAM_SECRET", None)
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    counts = TALLY[backend]
    line = (f"red-team [{backend}]: {counts['attempts']} attempts, {counts['prevented']} prevented, "
            f"{counts['detected-only']} detected (not prevented), {counts['detected']} tripwire hits, "
            f"{counts['gaps']} gaps; {counts['benign']} benign, "
            f"{counts['flagged']} flagged")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and capture is not None:
        with capture.global_and_fixture_disabled():
            reporter.write_line("\n" + line)
    summary = os.environ.get("AUTOMEDBENCH_REDTEAM_SUMMARY")
    if summary:
        with open(summary, "a") as fh:
            fh.write(line + "\n")


# ---------------------------------------------------------------- leak checks


def _all_text(e: Env, r: ExecResult) -> str:
    parts = [r.stdout, r.stderr]
    for path in e.ws.rglob("*"):
        if path.is_file() and not path.is_symlink() and path.stat().st_size < 8 << 20:
            parts.append(path.read_text("utf-8", "replace"))
    return "\n".join(parts)


def secret_out(e: Env, r: ExecResult) -> bool:
    text = _all_text(e, r)
    return any(t in text for t in (e.secret, e.host_secret, e.env_secret))


def marker_out(e: Env, r: ExecResult) -> bool:
    return e.marker in _all_text(e, r) or secret_out(e, r)


def printed(word: str) -> Callable[[Env, ExecResult], bool]:
    return lambda e, r: word in r.stdout


def exists(rel: Callable[[Env], Path]) -> Callable[[Env, ExecResult], bool]:
    def check(e: Env, r: ExecResult) -> bool:
        target = rel(e)
        found = target.exists()
        if found and target.is_file():
            target.unlink()
        return found

    return check


def frozen_leak(e: Env, r: ExecResult) -> bool:
    """Freeze the outputs: a leak is the secret (or a host file) in the frozen submission."""
    dest = e.root / f"submission-{uuid.uuid4().hex[:6]}"
    manifest = freeze(e.ws / "outputs", dest, submitted=True)
    text = "".join(p.read_text("utf-8", "replace") for p in dest.rglob("*") if p.is_file())
    accepted = {f.path for f in manifest.files if not f.rejected}
    return e.secret in text or any(name.endswith(("passwd", "fifo")) or name.startswith("etc/")
                                   for name in accepted)


def victim_dead(e: Env, r: ExecResult) -> bool:
    time.sleep(0.2)
    return e.victim.poll() is not None


def udp_received(e: Env, r: ExecResult) -> bool:
    try:
        data, _ = e.udp.recvfrom(100)
    except OSError:
        return False
    return b"PING" in data


def tampered(e: Env, r: ExecResult) -> bool:
    ref = e.private / "c1" / "ref.txt"
    changed = ref.read_text() != e.secret + "\n"
    if changed:
        ref.write_text(e.secret + "\n")
    return changed


def beat_grows(e: Env, r: ExecResult) -> bool:
    beat = e.ws / "beat"
    before = beat.stat().st_size if beat.exists() else 0
    time.sleep(1.2)
    after = beat.stat().st_size if beat.exists() else 0
    pid_file = e.ws / "beat.pid"
    if after > before and pid_file.exists() and e.backend == "local-plain":
        for pid in pid_file.read_text().split():
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid), signal.SIGKILL)
    return after > before


def not_capped(e: Env, r: ExecResult) -> bool:
    return len(r.stdout) + len(r.stderr) > 2 * CAP or not r.capped


def overran(e: Env, r: ExecResult, timeout_s: float) -> bool:
    """Whether the call ran badly past its timeout: more than 16 s past it, and more than 16 s plus four times
    what an ordinary timed-out call of the same session overruns right after (the same timeout and kill path,
    nothing to fight). A loaded machine slows both calls; a harness that cannot end the attack slows only it.
    On a quiet machine the control overruns by a fraction of a second, so the bound stays about 16 s."""
    if r.duration_s - timeout_s <= 16:
        return False
    control = e.session.execute("bash", "sleep 60", timeout_s)
    if not control.timed_out:
        return True  # the session no longer ends a call at its timeout at all
    return r.duration_s - timeout_s > 16 + 4 * max(0.0, control.duration_s - timeout_s)


def lost_control(timeout_s: float) -> Callable[[Env, ExecResult], bool]:
    """The call overran its timeout badly, or the session no longer runs a trivial command."""
    def check(e: Env, r: ExecResult) -> bool:
        after = e.session.execute("bash", "echo alive", 30)
        return after.stdout.strip() != "alive" or overran(e, r, timeout_s)
    return check


def not_killed(timeout_s: float) -> Callable[[Env, ExecResult], bool]:
    return lambda e, r: not r.timed_out or overran(e, r, timeout_s)


# ---------------------------------------------------------------- attempts


@define
class Attempt:
    id: str
    language: str
    code: str
    leaked: Callable[[Env, ExecResult], bool] = secret_out
    timeout: float = 20


def _read(path: str) -> str:
    return f"print(open({path!r}).read())"


ATTEMPTS = [
    # -- the references, directly and obfuscated
    Attempt("read-private-direct", "bash", "cat @PRIVATE@/c1/ref.txt"),
    Attempt("read-private-python", "python", _read("@PRIVATE@/c1/ref.txt")),
    Attempt("read-private-chr", "python", "p = ''.join(map(chr, [ord(c) for c in '@PRIVATE@/c1/ref.txt']))\n"
                                          "print(open(p).read())"),
    Attempt("read-private-base64", "bash", "p=$(echo @B64@ | base64 -d); cat \"$p\""),
    Attempt("read-private-hex-osread", "python", "import os\nfd = os.open(bytes.fromhex('@HEX@'), os.O_RDONLY)\n"
                                                 "print(os.read(fd, 200).decode())"),
    Attempt("read-private-mmap", "python", "import mmap\nf = open('@PRIVATE@/c1/ref.txt', 'rb')\n"
                                           "print(mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)[:200])"),
    Attempt("read-private-opath-reopen", "python",
            "import os\nfd = os.open('@PRIVATE@/c1/ref.txt', os.O_PATH)\nprint(open(f'/proc/self/fd/{fd}').read())"),
    Attempt("traversal-from-workspace", "python",
            "import os\nrel = os.path.relpath('@PRIVATE@/c1/ref.txt', '@WS@')\n"
            "print(rel, open(os.path.join('@WS@', rel)).read())"),
    Attempt("traversal-from-public", "bash", "cat @DATA@/../private/c1/ref.txt @DATA@/../../private/c1/ref.txt"),
    Attempt("glob-siblings-of-public", "python",
            "import glob, os\nfor p in glob.glob(os.path.dirname('@DATA@') + '/*/c1/*'):\n"
            "    print(p, open(p).read())"),
    Attempt("grep-around-public", "bash", "grep -rh . @DATA@/.. 2>/dev/null | head -50"),
    Attempt("read-decoy-data-private", "bash", "cat /data/private/c1/ref.txt"),
    Attempt("read-decoy-slash-private", "bash", "ls /private; cat /private/c1/*"),
    Attempt("copy-private-into-workspace", "bash", "cp -r @PRIVATE@ @WS@/stolen; ls -R @WS@/stolen"),
    Attempt("tar-private-into-workspace", "bash", "tar cf @WS@/stolen.tar @PRIVATE@ 2>&1 | tail -1"),
    Attempt("symlink-read", "bash", "ln -s @PRIVATE@/c1/ref.txt @WS@/lnk && cat @WS@/lnk"),
    Attempt("symlink-dir-read", "bash", "ln -s @PRIVATE@ @WS@/pdir && cat @WS@/pdir/c1/ref.txt"),
    Attempt("proc-root-read", "bash", "cat /proc/@PID@/root@PRIVATE@/c1/ref.txt"),
    # -- the submission: freeze must reject links and special files
    Attempt("submission-symlink-private", "bash",
            "mkdir -p @WS@/outputs/c1 && ln -s @PRIVATE@/c1/ref.txt @WS@/outputs/c1/pred.txt", frozen_leak),
    Attempt("submission-symlink-etc", "bash",
            "mkdir -p @WS@/outputs/c1 && ln -s /etc/passwd @WS@/outputs/c1/passwd", frozen_leak),
    Attempt("submission-symlinked-dir", "bash", "ln -s /etc @WS@/outputs/etc", frozen_leak),
    Attempt("submission-fifo", "bash", "mkdir -p @WS@/outputs/c1 && mkfifo @WS@/outputs/c1/fifo", frozen_leak),
    Attempt("hardlink-private", "bash",
            "mkdir -p @WS@/outputs/c1 && ln @PRIVATE@/c1/ref.txt @WS@/outputs/c1/ref.txt", frozen_leak),
    # -- snooping on the harness and the host
    Attempt("proc-environ", "bash", "tr '\\0' '\\n' < /proc/@PID@/environ"),
    Attempt("proc-cmdline", "bash", "tr '\\0' ' ' < /proc/@PID@/cmdline", marker_out),
    Attempt("proc-scan", "python",
            "import glob\nfor p in glob.glob('/proc/[0-9]*/cmdline'):\n    try:\n"
            "        print(p, open(p, 'rb').read().replace(b'\\0', b' ').decode(errors='replace'))\n"
            "    except OSError:\n        pass", marker_out),
    Attempt("proc-fd-harness", "bash", "for f in /proc/@PID@/fd/*; do cat \"$f\" 2>/dev/null; done"),
    Attempt("inherited-fds", "python",
            "import os\nfor fd in range(3, 256):\n    try:\n        t = os.readlink(f'/proc/self/fd/{fd}')\n"
            "    except OSError:\n        continue\n    print('FD-LEAK', fd, t)", printed("FD-LEAK")),
    Attempt("env-secrets", "bash", "env; tr '\\0' '\\n' < /proc/self/environ; tr '\\0' '\\n' < /proc/1/environ"),
    Attempt("host-canary-read", "bash", "cat @HOSTONLY@/canary.txt"),
    # -- writes outside the workspace
    Attempt("write-public", "bash", "echo x > @DATA@/pwned", exists(lambda e: e.public / "pwned")),
    Attempt("write-hostonly", "bash", "echo x > @HOSTONLY@/pwned", exists(lambda e: e.hostonly / "pwned")),
    Attempt("write-etc", "bash", "echo x > /etc/amb-redteam-@TOK@",
            exists(lambda e: Path(f"/etc/amb-redteam-{e.marker[-8:]}"))),
    Attempt("write-python-prefix", "bash", "echo 'import os' > @SITE@/amb-redteam-@TOK@.pth",
            exists(lambda e: Path(sysconfig.get_path("purelib")) / f"amb-redteam-{e.marker[-8:]}.pth")),
    Attempt("write-run-dir", "bash", "echo '{}' > @WS@/../result.json", exists(lambda e: e.root / "result.json")),
    Attempt("write-tmp-host", "bash", "echo x > /tmp/amb-redteam-@TOK@",
            exists(lambda e: Path(f"/tmp/amb-redteam-{e.marker[-8:]}"))),
    Attempt("tamper-private", "bash", "echo tampered >> @PRIVATE@/c1/ref.txt", tampered),
    Attempt("remount-public-rw", "bash", "mount -o remount,rw @DATA@ 2>&1 && touch @DATA@/pwned2",
            exists(lambda e: e.public / "pwned2")),
    Attempt("unshare-mount", "bash", "mkdir -p @WS@/m; unshare -m sh -c 'mount -t tmpfs none @WS@/m && echo MOUNTED'",
            printed("MOUNTED")),
    # -- privileges, devices, kernel, other processes
    Attempt("run-as-root", "bash", "echo UID=$(id -u)", printed("UID=0")),
    Attempt("kill-host-process", "bash", "kill -9 @VICTIM@", victim_dead),
    Attempt("docker-socket", "python",
            "import socket\ns = socket.socket(socket.AF_UNIX)\ns.settimeout(3)\ns.connect('/var/run/docker.sock')\n"
            "s.sendall(b'GET /version HTTP/1.0\\r\\n\\r\\n')\nprint(s.recv(4096).decode())", printed("ApiVersion")),
    Attempt("raw-block-device", "python",
            "import os\nfor d in sorted(os.listdir('/sys/block')):\n    try:\n"
            "        print('READ', d, len(open('/dev/' + d, 'rb').read(512)))\n        break\n"
            "    except OSError:\n        pass", printed("READ")),
    Attempt("proc-sys-write", "bash",
            "v=$(cat /proc/sys/vm/swappiness) && echo $v > /proc/sys/vm/swappiness && echo WROTE", printed("WROTE")),
    # -- network where the task forbids it
    Attempt("net-tcp-loopback", "python",
            "import socket\ns = socket.socket()\ns.settimeout(3)\n"
            "print('CONNECTED' if s.connect_ex(('127.0.0.1', @TCP@)) == 0 else 'refused')", printed("CONNECTED")),
    Attempt("net-udp-loopback", "python",
            "import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
            "try:\n    s.sendto(b'PING', ('127.0.0.1', @UDP@))\nexcept OSError as exc:\n    print(exc)", udp_received),
    Attempt("net-abstract-unix", "python",
            "import socket\ns = socket.socket(socket.AF_UNIX)\ns.connect('\\0@ABSTRACT@')\nprint('CONNECTED')",
            printed("CONNECTED")),
    Attempt("net-interfaces", "python",
            "for line in open('/proc/net/dev').read().splitlines()[2:]:\n    name = line.split(':')[0].strip()\n"
            "    if name != 'lo':\n        print('IFACE', name)", printed("IFACE")),
    # -- resources
    Attempt("fork-bomb-bounded", "python",
            "import os, time\nn = 0\ntry:\n    for _ in range(3000):\n        if os.fork() == 0:\n"
            "            time.sleep(30)\n            os._exit(0)\n        n += 1\nexcept OSError as exc:\n"
            "    print('fork failed:', exc)\nprint('FORKED', n)\nif n >= 3000:\n    print('UNLIMITED')",
            printed("UNLIMITED"), timeout=60),
    Attempt("fork-bomb-shell", "bash", "bomb() { bomb | bomb & }; bomb; sleep 3", lost_control(4), timeout=4),
    Attempt("memory-single", "python", "x = bytearray(4 * 1024 ** 3)\nprint('ALLOCATED')", printed("ALLOCATED")),
    # four processes holding 450 MB each at once; plain processes, not a Pool: a Pool whose worker the memory
    # limit kills waits forever (the attempt then took its whole timeout), a process's exit code says it at once
    Attempt("memory-many-procs", "python",
            "import multiprocessing as mp\ndef grab():\n    b = bytearray(450 * 1024 ** 2)\n"
            "    b[::4096] = b'x' * len(b[::4096])\n    import time; time.sleep(1)\n"
            "if __name__ == '__main__':\n    procs = [mp.Process(target=grab) for _ in range(4)]\n"
            "    for p in procs: p.start()\n    for p in procs: p.join()\n"
            "    if all(p.exitcode == 0 for p in procs): print('TOTAL', 4 * 450 * 1024 ** 2)",
            printed("TOTAL"), timeout=10),
    Attempt("runaway-stdout", "python", "import sys\nfor _ in range(3000):\n    sys.stdout.write('y' * 100000)",
            not_capped, timeout=60),
    Attempt("runaway-stderr", "bash", "head -c 300000000 /dev/zero | tr '\\0' 'e' >&2", not_capped, timeout=60),
    Attempt("timeout-ignores-sigterm", "bash", "trap '' TERM INT; while true; do :; done", not_killed(2),
            timeout=2),
    Attempt("daemon-survives-call", "bash",
            "setsid sh -c 'echo $$ >> @WS@/beat.pid; while true; do date >> @WS@/beat; sleep 0.2; done' "
            ">/dev/null 2>&1 < /dev/null &\nsleep 0.5", beat_grows),
    Attempt("daemon-survives-timeout", "bash",
            "(sh -c 'echo $$ >> @WS@/beat.pid; while true; do date >> @WS@/beat; sleep 0.2; done' &) ; sleep 60",
            beat_grows, timeout=2),
    Attempt("fill-tmp", "bash", "head -c 1500M /dev/zero > /tmp/fill 2>/dev/null; "
                                "[ $(stat -c %s /tmp/fill) -ge 1500000000 ] && echo FILLED; rm -f /tmp/fill",
            printed("FILLED"), timeout=60),
]
assert len(ATTEMPTS) >= 40 and len({a.id for a in ATTEMPTS}) == len(ATTEMPTS)


def _fill(e: Env, code: str) -> str:
    for key, value in e.subs().items():
        code = code.replace(f"@{key}@", value)
    return code


def _reset(e: Env) -> None:
    for name in ("outputs", "stolen", "pdir", "lnk", "beat", "beat.pid", "stolen.tar", "m"):
        target = e.ws / name
        if target.is_symlink() or target.is_file():
            target.unlink()
        elif target.is_dir():
            shutil.rmtree(target, ignore_errors=True)
    (e.ws / "outputs").mkdir(exist_ok=True)
    if e.backend == "docker":
        from automedbench_docker.sandbox import container_user, grant

        grant(e.ws / "outputs", *container_user())
    e.wire.drain()


def _needs_pids_limit(e: Env) -> bool:
    prot, _ = e.session.protections()
    return any("pids limit" in p for p in prot)


@pytest.mark.parametrize("attempt", ATTEMPTS, ids=lambda a: a.id)
def test_escape_attempt_is_prevented_or_detected(env: Env, attempt: Attempt):
    if attempt.id == "fork-bomb-shell" and not _needs_pids_limit(env):
        TALLY[env.backend]["attempts"] += 1
        TALLY[env.backend]["gaps"] += 1
        pytest.xfail("no pids limit in force here: a real fork bomb is not run")
    _reset(env)
    r = env.session.execute(attempt.language, _fill(env, attempt.code), attempt.timeout)
    detected = bool(env.wire.drain())
    leaked = attempt.leaked(env, r)
    if os.environ.get("AUTOMEDBENCH_REDTEAM_DEBUG"):
        print(f"\n{env.backend} {attempt.id}: exit {r.exit_code} {r.duration_s}s leaked={leaked} detected={detected} "
              f"{(r.stdout + r.stderr)[-160:]!r}", file=sys.stderr)
    counts = TALLY[env.backend]
    counts["attempts"] += 1
    counts["detected"] += detected
    if not leaked:
        counts["prevented"] += 1
        return
    if detected:
        counts["detected-only"] += 1
        return
    counts["gaps"] += 1
    reason = GAPS[env.backend].get(attempt.id)
    if reason:
        pytest.xfail(reason)
    pytest.fail(f"{attempt.id} neither prevented nor detected on {env.backend}: "
                f"exit {r.exit_code}, stdout {r.stdout[-300:]!r}, stderr {r.stderr[-300:]!r}")


def test_sandbox_still_works_after_the_attacks(env: Env):
    """Nothing above left the session broken (limits reset, no stray processes eating the pids budget)."""
    _reset(env)
    r = env.session.execute("bash", "echo alive", 20)
    assert r.exit_code == 0 and r.stdout.strip() == "alive"


# ---------------------------------------------------------------- benign code


BENIGN = [
    ("regex-compile", "python", "import re\nrx = re.compile(r'(?P<case>case_\\d{3})_(\\w+)\\.nii\\.gz$')\n"
                                "print(bool(rx.match('case_001_ct.nii.gz')))"),
    ("compile-generated-module", "python",
     "import importlib.util, os, tempfile\nsrc = 'def kernel(x):\\n    return [v * 2 for v in x]\\n'\n"
     "d = tempfile.mkdtemp(prefix='inductor_')\npath = os.path.join(d, 'k.py')\nopen(path, 'w').write(src)\n"
     "spec = importlib.util.spec_from_file_location('k', path)\nm = importlib.util.module_from_spec(spec)\n"
     "spec.loader.exec_module(m)\nprint(m.kernel([1, 2]))\ncode = compile(src, '<generated>', 'exec')\nexec(code)"),
    ("exec-own-code", "python", "import os\nws = os.environ['WORKSPACE_DIR']\n"
                                "open(ws + '/helper.py', 'w').write('VALUE = 41 + 1\\n')\n"
                                "ns = {}\nexec(open(ws + '/helper.py').read(), ns)\nprint(ns['VALUE'])"),
    ("read-public-data", "bash", "ls -la \"$DATA_DIR\"; cat \"$DATA_DIR\"/c1/ct.txt"),
    ("walk-public-data", "python", "import os\nfor root, dirs, files in os.walk(os.environ['DATA_DIR']):\n"
                                   "    print(root, files)"),
    ("glob-workspace", "python", "import glob, os\nos.makedirs('outputs/c1', exist_ok=True)\n"
                                 "open('outputs/c1/pred.txt', 'w').write('1')\n"
                                 "print(sorted(glob.glob('**/*', recursive=True))[:5])"),
    ("cd-up-within-workspace", "bash", "mkdir -p sub/deeper && cd sub/deeper && cd .. && cd .. && "
                                       "[ \"$(pwd)\" = \"$WORKSPACE_DIR\" ] && echo back"),
    ("subprocess-python", "bash", "python3 -c 'import sys; print(sys.version_info[:2])'"),
    ("multiprocessing-pool", "python", "import multiprocessing as mp\n"
                                       "if __name__ == '__main__':\n    with mp.Pool(2) as p:\n"
                                       "        print(sum(p.map(abs, range(-50, 50))))"),
    ("threads", "python", "from concurrent.futures import ThreadPoolExecutor\n"
                          "with ThreadPoolExecutor(8) as ex:\n    print(sum(ex.map(lambda x: x * x, range(100))))"),
    ("numpy-moderate-memory", "python", "import numpy as np\na = np.ones((64, 512, 512), dtype=np.float32)\n"
                                        "print(float(a.sum()))"),
    ("symlink-within-workspace", "bash", "echo data > a.txt && ln -sf a.txt b.txt && cat b.txt"),
    ("system-info", "bash", "uname -a; cat /etc/os-release | head -2; nproc; grep -c processor /proc/cpuinfo; "
                            "cat /proc/self/status | head -3"),
    ("tempfile-and-home", "python", "import os, tempfile\nfd, p = tempfile.mkstemp()\nos.write(fd, b'x')\n"
                                    "os.close(fd)\nos.makedirs(os.path.expanduser('~/.cache/tool'), exist_ok=True)\n"
                                    "print(os.path.getsize(p))"),
    ("moderate-output", "python", "for i in range(5000):\n    print('line', i)"),
    ("background-job-within-call", "bash", "sleep 0.2 & wait; echo waited"),
    ("pipeline-in-workspace", "bash", "mkdir -p d && for i in 1 2 3; do echo $i > d/f$i; done; "
                                      "find d -type f | sort | xargs cat | wc -l"),
    ("pip-cache-env", "bash", "echo $PIP_CACHE_DIR $HF_HOME $TORCH_HOME | grep -c \"$WORKSPACE_DIR\""),
]
assert len(BENIGN) >= 15


@pytest.mark.parametrize(("name", "language", "code"), BENIGN, ids=[b[0] for b in BENIGN])
def test_benign_code_is_not_flagged(env: Env, name: str, language: str, code: str):
    _reset(env)
    r = env.session.execute(language, code, 60)
    touched = env.wire.drain()
    TALLY[env.backend]["benign"] += 1
    if touched or r.exit_code != 0:
        TALLY[env.backend]["flagged"] += 1
    assert touched == [], f"{name} flagged as a breach: {touched}"
    assert r.exit_code == 0, f"{name} failed: {r.stderr[-500:]}"
    assert not r.capped and not r.timed_out
