"""Every built-in sandbox backend against the conformance suite (`automedbench.testing.check_sandbox`).

`local` is bubblewrap, `local-plain` the unisolated fallback (its gaps are declared below and show as
expected failures with their reasons), `docker` skips when no engine answers. A declared gap that
starts passing fails the test, so the declarations stay true.
"""

from __future__ import annotations

import pytest
from automedbench.sandboxes.local import LocalSandbox, bwrap_path
from automedbench.testing import SANDBOX_CHECKS, check_sandbox, needs_docker

PLAIN_GAPS = {
    "private-hidden": "no filesystem isolation: the tripwire detects a read of private data, nothing prevents it",
    "host-paths-hidden": "no filesystem isolation: bound_sources() is the whole host",
    "network-off": "network not restricted",
    "keyring-closed": "no seccomp filter: the kernel keyrings are the host's",
    "advisory-locks-private": "no seccomp filter: a lock on a public file is held on the host",
}
GAPS: dict[str, dict[str, str]] = {"local": {}, "local-plain": PLAIN_GAPS, "docker": {
    "advisory-locks-private": "docker's default seccomp profile allows locks: a public file's lock is shared"}}


def _sandbox(backend: str):
    if backend == "docker":
        needs_docker()  # waits for a background image build; skips (or, where docker is required, fails)
        from automedbench_docker.sandbox import DockerSandbox

        return DockerSandbox()
    if backend == "local" and bwrap_path() is None:
        pytest.skip("bubblewrap (bwrap) not usable on this machine")
    return LocalSandbox("auto" if backend == "local" else "none")


@pytest.fixture(scope="module", params=[pytest.param(b, marks=pytest.mark.docker) if b == "docker" else b
                                        for b in GAPS])
def outcomes(request, tmp_path_factory):
    """The whole suite once per backend (one session, plus one for the cleanup check)."""
    backend = request.param
    sandbox = _sandbox(backend)
    results = check_sandbox(sandbox, tmp_path_factory.mktemp(f"conformance-{backend}"), track="segmentation")
    return backend, {r.id: r for r in results}


@pytest.mark.parametrize("check_id", list(SANDBOX_CHECKS))
def test_sandbox_conformance(outcomes, check_id):
    backend, results = outcomes
    result = results[check_id]
    gap = GAPS[backend].get(check_id)
    if gap:
        assert not result.passed, f"{backend} now passes {check_id}: remove the declared gap ({gap})"
        pytest.xfail(f"declared gap of {backend}: {gap} ({result.reason})")
    assert result.passed, f"{backend}: {check_id}: {result.reason}"


def test_plain_gaps_match_what_the_backend_declares(tmp_path):
    """local-plain's own `protections()` names the gaps this suite expects of it."""
    for sub in ("ws", "public"):
        (tmp_path / sub).mkdir()
    from automedbench.sandbox import SandboxSpec

    session = LocalSandbox("none").open(SandboxSpec(tmp_path / "ws", tmp_path / "public"))
    try:
        _, gaps = session.protections()
        assert any("no filesystem isolation" in g for g in gaps) and any("network" in g for g in gaps), gaps
        assert not session.isolates_filesystem
    finally:
        session.close()


def test_a_broken_backend_fails_the_suite(tmp_path):
    """The suite can fail: a backend that ignores timeouts and caps and leaks the environment is caught."""
    import os
    import subprocess

    from automedbench.records import ExecResult
    from automedbench.sandbox import Sandbox, SandboxSession

    class Leaky(SandboxSession):
        def __init__(self, spec):
            self.workspace_dir, self.data_dir = str(spec.workspace), str(spec.public)

        def execute(self, language, code, timeout_s):
            argv = ["python3", "-c", code] if language == "python" else ["bash", "-c", code]
            env = {**os.environ, "WORKSPACE_DIR": self.workspace_dir, "DATA_DIR": self.data_dir}
            done = subprocess.run(argv, capture_output=True, text=True, cwd=self.workspace_dir, env=env,
                                  timeout=120)
            return ExecResult(done.returncode, done.stdout, done.stderr, 0.0)

        def protections(self):
            return [], ["everything"]

    class LeakySandbox(Sandbox):
        name = "leaky"

        def available(self):
            return True, ""

        def open(self, spec):
            return Leaky(spec)

    results = {r.id: r for r in check_sandbox(LeakySandbox(), tmp_path, ["exec-round-trip", "output-cap",
                                                                          "environment-scrubbed"])}
    assert results["exec-round-trip"].passed
    assert not results["output-cap"].passed and "not reported as capped" in results["output-cap"].reason
    assert not results["environment-scrubbed"].passed


def test_only_the_given_gpus_nodes_are_bound(tmp_path):
    """No GPU here, so the conformance check above is vacuous: the node choice is checked on a fake /dev, and
    a real bubblewrap session with spec.gpus=["1"] shows only that node (bound from the fake /dev)."""
    from automedbench.sandboxes import local

    dev = tmp_path / "dev"
    dev.mkdir()
    for name in ("nvidia0", "nvidia1", "nvidia2", "nvidiactl", "nvidia-uvm", "nvidia-caps"):
        (dev / name).mkdir() if name == "nvidia-caps" else (dev / name).write_text("")
    chosen = [p.name for p in local.gpu_nodes(["1"], dev)]
    assert chosen == ["nvidia-uvm", "nvidia1", "nvidiactl", "nvidia-caps"]
    assert local.gpu_nodes([], dev) == []
    assert [p.name for p in local.gpu_nodes(["../../etc"], dev)] == ["nvidia-uvm", "nvidiactl", "nvidia-caps"]


def _run_bpf(program: bytes, nr: int, args: tuple[int, ...] = (), arch: int = 0xC000003E) -> int:
    """A classic-BPF interpreter for the instructions seccomp filters use: the action for one syscall."""
    import struct

    data = struct.pack("<iIQ6Q", nr, arch, 0, *(list(args) + [0] * (6 - len(args))))
    ins = [struct.unpack("<HBBI", program[i:i + 8]) for i in range(0, len(program), 8)]
    pc, acc = 0, 0
    for _ in range(len(ins)):
        code, jt, jf, k = ins[pc]
        if code == 0x20:  # ld word at absolute offset
            acc = struct.unpack_from("<I", data, k)[0]
            pc += 1
        elif code == 0x06:
            return k
        elif code in (0x15, 0x35, 0x45):
            hit = acc == k if code == 0x15 else acc >= k if code == 0x35 else bool(acc & k)
            pc += 1 + (jt if hit else jf)
        else:
            raise AssertionError(f"unexpected instruction {code:#x} at {pc}")
    raise AssertionError("the program ran off its end")


def test_the_seccomp_program_does_what_it_says():
    """The filter, interpreted instruction by instruction: refusals, no-op locks, and ordinary calls allowed."""
    from automedbench.sandboxes import seccomp

    prog = seccomp.program()
    allow, eperm, noop = 0x7FFF0000, 0x00050000 | 1, 0x00050000
    cases = {
        "read": (0, ()), "write": (1, ()), "openat": (257, ()), "mmap": (9, ()), "fork-like clone": (56, (17,)),
        "fcntl F_GETFD": (72, (3, 1)), "fcntl F_GETLK": (72, (3, 5)), "ptrace": (101, ()), "memfd_create": (319, ()),
    }
    for name, (nr, args) in cases.items():
        assert _run_bpf(prog, nr, args) == allow, name
    for name, nr in seccomp.X86_64_DENIED.items():
        assert _run_bpf(prog, nr) == eperm, name
    assert _run_bpf(prog, 56, (0x10000000 | 17,)) == eperm  # clone with CLONE_NEWUSER
    assert _run_bpf(prog, 56, (0x00020000 | 17,)) == eperm  # clone with CLONE_NEWNS
    assert _run_bpf(prog, 435) == 0x00050000 | 38  # clone3: ENOSYS, libc falls back to clone
    assert _run_bpf(prog, 73) == noop  # flock
    for cmd in (6, 7, 37, 38):  # F_SETLK, F_SETLKW, F_OFD_SETLK, F_OFD_SETLKW
        assert _run_bpf(prog, 72, (3, cmd)) == noop, cmd
    assert _run_bpf(prog, 0x40000000 | 250) == eperm  # keyctl through the x32 ABI
    assert _run_bpf(prog, 0x40000000) == eperm  # x32 read
    assert _run_bpf(prog, 250, arch=0x40000003) == 0x80000000  # an i386 call: the process is killed
