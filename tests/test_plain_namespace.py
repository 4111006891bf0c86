"""Trust levels share nothing (issue 35, class 4): a local-plain call never sees what a verified run relies on.

One local-plain run through the real runner whose agent tries, call by call, every way we know to reach the
harness key, the signed state or another run (read the key, write the cache or the ledger, write beside its
run, into the data root or the harness's code, talk to the docker engine, read the disk's block device, undo
the namespace with mount/umount/a user namespace, leave its memory cgroup, write sysctls, make a device node);
each must fail, while the agent's own work in its workspace still runs. Then: a bind mount showing the state
folder a second time is covered too, and where no namespace can be made a plain run is refused with one line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from automedbench.errors import UserError
from automedbench.harnessstate import ensure_state_dir, harness_key, state_dir
from automedbench.runfolder import RunFolder
from automedbench.sandboxes import local, plainns
from automedbench.testing import StepsAgent, register_agent, register_toy_track, run_task
from test_agent_bytes_runs import SOLVE, TASK

PROBES = {
    "read the key": "od {state}/harness.key",
    "list the state folder": "ls -A {state} | grep .",
    "write the grade cache": "echo forged >> {state}/grade_cache.jsonl",
    "write the ledger": "echo '[]' > {state}/reservations.json",
    "plant a result beside the run": "mkdir -p {runs}/forged && echo '{{}}' > {runs}/forged/result.json",
    "write the data root": "echo x > {data}/planted",
    "write the harness's code": "echo 'x = 1' >> {code}",
    "write the host /tmp": "echo x > /tmp/amb-plain-probe-{token}",
    "talk to the docker engine": "python3 -c \"import socket; s = socket.socket(socket.AF_UNIX); "
                                 "s.connect('/run/docker.sock'); s.sendall(b'GET /info HTTP/1.0\\r\\n\\r\\n'); "
                                 "print(s.recv(100))\"",
    "read the block device": "python3 -c \"import os, sys; d = [p for p in os.listdir('/dev') if p[:2] in "
                             "('sd', 'vd', 'nv', 'xv') and not p[-1:].isdigit()]; "
                             "sys.exit(0 if any(open('/dev/' + p, 'rb').read(512).strip(b'\\0') for p in d) else 1)\"",
    "unmount the cover": "umount {state}",
    "remount read-write": "mount -o remount,rw /",
    "a user namespace of its own": "unshare -Urm sh -c 'umount {state} && ls -A {state} | grep .'",
    "leave the memory cgroup": "for f in /sys/fs/cgroup/memory/cgroup.procs /sys/fs/cgroup/cgroup.procs; do "
                               "[ -e $f ] && echo $$ > $f && exit 0; done; exit 1",
    "write a sysctl": "echo '|/bin/sh -c id' > /proc/sys/kernel/core_pattern",
    "make a device node": "mknod $WORKSPACE_DIR/disk b 8 0 && head -c 1 $WORKSPACE_DIR/disk",
    "see the harness's processes": "ps -e -o pid=,comm= | grep -v -e ps -e bash -e grep -e python -e sh | grep .",
}


@pytest.fixture(scope="module")
def probed(reg, data_root, tmp_path_factory):
    register_toy_track()
    register_agent(StepsAgent, reg)
    harness_key()  # the key exists before the run, as after any earlier run
    out = tmp_path_factory.mktemp("plain") / "runs"
    out.mkdir()
    context = {"state": state_dir(), "runs": out, "data": data_root, "code": Path(plainns.__file__).parent /
               "__init__.py", "token": os.urandom(4).hex()}
    steps = [["bash", cmd.format(**context)] for cmd in PROBES.values()]
    steps.append(["python", SOLVE])
    steps.append(["bash", "mkdir -p sub && cd sub && echo ok > here.txt && cat here.txt"])  # relative paths work
    result, run_dir = run_task(TASK, StepsAgent.name, out=out, data_root=data_root, sandbox="local-plain",
                               agent_options={"steps": steps})
    calls = [e for e in RunFolder(run_dir).events() if e.get("type") == "tool" and e.get("name") == "execute_code"]
    return result, dict(zip([*PROBES, "solve", "relative"], calls, strict=True)), context


@pytest.mark.slow  # one run of 19 calls, each in its namespace
def test_every_probe_fails_and_the_work_still_runs(probed):
    result, calls, context = probed
    reached = {name: call["stdout"][-300:] for name, call in calls.items()
               if name in PROBES and call["exit_code"] == 0}
    assert not reached, reached
    assert result.state == "scored" and result.task.strict == 1.0  # the agent's own work is untouched
    assert calls["relative"]["stdout"].strip() == "ok"
    assert not (context["runs"] / "forged").exists() and not (context["data"] / "planted").exists()
    assert "x = 1" not in context["code"].read_text()
    assert not Path(f"/tmp/amb-plain-probe-{context['token']}").exists()
    assert calls["read the key"]["stdout"].strip() == "" and calls["list the state folder"]["stdout"].strip() == ""


def test_a_second_mount_of_the_state_folder_is_covered_too(tmp_path):
    """A bind mount of a folder above the state folder shows it at a second path: that one is covered too."""
    if os.geteuid() != 0 or not local.pid_namespace_prefix():
        pytest.skip("needs root and unshare")
    ensure_state_dir()
    harness_key()
    alias, ws = tmp_path / "alias", tmp_path / "ws"
    alias.mkdir()
    ws.mkdir()
    spec = json.dumps({"workspace": str(ws), "hide": [str(state_dir())], "real_root": True})
    script = (f"mount --bind {state_dir().parent} {alias} && "
              f"unshare --pid --fork --kill-child --mount-proc -- {sys.executable} -I -S {plainns.__file__} "
              f"'{spec}' -- sh -c 'ls -A {alias / state_dir().name}; ls -A {state_dir()}'")
    seen = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
                          capture_output=True, text=True, timeout=60)
    assert seen.returncode == 0, seen.stderr
    assert seen.stdout.strip() == "", seen.stdout  # both views empty: no key, no cache, no ledger


def test_where_no_namespace_can_be_made_a_plain_run_is_refused(reg, data_root, tmp_path, monkeypatch):
    """Without unshare (or without root and user namespaces) nothing could keep the key from a plain call: the
    run is refused in one line before anything ran, its folder never made (before: it ran, and the key was
    replaced after its agent had it)."""
    register_toy_track()
    monkeypatch.setattr(local, "pid_namespace_prefix", lambda: ())
    local.plain_namespace_unsupported.cache_clear()
    try:
        with pytest.raises(UserError, match="local-plain refused") as refused:
            run_task(TASK, "reference", out=tmp_path / "runs", data_root=data_root, sandbox="local-plain")
    finally:
        local.plain_namespace_unsupported.cache_clear()
    assert "\n" not in str(refused.value) and not any((tmp_path / "runs").glob("*/result.json"))


def test_the_socket_walk_finds_sockets_only_within_its_depth_and_follows_no_link():
    """The walk that decides which daemon sockets a plain call covers: every socket within the depth, in any
    folder, none through a link, and the regular files, links and FIFOs around them skipped (typed by the
    listing; only the rest is stat'ed)."""
    import shutil
    import socket
    import stat
    import tempfile

    from automedbench.sandboxes.plainns import _nodes

    def _sockets(root: str, depth: int, budget: int) -> list[str]:
        return _nodes(root, depth, stat.S_ISSOCK, budget)

    tmp_path = Path(tempfile.mkdtemp(prefix="sw", dir="/tmp"))  # a unix socket's path must stay under 108 bytes

    def listen(path: Path) -> socket.socket:
        path.parent.mkdir(parents=True, exist_ok=True)
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(path))
        return sock

    held = [listen(tmp_path / "a.sock"), listen(tmp_path / "d1" / "b.sock"), listen(tmp_path / "d1" / "d2" / "c.sock")]
    (tmp_path / "plain.txt").write_text("x")
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "link.sock").symlink_to(tmp_path / "a.sock")
    (tmp_path / "linkdir").symlink_to(tmp_path / "d1", target_is_directory=True)
    try:
        assert sorted(_sockets(str(tmp_path), 1, 1000)) == [str(tmp_path / "a.sock"), str(tmp_path / "d1" / "b.sock")]
        assert len(_sockets(str(tmp_path), 2, 1000)) == 3
        assert _sockets(str(tmp_path), 2, 1) != sorted(_sockets(str(tmp_path), 2, 1000))  # the budget holds
    finally:
        for sock in held:
            sock.close()
        shutil.rmtree(tmp_path)


def test_the_mount_table_is_read_once_for_every_hidden_folders_aliases(tmp_path, monkeypatch):
    """A host's every state folder is hidden in each plain call (321 on a machine of many checkouts): their aliases
    come from one reading of the mount table, not one each (~0.09 CPU-s a call), and each folder is still covered.
    `enter` runs here with its mounts, /dev, /run, capabilities and filter recorded or left out (no namespace)."""
    covered: list[tuple[str, str | None]] = []
    monkeypatch.setattr(plainns, "_mount", lambda source, target, fstype, flags, data=None: covered.append(
        (target, fstype)))
    for name in ("_own_dev", "_snapshot_run", "_drop_capabilities", "_load_filter"):
        monkeypatch.setattr(plainns, name, lambda *args: None)
    reads = []
    real = plainns.mountinfo
    monkeypatch.setattr(plainns, "mountinfo", lambda: reads.append(1) or real())
    here = os.getcwd()
    workspace = tmp_path / "ws"
    workspace.mkdir()
    for count in (3, 60):
        folders = [tmp_path / f"state-{count}-{i}" for i in range(count)]
        for folder in folders:
            folder.mkdir()
        reads.clear()
        covered.clear()
        plainns.enter({"workspace": str(workspace), "hide": [str(f) for f in folders]})
        os.chdir(here)
        # one read for the aliases, one for making every mount read-only: whatever the number of folders
        assert len(reads) == 2, (count, len(reads))
        assert {str(f) for f in folders} <= {target for target, fstype in covered if fstype == "tmpfs"}
    assert plainns.aliases(str(tmp_path), real()) == plainns.aliases(str(tmp_path))
