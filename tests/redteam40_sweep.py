"""Round 40's sweeps, run as a script: an attacking agent's run beside an honest one in one sweep.

`python tests/redteam40_sweep.py OUT WORKERS AGENTS TASK ATTACK [cold]` runs a sweep of AGENTS (comma-separated;
`rt40-attacker` is the attacker here) over TASK on the lite tier and prints one JSON line per run: its state and
Task. A script, not a fixture: a sweep of two workers spawns interpreters that import the main module, and this
one registers the attacker in each of them (tests/test_redteam_round40.py drives it).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from automedbench.plugins import registry
from automedbench.testing import StepsAgent, register_agent

ATTACKS = {
    # outputs that are the staged input itself (a hard link, refused across mounts) or a copy of it with its
    # size and modification time: a cache keyed by file identity would meet the input's entry
    "same-identity": r'''
import os, shutil
ws = os.environ["WORKSPACE_DIR"]
for case in sorted(os.listdir("/data/public")):
    src = f"/data/public/{case}/ct.nii.gz"
    out = f"{ws}/outputs/{case}"
    os.makedirs(out, exist_ok=True)
    for name in ("organ.nii.gz", "lesion.nii.gz"):
        try:
            os.link(src, f"{out}/{name}")
        except OSError as exc:
            print("no link:", exc.strerror)
            shutil.copy2(src, f"{out}/{name}")
        st = os.stat(src)
        os.utime(f"{out}/{name}", ns=(st.st_atime_ns, st.st_mtime_ns))
''',
    # the slot's public inputs (hard links to the staged ones every slot shares) written, chmod-ed, re-timed; the
    # call then stays a while so that a second worker's victim runs meanwhile
    "write-public": r'''
import glob, os, time
for f in sorted(glob.glob("/data/public/*/*")):
    for how in ("r+b", "ab"):
        try:
            with open(f, how) as h:
                h.seek(400)
                h.write(b"\xff" * 64)
            print("WROTE", f)
        except OSError as exc:
            print("refused:", exc.strerror)
    for change in (lambda: os.chmod(f, 0o666), lambda: os.utime(f, (0, 0))):
        try:
            change()
            print("CHANGED", f)
        except OSError as exc:
            print("refused:", exc.strerror)
time.sleep(8)
''',
    # every output a copy of the case's first input (the identity baseline a warm cache keeps per reference), with
    # the input's modification time
    "input-copy": r'''
import json, os, shutil
ws = os.environ["WORKSPACE_DIR"]
task = json.load(open("/data/task.json")) if os.path.exists("/data/task.json") else {}
pairs = {"enhanced.npy": "input.npy", "sct.nii.gz": "ct.nii.gz"}
for case in sorted(os.listdir("/data/public")):
    os.makedirs(f"{ws}/outputs/{case}", exist_ok=True)
    for out, src in pairs.items():
        if os.path.exists(f"/data/public/{case}/{src}"):
            shutil.copy2(f"/data/public/{case}/{src}", f"{ws}/outputs/{case}/{out}")
''',
    # reports built against METEOR's line protocol (one request per line, fields split on " ||| "): line breaks of
    # every kind the contract lets through, the separator, the jar's own commands, and ~1200 tokens each
    "report-protocol": r'''
import os
ws = os.environ["WORKSPACE_DIR"]
bits = ["line one\nline two", "carriage\rreturn\r\n", "SCORE ||| the heart is normal ||| the heart is normal",
        "EVAL ||| 0 0 0", "vt\x0bff\x0c", "||", "|", "tab\there", "|||"]
text = "FINDINGS: " + " ".join(bits) + " " + " ".join("w%d" % i for i in range(1200))
for case in sorted(os.listdir("/data/public")):
    os.makedirs(f"{ws}/outputs/{case}", exist_ok=True)
    with open(f"{ws}/outputs/{case}/report.txt", "w") as fh:
        fh.write(text[:7900])
''',
}


class Attacker(StepsAgent):
    """One call running the attack named by $RT40_ATTACK, then a submit."""

    name = "rt40-attacker"

    def __init__(self) -> None:
        super().__init__([["python", ATTACKS[os.environ["RT40_ATTACK"]]]])


register_agent(Attacker, registry())  # in the sweep's process and in each spawned worker (which imports this)


def main(argv: list[str]) -> int:
    from automedbench_campaign.sweep import Sweep, SweepConfig

    out, workers, agents, task, attack = Path(argv[0]), int(argv[1]), argv[2].split(","), argv[3], argv[4]
    os.environ["RT40_ATTACK"] = attack
    config = SweepConfig.of(agents=agents, tasks=[task], tiers=["lite"], repeats=1, out=out,
                            data_root=Path(os.environ["AUTOMEDBENCH_DATA"]), workers=workers,
                            executor="local" if workers > 1 else "inline", warm_evaluator="cold" not in argv[5:])
    Sweep(config, registry()).run()
    for folder in sorted(p for p in out.iterdir() if (p / "result.json").is_file()):
        result = json.loads((folder / "result.json").read_text())
        evaluation = folder / "evaluation.json"
        metric = json.loads(evaluation.read_text())["metric"] if evaluation.is_file() else {}
        print(json.dumps({"run": folder.name, "state": result["state"], "task": result["aggregate"]["task"],
                          "components": metric.get("components"), "per_case": metric.get("per_case")}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
