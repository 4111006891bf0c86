"""The tripwire and the subreaper find libc without starting `ldconfig -p` (ctypes.util.find_library's way)."""

from __future__ import annotations

import subprocess
import sys
import textwrap


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
