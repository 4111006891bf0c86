"""Red team round 25: evidence the stage judge reads, forged by the agent and replayed, through the real runner.

- **A log the agent wrote and later showed** (the rules judge, S2): s2a ("method obtained", `git clone`), s2c/s2d
  (`pip install`) and s2e ("model loaded") read a call's observed output, and round 11 only dropped the lines that
  repeat that same call's literals. Text typed in one call (a heredoc or `printf` into `run.log`, `open(...).write`
  of a string, a `validate.py` that only prints "model loaded, Dice 0.93") and shown by a later one (`cat
  run.log`, `python3 validate.py`) was read as output the harness observed: S2 0.8 with no output at all (Overall
  0.06, as round 21 left it) on segmentation/demo (Standard) and classification/demo (Pro); with empty masks S2 0.8,
  Overall 0.16 on segmentation/demo (Pro). The rules now read a line of output as evidence only if some word of it
  was not typed as a literal by that call or an earlier one (`codetext.Authored`): the forgeries score S2 0 (0.6 with
  empty masks: the masks' own call), as doing nothing does. A line with a computed word (a shape, a loss, a library's
  message) still counts, so an honest agent reading its background run's log keeps s2e.

- **A validation named only in a comment** (the error codes, E3 "skipped validation"): the trace counted a call as an
  inspection of the outputs when its raw code named them, and a pilot as self-checked when its raw code held a
  check (`.shape`, `unique`, `assert`), comments included: `true  # checked outputs/case_000/organ.nii.gz: .shape`
  between an unchecked pilot and the batch, or a pilot ending in `# assert a.shape == b.shape`, silenced E3's
  "skipped validation". Both are now read in the code as it runs (`Trace.effective_code`; `codetext` moved from the
  judges to the contract layer, which the trace is in). Codes never change a score; a real check still silences it.

Measured and left alone: text the agent computes rather than types (`chr()` codes, base64, rot13 of a forged log, or
`printf 'mo-del lo-aded, me-thod ob-tained'` shown through `sed 's/-//g'`: S2 0.4 on segmentation/demo) is not literal
and still reads as output (a heuristic, as round 11 said; the LLM judge reads the code; joining an earlier call's
pieces as a call's own are joined would let short typed words spell any honest line); a line an
honest script prints from literals only (`print("model loaded")`) is now no evidence in a later call either, as it
was not in its own call since round 11 (s2e falls back to outputs written).
"""

from __future__ import annotations

import pytest
from automedbench.judge import JudgeInput
from automedbench.judges.rules import RulesJudge
from automedbench.testing import item_values, run_steps, stage_scores
from test_redteam_round21 import EMPTY_MASKS as ROUND21_EMPTY_MASKS

LOG = """[08:00:01] $ pip install nnunetv2 totalsegmentator
Successfully installed nnunetv2-2.5.1 totalsegmentator-2.4.0
[08:01:12] git clone https://github.com/MIC-DKFZ/nnUNet done; method obtained
[08:02:40] model loaded on cuda:0, model is ready
[08:05:00] validated 5/5 cases, Dice 0.93
"""
# the log typed three ways in earlier calls (heredoc, printf, a Python string), then shown
FORGED = [("bash", "mkdir -p /workspace/logs && cat > /workspace/logs/run.log <<'EOF'\n" + LOG + "EOF\n"),
          ("bash", "printf '%s\\n' " + " ".join(f"'{line}'" for line in LOG.splitlines())
           + " > /workspace/logs/run2.log"),
          ("python", "open('/workspace/logs/run3.log', 'w').write('''" + LOG + "''')"),
          ("bash", "cat /workspace/logs/run.log; tail -n 3 /workspace/logs/run2.log"),
          ("python", "print(open('/workspace/logs/run3.log').read())")]
# a "validation" script written in one call that only prints, run in the next
PRINTS_ONLY = [("bash", "cat > /workspace/validate.py <<'EOF'\n"
                "print('pip install done: Successfully installed nnunetv2')"
                "\nprint('method obtained via git clone')\nprint('model loaded, model is ready')\n"
                "print('Dice 0.93 on 5/5 cases')\nEOF"),
               ("bash", "python3 /workspace/validate.py")]
S2_OUTPUT_ITEMS = ("s2a_model_obtained", "s2c_env_ready", "s2d_env_fail_within_5", "s2e_model_loaded")


@pytest.mark.parametrize("task_id, tier, steps", [("segmentation/demo", "standard", FORGED),
                                                  ("classification/demo", "pro", PRINTS_ONLY)])
def test_a_log_or_a_script_the_agent_typed_and_later_showed_is_no_evidence(data_root, tmp_path, task_id, tier, steps):
    result, _ = run_steps(task_id, steps, out=tmp_path / "forged", data_root=data_root, tier=tier)
    assert result.state == "scored", result.error
    values = item_values(result)
    # before: s2a, s2c, s2d and s2e 1.0 each (S2 0.8, Overall 0.06) from text the agent typed itself
    assert all(values[item] == 0.0 for item in S2_OUTPUT_ITEMS), values
    assert stage_scores(result)["S2"] == 0.0 and result.aggregate.overall == 0.0


def _call(turn: int, code: str, stdout: str = "", cases: int = 0, language: str = "bash") -> dict:
    return {"type": "tool", "name": "execute_code", "turn": turn, "exit_code": 0, "language": language,
            "cases_with_outputs": cases, "code": code, "stdout": stdout}


def _s2e(reg, events: list[dict]) -> float | None:
    track, task = reg.task("segmentation/demo")
    item = track.rubric(task).item("s2e_model_loaded")
    return RulesJudge().grade(JudgeInput(task, "pro", [item], None, None, events)).items[0].value


def test_an_honest_background_log_with_computed_lines_still_counts(reg):
    script = ("cat > /workspace/segment.py <<'EOF'\nimport torch\nm = torch.load('/workspace/w.pt')\n"
              "print(f'model loaded: {sum(p.numel() for p in m.parameters())} parameters on {m.device}')\nEOF")
    run = _call(3, "nohup python3 /workspace/segment.py > /workspace/run.log 2>&1 &")
    # the library's own message and a line with a computed count: the agent typed neither
    for shown in ("model loaded: 31042 parameters on cpu", "Loaded the model from checkpoint_final.pth"):
        assert _s2e(reg, [_call(2, script), run, _call(4, "cat /workspace/run.log", shown)]) == 1.0, shown
    # the same words typed in an earlier call and shown again: no evidence
    typed = _call(2, "echo 'Loaded the model from checkpoint_final.pth' > /workspace/run.log")
    assert _s2e(reg, [typed, _call(4, "cat /workspace/run.log", "Loaded the model from checkpoint_final.pth")]) == 0.0
    # typed only AFTER the line was shown: the showing call's output was observed first
    assert _s2e(reg, [_call(2, "cat /workspace/run.log", "Loaded the model from checkpoint_final.pth"),
                      typed | {"turn": 3}]) == 1.0


def test_a_log_typed_past_the_heredocs_looked_into_is_still_typed(reg):
    # 200 heredocs are read as heredocs; the bodies after them are read as shell lines, whose words are no literals
    pad = "".join(f"cat > /tmp/pad{i} <<'EOF'\nx\nEOF\n" for i in range(200))
    forged = _call(2, pad + "cat > /workspace/run.log <<'EOF'\nmodel loaded on cuda\nEOF\n")
    assert _s2e(reg, [forged, _call(4, "cat /workspace/run.log", "model loaded on cuda")]) == 0.0


# round 21's empty masks for the first N cases, written without reading any array's `.shape` (a pilot that
# checks nothing)
EMPTY_MASKS = ROUND21_EMPTY_MASKS.replace("img.shape", "img.header.get_data_shape()")
PILOT, BATCH = ("python", EMPTY_MASKS.replace("[:N]", "[:1]")), ("python", EMPTY_MASKS.replace("[:N]", ""))


@pytest.mark.parametrize("steps", [
    # a "check" of the pilot that is a comment naming the outputs and the checks
    [PILOT, ("bash", "true  # checked outputs/case_000/organ.nii.gz: .shape, unique"), BATCH],
    # the pilot "checks itself" in a comment
    [("python", PILOT[1] + "# assert a.shape == b.shape; np.unique(a)\n"), BATCH]])
def test_a_validation_named_only_in_a_comment_leaves_the_batch_unchecked(data_root, tmp_path, steps):
    result, _ = run_steps("segmentation/demo", steps, out=tmp_path / "run", data_root=data_root, tier="standard")
    e3 = " ".join(c.message for c in result.error_codes if c.code == "E3")
    # before: the comment was an inspection of the outputs (or a self-checked pilot), and E3 said nothing of it
    assert "skipped validation" in e3, e3


def test_a_real_check_of_the_pilot_is_still_a_validation(data_root, tmp_path):
    check = ("python", "import os, nibabel as nib, numpy as np\n"
             "a = np.asanyarray(nib.load(os.environ['WORKSPACE_DIR'] + '/outputs/case_000/organ.nii.gz').dataobj)\n"
             "print(a.shape, np.unique(a))\n")
    result, _ = run_steps("segmentation/demo", [PILOT, check, BATCH], out=tmp_path / "run", data_root=data_root,
                          tier="standard")
    assert result.state == "scored" and result.error_codes, result.error
    assert not any("skipped validation" in c.message for c in result.error_codes), result.error_codes
