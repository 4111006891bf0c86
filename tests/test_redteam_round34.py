"""Red team round 34: state shared across trust levels on one machine, attacked with two runs through the real runner.

- **Another run's decoys, in its run folder** (class 1 and 2: a run's record changed by another run's agent): the
  decoy references a run plants (bait named as its references, watched by its inotify tripwire: any open of them
  during the agent phase is that run's breach) lay in its run folder (`.decoy/`). A `local-plain` call reads the
  host's files, so a plain agent of one run that opened the decoys of a concurrent run (here a verified `local` run
  on toy/vowels, in another runs folder) made that run breached: Task 1.0 -> 0.0, "read of decoy references" as its
  evidence, while the plain run itself scored 1.0, clean (a docker run's decoys lay there too: read in code, no
  engine here). The decoys are now the run's own folder in the harness state folder (`tripwire.run_decoy_dir`),
  which every plain call covers and `local` and `docker` bind at the decoy paths alone, removed when the agent phase
  ends: the same neighbour opens none of them, and the victim scores 1.0, not breached.
- **The executor cluster's token** (class 4 and 1: code outside the sandbox, the harness key): Ray 2.60's local
  instance (a sweep's `--executor ray` without an address) asks every node and driver for a token, which it keeps in
  ~/.ray/auth_token (0644; or the file $RAY_AUTH_TOKEN_PATH names). A plain call covered the state folders, /tmp/ray
  and every socket, not that file: measured through the real runner, a local-plain agent read it and, given the
  head's address (192.0.2.2:44353 here; it listens in the host's network namespace, which a plain call shares, so
  /proc/net/tcp lists it), ran `ray start --address ... --temp-dir /dev/shm/r` (a node of its own, in its own
  /dev/shm) and then a task pinned to the head (`NodeAffinitySchedulingStrategy`): it ran in the host's PID
  namespace as the harness's user and returned the harness key's digest (what signs every run's result), while its
  run scored 1.0. A plain call now covers every home's ~/.ray and the named token file (`local.service_credentials`;
  ~/.docker and the docker engine's TLS files too, read in code): the token reads as nothing, the join is refused
  (InvalidAuthToken). A local instance started with RAY_AUTH_MODE=disabled needs no token: the same agent joined it
  and read the key all the same, so a sweep now says so when it starts one (tests/test_campaign_ray_edges.py).

Measured and left alone (no test kept): a plain run's tripwire also watches the staged references themselves (it
cannot keep its agent from them), so any other process opening them during its agent phase is its breach. An honest
`local` run on the same data root, started 3 s after a plain run (two commands; a sweep gives each worker slot its own
copy), was scored while the plain agent waited: the plain run ended breached, Task 1.0 -> 0.0, its evidence the six
answer.txt that evaluator read (an agent of the other run can time its submit for it). tests/test_run_states.py keeps
that rule on purpose ("without [filesystem isolation] any read is a breach"), and the plain run is unverified anyway;
telling the harness's reads from the agent's needs the reader's pid (fanotify), not inotify. Read in code, not tried:
a plain call can still flock the harness's lock files it can open read-only (a sweep folder's .sweep.lock, a staging
lock, a quota image's owner lock): each held no longer than the call, whose PID namespace ends with it; a local
model server on the host's loopback is reachable from a plain call (the declared "network not restricted").
"""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

import pytest
from automedbench.harnessstate import state_dir, user_homes
from automedbench.runfolder import RunFolder
from automedbench.sandboxes import local
from automedbench.testing import StepsAgent, register_agent, register_toy_track, run_task
from automedbench.tripwire import DECOYS
from test_agent_bytes_runs import SOLVE, TASK

# the victim's first call: says it is in its agent phase (its tripwire armed), then stays there a while: long enough
# for the neighbour's plain call to start and walk on a loaded machine (at 8 s, under a CI run and seven other test
# sessions, the walk came after the victim's agent phase; the sleep costs no CPU)
VICTIM_WAITS = ("import os, pathlib, time\npathlib.Path(os.environ['WORKSPACE_DIR'], 'ready').write_text('1')\n"
                "time.sleep(25)\n")
# the neighbour's plain call: once the victim is in its agent phase, opens every file below the victim's runs
# folder and the harness state folder (where a `find /` would find them), and names those it read
NEIGHBOUR_READS = r"""
import os, time
runs, state, end = RUNS, STATE, time.time() + 90
while time.time() < end and not any(os.path.exists(os.path.join(runs, d, 'workspace', 'ready'))
                                    for d in (os.listdir(runs) if os.path.isdir(runs) else [])):
    time.sleep(0.1)
for top in (runs, state):
    for folder, _, files in os.walk(top):
        for name in files:
            path = os.path.join(folder, name)
            try:
                with open(path, 'rb') as handle:
                    handle.read(64)
                print('opened', path)
            except OSError:
                pass
"""


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None or not local.pid_namespace_prefix()
                    or local.bwrap_path() is None, reason="a local-plain neighbour (root) and a bubblewrap victim")
def test_a_plain_neighbour_cannot_open_another_runs_decoys(reg, data_root, tmp_path):
    """Before: the neighbour opened the victim's .decoy files and the victim ended breached, Task 0.0. Now the
    neighbour opens only ordinary files of the victim's folder, the victim is clean at 1.0, and its decoys are gone."""
    register_toy_track()
    register_agent(StepsAgent, reg)
    victim_runs, decoys_before = tmp_path / "victim-runs", _decoy_folders()
    done: dict = {}

    def victim() -> None:
        done["result"], done["run_dir"] = run_task(TASK, StepsAgent.name, out=victim_runs, data_root=data_root,
                                                   sandbox="local", agent_options={"steps": [["python", VICTIM_WAITS],
                                                                                             ["python", SOLVE]]})

    thread = threading.Thread(target=victim, daemon=True)
    thread.start()
    probe = NEIGHBOUR_READS.replace("RUNS", repr(str(victim_runs))).replace("STATE", repr(str(state_dir())))
    neighbour, neighbour_dir = run_task(TASK, StepsAgent.name, out=tmp_path / "neighbour-runs", data_root=data_root,
                                        sandbox="local-plain",
                                        agent_options={"steps": [["python", probe], ["python", SOLVE]]})
    thread.join(180)
    assert "result" in done, "the victim's run did not end"
    call = next(e for e in RunFolder(neighbour_dir).events() if e.get("type") == "tool")
    opened = [line.split(" ", 1)[1] for line in call["stdout"].splitlines() if line.startswith("opened ")]
    assert any(path.endswith(os.path.join("workspace", "ready")) for path in opened), call["stdout"][-2000:]
    assert not any(f"{os.sep}.decoy{os.sep}" in path or f"{os.sep}{DECOYS}{os.sep}" in path for path in opened), opened
    result = done["result"]
    assert result.isolation.evidence == [] and not result.isolation.breached, result.isolation.evidence
    assert result.state == "scored" and result.task.strict == 1.0
    assert neighbour.state == "scored" and neighbour.task.strict == 1.0
    assert _decoy_folders() <= decoys_before  # the victim's (and the neighbour's) decoys went with their runs


def _decoy_folders() -> set[Path]:
    root = state_dir() / DECOYS
    return set(root.iterdir()) if root.is_dir() else set()


# the plain call reads the token files a Ray cluster's node or driver would present, and names what it got
READS_TOKENS = r"""
import os
for path in PATHS:
    try:
        with open(path, 'rb') as handle:
            print(path, len(handle.read()))
    except OSError as exc:
        print(path, 'refused', exc.errno)
"""


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None or not local.pid_namespace_prefix(),
                    reason="a local-plain run as root (unshare)")
def test_a_plain_call_reads_no_ray_token(reg, data_root, tmp_path, monkeypatch):
    """Before: the named token file (and ~/.ray/auth_token where this host has one) read whole from the plain call.
    Now each reads as nothing (covered by /dev/null, or ~/.ray by an empty folder), and the run is as before."""
    register_toy_track()
    register_agent(StepsAgent, reg)
    named = tmp_path / "cluster" / "token"
    named.parent.mkdir()
    named.write_text("T" * 64)
    certs = tmp_path / "docker-certs"
    certs.mkdir()
    (certs / "key.pem").write_text("K" * 64)
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(named))
    monkeypatch.setenv("DOCKER_CERT_PATH", str(certs))
    homes = [os.path.join(home, ".ray", "auth_token") for home in user_homes()]
    present = [path for path in homes if os.path.isfile(path) and os.path.getsize(path)]
    present.append(str(certs / "key.pem"))
    probe = READS_TOKENS.replace("PATHS", repr([str(named), *present]))
    result, run_dir = run_task(TASK, StepsAgent.name, out=tmp_path / "runs", data_root=data_root,
                               sandbox="local-plain", agent_options={"steps": [["python", probe], ["python", SOLVE]]})
    call = next(e for e in RunFolder(run_dir).events() if e.get("type") == "tool")
    said = dict(line.rsplit(" ", 1) for line in call["stdout"].splitlines() if " " in line)
    said |= {path: "refused" for path in present if f"{path} refused" in call["stdout"]}
    assert said[str(named)] == "0", call["stdout"]  # covered by /dev/null: nothing to present
    assert all(said.get(path) in ("0", "refused") for path in present), (present, call["stdout"])
    assert named.read_text() == "T" * 64  # covered in the call's namespace only
    assert result.state == "scored" and result.task.strict == 1.0
