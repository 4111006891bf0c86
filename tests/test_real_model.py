"""Opt-in: the demo run by a real open-weight model served by llama-cpp-python (scripts/local-model.sh).

Skipped unless AUTOMEDBENCH_GGUF names a GGUF file and the interpreter in AUTOMEDBENCH_LLAMA_PYTHON
(default: this one) has llama-cpp-python[server]; building that takes ~11 minutes, so it is never part of
the default test command. Run: `AUTOMEDBENCH_GGUF=/models/qwen2.5-coder-0.5b-q4.gguf .venv/bin/python -m
pytest -m real_model tests/test_real_model.py`."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from automedbench.trajectory import read_events

ROOT = Path(__file__).resolve().parents[1]
GGUF = os.environ.get("AUTOMEDBENCH_GGUF", "")
PYTHON = os.environ.get("AUTOMEDBENCH_LLAMA_PYTHON", sys.executable)
N_CTX = int(os.environ.get("AUTOMEDBENCH_GGUF_CTX", "8192"))


def _has_server() -> bool:
    return subprocess.run([PYTHON, "-c", "import llama_cpp.server"], capture_output=True).returncode == 0


pytestmark = [
    pytest.mark.real_model,
    pytest.mark.skipif(not GGUF or not Path(GGUF).is_file(),
                       reason="set AUTOMEDBENCH_GGUF to a GGUF model file to run a real model"),
]


@pytest.fixture
def server(tmp_path):
    if not _has_server():
        pytest.skip(f"{PYTHON} lacks llama-cpp-python[server] (set AUTOMEDBENCH_LLAMA_PYTHON)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = (tmp_path / "server.log").open("w")
    proc = subprocess.Popen(["bash", str(ROOT / "scripts" / "local-model.sh"), GGUF, str(port)], stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True,
                            env={**os.environ, "PYTHON": PYTHON, "N_CTX": str(N_CTX)})
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 300
        while True:
            assert proc.poll() is None, (tmp_path / "server.log").read_text()[-2000:]
            try:
                with urllib.request.urlopen(url + "/models", timeout=5):
                    break
            except OSError:
                assert time.monotonic() < deadline, "the model server never answered"
                time.sleep(1)
        yield url
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)


def test_demo_through_a_real_model_with_continues_and_recovery(server, tmp_path, data_root, staged):
    from automedbench.cli import main
    from click.testing import CliRunner

    out = tmp_path / "runs"
    t0 = time.monotonic()
    cli = CliRunner().invoke(main, [
        "run", "--task", "segmentation/demo", "--agent", "openai", "--out", str(out), "--data-root", str(data_root),
        "--max-turns", os.environ.get("AUTOMEDBENCH_GGUF_TURNS", "12"), "--quiet",
        "--agent-option", "model=local", "--agent-option", f"base_url={server}", "--agent-option", "api_key_env=none",
        "--agent-option", f"context_window={N_CTX}", "--agent-option", "max_tokens=1024",
        "--agent-option", "text_tool_calls=true", "--agent-option", "timeout_s=600"])
    assert cli.exit_code == 0, cli.output
    (run_dir,) = out.iterdir()
    result = json.loads((run_dir / "result.json").read_text())
    executed = [e for e in read_events(run_dir / "trajectory.jsonl") if e["type"] == "tool" and "exit_code" in e]
    runtime = result["runtime"]
    print(f"real model: {runtime['turns']} turns, {runtime['tool_calls']} tool calls "
          f"({runtime['recovered_calls']} recovered from text, {runtime['text_replies']} text-only replies), "
          f"Overall {result['aggregate']['overall']}, {(time.monotonic() - t0) / max(runtime['turns'], 1):.1f} s/turn")
    assert result["state"] == "scored" and executed
