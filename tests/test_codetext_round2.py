"""Honest script shapes the S2 evidence rule misread as typed (codetext.Authored after review 24): the judge, a run.

A line of output is no S2 evidence when every word of it was typed as a literal (red team round 25); a script
written by one call and run by a later one is read as code run at once (review 23, 24). Still typed, so an honest
log line lost s2e (1.0 run inline, 0.0 these ways):

- a script written from Python (`open('seg.py', 'w').write(CODE)`, `Path('seg.py').write_text(CODE)`): the whole
  script was one string literal of the writing call;
- a script run as `./seg.py`, as `python -W ignore seg.py` (the flag's argument was taken as the script) or as
  `python -m seg`: no interpreter's argument named it, so it was never run;
- a shift in shell arithmetic (`$((1 << bits))`) read as a heredoc to a line `bits`: the rest of the call, the
  script it runs included, was one typed body.

The round-25 forgeries stay refused (a log typed and shown back, `cat` of an unrun script, literals printed back).
"""

from __future__ import annotations

import pytest
from automedbench.testing import item_values, run_steps
from test_review23 import SCRIPT, SHOWN, WRITE, _call, _s2e

PATH = "/workspace/seg.py"
BODY = "CODE = '''" + SCRIPT + "'''\n"
# a script written from Python, four ways
PY_WRITES = [f"open('{PATH}', 'w').write('''{SCRIPT}''')",
             BODY + f"open('{PATH}', 'w').write(CODE)",
             BODY + f"from pathlib import Path\nPath('{PATH}').write_text(CODE)",
             BODY + f"with open('{PATH}', 'w') as f:\n    f.write(CODE)\n"]


@pytest.mark.parametrize("write", PY_WRITES)
def test_a_script_written_from_python_then_run_is_read_as_run(reg, write):
    """Before: 0.0 (the script one typed string of the writing call)."""
    written = _call(1, write, language="python")
    for shown in SHOWN:
        assert _s2e(reg, [written, _call(2, f"python3 {PATH}", shown)]) == 1.0
        assert _s2e(reg, [written, _call(2, f"cat {PATH}", shown)]) == 0.0  # shown, not run: typed
        # its own literals printed back stay typed
    assert _s2e(reg, [written, _call(2, f"python3 {PATH}", "model loaded on cpu")]) == 0.0


@pytest.mark.parametrize("write", [
    "open('/workspace/run.log', 'w').write(LOG)",  # another file written: the log stays typed
    f"open('{PATH}').read()\nopen('/workspace/run.log', 'w').write(LOG)",  # the script read, the log written
    f"open('{PATH}', 'w').write(CODE)\nimport sys\nsys.stdout.write(LOG)",
])
def test_a_log_written_from_python_beside_a_script_stays_typed(reg, write):
    log = "LOG = 'model loaded: OrganUNet on cpu'\n"
    steps = [_call(1, WRITE), _call(2, BODY + log + write, language="python")]
    run = _call(3, f"python3 {PATH}; cat /workspace/run.log", SHOWN[0])
    assert _s2e(reg, [*steps, run]) == 0.0


@pytest.mark.parametrize("run", [
    f"chmod +x {PATH} && {PATH}",
    "cd /workspace && chmod +x seg.py && ./seg.py 2>&1 | tail -5",
    f"nohup {PATH} > /workspace/out.txt 2>&1; cat /workspace/out.txt",
    f"python -W ignore {PATH}",
    "cd /workspace && python3 -X dev -W ignore::UserWarning seg.py",
    "cd /workspace && python -m seg",
    "cd /workspace && python3 -u -m seg --fold 0",
])
def test_a_script_run_in_other_words_is_read_as_run(reg, run):
    """Before: 0.0 (`./seg.py` and `python -m seg` ran no interpreter's argument; `-W ignore` took `ignore`)."""
    written = _call(1, WRITE.replace("<<'EOF'\n", "<<'EOF'\n#!/usr/bin/env python3\n"))
    for shown in SHOWN:
        assert _s2e(reg, [written, _call(2, run, shown)]) == 1.0, run
        # a script shown, or only made executable, is not run
        assert _s2e(reg, [written, _call(2, f"chmod +x {PATH}; cat {PATH}", shown)]) == 0.0
        assert _s2e(reg, [written, _call(2, f"python -W ignore -m other; less {PATH}", shown)]) == 0.0


@pytest.mark.parametrize("shift", ["echo $((1 << bits))", "(( x = mask << shift ))", "n=$(( x<<y ))",
                                   "grep -c model <<< word"])
def test_a_shift_in_shell_arithmetic_is_no_heredoc(reg, shift):
    """Before: 0.0 (`<< bits` read as a heredoc to a line `bits`: the script run after it one typed body)."""
    inline = f"bits=4\n{shift}\npython3 - <<'EOF'\n{SCRIPT}EOF\necho done"
    for shown in SHOWN:
        assert _s2e(reg, [_call(1, inline, shown)]) == 1.0
        # a log typed after the shift is still typed
        forged = f"{shift}\ncat > /workspace/run.log <<'EOF'\n{shown}\nEOF"
        assert _s2e(reg, [_call(1, forged), _call(2, "cat /workspace/run.log", shown)]) == 0.0


@pytest.mark.parametrize("opener", [': "((" ; ', ": '((' ; ", ': "\\"((" ; ', "x=$((1 << 2)); ", ": # ((\n"])
@pytest.mark.parametrize("end", ["\nEOF", ""])  # bash writes a heredoc with no end line too (a warning)
def test_a_log_after_a_quoted_double_parenthesis_is_still_a_typed_heredoc(reg, opener, end):
    """A `((` quoted, closed or in a comment opens no arithmetic: the heredoc after it still types its log."""
    forged = f"{opener}cat > /workspace/run.log <<'EOF'\n{SHOWN[0]}{end}"
    assert _s2e(reg, [_call(1, forged), _call(2, "cat /workspace/run.log", SHOWN[0])]) == 0.0


# an honest script that loads no library: the class name is computed by running it, "cpu" is a literal of it
HONEST = """#!/usr/bin/env python3
class OrganUNet:
    pass
device = "cpu"
model = OrganUNet()
print(f"model loaded: {type(model).__name__} on {device}")
"""


@pytest.mark.parametrize("show, s2e", [("./seg.py", 1.0), ("tail -1 seg.py | cut -c8-", 0.0)])
def test_a_script_written_from_python_and_run_by_its_path_counts_through_the_runner(data_root, tmp_path, show, s2e):
    """Through the real runner: a script written with `Path.write_text`, made executable and run as `./seg.py`.
    Before: s2e 0.0 run (every word typed); its text shown rather than run stays 0.0."""
    write = f"from pathlib import Path\nCODE = '''{HONEST}'''\nPath('/workspace/seg.py').write_text(CODE)"
    steps = [("python", write), ("bash", f"cd /workspace && chmod +x seg.py && {show}")]
    result, _ = run_steps("segmentation/demo", steps, out=tmp_path / "run", data_root=data_root, tier="pro")
    assert result.state == "scored", result.error
    assert item_values(result)["s2e_model_loaded"] == s2e


def test_scripts_written_from_python_and_run_by_path_are_read_in_linear_time():
    """Review 24's bound for these shapes: 400 calls (a script written from Python, run as `./stepN.py`, 16 kB of
    output each) in 0.4 CPU-s here (800 calls: 0.75)."""
    import time

    from automedbench.judges.rules import Evidence
    from test_review24 import NAMES
    from test_review24 import SCRIPT as STEP

    line = " ".join(NAMES) + "\n"
    events = []
    for i in range(200):
        events.append(_call(2 * i + 1, f"CODE = '''{STEP}'''\nopen('/workspace/step{i}.py', 'w').write(CODE)",
                            language="python"))
        events.append(_call(2 * i + 2, f"cd /workspace && ./step{i}.py", line * (16_000 // len(line))))
    start = time.process_time()
    evidence = Evidence(events)
    kept = [evidence.output(c) for c in evidence.calls]
    spent = time.process_time() - start
    assert all(len(k) > 15_000 for k in kept[1::2])  # every run's printed names computed, kept as evidence
    assert spent < 2.0, f"{spent:.2f} CPU-s for 400 calls"
