"""Agent bytes never crash the harness (issue 35, class 7): a property test through the real runner.

For every track's demo, one run whose agent submits the track's correct outputs with hostile text (lone
surrogates written as JSON escapes and as raw bytes, NUL, U+2028, bidi and escape characters, strings of
hundreds of thousands of characters, drawn by hypothesis around those fixed ones) after one string field of
each case's JSON outputs in turn (so every field, keys included, is hostile in some otherwise valid case),
every field at once in the last case (beside a file whose name is not UTF-8), after every text output, and in
its words, its reasoning, its plan and its tool output. Each run must end `scored`
(before: one lone surrogate in a VQA answer or a detection box ended the run as an infrastructure failure,
which sweeps retry and leaderboards drop), and every file the harness wrote must read back as UTF-8 JSON:
result, evaluation, trajectory, the run page, `show` and a leaderboard over the runs.
"""

from __future__ import annotations

import base64
import io
import json
import tarfile
from pathlib import Path

import attrs
import pytest
from automedbench.cli import main
from automedbench.records import AgentTurn
from automedbench.staging import ensure
from automedbench.testing import StepsAgent, register_agent, run_task
from automedbench.trajectory import torn_line
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

DEMOS = ["vqa/demo", "detection/demo", "classification/demo", "report_gen/demo", "segmentation/demo",
         "enhancement/demo-ldct", "synthesis/demo"]
FIXED = ["\ud800", "a\udfffb", "\x00", "\u2028\u2029\x85", "\u202e\x1b[2J\x9b31m", "\ufeff", "😀\ud83d"]
hostile = st.lists(st.text(st.characters(codec=None, categories=("Cs", "Cc", "Zl", "Zp", "Cf", "So", "Lo")),
                           min_size=1, max_size=12), min_size=1, max_size=3).map(lambda parts: "".join(FIXED + parts))


def string_paths(value, path=()) -> list[tuple]:
    """Where the strings of a JSON value are: a path of keys and indexes to each string value, and to each
    object (where a hostile key goes)."""
    if isinstance(value, str):
        return [path]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in string_paths(v, (*path, i))]
    if isinstance(value, dict):
        return [(*path, None), *(p for k, v in value.items() for p in string_paths(v, (*path, k)))]
    return []


def mangled(value, path: tuple, text: str):
    """`value` with the one string at `path` followed by `text` (None at the end: a hostile key added)."""
    if not path:
        return value + text if isinstance(value, str) else value
    head, rest = path[0], path[1:]
    if head is None:
        return {**value, text: text}
    copy = list(value) if isinstance(value, list) else dict(value)
    copy[head] = mangled(value[head], rest, text)
    return copy


def hostile_outputs(reg, track_task, data_root: Path, folder: Path, text: str) -> bytes:
    """The track's perfect outputs with hostile text, tarred for the agent: case k has the k-th string field of
    its JSON outputs followed by `text` (each field in turn, keys as an added key; the last case every field at
    once, its first 300 000 characters long, beside a file whose name is not UTF-8), and text outputs get
    `text` as raw bytes, with bytes no UTF-8 holds."""
    track, task = reg.task(track_task)
    staged = ensure(track, task, data_root)
    track.write_baseline(task, "perfect", staged, folder)
    raw = text.encode("utf-8", "surrogatepass")
    cases = sorted(p for p in folder.iterdir() if p.is_dir())
    for k, case in enumerate(cases):
        for path in sorted(p for p in case.rglob("*") if p.is_file()):
            if path.suffix == ".json":
                data = json.loads(path.read_text())
                paths = string_paths(data)
                if k == len(cases) - 1:
                    for n, where in enumerate(paths):
                        data = mangled(data, where, text * (1 + 300_000 // len(text)) if n == 1 else text)
                elif paths:  # each field with one piece: a lone surrogate alone first (the measured crash)
                    pieces = [" \ud800", text, " \udfff", "\u2028", "\x00", text * (1 + 300_000 // len(text))]
                    data = mangled(data, paths[k % len(paths)], pieces[(k // len(paths)) % len(pieces)])
                path.write_text(json.dumps(data))  # ensure_ascii: a lone surrogate is the escape \ud800
            elif path.suffix in (".txt", ".md"):
                path.write_bytes(path.read_bytes() + raw + b"\xff\xfe" + raw)
        if k == len(cases) - 1:  # a name that is not UTF-8 (surrogate-escaped bytes): rejects its case
            (case / "odd\udcff\udced.json").write_bytes(raw)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.add(folder, arcname=".")
    return buffer.getvalue()


class HostileSteps(StepsAgent):
    """StepsAgent whose words, reasoning and call ids are hostile text."""

    name = "hostile-bytes"
    text = ""

    def next_turn(self, messages) -> AgentTurn:
        turn = super().next_turn(messages)
        return attrs.evolve(turn, content=self.text, reasoning=self.text * 50)


CHUNK_CHARS = 2 << 20  # what one step's code carries of the outputs' archive: a reply holds at most 4 Mi characters


def agent_steps(archive: bytes, text: str) -> list[list[str]]:
    """The agent's steps: the outputs' archive carried in pieces (a demo's volumes are more than one reply may
    hold), then unpacked into outputs/, with the hostile text in the plan, stdout and stderr."""
    encoded = base64.b64encode(archive).decode()
    carry = [["python", f"open(__import__('os').environ['WORKSPACE_DIR'] + '/archive.b64', 'a').write("
                        f"{encoded[at:at + CHUNK_CHARS]!r})"] for at in range(0, len(encoded), CHUNK_CHARS)]
    return [*carry, ["python", f"""
import base64, io, os, sys, tarfile
ws = os.environ['WORKSPACE_DIR']
with open(ws + '/archive.b64') as f, tarfile.open(fileobj=io.BytesIO(base64.b64decode(f.read()))) as tar:
    tar.extractall(ws + '/outputs')
os.remove(ws + '/archive.b64')
text = {text!r}
os.makedirs(ws + '/plan', exist_ok=True)
open(ws + '/plan/plan.md', 'wb').write(text.encode('utf-8', 'surrogatepass') * 100 + b'\\xff')
sys.stdout.buffer.write(text.encode('utf-8', 'surrogatepass') * 2000)
sys.stderr.write(text.encode('utf-8', 'surrogatepass').decode('utf-8', 'replace'))
"""]]


@pytest.mark.slow  # one demo run per track
@pytest.mark.parametrize("task_id", DEMOS)
@settings(max_examples=1, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=hostile)
def test_hostile_text_in_every_contract_field_ends_scored(reg, data_root, tmp_path_factory, task_id, text):
    work = tmp_path_factory.mktemp("bytes")
    archive = hostile_outputs(reg, task_id, data_root, work / "outputs", text)
    HostileSteps.text = text
    register_agent(HostileSteps, reg)
    result, run_dir = run_task(task_id, HostileSteps.name, out=work / "runs", data_root=data_root,
                               agent_options={"steps": agent_steps(archive, text)},
                               warm_evaluator=False)  # the cold evaluator: `run`'s default path
    assert result.state == "scored", (task_id, result.state, result.error)
    assert not [c for c in result.error_codes if c.code in ("H-HOOK", "H-DETECTOR")], result.error_codes
    for name in ("result.json", "evaluation.json", "judge.json", "submission_manifest.json"):
        json.loads((run_dir / name).read_bytes().decode("utf-8"))  # strict UTF-8, whole JSON
    assert torn_line(run_dir / "trajectory.jsonl") is None
    for line in (run_dir / "trajectory.jsonl").read_bytes().decode("utf-8").split("\n"):
        if line:
            json.loads(line)
    (run_dir / "view.html").read_bytes().decode("utf-8")
    shown = CliRunner().invoke(main, ["show", str(run_dir), "--items"])
    assert shown.exit_code == 0 and "UNVERIFIED" not in shown.output, shown.output[-2000:]
    board = CliRunner().invoke(main, ["leaderboard", str(work / "runs"), "--quiet", "--resamples", "100",
                                      "--html", str(work / "board.html")])
    assert board.exit_code == 0, board.output
    viewed = CliRunner().invoke(main, ["view", str(run_dir), "--out", str(work / "view.html")])
    assert viewed.exit_code == 0, viewed.output
