"""Review round 24 of the changes merged up to a7b3534, each finding proved by a test here.

- **The rules judge's typed-word check grew with calls x scripts x runs** (codetext.Authored, review 23): every
  word of an output that a written script's code holds was looked up in every script holding it and each script's
  name in every interpreter argument run so far, per occurrence. An honest 400-call trajectory (write a script,
  run it, 16 kB of output each) took 7.1 CPU-s to read, 1000 calls 83 CPU-s; now a lookup is a bisection.
"""

from __future__ import annotations

import time

from automedbench.judges.rules import Evidence

NAMES = ("model", "device", "tensor", "shape", "volume", "spacing", "organ", "mask", "liver", "kidney",
         "spleen", "pancreas", "network", "weights", "predict", "dice", "loader", "batch", "epoch", "loss")
SCRIPT = "import torch\n" + "\n".join(f"{n} = compute_{n}({NAMES[(i + 1) % len(NAMES)]})\nprint({n})"
                                      for i, n in enumerate(NAMES))


def _call(turn: int, code: str, stdout: str = "") -> dict:
    return {"type": "tool", "name": "execute_code", "turn": turn, "exit_code": 0, "language": "bash",
            "cases_with_outputs": 0, "code": code, "stdout": stdout}


def _write_then_run(steps: int, output_chars: int) -> list[dict]:
    """An honest loop: each step writes a script with a heredoc, the next call runs it and prints its values."""
    line = " ".join(NAMES) + "\n"
    events = []
    for i in range(steps):
        events.append(_call(2 * i + 1, f"cat > /workspace/step{i}.py <<'EOF'\n{SCRIPT}\nEOF"))
        events.append(_call(2 * i + 2, f"python3 /workspace/step{i}.py", line * (output_chars // len(line))))
    return events


def test_a_long_trajectory_of_written_then_run_scripts_is_read_in_linear_time():
    """Before: 400 calls 7.1 CPU-s (100: 0.24, 200: 1.2), 1000 calls 83 CPU-s."""
    events = _write_then_run(200, 16_000)
    start = time.process_time()
    evidence = Evidence(events)
    kept = [evidence.output(c) for c in evidence.calls]
    spent = time.process_time() - start
    # every run's printed names are its script's computation: none of them typed, all kept as evidence
    assert all(k == "" for k in kept[0::2]) and all(len(k) > 15_000 for k in kept[1::2])
    assert spent < 0.6, f"{spent:.2f} CPU-s for 400 calls"
