"""Red team round 27: state shared across trust levels, attacked through the real runner.

- **Kernel state a plain call shared with the host and every other run** (class 4, `local-plain` as root): a plain
  call kept root's network and IPC capabilities (net_admin, net_raw, net_bind_service, ipc_owner, ipc_lock,
  sys_nice, lease...; only those that could undo its mount namespace were dropped) and ran in the host's network
  and IPC namespaces. Measured through the real runner on toy/vowels (run `scored`): `ip addr add 127.0.0.99/32 dev
  lo` changed the host's loopback for good (still there after the run; `ip route del default` or `ip link set lo
  down` the same way would cut every concurrent and later run off its model, or its judge); an AF_PACKET socket read
  a host process's HTTP request to a loopback model server, its `Authorization: Bearer ...` key included; a SysV
  shared-memory segment it made stayed in the host's namespace after the run (a channel to any later process of the
  harness's user). Now a plain call keeps only root's file and own-process capabilities (`plainns.KEPT_CAPS`: every
  other one is dropped, so a capability a later kernel adds is too) and has an IPC namespace of its own (`unshare
  --ipc`): the address change and the packet socket are refused (EPERM), the segment goes with the call. The
  agent's own work is unchanged (Task 1.0), as are the bubblewrap and docker sandboxes (no capabilities at all).
- **A block device another run's mount made while a plain call ran** (class 4, `local-plain` as root, same class):
  a plain call saw the host's /dev (a devtmpfs) with the block devices present when it started covered by /dev/null,
  but a node the kernel made later was not: a concurrent run whose workspace mount found every loop device busy
  makes a new one (this machine grew loop8-loop10 that way under the helpers' test runs). Measured through the real
  runner: a plain call waiting for a loop device made during it (holding an image with a marker, standing for that
  run's workspace) read the marker and held the device open read-write (the other run's files, raw, to read or
  rewrite); /dev/loop-control (remove idle loop devices, so that the next mount must make a node), kvm, console and
  kmsg were open too. Now a plain call's /dev is a tmpfs of its own with only null, zero, full, random, urandom, tty,
  the GPUs' nodes and a devpts instance of its own (`plainns._own_dev`, bubblewrap's --dev set; the host's devpts
  held every terminal of the machine): the new device is not there (ENOENT), nor the rest; the classification and
  detection demos' reference runs on local-plain score as before (1.000, 0.996).

Tried and held (no test kept): a bubblewrap agent holding every inotify instance of root (127 made, EMFILE) leaves
a concurrent run's tripwire unarmed; that run records it as a gap (declared: "per-user kernel state is shared ...
(inotify limits ...)"), its score and verification unchanged (its references are not mounted). METEOR's JVM, kept
by the warm evaluator across runs, stays in step whatever the report holds (empty, NUL, BOM, 9000 words, lone
surrogates: the call fails and the JVM is dropped; nothing is written to its never-read stderr); the segmentation
case cache is keyed by the submission's path, which no two runs share.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import secrets
import shutil
import threading
import time
from pathlib import Path

import pytest
from automedbench.runfolder import RunFolder
from automedbench.sandboxes import local
from automedbench.testing import StepsAgent, register_agent, register_toy_track, run_task
from test_agent_bytes_runs import SOLVE, TASK

IPC_RMID = 0
LOOP_SET_FD, LOOP_CLR_FD, LOOP_CTL_ADD, LOOP_CTL_REMOVE = 0x4C00, 0x4C01, 0x4C80, 0x4C81
MARK = b"ANOTHER-RUNS-WORKSPACE-BYTES"
# root's capabilities a plain call may keep: chown, dac_override, fowner, fsetid, kill, setgid, setuid
KEPT = (0, 1, 3, 4, 5, 6, 7)

# what the plain call tries: each line "name: outcome", read back from its output
PROBE = r"""
import ctypes, socket
libc = ctypes.CDLL(None, use_errno=True)
status = open('/proc/self/status').read()
for field in ('CapEff', 'CapPrm', 'CapBnd'):
    print(field + ':', int(status.split(field + ':')[1].split()[0], 16))
def attempt(name, action):
    try:
        action()
        print(name + ': done')
    except OSError as exc:
        print(name + ': refused', exc.errno)
def so_mark():  # needs net_admin in the host's network namespace; changes nothing outside this socket
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, 36, 1)
def packet_socket():  # needs net_raw: reads every frame of the host's interfaces, loopback included
    socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3)).close()
attempt('so_mark', so_mark)
attempt('packet_socket', packet_socket)
print('shmget:', libc.shmget(KEY, 4096, 0o1600))
"""


def _host_segment(key: int) -> int:
    """The id of the host's SysV segment with `key`, or -1 (read from /proc/sysvipc/shm: key, then shmid)."""
    for line in Path("/proc/sysvipc/shm").read_text().splitlines()[1:]:
        fields = line.split()
        if fields and int(fields[0]) == key:
            return int(fields[1])
    return -1


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None or not local.pid_namespace_prefix()
                    or not Path("/proc/sysvipc/shm").exists(), reason="a local-plain run as root (unshare)")
def test_a_plain_call_keeps_no_capability_over_the_hosts_network_and_no_ipc_object_past_the_call(reg, data_root,
                                                                                                 tmp_path):
    """Before: CapEff held net_admin and net_raw, SO_MARK and the packet socket were allowed, and the segment was in
    the host's namespace after the run. Now only the kept capabilities remain, both are refused, no segment stays."""
    register_toy_track()
    register_agent(StepsAgent, reg)
    key = 0x27000000 | secrets.randbelow(1 << 24)
    steps = [["python", PROBE.replace("KEY", str(key))], ["python", SOLVE]]
    try:
        result, run_dir = run_task(TASK, StepsAgent.name, out=tmp_path / "runs", data_root=data_root,
                                   sandbox="local-plain", agent_options={"steps": steps})
        left = _host_segment(key)
    finally:
        stale = _host_segment(key)
        if stale >= 0:  # a segment the call left in the host's namespace: removed, whatever the test says
            ctypes.CDLL(None, use_errno=True).shmctl(stale, IPC_RMID, None)
    call = next(e for e in RunFolder(run_dir).events() if e.get("type") == "tool" and e.get("name") == "execute_code")
    said = dict(line.split(": ", 1) for line in call["stdout"].splitlines() if ": " in line)
    kept = sum(1 << cap for cap in KEPT)
    for field in ("CapEff", "CapPrm", "CapBnd"):
        assert int(said[field]) & ~kept == 0, (field, hex(int(said[field])))
    assert said["so_mark"] == "refused 1" and said["packet_socket"] == "refused 1", said
    assert int(said["shmget"]) >= 0  # the call may use SysV IPC among its own processes
    assert left == -1  # but its segment is not the host's
    assert result.state == "scored" and result.task.strict == 1.0  # the agent's own work runs as before



# waits (after saying so) for a loop device that did not exist when the call started, then reads and writes it raw
LOOP_PROBE = r"""
import os, pathlib, time
pathlib.Path(os.environ['WORKSPACE_DIR'], 'ready').write_text('1')
node, end = '/dev/loopINDEX', time.time() + 20
while time.time() < end and not os.path.exists(node):
    time.sleep(0.1)
try:
    with open(node, 'r+b') as device:
        print('read:', device.read(8192).strip(b'\0').decode(errors='replace'))
except OSError as exc:
    print('refused:', exc.errno)
for name in ('loop-control', 'kmsg', 'kvm', 'console', 'tty0'):
    try:
        os.close(os.open('/dev/' + name, os.O_RDWR)); print(name + ': opened')
    except OSError:
        pass
with open('/dev/null', 'w') as null:  # the nodes a call needs still work
    print('null: written', null.write('x'))
import pty
print('pty:', os.ttyname(pty.openpty()[1]))
"""


def _new_loop_device(image: Path, runs: Path, index: int, made: list[int]) -> None:
    """Once the plain call is waiting: a new loop device (as a concurrent run's workspace mount makes one when every
    loop device is busy) holding `image`."""
    end = time.monotonic() + 120
    while time.monotonic() < end and not any(runs.glob("*/workspace/ready")):
        time.sleep(0.05)
    control = os.open("/dev/loop-control", os.O_RDWR)
    try:
        fcntl.ioctl(control, LOOP_CTL_ADD, index)
        made.append(index)
    finally:
        os.close(control)
    for _ in range(100):  # udev-less devtmpfs: the node shows at once, but give it a moment
        if os.path.exists(f"/dev/loop{index}"):
            break
        time.sleep(0.02)
    device, backing = os.open(f"/dev/loop{index}", os.O_RDWR), os.open(image, os.O_RDWR)
    try:
        fcntl.ioctl(device, LOOP_SET_FD, backing)
    finally:
        os.close(backing)
        os.close(device)


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None or not local.pid_namespace_prefix()
                    or not Path("/dev/loop-control").exists(), reason="a local-plain run as root, loop devices")
def test_a_plain_call_sees_no_block_device_the_host_makes_while_it_runs(reg, data_root, tmp_path):
    """Before: the loop device made during the call was readable (its bytes printed) and open read-write, and so
    were /dev/loop-control, kmsg, kvm. Now the call's /dev holds none of them; /dev/null still works."""
    register_toy_track()
    register_agent(StepsAgent, reg)
    index = next(i for i in range(200 + secrets.randbelow(300), 1 << 20) if not os.path.exists(f"/dev/loop{i}"))
    image = tmp_path / "other-run.img"
    image.write_bytes(b"\0" * 4096 + MARK + b"\0" * (1 << 16))
    runs, made = tmp_path / "runs", []
    host = threading.Thread(target=_new_loop_device, args=(image, runs, index, made), daemon=True)
    host.start()
    try:
        result, run_dir = run_task(TASK, StepsAgent.name, out=runs, data_root=data_root, sandbox="local-plain",
                                   agent_options={"steps": [["python", LOOP_PROBE.replace("INDEX", str(index))],
                                                            ["python", SOLVE]]})
        host.join(30)
    finally:
        if made:
            with contextlib.suppress(OSError):
                device = os.open(f"/dev/loop{index}", os.O_RDWR)
                with contextlib.suppress(OSError):
                    fcntl.ioctl(device, LOOP_CLR_FD, 0)
                os.close(device)
            control = os.open("/dev/loop-control", os.O_RDWR)
            with contextlib.suppress(OSError):
                fcntl.ioctl(control, LOOP_CTL_REMOVE, index)
            os.close(control)
    call = next(e for e in RunFolder(run_dir).events() if e.get("type") == "tool" and e.get("name") == "execute_code")
    assert made == [index]  # the host did make the device while the call waited
    said = call["stdout"]
    assert MARK.decode() not in said and "refused: 2" in said, said
    assert "opened" not in said and "null: written 1" in said, said
    assert "pty: /dev/pts/" in said, said  # pseudo-terminals of its own
    assert result.state == "scored" and result.task.strict == 1.0
