"""The tripwire and the subreaper find libc without starting `ldconfig -p` (ctypes.util.find_library's way)."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_a_tripwire_and_the_subreaper_start_no_process_to_find_libc(tmp_path):
    # In a fresh interpreter: an audit hook records every process started while both look libc up.
    code = textwrap.dedent("""
        import sys
        started = []
        sys.addaudithook(lambda ev, args: started.append(ev) if ev in ("subprocess.Popen", "os.posix_spawn") else None)
        from automedbench.tripwire import Tripwire
        from automedbench.sandboxes import cgroup
        wire = Tripwire()
        print(wire.active, cgroup._make_subreaper(), len(started))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    active, subreaper, started = out.stdout.split()
    assert active == "True" and subreaper == "True"
    assert started == "0"


def _own_lookups(path: Path) -> list[str]:
    """Calls in a module that find or open a C library themselves: `find_library(...)` or `CDLL(...)`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name in ("find_library", "CDLL"):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} {name}")
    return found


def test_only_automedbench_libc_finds_the_c_library():
    # plainns and local each opened libc beside libc.libc(): one way, every module of the core, built-ins and tracks
    modules = [p for top in ("core", "plugins") for p in (ROOT / top).rglob("*.py") if ".venv" not in p.parts]
    assert len(modules) > 100
    own = [hit for path in modules if path != ROOT / "core/automedbench/libc.py" for hit in _own_lookups(path)]
    assert own == []
    assert _own_lookups(ROOT / "core/automedbench/libc.py")  # the scan sees a lookup where there is one


def test_plainns_run_as_a_script_finds_libc_through_libc_py():
    # `python -I -S plainns.py`: the package is not on the path; libc.py is loaded by its file
    plainns = ROOT / "core/automedbench/sandboxes/plainns.py"
    code = ("import runpy, sys\nns = runpy.run_path(sys.argv[1])\nc = ns['_c']()\n"
            "print(hasattr(c, 'prctl'), hasattr(c, 'mount'), 'automedbench' in sys.modules)")
    out = subprocess.run([sys.executable, "-I", "-S", "-c", code, str(plainns)], capture_output=True, text=True,
                         timeout=60, check=True)
    assert out.stdout.split() == ["True", "True", "False"]
