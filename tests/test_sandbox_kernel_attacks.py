"""Attacks written against the bubblewrap sandbox's own defences: seccomp filter, memory cgroup, scratch folders.

Each snippet tries to get round one defence (the x32 syscall ABI, a raw clone(2) with namespace flags,
io_uring, memory held in memfd or SysV shm pages no address-space limit sees, an OFD lock on a public
file, a workspace too full for the call's /tmp); each must be refused or contained, and the session must
still work afterwards. The full-quota case goes through the real runner: it must never end as an
infrastructure failure.
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
from pathlib import Path

import pytest
from automedbench.sandbox import SandboxSpec
from automedbench.sandboxes import quota, seccomp
from automedbench.sandboxes.local import LocalSandbox, bwrap_path

pytestmark = pytest.mark.skipif(bwrap_path() is None, reason="bubblewrap (bwrap) not usable here")
MEMORY_MB = 512
MEMORY_CGROUP = os.geteuid() == 0 and Path("/sys/fs/cgroup/memory/cgroup.procs").exists()


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    root = tmp_path_factory.mktemp("kernel-attacks")
    for sub in ("ws", "public/c1"):
        (root / sub).mkdir(parents=True)
    (root / "public" / "c1" / "input.txt").write_text("public\n")
    s = LocalSandbox("auto").open(SandboxSpec(root / "ws", root / "public", memory_mb=MEMORY_MB))
    yield s
    s.close()


SYSCALLS = r"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
def call(name, nr, *args):
    ret = libc.syscall(nr, *args)
    if ret == 0 and name == 'clone':
        os._exit(0)  # a child made by a raw clone: leave at once
    print(name, 'OK' if ret >= 0 else 'ERR', ctypes.get_errno())
call('x32-keyctl', 0x40000000 | 250, 0, -4, 0)
call('x32-add_key', 0x40000000 | 248, b'user', b'k', b'v', 1, -3)
call('clone', 56, 0x10000000 | 17, 0, 0, 0, 0)
call('io_uring_setup', 425, 8, ctypes.create_string_buffer(120))
call('bpf', 321, 0, 0, 0)
call('perf_event_open', 298, 0, 0, -1, -1, 0)
call('open_by_handle_at', 304, -100, 0, 0)
"""


def test_seccomp_bypasses_are_refused(session):
    if seccomp.supported():
        pytest.skip(seccomp.supported())
    r = session.execute("python", SYSCALLS, 30)
    lines = dict(line.split(" ", 1) for line in r.stdout.splitlines())
    assert set(lines) == {"x32-keyctl", "x32-add_key", "clone", "io_uring_setup", "bpf", "perf_event_open",
                          "open_by_handle_at"}, r.stdout + r.stderr
    allowed = [name for name, outcome in lines.items() if outcome.startswith("OK")]
    assert allowed == [], lines


def test_an_ofd_lock_on_a_public_file_does_not_reach_the_host(session):
    code = ("import fcntl, os, struct, time\nfd = os.open(os.environ['DATA_DIR'] + '/c1/input.txt', os.O_RDONLY)\n"
            "lock = struct.pack('hhqqi4x', fcntl.F_RDLCK, 0, 0, 0, 0)\n"
            "fcntl.fcntl(fd, 37, lock)\nprint('LOCKED', flush=True)\ntime.sleep(4)\n")  # 37: F_OFD_SETLK
    target = session.spec.public / "c1" / "input.txt"
    call = threading.Thread(target=session.execute, args=("python", code, 30))
    call.start()
    blocked = False
    try:
        time.sleep(2)
        with open(target, "rb+") as fh:
            try:
                fcntl.lockf(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                fcntl.lockf(fh, fcntl.LOCK_UN)
            except OSError:
                blocked = True
    finally:
        call.join()
    assert not blocked, "an OFD read lock taken in the sandbox blocked the host's write lock"


@pytest.mark.skipif(not MEMORY_CGROUP, reason="needs root and a cgroup v1 memory hierarchy")
@pytest.mark.parametrize("how", ["memfd", "sysv-shm", "dev-shm-many"])
def test_memory_held_outside_the_address_space_is_limited(session, how):
    """Pages held by a memfd, by detached SysV shm segments or by many short-lived writers stay within the limit."""
    code = {
        "memfd": "import os\nfd = os.memfd_create('x')\nblock = b'x' * (1 << 20)\n"
                 "for i in range(1536):\n    os.write(fd, block)\nprint('HELD', flush=True)\n",
        "sysv-shm": "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nlibc.shmat.restype = ctypes.c_void_p\n"
                    "for i in range(12):\n    sid = libc.shmget(0, 128 << 20, 0o1600)\n"
                    "    addr = libc.shmat(sid, None, 0)\n    ctypes.memset(addr, 1, 128 << 20)\n"
                    "    libc.shmdt(ctypes.c_void_p(addr))\nprint('HELD', flush=True)\n",
        "dev-shm-many": "for i in $(seq 12); do head -c 128M /dev/zero > /dev/shm/f$i; done; "
                        "du -sm /dev/shm; echo HELD",
    }[how]
    r = session.execute("bash" if how == "dev-shm-many" else "python", code, 120)
    if how == "dev-shm-many":
        # /dev/shm is a folder on the workspace's disk, not memory: the write lands there (the quota's job)
        assert "HELD" in r.stdout and "tmpfs" not in session.execute("bash", "df -T /dev/shm", 10).stdout
    else:
        assert "HELD" not in r.stdout, f"{how}: 1.5 GB held under a {MEMORY_MB} MB limit"
    assert session.execute("bash", "echo alive", 20).stdout.strip() == "alive"


def test_scratch_folders_are_gone_and_planted_names_are_ignored(session):
    ws = session.spec.workspace
    os.symlink("/etc", ws / ".amb-tmp-000000000000")
    r = session.execute("bash", "echo x > /tmp/probe && ls -a /tmp && ls -d $WORKSPACE_DIR/.amb-* | wc -l", 20)
    assert r.exit_code == 0 and "probe" in r.stdout
    left = sorted(p.name for p in ws.iterdir() if p.name.startswith(".amb-"))
    assert left == [".amb-tmp-000000000000"], left  # the call's own folders went with it; the plant untouched
    assert not Path("/etc/probe").exists()
    (ws / ".amb-tmp-000000000000").unlink()


def test_a_full_workspace_never_makes_an_infrastructure_failure(reg, data_root, tmp_path):
    """The agent fills its quota to the last block: the next call cannot get a /tmp; that is the agent's doing."""
    if quota.unsupported():
        pytest.skip(quota.unsupported())
    from automedbench.runner import Run, RunOptions
    from automedbench.testing import StepsAgent
    from review_steps import DEMO, register_steps

    register_steps(reg)
    steps = [["bash", "cd $WORKSPACE_DIR && (dd if=/dev/zero of=fill bs=1M 2>/dev/null; "
                      "for i in $(seq 2000); do mkdir d$i 2>/dev/null || break; done; "
                      "for i in $(seq 2000); do echo > f$i 2>/dev/null || break; done); df -k . | tail -1"],
             ["bash", "echo second call"]]
    runner = Run(RunOptions(DEMO, "lite", StepsAgent.name, out=tmp_path, data_root=data_root,
                            workspace_quota_mb=24, agent_options={"steps": steps}), reg)
    result = runner.execute()
    assert result.state in ("scored", "agent_failure"), (result.state, result.error)
