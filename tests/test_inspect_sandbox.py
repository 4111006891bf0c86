"""inspect_ai's own sandbox self-check, run against the `automedbench` sandbox environment: every exec, read and
write goes through one real AutoMedBench run (the toy task, the local sandbox) as a recorded turn. The checks it
cannot pass by design are expected failures, each with its reason; the rest must pass."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import anyio
import pytest
from automedbench.testing import register_toy_track
from automedbench.trajectory import read_events

SPEC = importlib.util.find_spec("inspect_ai")
if SPEC is None or SPEC.origin is None:
    pytest.skip("inspect_ai is not installed: pip install 'automedbench[inspect]'", allow_module_level=True)
# The checks' names, read from inspect's source: collecting them must not import inspect_ai (2 CPU-s per worker)
SOURCE = Path(SPEC.origin).parent / "util" / "_sandbox" / "self_check.py"
CHECKS = [node.name for node in ast.parse(SOURCE.read_text()).body
          if isinstance(node, ast.AsyncFunctionDef) and node.name.startswith("test_")]

pytestmark = pytest.mark.slow

# check -> why the AutoMedBench sandbox does not do what it asks (kept, so a change in either side shows)
BY_DESIGN = {
    "test_exec_as_user": "every call runs as the sandbox's one user (no root, no adduser)",
    "test_read_and_write_file_including_directory_absolute": "each call has its own private /tmp",
    "test_write_text_file_is_directory": "each call has its own private /tmp (the folder it made is gone)",
    "test_write_binary_file_is_directory": "each call has its own private /tmp (the folder it made is gone)",
    "test_cwd_absolute": "each call has its own private /tmp (the folder it made is gone)",
}


@pytest.fixture(scope="module")
def bridged(tmp_path_factory):
    """One run of the toy task driven by the checks, with room for all of them; scored at the end."""
    from automedbench_inspect.bridge import start_run
    from automedbench_inspect.sandboxenv import AutoMedBenchSandbox, BridgeConfig

    register_toy_track()
    root = tmp_path_factory.mktemp("inspect-selfcheck")
    config = BridgeConfig(task="toy/vowels", out=str(root / "runs"), data_root=str(root / "data"), max_turns=1000,
                          time_limit_s=3600, exec_timeout_s=60, repeat_limit=0)
    channel = start_run(config.run_options(model="test/self-check"))
    channel.wait_ready()
    yield AutoMedBenchSandbox(channel)
    result = channel.finish(submit=False)
    assert result.state == "scored", result.error
    events = read_events(channel.run_dir / "trajectory.jsonl")
    tools = [e for e in events if e["type"] == "tool"]
    assert result.runtime.tool_calls >= 60 and len(tools) == result.runtime.tool_calls
    assert result.header.agent == "inspect" and result.header.sandbox == "local"


def test_the_checks_were_found():
    assert len(CHECKS) >= 40 and "test_exec_timeout" in CHECKS and set(BY_DESIGN) <= set(CHECKS)


@pytest.mark.parametrize("check", CHECKS)
def test_inspect_self_check(bridged, check, request):
    from inspect_ai.util._sandbox import self_check

    if check in BY_DESIGN:
        request.applymarker(pytest.mark.xfail(reason=BY_DESIGN[check], strict=True))
    anyio.run(getattr(self_check, check), bridged)
