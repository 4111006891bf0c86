"""Only the harness puts a result on a leaderboard (issue 35, class 3): every result carries a proof a sandbox
cannot forge (`automedbench.resultproof`), and every reader checks it.

Through the real runner (toy track): an honest run, and an agent that plants a second, perfect result beside
its own run folder, the measured attack (before: listed as a verified run, Overall 1.0, rating A, counted).
Then every way of forging or reusing a result we could think of, each through the command line:
`leaderboard`, `verify`, `show`, `codes`, `rejudge`, the site and the HTML report.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest
from automedbench.cli import main
from automedbench.resultproof import check_bytes, check_folder, public_key, write_result
from automedbench.runfolder import RunFolder
from automedbench.testing import StepsAgent, register_agent, register_toy_track, run_task
from click.testing import CliRunner
from test_agent_bytes_runs import SOLVE, TASK


def plant(template: dict) -> str:
    """Agent code: a perfect, 'verified' result in a new folder beside its own run (the measured attack)."""
    return f"""
import json, os, pathlib
runs = pathlib.Path(os.environ['WORKSPACE_DIR']).resolve().parent.parent
data = json.loads({json.dumps(json.dumps(template))})
data['header']['run_id'] = 'forged-run'
data['aggregate'].update(overall=1.0, agentic=1.0, task=1.0, rating='A')
for stage in data['stages']:
    stage['score'] = 1.0
data['isolation'].update(verified=True, unverified=[])
try:
    (runs / 'forged-run').mkdir()
    (runs / 'forged-run' / 'result.json').write_text(json.dumps(data, indent=2))
    print('planted')
except OSError as exc:
    print('refused', exc)
"""


@pytest.fixture(scope="module")
def runs(reg, data_root, tmp_path_factory) -> dict[str, Path]:
    """One honest run (local) and the planting agent's run (local-plain: it can reach the runs folder)."""
    register_toy_track()
    register_agent(StepsAgent, reg)
    out = tmp_path_factory.mktemp("proof") / "runs"
    _, honest = run_task(TASK, "reference", out=out, data_root=data_root)
    template = json.loads((honest / "result.json").read_text())
    template.pop("proof")
    _, planter = run_task(TASK, StepsAgent.name, out=out, data_root=data_root, sandbox="local-plain",
                          agent_options={"steps": [["python", plant(template)], ["python", SOLVE]]})
    return {"out": out, "honest": honest, "planter": planter}


def board(*roots: Path, extra: tuple[str, ...] = ()) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "board.json"
        result = CliRunner().invoke(main, ["leaderboard", *map(str, roots), "--json", str(out), "--quiet",
                                           "--resamples", "100", *extra], catch_exceptions=False)
        assert result.exit_code == 0, result.output
        return json.loads(out.read_text())


def verify(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["verify", *args], catch_exceptions=False)
    return result.exit_code, " ".join(result.output.split())


def test_a_result_the_agent_planted_is_never_counted(runs):
    """Before: the planted result.json was listed as a verified run (Overall 1.0, rating A) and counted."""
    data = board(runs["out"], extra=("--include-unverified",))
    counted = {row["agent"]: row for row in data["rows"]}
    assert data["runs_used"] == 2 and set(counted) == {"reference", StepsAgent.name}, data
    honest = json.loads((runs["honest"] / "result.json").read_text())["aggregate"]["overall"]
    assert counted["reference"]["n"] == 1 and counted["reference"]["overall"] == pytest.approx(honest, abs=1e-4)
    forged = runs["out"] / "forged-run"
    if forged.exists():  # the backend let the agent write there: the file exists but never counts
        assert any("forged-run" in r and "no proof" in r for r in data["rejected"]), data["rejected"]
        code, text = verify(str(forged))
        assert code == 1 and "NOT GENUINE" in text and "no proof" in text


def test_the_harness_own_results_verify_and_every_alteration_is_named(runs, tmp_path):
    honest = runs["honest"]
    code, text = verify(str(honest), str(runs["planter"]))
    assert code == 0 and text.count(": genuine") == 2, text
    assert text.count("an unverified run, counted only with --include-unverified") == 1  # the local-plain one
    root = tmp_path / "forgeries"
    root.mkdir()
    # a genuine result copied to another folder
    shutil.copytree(honest, root / "copied")
    # the score edited in place
    shutil.copytree(honest, root / honest.name)
    edited = (root / honest.name / "result.json")
    edited.write_text(edited.read_text().replace('"rating": "A"', '"rating": "B"', 1))
    # a proof taken from a genuine result onto another one's bytes (a different run's body)
    other = runs["planter"]
    shutil.copytree(other, root / other.name)
    body = (other / "result.json").read_bytes()
    proof = (honest / "result.json").read_bytes()
    cut = proof.rindex(b',\n  "proof": ')
    (root / other.name / "result.json").write_bytes(body[:body.rindex(b',\n  "proof": ')] + proof[cut:])
    expected = {"copied": "copied or renamed", honest.name: "changed after the harness signed it",
                other.name: "changed after the harness signed it"}
    for name, why in expected.items():
        code, text = verify(str(root / name))
        assert code == 1 and why in text, (name, text)
    data = board(root, extra=("--include-unverified",))
    assert data["runs_used"] == 0 and data["excluded"]["not harness-written"] == 3


def test_evidence_changed_after_signing_is_refused_by_rejudge_and_codes(runs, tmp_path):
    """The proof binds the trajectory, verdict and evaluation by digest: rejudge and codes re-read them to
    recompute a score or a code, and they re-sign what they rewrite, so they refuse evidence changed since."""
    copy = tmp_path / "runs" / runs["honest"].name
    shutil.copytree(runs["honest"], copy)
    code, text = verify(str(copy))
    assert code == 0, text
    with (copy / "trajectory.jsonl").open("a") as handle:
        handle.write(json.dumps({"type": "note", "note": "added later"}) + "\n")
    code, text = verify(str(copy))
    assert code == 1 and "trajectory.jsonl changed since the harness signed the result" in text
    before = (copy / "result.json").read_bytes()
    rejudged = CliRunner().invoke(main, ["rejudge", str(copy), "--judge", "rules"])
    assert rejudged.exit_code == 2 and "not re-graded" in rejudged.output
    coded = CliRunner().invoke(main, ["codes", str(copy.parent)])
    assert coded.exit_code == 0 and "left out (not verified" in " ".join(coded.output.split())
    assert (copy / "result.json").read_bytes() == before  # nothing rewritten, nothing re-signed


def test_rejudge_and_codes_re_sign_what_they_verified(runs, tmp_path):
    copy = tmp_path / "runs" / runs["honest"].name
    shutil.copytree(runs["honest"], copy)
    before = (copy / "result.json").read_bytes()
    assert CliRunner().invoke(main, ["rejudge", str(copy), "--judge", "rules"]).exit_code == 0
    assert CliRunner().invoke(main, ["codes", str(copy.parent)]).exit_code == 0
    assert (copy / "result.json").read_bytes() != before  # rewritten (new judge time, judge archived) ...
    assert check_folder(copy).genuine  # ... and signed again, evidence digests included


def test_a_key_this_harness_does_not_trust_is_named_and_can_be_trusted(runs, tmp_path, monkeypatch):
    """Another harness (another state folder, another key) signs a result: foreign here until its public key
    is trusted with --key, then genuine; a key file works as well as the hex."""
    folder = tmp_path / "elsewhere" / runs["honest"].name
    shutil.copytree(runs["honest"], folder)
    data = json.loads((folder / "result.json").read_text())
    data.pop("proof")
    monkeypatch.setenv("AUTOMEDBENCH_STATE", str(tmp_path / "other-state"))
    assert write_result(RunFolder(folder), data) is None
    other = public_key()
    monkeypatch.undo()
    code, text = verify(str(folder))
    assert code == 1 and "does not trust" in text and other[:16] in text
    code, text = verify(str(folder), "--key", other)
    assert code == 0 and f"signed by {other[:16]}" in text
    keyfile = tmp_path / "team.pub"
    keyfile.write_text(f"# the other lab\n{other}\n")
    assert verify(str(folder), "--key", str(keyfile))[0] == 0
    assert verify(str(folder), "--key", "zz")[0] == 2  # bad input: one line, exit 2
    assert board(folder.parent)["runs_used"] == 0  # readers trust only their own and listed keys


def test_results_without_a_proof_read_as_unverified_with_the_reason(runs, tmp_path):
    """A result written before results were signed (no proof): never silently trusted; every reader says so."""
    folder = tmp_path / "old" / runs["honest"].name
    shutil.copytree(runs["honest"], folder)
    data = json.loads((folder / "result.json").read_text())
    data.pop("proof")
    (folder / "result.json").write_text(json.dumps(data, indent=2))
    code, text = verify(str(folder.parent))
    assert code == 1 and "written before results were signed" in text and "run it again" in text
    shown = CliRunner().invoke(main, ["show", str(folder)])
    assert shown.exit_code == 0 and "UNVERIFIED" in shown.output
    assert "written before results were signed" in " ".join(shown.output.split())
    data = board(folder.parent, extra=("--include-unverified",))
    assert data["runs_used"] == 0 and "written before results were signed" in data["rejected"][0]


def test_copies_count_once_and_site_and_html_show_only_genuine_runs(runs, tmp_path):
    """The same genuine run reached under two roots counts once; the site and the HTML report list only
    genuine runs (the planted one, where it exists, is on no page)."""
    mirror = tmp_path / "mirror"
    shutil.copytree(runs["honest"], mirror / runs["honest"].name)
    data = board(runs["out"], mirror)
    assert data["runs_used"] == 1 and any("a copy of the run" in r for r in data["rejected"])
    site, html = tmp_path / "site", tmp_path / "board.html"
    result = CliRunner().invoke(main, ["leaderboard", str(runs["out"]), "--include-unverified", "--site", str(site),
                                       "--html", str(html), "--quiet", "--resamples", "100"])
    assert result.exit_code == 0, result.output
    pages = " ".join(p.read_text() for p in site.rglob("*.html")) + html.read_text()
    assert "<h1>Run forged-run" not in pages and f"<h1>Run {runs['honest'].name}" in pages


def test_proof_parsing_refuses_malformed_tails(runs):
    data = (runs["honest"] / "result.json").read_bytes()
    name = runs["honest"].name
    assert check_bytes(data, name).genuine
    cut = data.rindex(b',\n  "proof": ')
    for tail, why in [(data[cut:].replace(b'"sig": "', b'"sig": "00', 1), "not in the form|does not verify"),
                      (data[cut:].replace(b'{"alg"', b'{"x": 1, "alg"', 1), "not in the form"),
                      (data[cut:-3] + b"}\n}\n", "not valid JSON"),
                      (data[cut:] + b" ", "no proof")]:
        found = check_bytes(data[:cut] + tail, name)
        assert not found.genuine and any(w in found.reason for w in why.split("|")), (tail[-40:], found)
