"""Round eleven of the red team: attacks through the real runner on the stage grading and the tracks' metrics.

- **An echo in disguise earns S2** (the rules judge): stdout lines that only repeat the code's literals are no
  evidence, but the comparison was case-sensitive, by whole literal pieces of three characters or more, and blind
  to strings inside f-string expressions. `print('METHOD OBTAINED; MODEL LOADED'.lower())`,
  `print('me' + 'thod obtained; mo' + 'del loaded')` and `print(f"{'method'} obtained, {'model'} loaded")`, in a
  run that did nothing else, each earned s2a_model_obtained and s2e_model_loaded (0 for the plain echo). Echoes are
  now compared without case, word by word, a word counting as literal when the literals' words spell it
  (`codetext.observed_output`); a line with a computed word (a shape, a digest) still counts.

Held (measured, no test kept: each a minute of evaluator time): report_gen/demo with every study given a blind
permutation of the twelve public findings texts (Task 0.50-0.59, C) or four of them concatenated per study
(0.53-0.56, C; B starts at 0.75).
"""

from __future__ import annotations

import pytest
from automedbench.testing import register_toy_track, run_steps

DISGUISED_ECHOES = {
    "case": "print('METHOD OBTAINED; MODEL LOADED'.lower())",
    "pieces": "print('me' + 'thod obtained; mo' + 'del loaded')",
    "reordered": "a, b = 'del', 'mo'\nprint('me' + 'thod obtained;', b + a, 'loaded')",
    "fstring": "print(f\"{'method'} obtained, {'model'} loaded\")",
    "bash": "printf '%s %s\\n' 'METHOD OBTAINED;' 'MODEL LOADED' | tr A-Z a-z",
}


def s2_items(result) -> dict[str, float | None]:
    return {i.id: i.value for s in result.stages for i in s.items if i.id in ("s2a_model_obtained",
                                                                            "s2e_model_loaded")}


@pytest.mark.parametrize("name", sorted(DISGUISED_ECHOES))
def test_a_disguised_echo_earns_no_stage_item(name, data_root, tmp_path):
    """A run whose only call prints the S2 keywords from its own literals (no method, no outputs) earns neither
    S2 item, as the plain echo does not."""
    register_toy_track()
    result, _ = run_steps("toy/vowels", [("bash" if name == "bash" else "python", DISGUISED_ECHOES[name])],
                          out=tmp_path, data_root=data_root)
    assert result.state == "scored", result.error
    assert s2_items(result) == {"s2a_model_obtained": 0.0, "s2e_model_loaded": 0.0}


@pytest.mark.parametrize(("language", "code", "stdout"), [
    ("python", "print('model loaded: smoke output', o.shape, o.dtype)", "model loaded: smoke output (32, 32, 8) uint8"),
    ("python", "print('method obtained: x sha256', digest)", "method obtained: x sha256 3fa9c2e1"),
    ("python", "m = load()", "Loaded model weights from /root/.cache/x"),
    ("python", "print(len(cases), 'cases')", "12 cases"),
])
def test_a_line_with_a_computed_word_is_still_evidence(language, code, stdout):
    from automedbench.codetext import observed_output

    assert observed_output(language, code, stdout) == stdout


def test_spelling_an_outsized_output_stays_bounded():
    """Word splitting is budgeted per call: words the literals almost spell take well under a second
    of CPU for the most the judge reads of one call (100 000 characters)."""
    import time

    from automedbench.codetext import observed_output

    code = "x = [" + ", ".join(repr("ab" * n + "c") for n in range(1, 40)) + "]"
    stdout = "\n".join(" ".join("ab" * 30 + "d" for _ in range(10)) for _ in range(160))
    start = time.process_time()
    observed_output("python", code, stdout)
    assert time.process_time() - start < 0.5
