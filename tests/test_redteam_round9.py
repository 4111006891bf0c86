"""Round nine of the red team on issue 35's fixes: attacks that got through, each now a test that failed before.

- **Paraphrases a judge credits** (class 6): with a model answer judge (`answer_judge=llm`), which is told to
  credit paraphrase and light hedging, the chance check keyed each answer by its own words. A blind answerer
  (the question-prior guess, no image opened) that wrote every text answer as a one-off paraphrase ("yes, see
  finding 17") was credited exactly as before, but no credited answer could agree by chance any more, while its
  wrong ones (made up: no gold answer) stood for the blind guess: kappa rose from about 0 to over 0.1 and the
  rating cap let it through. An answer the scorer credits is now the gold answer in the chance check.
- **Another run's model gateway** (class 4): an installed agent's gateway listens on a unix socket in its run's
  workspace and forwards whatever it is sent with the run's real key, counting it against that run's turn budget
  and handing it to that run's step ledger. A `local-plain` call covered the sockets under /run and /tmp that
  existed when it started, nothing else: a plain agent that waited for a concurrent (verified) run's gateway to
  appear, or found one outside /tmp, got model replies on that run's key and budget. Now the gateway of a run in
  a sandbox with a root of its own answers only peers whose root folder is not the harness's, and a plain call
  can change its root neither by chroot (the capability is dropped) nor in a namespace of its own (a seccomp
  filter); a plain process that makes itself undumpable (unreadable in /proc to a non-root harness) is still
  the harness's user, and refused.
- **A daemon started during a plain run** (class 4): the same snapshot covered a docker engine's socket only if
  the engine ran when the call started; one started later (/run/docker.sock) answered the plain agent, and
  through it the host. /run in a plain call now shows only what it held when the call started.
- **The VQA demo's question set** (class 1): a scan without lesions is asked no side or shape question, and a
  scan's questions shared one image numbered in the generator's order: a blind agent grouping questions by image
  bytes answered every presence question (A on every staging). Each question now has its own render, one file
  size, a secret number.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import threading
import time
from collections import defaultdict
from pathlib import Path

import pytest
from automedbench.runfolder import RunFolder
from automedbench.testing import StepsAgent, evaluate_outputs, register_agent, register_toy_track, run_task
from automedbench_vqa.answers import normalize
from automedbench_vqa.chance import KAPPA_MIN, agreement_beyond_chance
from test_backends_fakes import openai_reply, serve_fake_llm

fake_llm = pytest.fixture(serve_fake_llm, name="fake_llm")
VQA = "vqa/demo"


def _paraphrase_judge(request):
    """A judge that does what SYSTEM_PROMPT asks: a prediction that opens with the gold answer's words and hedges
    or elaborates after them is clinically equivalent (1), anything else wrong (0)."""
    user = request["body"]["messages"][1]["content"]
    gold = re.search(r"Gold answer:\n(.*?)\nPrediction:", user, re.S).group(1)
    prediction = re.search(r"<<<AGENT TEXT (\w+)>>>\n(.*?)\n<<<END AGENT TEXT \1>>>", user, re.S).group(2)
    words, said = normalize(gold).split(), normalize(prediction).split()
    score = 1.0 if words and said[:len(words)] == words else 0.0
    return openai_reply(json.dumps({"score": score, "rationale": "paraphrase" if score else "differs"}))


def _judge_options(server) -> dict[str, str]:
    return {"answer_judge": "llm", "answer_judge.provider": "openai", "answer_judge.model": "paraphrase-grader",
            "answer_judge.base_url": server.url + "/v1", "answer_judge.api_key_env": "none",
            "answer_judge.max_retries": "0"}


def test_credited_paraphrases_are_the_gold_answer_in_the_chance_check():
    """The class: 20 polar questions, half yes; a blind answerer says yes to each in its own words. Credited
    where the gold is yes, its keys differ from every gold key: before, kappa 0.33 (the same answers spelled
    "yes" give 0.0)."""
    rows = [{"kind": "closed", "answer_key": f"yes see finding {i}", "gold_key": gold, "question_key": "is there",
             "form": "yes_no_form", "score": float(gold == "yes")} for i, gold in enumerate(["yes", "no"] * 10)]
    plain = [{**r, "answer_key": "yes"} for r in rows]
    assert agreement_beyond_chance(plain)["chance_kappa"] == 0.0
    assert agreement_beyond_chance(rows)["chance_kappa"] == 0.0


def test_a_blind_answerer_in_its_own_words_stays_capped_under_a_model_judge(fake_llm, reg, data_root,
                                                                            tmp_path):
    fake_llm.fallback = _paraphrase_judge
    options = _judge_options(fake_llm)
    blind = evaluate_outputs(VQA, baseline="question-prior", data_root=data_root, work=tmp_path / "blind",
                             eval_options=options, registry=reg)
    assert blind.aggregate.rating not in ("A", "B"), blind.aggregate.rating_reason
    sub = tmp_path / "worded"
    for n, row in enumerate(blind.task.per_case):
        answer = json.loads((tmp_path / "blind" / "baseline" / row["case_id"] / "answer.json").read_text())
        if row["kind"] != "mcq":  # the same guess, in words no other answer uses
            answer["predicted_answer"] = answer["raw_model_output"] = f"{answer['predicted_answer']}, see finding {n}"
        (sub / row["case_id"]).mkdir(parents=True)
        (sub / row["case_id"] / "answer.json").write_text(json.dumps(answer))
    worded = evaluate_outputs(VQA, submission=sub, data_root=data_root, work=tmp_path / "eval-worded",
                              eval_options=options, registry=reg)
    assert worded.task.partial == blind.task.partial  # credited exactly as the plain guess
    kappa = worded.task.components["chance_kappa"]
    assert kappa is not None and kappa < KAPPA_MIN, (kappa, blind.task.components["chance_kappa"])
    assert worded.aggregate.rating not in ("A", "B"), worded.aggregate.rating_reason


# ------------------------------------------------------------------ another run's model gateway (class 4)

ASK = """
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(10)
try:
    s.connect(sys.argv[1])
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\\r\\nhost: x\\r\\ncontent-type: application/json\\r\\n"
              b"content-length: %d\\r\\n\\r\\n" % len(body) + body)
    print(sys.argv[2], "reply", s.recv(4096)[:12])
except OSError as exc:
    print(sys.argv[2], "refused", exc)
"""


def _plain_attacker(sock: Path) -> str:
    """The plain agent's code: say it has started, wait for the other run's gateway, ask it for a model reply
    directly, from a user and network namespace of its own, from a chroot holding the socket, and undumpable."""
    return (f"import pathlib, subprocess, sys, time\n"
            f"pathlib.Path('ask.py').write_text({ASK!r})\n"
            f"pathlib.Path('waiting').write_text('1')\n"
            f"for _ in range(600):\n"
            f"    if pathlib.Path({str(sock)!r}).exists(): break\n"
            f"    time.sleep(0.05)\n"
            f"subprocess.run([sys.executable, 'ask.py', {str(sock)!r}, 'direct'])\n"
            f"done = subprocess.run(['unshare', '-U', '-n', sys.executable, 'ask.py', {str(sock)!r}, 'own-netns'])\n"
            f"print('own-netns exit', done.returncode)\n"
            f"chroot = ('import json, os, socket, sys; os.chroot(sys.argv[1]); '\n"
            f"          'sys.argv = [0, \"/model.sock\", \"chroot\"]; ')\n"
            f"done = subprocess.run([sys.executable, '-c', chroot + 'exec(open(0).read())', {str(sock.parent)!r}],\n"
            f"                      input=pathlib.Path('ask.py').read_text(), text=True)\n"
            f"print('chroot exit', done.returncode)\n"
            f"hidden = 'import ctypes; ctypes.CDLL(None).prctl(4, 0, 0, 0, 0); exec(open(\"ask.py\").read())'\n"
            f"subprocess.run([sys.executable, '-c', hidden, {str(sock)!r}, 'undumpable'])\n")


@contextlib.contextmanager
def _plain_run_started(reg, data_root: Path, out: Path, code: str):
    """A `local-plain` run of `code` (one call) on a thread, entered once the call wrote `waiting` in its workspace;
    yields (that workspace, a dict); on leaving, the run has ended and the dict holds `result`, `run_dir` and
    `said` (what the call printed)."""
    register_toy_track()
    register_agent(StepsAgent, reg)
    done: dict = {}
    thread = threading.Thread(target=lambda: done.update(zip(("result", "run_dir"), run_task(
        "toy/vowels", StepsAgent.name, out=out, data_root=data_root, sandbox="local-plain",
        agent_options={"steps": [["python", code]]}), strict=True)))
    thread.start()
    deadline = time.monotonic() + 120
    # the run's own depth only: a recursive walk entered the mounted workspace's lost+found just as the run
    # unmounted it (FileNotFoundError, seen in a fresh-clone CI run)
    while not (waiting := list(out.glob("*/workspace/waiting"))) and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        yield (waiting[0].parent if waiting else out), done
    finally:
        thread.join(180)
    calls = [e for e in RunFolder(done["run_dir"]).events()
             if e.get("type") == "tool" and e.get("name") == "execute_code"]
    done["said"] = calls[0]["stdout"]


def test_a_plain_run_cannot_use_a_concurrent_runs_model_gateway(fake_llm, reg, data_root, tmp_path):
    import shutil
    import tempfile

    from automedbench_models.gateway import ModelGateway
    from automedbench_models.installed import open_path

    fake_llm.fallback = lambda request: openai_reply("a reply paid for by the other run")
    # the other run's folder in the host's /tmp, which a plain call can write (a declared gap): the attacker's
    # connections reach the gateway there, so its peer check is what refuses them (elsewhere, e.g. pytest's
    # folders in /var/tmp, the plain call's read-only mounts refuse the connect before the gateway sees it)
    base = Path(tempfile.mkdtemp(prefix="rt9", dir="/tmp"))
    other = base / "other-run" / "workspace"  # a verified run's workspace, its gateway started later
    other.mkdir(parents=True)
    sock = other / "model.sock"
    gateway = ModelGateway(fake_llm.url + "/v1", "openai", "sk-the-other-runs-key", model="m", max_calls=50,
                           deadline=time.monotonic() + 300, host_peers=False)
    fd = open_path(base / "other-run", "workspace")
    try:
        with _plain_run_started(reg, data_root, tmp_path / "runs", _plain_attacker(sock)) as (_, done):
            gateway.start(fd)
    finally:
        gateway.close()
        os.close(fd)
        shutil.rmtree(base, ignore_errors=True)
    result, said = done["result"], done["said"]
    assert all(w in said for w in ("direct", "own-netns", "chroot", "undumpable")), said  # every attempt made
    assert gateway.totals()["calls"] == 0 and not fake_llm.requests, said
    assert gateway.totals()["foreign_peers"] >= 1  # counted, for the other run's record
    assert "reply b'HTTP/1.1 200" not in said
    assert result.state in ("scored", "agent_failure")


# ------------------------------------------------------------------ the VQA demo's question set (class 1)


def _grouped_by_image(public: Path, out: Path) -> None:
    """A blind agent reading the public folder only: questions grouped by their image's bytes; a scan with no side
    question has no lesion ("no", "0"), the others "yes", "1"; the commonest side and shape; frame C."""

    questions = {}
    for folder in sorted(p for p in public.iterdir() if (p / "question.json").is_file()):
        doc = json.loads((folder / "question.json").read_text())
        image = hashlib.sha256(b"".join((folder / n).read_bytes() for n in doc["image_paths"])).hexdigest()
        questions[folder.name] = (doc, image)
    has_side: dict[str, bool] = defaultdict(bool)
    for doc, image in questions.values():
        has_side[image] |= "which side" in doc["question"].lower()
    for qid, (doc, image) in questions.items():
        text, label, answer = doc["question"].lower(), "", "left"
        if doc.get("mode") == "multiple_choice":
            label = next((k for k, v in doc["options"].items() if v == "circle"), "C")
            answer = doc["options"][label]
        elif text.startswith("is there"):
            answer = "yes" if has_side[image] else "no"
        elif text.startswith("how many"):
            answer = "1" if has_side[image] else "0"
        (out / qid).mkdir(parents=True)
        (out / qid / "answer.json").write_text(json.dumps({
            "question_id": qid, "predicted_label": label, "predicted_answer": answer,
            "raw_model_output": f"Answer: {label or answer}", "model_name": "blind", "runtime_s": 0.1}))


def test_the_vqa_demo_question_set_gives_no_answer_away(reg, tmp_path):
    """Before: each scan's questions shared one image, numbered in the generator's order, and a scan without
    lesions is asked no side or shape question: grouping by image bytes gave every presence answer and the one
    count of 0: kappa 0.15-0.20, rating A on four of four stagings (the question-prior guess: kappa 0.0, C). The
    compressed PNG sizes also ranked the scans by lesion count. Now every question has its own render, stored
    uncompressed (one size), numbered in a secret order."""
    from automedbench import staging

    track, task = reg.task(VQA)
    one = staging.ensure(track, task, tmp_path / "one")
    two = staging.ensure(track, task, tmp_path / "two")
    scans = {}
    for qid in one.case_ids:
        doc = json.loads((one.public / qid / "question.json").read_text())
        if doc.get("question_type") != "frames":
            data = (one.public / qid / doc["image_paths"][0]).read_bytes()
            scans[qid] = (hashlib.sha256(data).hexdigest(), len(data))
    assert len({digest for digest, _ in scans.values()}) == len(scans)  # no two questions share an image
    assert len({size for _, size in scans.values()}) == 1  # nor does a file's size tell one scan from another

    def kinds(staged) -> list[str]:
        return [json.loads((staged.public / q / "question.json").read_text())["question_type"]
                for q in sorted(staged.case_ids)]
    assert kinds(one) != kinds(two)  # the numbering follows no fixed order of the generator's

    _grouped_by_image(one.public, tmp_path / "blind")
    blind = evaluate_outputs(VQA, submission=tmp_path / "blind", data_root=tmp_path / "one", work=tmp_path / "eval",
                             registry=reg)
    assert blind.aggregate.rating not in ("A", "B"), (blind.task.partial, blind.aggregate.rating_reason)


# ------------------------------------------------------------------ a daemon started while a plain run runs (class 4)


@pytest.mark.skipif(not os.access("/run", os.W_OK), reason="a stand-in daemon socket needs a writable /run (root)")
def test_a_daemon_started_during_a_plain_run_is_out_of_its_reach(reg, data_root, tmp_path):
    """A `local-plain` call covered the daemon sockets that existed when it started. A docker engine started while
    a plain run ran (scripts/docker-up.sh makes /run/docker.sock) was reachable: the engine runs as root outside
    every namespace (a container with the host's / mounted: the harness key, any result). Before: the stand-in
    socket made in /run after the call began answered the plain agent. Now /run in a plain call shows what was
    there when it started."""
    import socket
    import uuid

    sock = f"/run/amb-redteam-{uuid.uuid4().hex[:8]}.sock"
    code = (f"import pathlib, socket, time\n"
            f"pathlib.Path('waiting').write_text('1')\n"
            f"for _ in range(600):\n"
            f"    if pathlib.Path('go').exists(): break\n"
            f"    time.sleep(0.05)\n"
            f"s = socket.socket(socket.AF_UNIX)\n"
            f"try:\n"
            f"    s.connect({sock!r}); print('daemon reached')\n"
            f"except OSError as exc:\n"
            f"    print('daemon unreachable', exc)\n")
    daemon = socket.socket(socket.AF_UNIX)
    try:
        with _plain_run_started(reg, data_root, tmp_path / "runs", code) as (workspace, done):
            daemon.bind(sock)
            daemon.listen(4)
            (workspace / "go").write_text("1")
    finally:
        daemon.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(sock)
    result, said = done["result"], done["said"]
    assert "daemon unreachable" in said and "No such file" in said, said
    assert result.state in ("scored", "agent_failure")
