"""Collecting the suite loads no heavy library: each xdist worker collects every test module, so an import at
module level (or in a module-level skip condition) is paid by every pytest process, the workers that never run
the module's tests included. torch with MONAI (and the transformers it pulls in) cost 5-8 CPU-s a process this
way (BENCHMARKS.md, issue 38 item 4); they load inside the tests that use them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("torch", "monai", "transformers", "inspect_ai", "ray", "sklearn", "SimpleITK")

# pytest run in-process inside a fresh interpreter, so that its sys.modules can be read after the collection;
# arguments: the libraries (JSON), then the test folders
COLLECT = """
import json, sys
import pytest
heavy = json.loads(sys.argv[1])
code = pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", *sys.argv[2:]])
print("HEAVY=" + json.dumps([name for name in heavy if name in sys.modules]))
sys.exit(int(code))
"""


def test_collecting_every_test_module_imports_no_heavy_library():
    paths = ["tests", *sorted(str(p.relative_to(ROOT)) for p in ROOT.glob("plugins/*/tests"))]
    out = subprocess.run([sys.executable, "-c", COLLECT, json.dumps(HEAVY), *paths], cwd=ROOT, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    line = next(line for line in out.stdout.splitlines() if line.startswith("HEAVY="))
    assert json.loads(line.removeprefix("HEAVY=")) == [], "imported while collecting the suite"
