"""A seccomp filter for the bubblewrap sandbox, modelled on docker's default profile, as a raw BPF program.

`pyseccomp` installs, but it is ctypes over the system's libseccomp.so.2, which slim hosts and images
lack; the program is small enough to assemble here (about 130 instructions, checked by a BPF interpreter
in the tests), x86_64 only (elsewhere no filter is loaded and the gap is declared). It refuses what
docker's default refuses (kernel keyrings, mounts, new namespaces, module loading, clock and reboot calls,
io_uring, bpf, perf, handle-based opens) and turns
advisory locks (`flock`, `fcntl` F_SETLK/F_OFD_SETLK and their waiting forms) into no-ops that succeed:
lock owners are shared across the sandbox boundary (a public file's inode is the same in every run), so a
real lock would be a channel between runs, while a refused one would break pip and sqlite.
"""

from __future__ import annotations

import os
import platform
import struct

# seccomp_data: nr (u32), arch (u32), instruction pointer (u64), args[6] (u64 each)
_NR, _ARCH, _ARG0, _ARG1 = 0, 4, 16, 24
_LD_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
RET_ALLOW, RET_ERRNO, RET_KILL_PROCESS = 0x7FFF0000, 0x00050000, 0x80000000
EPERM, ENOSYS = 1, 38
AUDIT_ARCH_X86_64 = 0xC000003E
X32_SYSCALL_BIT = 0x40000000
# namespace flags of clone(2): a new namespace inside the sandbox is refused, as docker refuses it
CLONE_NEW = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
LOCK_SET_COMMANDS = (6, 7, 37, 38)  # F_SETLK, F_SETLKW, F_OFD_SETLK, F_OFD_SETLKW

# x86_64 numbers of the refused calls (docker's default profile, the parts that apply without capabilities)
X86_64_DENIED = {
    "uselib": 134, "ustat": 136, "sysfs": 139, "vhangup": 153, "pivot_root": 155, "_sysctl": 156,
    "acct": 163, "settimeofday": 164, "mount": 165, "umount2": 166, "swapon": 167, "swapoff": 168,
    "reboot": 169, "iopl": 172, "ioperm": 173, "create_module": 174, "init_module": 175, "delete_module": 176,
    "get_kernel_syms": 177, "query_module": 178, "quotactl": 179, "nfsservctl": 180, "lookup_dcookie": 212,
    "clock_settime": 227, "kexec_load": 246, "add_key": 248, "request_key": 249, "keyctl": 250,
    "unshare": 272, "perf_event_open": 298, "fanotify_init": 300, "name_to_handle_at": 303,
    "open_by_handle_at": 304, "clock_adjtime": 305, "setns": 308, "kcmp": 312, "finit_module": 313,
    "kexec_file_load": 320, "bpf": 321, "userfaultfd": 323, "io_uring_setup": 425, "io_uring_enter": 426,
    "io_uring_register": 427, "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431,
    "fsmount": 432, "fspick": 433, "mount_setattr": 442, "quotactl_fd": 443, "syslog": 103,
}
X86_64 = {"clone": 56, "clone3": 435, "flock": 73, "fcntl": 72}
KEYRING_CALLS = (X86_64_DENIED["add_key"], X86_64_DENIED["request_key"], X86_64_DENIED["keyctl"])


def _ins(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("<HBBI", code, jt, jf, k)


def supported() -> str | None:
    """Why no filter can be loaded here, or None."""
    machine = platform.machine()
    return None if machine == "x86_64" else f"no seccomp program for {machine} (x86_64 only)"


def _prologue() -> list[bytes]:
    """x86_64 only (another architecture's call is killed), the call number loaded, the x32 ABI refused (another
    number space)."""
    return [_ins(_LD_ABS, _ARCH), _ins(_JEQ, AUDIT_ARCH_X86_64, 1, 0), _ins(_RET, RET_KILL_PROCESS),
            _ins(_LD_ABS, _NR), _ins(_JGE, X32_SYSCALL_BIT, 0, 1), _ins(_RET, RET_ERRNO | EPERM)]


def program() -> bytes:
    """The filter as bwrap's --seccomp expects it: an array of `struct sock_filter`."""
    out = _prologue()
    for nr in sorted(X86_64_DENIED.values()):
        out += [_ins(_JEQ, nr, 0, 1), _ins(_RET, RET_ERRNO | EPERM)]
    # clone3 passes its flags in memory a filter cannot read: ENOSYS makes libc fall back to clone(2)
    out += [_ins(_JEQ, X86_64["clone3"], 0, 1), _ins(_RET, RET_ERRNO | ENOSYS)]
    out += [_ins(_JEQ, X86_64["flock"], 0, 1), _ins(_RET, RET_ERRNO | 0)]  # errno 0: "succeeds", does nothing
    out += [_ins(_JEQ, X86_64["clone"], 0, 4), _ins(_LD_ABS, _ARG0), _ins(_JSET, CLONE_NEW, 0, 1),
            _ins(_RET, RET_ERRNO | EPERM), _ins(_RET, RET_ALLOW)]
    n = len(LOCK_SET_COMMANDS)
    out += [_ins(_JEQ, X86_64["fcntl"], 0, n + 3), _ins(_LD_ABS, _ARG1)]
    out += [_ins(_JEQ, cmd, n - i, 0) for i, cmd in enumerate(LOCK_SET_COMMANDS)]
    out += [_ins(_RET, RET_ALLOW), _ins(_RET, RET_ERRNO | 0)]
    out.append(_ins(_RET, RET_ALLOW))
    return b"".join(out)


def namespace_program() -> bytes:
    """A filter that refuses new namespaces (unshare, setns, clone with a CLONE_NEW* flag; clone3 ENOSYS) and the
    kernel's keyrings (add_key, request_key, keyctl): what a `local-plain` call loads (`plainns`), so that it cannot
    step into a network namespace of its own, where a model gateway would take it for another run's sandbox, nor
    make a user namespace to regain capabilities, nor leave keys in its user's keyring, which outlive the run: read
    by the next run's agent, or filling the key quota so that every later plain call of that user is refused."""
    out = _prologue()
    for nr in (X86_64_DENIED["unshare"], X86_64_DENIED["setns"], *KEYRING_CALLS):
        out += [_ins(_JEQ, nr, 0, 1), _ins(_RET, RET_ERRNO | EPERM)]
    out += [_ins(_JEQ, X86_64["clone3"], 0, 1), _ins(_RET, RET_ERRNO | ENOSYS)]
    out += [_ins(_JEQ, X86_64["clone"], 0, 3), _ins(_LD_ABS, _ARG0), _ins(_JSET, CLONE_NEW, 0, 1),
            _ins(_RET, RET_ERRNO | EPERM)]
    out.append(_ins(_RET, RET_ALLOW))
    return b"".join(out)


def program_fd() -> int:
    """A sealed-size memory file holding the program, positioned at its start (for bwrap --seccomp FD)."""
    fd = os.memfd_create("automedbench-seccomp", os.MFD_CLOEXEC)
    os.write(fd, program())
    os.lseek(fd, 0, os.SEEK_SET)
    return fd
