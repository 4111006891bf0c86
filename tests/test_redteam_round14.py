"""Round fourteen of the red team: state shared across trust levels (attacked through the real runner) and hidden
answers public information decides.

- **Another sandbox's model relay on the shared loopback** (class 4): an installed agent reaches its model through
  a relay the run script starts inside the sandbox (127.0.0.1:<port> -> the gateway's socket in the workspace).
  Round 9 made the gateway of a sandbox with a root of its own answer only peers under that root, but the peer it
  sees is the relay, which is always inside. Where the sandbox shares the host's network (bubblewrap on a
  network-enabled task without a network namespace of its own: the harness not root, or no slirp4netns; every
  release classification task sets `network: true`; and every `local-plain` run), the relay's port is on the
  host's loopback: a concurrent `local-plain` agent (or any local user) that connected to it got model replies on
  the other run's real key and turn budget, its requests in that run's step ledger. Before: the attacker's request
  was answered 200 and the provider saw the victim's key. Now the relay serves only a peer whose socket a process
  of its own PID namespace (its sandbox) holds, found through /proc/net/tcp; everyone else's connection is closed.
  (The README had declared this gap for bubblewrap without a network namespace; it is closed now.)
- **A class told apart by its colour mode** (classification, class 1): the stager re-encoded every image as
  JPEG (no EXIF, no source bytes) but kept each image's mode, grey or RGB. A download that saves one class's grey
  radiographs as RGB files (as Kermany's chest X-ray folders mix modes) gave that mode to every staged case of
  the class: an agent reading only the JPEG headers (PIL's `mode`) scored accuracy 1.0 (rating A) on noise
  images of the chest-xray-pneumonia layout. Every case of a staging is now written in one mode: grey when every
  drawn image's content is grey (three channels within JPEG chroma noise), else RGB; the attacker scores 0.5.

Held (through the real runner unless noted; no test kept): a `local-plain` agent writing outside its workspace
(/tmp, /var/tmp, ~/.cache, the checkout's core/automedbench/__pycache__, the data root, the runs folder, /run: each
refused EROFS; /dev/shm is its own), so nothing is planted for the harness, the warm evaluator (pipes only, 0700
working folders under /tmp), the judge or the next run of the task; its /proc lists one PID (no harness process to
signal); a tmpfs the host mounted during the call (as a concurrent run's workspace image is) was not visible in it
and not writable through it (private propagation). Advisory locks stay shared with the host (declared): the plain
agent took an exclusive `flock` on the task's staging lock (the disk ledger's folder is hidden), which delays a
concurrent `stage` of that task while its call lasts and dies with the call's PID namespace; no run ends
`infrastructure_failure` for it. Hidden answers (code read, fixtures where noted): the release stagers publish
inputs written again from their voxels or pixels (segmentation's `publish_volume` drops descrip/aux_file/
intent_name and the gzip stream; classification's and detection's JPEG/PNG, report_gen's PNG named 01.png...,
VQA's PNG, enhancement's and synthesis' float32 arrays with the source names in the private manifest only),
with secret case ids and draws (each track's public-knowledge tests); multiple-choice options keep the source's
order, but an answerer with no per-question information has kappa about 0 and the chance cap holds its rating;
every release VQA, segmentation and classification task that anyone can fetch declares its `public_source`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from automedbench.runfolder import RunFolder
from automedbench.testing import StepsAgent, register_agent, register_toy_track, run_task
from automedbench_models.gateway import RELAY, SOCKET_NAME, ModelGateway
from automedbench_models.installed import open_path
from test_backends_fakes import openai_reply, serve_fake_llm

fake_llm = pytest.fixture(serve_fake_llm, name="fake_llm")

# one request to a relay on the host's loopback, as a model CLI sends it (the sandbox's dummy key)
ASK = """
import http.client, json, sys
try:
    conn = http.client.HTTPConnection('127.0.0.1', int(sys.argv[1]), timeout=10)
    conn.request('POST', '/v1/chat/completions', json.dumps({'model': 'm', 'messages': []}),
                 {'authorization': 'Bearer automedbench-gateway', 'content-type': 'application/json'})
    print(sys.argv[2], 'status', conn.getresponse().status)
except (OSError, http.client.HTTPException) as exc:
    print(sys.argv[2], 'refused', type(exc).__name__)
"""

# the victim's sandbox: a root and PID namespace of its own, the host's network: the relay started as the run
# script starts it, then the sandbox's own client asks through it
SANDBOX = """
import pathlib, subprocess, sys, time
here = pathlib.Path(sys.argv[1])
relay = subprocess.Popen([sys.executable, str(here / 'relay.py'), sys.argv[2], str(here / 'relay.port')])
for _ in range(200):
    if (here / 'relay.port').exists(): break
    time.sleep(0.05)
port = (here / 'relay.port').read_text()
own = subprocess.run([sys.executable, str(here / 'ask.py'), port, 'inside'], capture_output=True, text=True)
(here / 'inside.txt').write_text(own.stdout)
(here / 'ready').write_text(port)
while not (here / 'stop').exists(): time.sleep(0.05)
relay.kill()
"""


@pytest.mark.skipif(shutil.which("bwrap") is None or shutil.which("unshare") is None or os.geteuid() != 0,
                    reason="needs bubblewrap, unshare and root (a local-plain run)")
def test_a_plain_run_cannot_use_another_sandboxs_model_relay_on_the_shared_loopback(fake_llm, reg, data_root,
                                                                                     tmp_path):
    """Before: the plain agent's request through the other sandbox's relay was answered 200, the provider saw the
    other run's key. Now the relay closes it; the sandbox's own client is still served."""
    fake_llm.fallback = lambda request: openai_reply("a reply paid for by the other run")
    victim = Path(tempfile.mkdtemp(prefix="rt14"))  # the victim's session folder (the gateway socket, the relay)
    gateway = ModelGateway(fake_llm.url + "/v1", "openai", "sk-the-other-runs-key", model="m", max_calls=50,
                           deadline=time.monotonic() + 300, host_peers=False)
    fd = open_path(victim.parent, victim.name)
    gateway.start(fd)
    for name, text in (("relay.py", RELAY), ("ask.py", ASK), ("sandbox.py", SANDBOX)):
        (victim / name).write_text(text)
    # bubblewrap as the local sandbox runs it, its network shared (a network task, no namespace of its own)
    system = [a for d in ("/usr", "/bin", "/lib", "/lib64", "/etc", sys.prefix, sys.base_prefix)
              if os.path.isdir(d)
              for a in ("--ro-bind", d, d)]
    sandbox = subprocess.Popen(["bwrap", *system, "--dev", "/dev", "--proc", "/proc", "--bind", str(victim),
                                str(victim), "--unshare-all", "--share-net", "--die-with-parent",
                                sys.executable, str(victim / "sandbox.py"), str(victim), str(victim / SOCKET_NAME)])
    try:
        for _ in range(400):
            if (victim / "ready").exists() or sandbox.poll() is not None:
                break
            time.sleep(0.05)
        port = (victim / "ready").read_text()
        inside = (victim / "inside.txt").read_text()
        served = len(fake_llm.requests)
        register_toy_track()
        register_agent(StepsAgent, reg)
        attack = ASK.replace("sys.argv[1]", repr(port)).replace("sys.argv[2]", "'plain'")
        result, run_dir = run_task("toy/vowels", StepsAgent.name, out=tmp_path / "runs", data_root=data_root,
                                   sandbox="local-plain", agent_options={"steps": [["python", attack]]})
    finally:
        (victim / "stop").write_text("1")
        sandbox.wait(30)
        gateway.close()
        os.close(fd)
        shutil.rmtree(victim, ignore_errors=True)
    said = next(e for e in RunFolder(run_dir).events()
                if e.get("type") == "tool" and e.get("name") == "execute_code")["stdout"]
    assert "inside status 200" in inside and served == 1, inside  # the sandbox's own program is served
    assert "plain" in said and "plain status 200" not in said, said
    assert len(fake_llm.requests) == 1  # nothing more reached the provider on the other run's key
    assert result.state in ("scored", "agent_failure")


# ------------------------------------------------------------------ a class told apart by its colour mode (class 1)


def test_a_class_the_download_stores_in_another_colour_mode_is_not_told_apart_by_the_jpeg_header(tmp_path):
    """Kermany's chest X-rays are grey, but the download saves some of one class as RGB JPEGs: the stager kept each
    image's mode, so an agent reading only the staged JPEG headers (PIL's `mode`, the SOF's component count)
    labelled every RGB case pneumonia and every grey one normal: accuracy 1.0 (rating A) on noise images. Now a
    staging whose images are all grey in content publishes every case grey: the attacker is at chance."""
    import json

    import attrs
    from automedbench.testing import evaluate_outputs, load_task, stage_from_folder
    from PIL import Image

    sys.path.insert(0, str(Path(__file__).parents[1] / "plugins" / "classification" / "tests"))
    import classification_layouts as layouts

    download = layouts.kermany(tmp_path / "download", per_class=20)
    for path in (download / "test" / "PNEUMONIA").glob("*.jpeg"):
        with Image.open(path) as image:
            image.convert("RGB").save(path)  # grey content in three channels, as the download stores some
    track, task = load_task("classification/chest-xray-pneumonia")
    staged = stage_from_folder(track, attrs.evolve(task, case_count=40), tmp_path / "root", download)
    out = tmp_path / "by-mode"
    modes = {}
    for case in staged.case_ids:
        with Image.open(staged.public / case / "image.jpg") as image:
            modes[case] = image.mode
        (out / case).mkdir(parents=True)
        label = "pneumonia" if modes[case] == "RGB" else "normal"
        (out / case / "prediction.json").write_text(json.dumps({"label": label}) + "\n")
    result = evaluate_outputs(task.id, submission=out, data_root=tmp_path / "root", work=tmp_path / "eval")
    assert result.task.partial <= 0.5 and result.aggregate.rating not in ("A", "B"), result.task.partial
    assert set(modes.values()) == {"L"}  # one mode for the whole staging
