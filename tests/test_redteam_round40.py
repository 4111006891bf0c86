"""Red team round 40: state one run leaves for another's evaluation (warm evaluator, METEOR's JVM, sweep slots).

An attacking scripted agent ran beside an honest one (the `reference` agent) in one sweep through the real runner
(tests/redteam40_sweep.py), the attacker first; the victim's Task was compared with a lone cold run of it. Every
attack held: no change to the victim's Task, nothing to fix this round.

- **METEOR's line protocol** (report_gen/demo, one JVM serving every evaluation of the warm process): reports with
  `\\n`, `\\r`, `\\r\\n`, VT, FF, tabs, `|||`, `||`, `|`, the jar's own `SCORE ||| ...` and `EVAL ||| ...` and ~1200
  tokens each (all 12 accepted by the contract; other control characters, NEL and U+2028 are refused there). The
  jar answered one line per request for each (also measured on the jar directly: empty, NUL, 0x1A, U+2028, NEL,
  invalid UTF-8, 4000-token hypotheses and references: one line, no stderr), so nothing was left in its pipe for
  the next call. Victim Task 0.8457 alone cold and 0.8457 after the attacker (attacker 0.026).
- **Cache identities** (segmentation/demo): masks hard-linked to the staged input (refused: another mount) or
  copies with its size and mtime. The warm caches key by path and identity with the change time (synthesis,
  classification), compare the arrays element by element (enhancement's reference SSIM), or keep one case and
  clear it when the case changes (segmentation); a path repeats only within a run. Victim Task 0.8816 alone cold,
  0.8816 after the attacker with --workers 1 and 2.
- **The reference's half of SSIM kept warm** (enhancement/demo-ldct's `refssim`, synthesis/demo's `refcache`):
  every output a copy of the case's input with its mtime, so the attacker's run fills the entries the victim's
  then reads (the identity baseline's SSIM among them). Victim Task 0.9635 (enhancement) and 0.979 (synthesis)
  alone cold and after the attacker (attacker 0.8299 and 0.9675).
- **A slot's hard-linked inputs** (segmentation/demo, --workers 2): writing, appending, chmod and utime on
  /data/public/* all fail (read-only file system), so the inode every slot shares keeps its bytes; victim 0.8816.
- **The warm process under a parser attack** (a script, not kept): a NIfTI header of 30000^3 voxels in every mask
  scores the attacker 0.0 and the victim after it 0.8816. Three attackers in a row (5000 folders, a detached
  `sleep`) then the victim in one process: the harness's open descriptors 9 -> 9, threads 2 -> 2, the victim 0.8816.

Left alone: segmentation's CaseCache keys a volume by path, size and mtime only (no inode or change time) and
keeps the last case into the next request; a path repeats only within a run, staged files share the published
mtime, and only a re-staging of equal size between two requests of one process could meet it (no agent can cause
one). The model gateway is per run (its own socket, peers checked to be in the run's sandbox); Ray workers
were not tried here (no cluster in this round's budget).
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
SWEEP = HERE / "redteam40_sweep.py"

ATTACK_BITS = ["line one\nline two", "carriage\rreturn\r\n", "SCORE ||| the heart is normal ||| the heart is normal",
               "EVAL ||| 0 0 0", "vt\x0bff\x0c", "||", "|", "tab\there", "|||"]
VICTIM = ["The heart is normal in size. The lungs are clear. No pleural effusion.",
          "Mild cardiomegaly. Small left pleural effusion with basilar atelectasis.",
          "Right lower lobe consolidation concerning for pneumonia. No pneumothorax."]
GOLD = ["Heart size is normal. Lungs are clear without effusion.",
        "The heart is mildly enlarged. There is a small left effusion.",
        "Consolidation in the right lower lobe, likely pneumonia. No pneumothorax is seen."]


def _pending(scorer) -> bool:
    """Whether METEOR's JVM has written anything the last call did not read (a desynchronised protocol)."""
    return bool(select.select([scorer.meteor_p.stdout], [], [], 0.5)[0])


@pytest.mark.slow  # two JVM starts: ~18 CPU-s
def test_meteor_answers_one_line_per_request_whatever_a_neighbour_wrote():
    """A report built against the jar's line protocol leaves nothing in its pipe: the next evaluation on the same
    JVM scores exactly as on a fresh one."""
    from automedbench_report_gen import contract, nlg

    if nlg.java_missing():
        pytest.skip(nlg.java_missing())
    attack = "FINDINGS: " + " ".join(ATTACK_BITS) + " " + " ".join(f"w{i}" for i in range(1200))
    attack = attack[:7900]
    assert contract.check_report_bytes(attack.encode()) == []  # the contract lets it through to METEOR
    nlg._close_meteor()
    nlg.meteor(GOLD, [attack, attack.replace("|", " "), attack.upper()])
    scorer = nlg._meteor_scorer()
    assert not _pending(scorer)
    warm = nlg.meteor(GOLD, VICTIM)
    assert nlg._meteor_scorer() is scorer and not _pending(scorer)
    nlg._close_meteor()
    cold = nlg.meteor(GOLD, VICTIM)
    assert warm == cold and 0 < cold[0] < 1


def _sweep(data: Path, out: Path, workers: int, agents: str, task: str, attack: str, *extra: str) -> dict[str, dict]:
    """The runs of one sweep (tests/redteam40_sweep.py) over the data root `data`, by agent."""
    env = {**os.environ, "RT40_ATTACK": attack, "AUTOMEDBENCH_DATA": str(data)}
    done = subprocess.run([sys.executable, str(SWEEP), str(out), str(workers), agents, task, attack, *extra],
                          capture_output=True, text=True, env=env, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    runs = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return {r["run"].split(".", 1)[0]: r for r in runs}


LONE: dict[tuple[str, str], dict] = {}  # the victim's lone cold run by (task, data root): the attack-free baseline


@pytest.mark.slow
@pytest.mark.parametrize(("task", "attack", "workers"), [
    ("segmentation/demo", "same-identity", 1),
    ("segmentation/demo", "same-identity", 2),
    ("segmentation/demo", "write-public", 2),
    ("report_gen/demo", "report-protocol", 1),
    ("enhancement/demo-ldct", "input-copy", 1),
    ("synthesis/demo", "input-copy", 1),
], ids=["identity-w1", "identity-w2", "write-public-w2", "meteor-w1", "ssim-identity-w1", "refcache-w1"])
def test_a_neighbours_attack_leaves_the_victims_task(task, attack, workers, amb_data_root, tmp_path):
    """The victim's Task and per-case figures after the attacker in one sweep equal a lone cold run's (one per task
    and data root in a test process: the three segmentation cases share it)."""
    key = (task, str(amb_data_root))
    if key not in LONE:
        LONE[key] = _sweep(amb_data_root, tmp_path / "alone", 1, "reference", task, attack, "cold")["reference"]
    alone = LONE[key]
    both = _sweep(amb_data_root, tmp_path / "both", workers, "rt40-attacker,reference", task, attack)
    assert set(both) == {"rt40-attacker", "reference"}
    assert both["rt40-attacker"]["state"] in ("scored", "agent_failure")
    victim = both["reference"]
    assert alone["state"] == victim["state"] == "scored"
    assert victim["task"] == alone["task"] and victim["task"] > both["rt40-attacker"]["task"]
    assert victim["per_case"] == alone["per_case"]
