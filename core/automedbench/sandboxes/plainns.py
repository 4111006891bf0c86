"""What a `local-plain` call may still not touch: the harness's state, other runs, the harness's own code.

`local-plain` has no filesystem isolation (the agent reads the host's files, references included: declared,
every such run is unverified). It must still never see what a verified run relies on, or change what one
will read: the harness key and everything signed with it (the state folder), other runs' folders and the
data root, the harness's code. So each call starts in a mount namespace of its own (the PID namespace it
already had, `unshare --pid --fork --kill-child --mount-proc`, made a mount namespace too) where, before the
agent's code runs:

- the state folder is covered by an empty read-only tmpfs (so are Ray's session folder and every unix socket
  under /run and /tmp: the docker engine's, containerd's, Ray's; a daemon reached through one runs outside
  this namespace);
- /run shows only what was in it when the call started (a tmpfs with each entry bound back, container engines'
  folders empty): a socket a daemon makes there later (dockerd's /run/docker.sock, started while a plain run
  ran) is not reachable;
- /dev is a tmpfs of its own holding only the host's null, zero, full, random, urandom, tty and the GPUs' nodes
  (`_own_dev`, bubblewrap's set), a devpts instance and a fresh /dev/shm of its own: no block device, raw memory,
  console or terminal of the host, and none the host makes later (the host's /dev showed every block device
  made after the call started: a concurrent run's workspace image, as a new loop device, was read and writable
  raw; covering the nodes present at the start missed it);
- every mount is remounted read-only except the workspace (writes go there only; TMPDIR points into it),
  /dev/shm, /dev/pts and /proc (whose /proc/sys and sysrq-trigger are read-only);
- every capability but the few a root process uses on files and its own processes (KEPT_CAPS) is dropped from
  every set and the bounding set, so neither the agent nor anything it runs (set-uid programs included) gets one
  back: those that could undo any of this (mount, new device nodes, handle-based opens that bypass mounts, raw I/O,
  module loading, ptrace, ...) and those that reach kernel state the call shares with the host and every other
  run (the network namespace: net_admin changed the host's addresses and routes for good, net_raw read another
  process's loopback traffic; realtime priority, file leases, audit);
- SysV IPC is the call's own (`unshare --ipc`, local.pid_namespace_prefix): a segment, queue or semaphore it makes
  goes with it instead of staying in the host's namespace, readable by any later process of the harness's user;
- no new namespace can be made (a seccomp filter, SPEC's "seccomp", with no_new_privs; x86_64) and no chroot:
  a plain call keeps the harness's root folder, which is how a model gateway tells it from another run's
  sandbox (a plain agent that reached a concurrent run's gateway socket was served on that run's key and
  budget), and gets no capabilities back in a user namespace either.

Run as `python -I -S plainns.py SPEC -- COMMAND...` inside `unshare`; SPEC is JSON: {"workspace", "hide": [...],
"shm_mb", "seccomp", "keyctl" (the keyctl call's number: a fresh session keyring is joined first, or the call is
refused: `KEYRING_REFUSED`)}. It imports only the standard library (the harness package is not on its path) and
the harness's `libc.py` by its file (itself standard library only), so the C library is found one way everywhere.
Where this cannot be done (no unshare, no root and no user namespaces), `local-plain` is refused with one line.
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import functools
import importlib.util
import json
import os
import stat
import sys
from collections.abc import Callable

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_REC = 32, 1024, 2048, 4096, 16384
MS_RELATIME, MS_STRICTATIME = 1 << 21, 1 << 24
FLAG_OPTIONS = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC, "noatime": MS_NOATIME,
                "nodiratime": MS_NODIRATIME, "relatime": MS_RELATIME}
PR_CAPBSET_DROP, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 24, 47, 4
PR_SET_SECCOMP, SECCOMP_MODE_FILTER, PR_SET_NO_NEW_PRIVS = 22, 2, 38
# What a plain call keeps of root's capabilities: chown, dac_override, fowner, fsetid, kill, setgid, setuid (files
# and its own processes; its PID namespace shows no other). Every other one is dropped (up to 63: one this kernel does
# not know is skipped), so a capability a later kernel adds is dropped too. Among them dac_read_search
# (open_by_handle_at), sys_chroot (a root of its own: a model gateway would take the call for a sandbox's),
# sys_admin (mount, setns), mknod, sys_ptrace, sys_module, sys_rawio; and the network ones: the call shares the
# host's network namespace, where net_admin changes addresses, routes and firewall rules for the host and every
# run after it, net_raw reads any process's traffic (a bearer key sent to a local model server), net_bind_service
# takes the host's privileged ports; sys_nice (realtime priority over the host's CPUs), lease, ipc_lock, audit.
KEPT_CAPS = (0, 1, 3, 4, 5, 6, 7)
DROPPED_CAPS = tuple(cap for cap in range(64) if cap not in KEPT_CAPS)
LINUX_CAPABILITY_VERSION_3 = 0x20080522
SYS_CAPGET = {"x86_64": 125, "aarch64": 90}
SYS_CAPSET = {"x86_64": 126, "aarch64": 91}
SOCKET_ROOTS = (("/run", 8, 20_000), ("/tmp", 6, 50_000))
HIDDEN_DIRS = ("/tmp/ray",)  # a local Ray cluster's session (sockets, logs, the token it may hold)
DEV = "/dev"
# What a call's own /dev holds of the host's (bubblewrap's --dev set, and the GPUs as before): character devices by
# name or prefix, folders bound whole, links made again; nothing else (block devices, mem, loop-control, kvm, ...).
# Its pseudo-terminals are a devpts instance of its own (the host's held every terminal of the machine: root writes
# to any by mode alone), reached through /dev/ptmx -> pts/ptmx as bubblewrap does.
DEV_NODES = ("null", "zero", "full", "random", "urandom", "tty", "kfd")
DEV_PREFIXES = ("nvidia",)
DEV_DIRS = ("nvidia-caps", "dri")
DEV_LINKS = (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
             ("stderr", "/proc/self/fd/2"), ("ptmx", "pts/ptmx"))
SKIP_RO = ("/proc", "/dev/pts", "/dev/shm")
RUN = "/run"
ENGINE_DIRS = ("docker", "containerd", "podman", "crio", "buildkit", "ray")  # shown empty under RUN

KEYCTL_JOIN_SESSION_KEYRING = 1


# The first words of the line a call refused for want of a fresh session keyring prints (`local` ends the run on it).
KEYRING_REFUSED = "automedbench: the call got no fresh session keyring"


def keyring_refusal(why: str) -> str:
    """The line a call refused for want of a fresh session keyring prints (here, and in `local`'s preexec)."""
    return f"{KEYRING_REFUSED} ({why}; the user's key quota may be full); the call did not run"


class Refused(RuntimeError):
    """The namespace could not be made as required: the call must not run."""


@functools.cache
def _c() -> ctypes.CDLL:
    """The C library as `automedbench.libc` finds it: imported from the package, or loaded from its file when this
    runs as a script (`python -I -S`, the package not on the path); refused where none is found."""
    if __package__:
        from ..libc import libc
    else:
        where = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "libc.py")
        spec = importlib.util.spec_from_file_location("automedbench_libc", where)
        if spec is None or spec.loader is None:
            raise Refused(f"cannot load {where}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        libc = module.libc
    found = libc()
    if found is None:
        raise Refused("no C library found (mount, prctl and syscall are needed)")
    return found


class KeyringRefused(Refused):
    """No fresh session keyring could be joined (EDQUOT: the user's key quota, which an earlier call of an agent may
    have filled): run on, the call would keep the harness's keyring and every key it links."""


def _enc(text: str | None) -> bytes | None:
    return None if text is None else os.fsencode(text)


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    if _c().mount(_enc(source), _enc(target), _enc(fstype), ctypes.c_ulong(flags), _enc(data)) != 0:
        err = ctypes.get_errno()
        raise Refused(f"mount {target}: {os.strerror(err)}")


def decode_path(field: str) -> str:
    """A mountinfo path: octal escapes (space, tab, newline, backslash) decoded."""
    out, i, raw = bytearray(), 0, field.encode("utf-8", "surrogateescape")
    while i < len(raw):
        if raw[i:i + 1] == b"\\" and raw[i + 1:i + 4].isdigit():
            out.append(int(raw[i + 1:i + 4], 8))
            i += 4
        else:
            out.append(raw[i])
            i += 1
    return os.fsdecode(bytes(out))


def mountinfo() -> list[tuple[str, str, str, int]]:
    """(device, root within its filesystem, mount point, flags to keep: nosuid/nodev/noexec and the atime
    mode) of every mount, in order."""
    found = []
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as handle:
        for line in handle:
            fields = line.split(" ")
            if len(fields) < 6:
                continue
            flags = 0
            for name in fields[5].split(","):
                flags |= FLAG_OPTIONS.get(name, 0)
            if not flags & (MS_NOATIME | MS_RELATIME):
                flags |= MS_STRICTATIME
            found.append((fields[2], decode_path(fields[3]), decode_path(fields[4]), flags))
    return found


def mounts() -> list[tuple[str, int]]:
    """(mount point, flags to keep) of every mount, in order."""
    return [(point, flags) for _, _, point, flags in mountinfo()]


def aliases(path: str, table: list[tuple[str, str, str, int]] | None = None) -> list[str]:
    """Every path at which the folder `path` is visible: itself, and the same place of its filesystem under
    any other mount of that filesystem (a bind mount of a parent folder shows it a second time). `table`: the
    mount table (`mountinfo()`) when the caller read it already."""
    table = mountinfo() if table is None else table
    home = max((m for m in table if _under(path, [m[2]])), key=lambda m: len(m[2]), default=None)
    if home is None:
        return [path]
    device, root, point = home[0], home[1], home[2]
    inside = os.path.join(root, os.path.relpath(path, point)) if path != point else root
    found = [path]
    for dev, other_root, other_point, _ in table:
        if dev == device and _under(inside, [other_root]):
            alias = os.path.normpath(os.path.join(other_point, os.path.relpath(inside, other_root)))
            if alias not in found and os.path.lexists(alias):
                found.append(alias)
    return found


def _under(path: str, roots: list[str]) -> bool:
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


def _nodes(root: str, depth: int, kind: Callable[[int], bool], budget: int | None = None,
           skip: tuple[str, ...] = ()) -> list[str]:
    """Files of one type (`kind`: a `stat.S_IS*` test) below `root`, not following links, breadth first, `depth`
    levels down, at most `budget` entries looked at; folders in `skip` not entered. An entry the directory listing
    types as a regular file, a link or a folder needs no stat call of its own (most of a busy /tmp: a stat per
    entry made each plain call cost up to 0.3 CPU-s)."""
    found, queue, seen = [], collections.deque([(root, 0)]), 0
    while queue and (budget is None or seen < budget):
        folder, level = queue.popleft()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            seen += 1
            try:
                if entry.is_dir(follow_symlinks=False):
                    if level < depth and entry.path not in skip:
                        queue.append((entry.path, level + 1))
                    continue
                if entry.is_file(follow_symlinks=False) or entry.is_symlink():
                    continue
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if kind(info.st_mode):
                found.append(entry.path)
    return found


def _cover_file(path: str) -> None:
    _mount("/dev/null", path, None, MS_BIND)
    _mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NOEXEC)


def _cover_dir(path: str) -> None:
    _mount("tmpfs", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=0555")


def _hide(path: str) -> None:
    """An empty read-only folder or /dev/null over `path`; refused if it cannot be covered."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(info.st_mode):
        _cover_dir(path)
    elif not stat.S_ISLNK(info.st_mode):
        _cover_file(path)


def _snapshot_run(workspace: str) -> None:
    """RUN replaced by a tmpfs holding what it held now: folders and files bound back (with what is mounted or
    covered in them), links made again, sockets and container engines' folders left out. A daemon started later
    makes its socket in the host's RUN, which this namespace no longer shows."""
    if not os.path.isdir(RUN) or os.path.islink(RUN) or _under(RUN, [workspace]):
        return
    old = os.open(RUN, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        entries = [(e.name, e.stat(follow_symlinks=False)) for e in os.scandir(old)]
        _mount("tmpfs", RUN, "tmpfs", MS_NOSUID | MS_NODEV, f"size=64k,mode={stat.S_IMODE(os.fstat(old).st_mode):o}")
        for name, info in entries:
            source, target = f"/proc/self/fd/{old}/{name}", os.path.join(RUN, name)
            if stat.S_ISLNK(info.st_mode):
                os.symlink(os.readlink(source), target)
            elif stat.S_ISDIR(info.st_mode):
                os.mkdir(target, stat.S_IMODE(info.st_mode))
                if name not in ENGINE_DIRS:
                    _mount(source, target, None, MS_BIND | MS_REC)
            elif stat.S_ISREG(info.st_mode):
                os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
                _mount(source, target, None, MS_BIND)
    finally:
        os.close(old)


def _own_dev(shm_mb: int) -> None:
    """DEV replaced by a tmpfs holding the allowed nodes and folders of the host's (bound back) and a fresh shm.

    A tmpfs, not the host's devtmpfs, so that a node the kernel makes later (a loop device another run's mount
    attaches its workspace image to) never appears here; root opens any node by its mode alone."""
    if not os.path.isdir(DEV) or os.path.islink(DEV):
        raise Refused(f"{DEV} is not a folder")
    old = os.open(DEV, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        entries = [(e.name, e.stat(follow_symlinks=False)) for e in os.scandir(old)]
        _mount("tmpfs", DEV, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=0755")
        for name, info in entries:
            source, target = f"/proc/self/fd/{old}/{name}", os.path.join(DEV, name)
            if stat.S_ISCHR(info.st_mode) and (name in DEV_NODES or name.startswith(DEV_PREFIXES)):
                os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
                _mount(source, target, None, MS_BIND)
            elif stat.S_ISDIR(info.st_mode) and name in DEV_DIRS:
                os.mkdir(target, 0o755)
                _mount(source, target, None, MS_BIND | MS_REC)
    finally:
        os.close(old)
    for name, link in DEV_LINKS:
        os.symlink(link, os.path.join(DEV, name))
    pts = os.path.join(DEV, "pts")
    os.mkdir(pts)
    _mount("devpts", pts, "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=620")
    shm = os.path.join(DEV, "shm")
    os.mkdir(shm)
    _mount("tmpfs", shm, "tmpfs", MS_NOSUID | MS_NODEV, f"size={shm_mb}m,mode=1777")


def _read_only(keep_rw: list[str]) -> None:
    """Every mount remounted read-only (keeping its nosuid/nodev/noexec and atime flags, which a user namespace
    locks), except those at or under `keep_rw` and SKIP_RO; /proc/sys and sysrq-trigger made read-only."""
    for point, flags in mounts():
        if _under(point, keep_rw) or _under(point, list(SKIP_RO)):
            continue
        try:
            _mount(None, point, None, MS_REMOUNT | MS_BIND | MS_RDONLY | flags)
        except Refused:
            if os.path.exists(point):  # a mount we can reach and cannot make read-only: not safe to go on
                raise
    for path in ("/proc/sys", "/proc/sysrq-trigger"):
        if os.path.exists(path):
            _mount(path, path, None, MS_BIND | MS_REC)
            _mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)


def _drop_capabilities() -> None:
    import platform

    for cap in DROPPED_CAPS:
        if _c().prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() != 22:  # EINVAL: unknown here
            raise Refused(f"cannot drop capability {cap}: {os.strerror(ctypes.get_errno())}")
    _c().prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    machine = platform.machine()
    if machine not in SYS_CAPGET:
        raise Refused(f"no capset call known for {machine}")
    header = (ctypes.c_uint32 * 2)(LINUX_CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()
    if _c().syscall(SYS_CAPGET[machine], header, data) != 0:
        raise Refused(f"capget: {os.strerror(ctypes.get_errno())}")
    mask = [0, 0]
    for cap in DROPPED_CAPS:
        mask[cap // 32] |= 1 << (cap % 32)
    for word in range(2):  # data[word] = {effective, permitted, inheritable}
        for field in range(3):
            data[word * 3 + field] &= ~mask[word] & 0xFFFFFFFF
    if _c().syscall(SYS_CAPSET[machine], header, data) != 0:
        raise Refused(f"capset: {os.strerror(ctypes.get_errno())}")


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _load_filter(program: bytes) -> None:
    """Install a seccomp filter (an array of 8-byte `struct sock_filter`) on this process and all it starts."""
    if not program or len(program) % 8:
        raise Refused("a seccomp program is a non-empty array of 8-byte instructions")
    code = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.addressof(code))
    if _c().prctl(PR_SET_NO_NEW_PRIVS, ctypes.c_ulong(1), ctypes.c_ulong(0), ctypes.c_ulong(0),
                   ctypes.c_ulong(0)) != 0:
        raise Refused(f"no_new_privs: {os.strerror(ctypes.get_errno())}")
    if _c().prctl(PR_SET_SECCOMP, ctypes.c_ulong(SECCOMP_MODE_FILTER), ctypes.byref(fprog), ctypes.c_ulong(0),
                   ctypes.c_ulong(0)) != 0:
        raise Refused(f"seccomp filter: {os.strerror(ctypes.get_errno())}")


def enter(spec: dict) -> None:
    """Make this (new) mount namespace what a plain call may see, then drop what could undo it."""
    _c()  # found (its file read) before any mount covers anything
    # a fresh, empty session keyring: the harness's (and the keys it links) stays behind
    if spec.get("keyctl") and _c().syscall(int(spec["keyctl"]), KEYCTL_JOIN_SESSION_KEYRING, None) < 0:
        raise KeyringRefused(os.strerror(ctypes.get_errno()))
    here = os.getcwd()  # the call's working folder (the workspace), entered again once its mount exists
    workspace = os.path.realpath(spec["workspace"])
    _mount(workspace, workspace, None, MS_BIND | MS_REC)  # its own mount: stays writable below read-only parents
    _own_dev(int(spec.get("shm_mb", 64)))
    # the mount table read once for every folder's aliases (nothing is mounted until all are known): read and
    # decoded again per folder, a host's every state folder (321 on a machine of many checkouts) took ~0.09 of a
    # plain call's 0.16 CPU-s
    table = mountinfo()
    hidden = [a for p in spec.get("hide", []) for a in aliases(os.path.realpath(p), table)]
    hidden += [p for p in HIDDEN_DIRS if os.path.isdir(p)]
    for path in hidden:
        if not _under(workspace, [path]):
            _hide(path)
    for root, depth, budget in SOCKET_ROOTS:
        for sock in _nodes(root, depth, stat.S_ISSOCK, budget):
            if not _under(sock, [workspace, *hidden]):
                with contextlib.suppress(Refused):  # gone since the walk saw it
                    _cover_file(sock)
    _snapshot_run(workspace)
    _read_only([workspace])
    os.chdir(here)  # the old working folder is on the parent mount, read-only now; the path reaches the new one
    _drop_capabilities()
    if spec.get("seccomp"):
        _load_filter(bytes.fromhex(spec["seccomp"]))


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        print("usage: plainns.py SPEC -- COMMAND...", file=sys.stderr)
        return 125
    try:
        enter(json.loads(argv[1]))
    except KeyringRefused as exc:
        print(keyring_refusal(str(exc)), file=sys.stderr)
        return 125
    except (Refused, OSError, ValueError, KeyError) as exc:
        print(f"automedbench: the call's namespace could not be made safe ({exc}); the call did not run",
              file=sys.stderr)
        return 125
    os.execvp(argv[3], argv[3:])
    return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv))
