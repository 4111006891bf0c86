"""Round eight of the red team on issue 35's fixes: attacks that got through, each now a test that failed before.

- **Write order** (class 1): a stager wrote a balanced draw one class after another; the case ids were secret,
  but `stat` showed the order (mtimes, inode numbers): an agent sorting the case folders by mtime or inode and
  labelling the first quarter glioma, the next meningioma... scored accuracy 1.0, rating A, on pure-noise
  images. The engine now writes every staging's public tree again in a secret order with one timestamp.
- **Another harness's key** (class 4): a `local-plain` call covered only its own run's state folder; the key of
  every other state folder on the host (another campaign's, another checkout's, the user's default one) was
  readable, and with it any result could be signed for that harness. A plain call now covers every state
  folder a harness of this user made (listed in the default one), the default one, and as root every user's.
- **Non-finite verdict numbers** (class 5): Python's `json` reads NaN, Infinity and 1e999; a tagger reply
  with `"evidence_turns": [NaN]` (or a bare number) ended `codes --tagger` in a traceback. A reply holding a
  non-finite number is no verdict, for every reader.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from automedbench.cli import main
from automedbench.harnessstate import harness_key
from automedbench.replyjson import ReplyError, final_json
from automedbench.runfolder import RunFolder
from automedbench.stagearea import PUBLISHED_TIME_NS
from automedbench.testing import StepsAgent, register_agent, register_toy_track, run_task
from automedbench_campaign.tagger import parse_reply
from automedbench_models import grading
from automedbench_models.llm_judge import VerdictError, parse_verdict
from click.testing import CliRunner
from test_agent_bytes_runs import SOLVE, TASK
from test_backends_fakes import openai_reply, serve_fake_llm

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "plugins" / "classification" / "tests"))
from test_classification_public_knowledge import staged  # noqa: F401 - the fixture: 100 noise images staged

fake_llm = pytest.fixture(serve_fake_llm, name="fake_llm")
BRAIN = "classification/brain-tumour-mri"
CLASSES = ["glioma", "meningioma", "notumor", "pituitary"]

# ------------------------------------------------------------------ write order (class 1)

# an agent that never opens an image: case folders in write order (mtime, then inode), a quarter per class
BY_WRITE_ORDER = (
    "import json, os\nroot = os.environ['DATA_DIR']\n"
    "cases = [d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d))]\n"
    "def first(case):\n"
    "    paths = [os.path.join(root, case, f) for f in os.listdir(os.path.join(root, case))]\n"
    "    return min((os.stat(p).st_mtime_ns, os.stat(p).st_ino) for p in paths)\n"
    "cases.sort(key=first)\n"
    f"classes = {CLASSES!r}\n"
    "for i, case in enumerate(cases):\n"
    "    os.makedirs(f'outputs/{case}', exist_ok=True)\n"
    "    label = classes[i * len(classes) // len(cases)]\n"
    "    json.dump({'label': label}, open(f'outputs/{case}/prediction.json', 'w'))\n"
    "print(len(cases), 'cases labelled by write order')\n")


@pytest.fixture(scope="module")
def brain(request):
    return request.getfixturevalue("staged")[0] / "root"


def test_published_files_carry_one_timestamp_and_no_write_order(brain):
    public = brain / BRAIN / "public"
    entries = [public, *public.rglob("*")]
    assert {os.lstat(p).st_mtime_ns for p in entries} == {PUBLISHED_TIME_NS}
    cases = sorted(p for p in public.iterdir() if p.is_dir())
    labels = {p.name: json.loads((brain / BRAIN / "private" / p.name / "label.json").read_text())["label"]
              for p in cases}
    by_inode = sorted(cases, key=lambda p: min(q.stat().st_ino for q in p.iterdir()))
    # the first quarter by inode is not one class (as when the stager wrote one class after another)
    assert len({labels[p.name] for p in by_inode[:25]}) > 1


@pytest.mark.slow  # one run through the real runner
def test_an_agent_labelling_by_write_order_stays_at_chance(brain, tmp_path):
    """Before: accuracy 1.0, rating A, without opening an image."""
    register_agent(StepsAgent)
    result, _ = run_task(BRAIN, StepsAgent.name, out=tmp_path, data_root=brain, workspace_quota_mb=256,
                         agent_options={"steps": [["python", BY_WRITE_ORDER]]})
    assert result.state == "scored" and result.task.components["completeness"] == 1.0
    assert result.task.partial < 0.45 and result.aggregate.rating not in ("A", "B"), result.task.partial


# ------------------------------------------------------------------ other harnesses' keys (class 4)


@pytest.mark.slow  # one local-plain run of four calls
def test_a_plain_call_sees_no_key_of_any_harness_on_the_host(reg, data_root, tmp_path):
    """Another state folder (another campaign's, a test worker's) made by this harness is covered in a plain
    call, and so is the user's default one; the agent's own work still runs. Before: `od` printed the key."""
    other = tmp_path / "other-campaign-state"
    harness_key(other)
    register_toy_track()
    register_agent(StepsAgent, reg)
    steps = [["bash", f"od -An -tx1 {other}/harness.key"], ["bash", f"ls -A {other} | grep ."],
             ["bash", "ls -A \"${XDG_STATE_HOME:-/root/.local/state}/automedbench\" | grep .; "
                      "ls -A ~root/.local/state/automedbench 2>/dev/null | grep ."],
             ["python", SOLVE]]
    result, run_dir = run_task(TASK, StepsAgent.name, out=tmp_path / "runs", data_root=data_root,
                               sandbox="local-plain", agent_options={"steps": steps})
    calls = [e for e in RunFolder(run_dir).events() if e.get("type") == "tool" and e.get("name") == "execute_code"]
    assert [c["exit_code"] != 0 for c in calls[:3]] == [True, True, True], [c["stdout"][-200:] for c in calls]
    assert all(c["stdout"].strip() == "" for c in calls[:3])
    assert result.state == "scored" and result.task.strict == 1.0


# ------------------------------------------------------------------ non-finite numbers in verdicts (class 5)

NON_FINITE = ["NaN", "Infinity", "-Infinity", "1e999", "-1e400"]


@pytest.mark.parametrize("number", NON_FINITE)
def test_a_reply_holding_a_non_finite_number_is_no_verdict_for_any_reader(number):
    with pytest.raises(ReplyError):
        final_json(f'{{"score": 0, "rationale": "fine", "extra": [{number}]}}')
    with pytest.raises(grading.GradeError):
        grading.parse_grade(f'{{"score": {number}, "rationale": "x"}}', [0, 1])
    with pytest.raises(VerdictError):
        parse_verdict(f'{{"items": {{"S1": {{"value": {number}, "rationale": "x"}}}}}}', [], 3)
    reply = f'{{"codes": [{{"code": "E1", "rationale": "x", "evidence_turns": [{number}]}}]}}'
    assert [c.code for c in parse_reply(reply, "llm:test")] == ["H-TAGGER"]


@pytest.mark.parametrize("turns", ["7", '"2"', "[true, 2.5, -1, 3, 4.0]", "{}", "[" + "1, " * 5000 + "1]"])
def test_tagger_evidence_turns_of_any_shape_never_crash(turns):
    reply = f'{{"codes": [{{"code": "E1", "rationale": "x", "evidence_turns": {turns}}}]}}'
    (code,) = parse_reply(reply, "llm:test")
    assert code.code == "E1" and all(isinstance(t, int) and t >= 0 for t in code.evidence_turns)
    assert len(code.evidence_turns) <= 200


@pytest.mark.slow  # a run through the real runner, then `codes --tagger`
def test_codes_with_a_tagger_replying_nan_ends_in_no_traceback(fake_llm, data_root, tmp_path, monkeypatch):
    """Before: `codes --tagger openai` ended in ValueError: cannot convert float NaN to integer."""
    monkeypatch.setenv("AMB_TEST_TAGGER_KEY", "sk-tag")
    out = tmp_path / "runs"
    cli = CliRunner().invoke(main, ["run", "--task", "toy/vowels", "--agent", "no-submit", "--out", str(out),
                                    "--data-root", str(data_root), "--quiet"])
    assert cli.exit_code == 0, cli.output
    fake_llm.fallback = lambda request: openai_reply(
        '{"codes": [{"code": "E5", "rationale": "never submitted", "evidence_turns": [NaN]}]}')
    cli = CliRunner().invoke(main, ["codes", str(out), "--tagger", "openai", "--tagger-option", "model=gpt-tagger",
                                    "--tagger-option", f"base_url={fake_llm.url}/v1", "--tagger-option",
                                    "api_key_env=AMB_TEST_TAGGER_KEY", "--tagger-option", "max_retries=0"])
    assert cli.exit_code == 0, cli.output
    assert cli.exception is None or isinstance(cli.exception, SystemExit)
    assert "H-TAGGER" in cli.output


# ------------------------------------------------------------------ evidence swapped under a genuine result (class 3)


def test_a_genuine_result_beside_a_rewritten_trajectory_is_not_counted(data_root, tmp_path):
    """A submitter rewrote a genuine run's trajectory (its site page then showed other work): `verify` refused
    it but `leaderboard` counted it (n 1, rating A), and a board with every result refused ended in a
    traceback. Now it is listed as not counted with the reason, and the board prints."""
    out = tmp_path / "runs"
    cli = CliRunner().invoke(main, ["run", "--task", "toy/vowels", "--agent", "reference", "--out", str(out),
                                    "--data-root", str(data_root), "--quiet", "--workspace-quota-mb", "0"])
    assert cli.exit_code == 0, cli.output
    (run_dir,) = out.iterdir()
    board = CliRunner().invoke(main, ["leaderboard", str(out), "--json", str(tmp_path / "before.json")])
    assert board.exit_code == 0 and json.loads((tmp_path / "before.json").read_text())["runs_used"] == 1
    trajectory = run_dir / "trajectory.jsonl"
    trajectory.write_bytes(trajectory.read_bytes().replace(b"Exploring the data", b"Training a 3-D U-Net"))
    board = CliRunner().invoke(main, ["leaderboard", str(out)])
    assert board.exit_code == 0 and board.exception is None, board.output
    text = " ".join(board.output.split())
    assert "trajectory.jsonl changed since the harness signed the result" in text
    board = CliRunner().invoke(main, ["leaderboard", str(out), "--json", str(tmp_path / "after.json")])
    assert board.exit_code == 0 and json.loads((tmp_path / "after.json").read_text())["runs_used"] == 0


# ------------------------------------------------------------------ case ids that hold their draw order (class 1)


def _untemper(value: int) -> int:
    """The Mersenne Twister state word behind one 32-bit output."""
    value ^= value >> 18
    value ^= (value << 15) & 0xEFC60000
    result = value
    for _ in range(5):
        result = value ^ ((result << 7) & 0x9D2C5680)
    value = result & 0xFFFFFFFF
    result = value
    for _ in range(3):
        result = value ^ (result >> 11)
    return result & 0xFFFFFFFF


def _twister_links(words: list[int]) -> int:
    """How many words from the 625th on follow from three earlier ones by the twister's recurrence."""
    links = 0
    for i in range(len(words) - 624):
        y = (words[i] & 0x80000000) | (words[i + 1] & 0x7FFFFFFF)
        links += words[i + 624] == words[i + 397] ^ (y >> 1) ^ (0x9908B0DF if y & 1 else 0)
    return links


def test_case_ids_hold_no_relation_that_gives_their_draw_order():
    """Ids drawn from one twister stream satisfied its recurrence in draw order (all 376 of 1000 here), so the
    published set carried the order the stager assigned them in (one class after another); HMAC ids do not."""
    from automedbench.stagesecret import StagingSecret

    ids = StagingSecret().case_ids(1000, "case")
    words = [_untemper(int(case.split("_")[1], 16)) for case in ids]
    assert _twister_links(words) == 0
