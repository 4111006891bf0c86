"""Red team round 24: results put on a leaderboard that the harness did not produce as recorded, through the real
runner and CLI. The adversary is a second user who can write the sweep folder (not the harness's key).

- **Case pictures outside the proof** (leaderboards and the site): the proof bound the trajectory, verdict,
  evaluation, artefacts and tool output, not `pictures/`; the run page shows each case's picture and the texts of
  its index (the answer, the reference, a note) as the evaluator's. Another case's picture copied over one and a
  note of the editor's own ("reviewer confirmed") in the index: `verify` said genuine, the leaderboard counted the
  run and the site showed both on its page. The pictures are now evidence: the run is "not genuine: pictures/...
  changed since the harness signed the result", on no page.
- **One run counted twice** (leaderboards, duplicates): copies counted once only when their bytes were equal; a copy
  kept from before the run was re-graded or re-tagged (`rejudge`, `codes --tagger`) is another signed body of the
  same run, so the run was two rows (n 2 over one run). Versions of one run (the same run id and signed
  trajectory) now count once: "another version of the run at ...".
- **A re-signing command signing what it read after it checked** (rejudge, codes): both checked the run folder,
  then read it again to grade or tag it and signed the digests of whatever it held by then. A file swapped in while
  the judge graded (an LLM judge takes seconds; here a judge that swaps it, standing in for the second user)
  was graded and signed: another run's evaluation.json put under a half-done run gave it that run's Task 1.0
  (Task 0.0 -> 1.0, Overall 0.10 -> 0.63, rating F -> A), genuine; a trajectory swapped while `codes` tagged
  was signed into the run. Both now read a private copy checked file by file against the signed digests
  (`copy_verified`) and sign those digests (plus rejudge's own verdict): the re-graded run keeps its own Task and
  a swapped file leaves it not genuine, refused by every reader.
- **A run page drawn from the folder after the table was checked** (the site, same class): `write_site` re-read each
  counted run's folder to draw its page; a result.json (another agent's name) or trajectory rewritten after
  `load_table` was on the page of a run the ranking counts. Pages are now drawn from a verified copy, or not drawn.
  `show` and `view` likewise read result.json once to show it and again to check it: what they show is now what
  they checked (`load_checked`; `view` draws a genuine run from its verified copy).
- **References another user can write** (state shared across users: the staging, AUTOMEDBENCH_DATA): a staging
  writable by others (a data root shared with a group, staged by a colleague, or a loose umask) had its references
  replaced by what the attacker's agent writes ('0' for every vowel count): Task 0.17 -> 1.0, rating C -> A,
  signed. `staging.load` now refuses (one line, before the run) a staging with any entry, or any folder up to the
  data root, that belongs to another user or is writable by group or others (`ownedpaths.py`); so does a run
  whose runs folder (or a folder above it, sticky ones excepted) another user can write: there the run folder,
  moved away while the judge graded and replaced by a copy holding another run's evaluation.json, was signed as
  the run's record (genuine) and `rejudge` then scored it from that evaluation: Task 0.0 -> 1.0.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from automedbench.api import ItemVerdict, Judge, JudgeVerdict, UserError, hookimpl
from automedbench.testing import run_cli, run_steps, run_task
from test_redteam_round13 import HALF
from test_result_proof import board

TASK = "toy/vowels"
SWAPPER = "swapping-test-judge"
SWAP: dict[str, Path] = {}  # the file a "second user" puts in place while the judge or tagger works: dest -> source


def _swap() -> None:
    for dest, source in SWAP.items():
        shutil.copyfile(source, dest)


class SwappingJudge(Judge):
    """A judge that grades like a slow one and meanwhile (as another user writing the folder would) swaps a file."""

    name = SWAPPER

    def grade(self, judge_input: Any) -> JudgeVerdict:
        _swap()
        return JudgeVerdict(self.name, self.version,
                            [ItemVerdict(i.id, i.stage, i.description, 0.0, "graded") for i in judge_input.rubric])


class SwappingPlugins:
    """The swapping judge, and a tagging step that swaps before the installed one tags (it answers nothing)."""

    @hookimpl
    def automedbench_register_judges(self, register: Any) -> None:
        register(SWAPPER, SwappingJudge, "test judge: swaps a file of the run while it grades")

    @hookimpl(tryfirst=True)
    def automedbench_tag_codes(self, result: Any, run_dir: Path, registry: Any, output_names: list[str],
                               tagger: Any) -> Any:
        _swap()


@pytest.fixture
def swapping(reg):
    name = "test_swapping_plugins"
    reg.add_plugin(SwappingPlugins(), name=name)
    try:
        yield SWAP
    finally:
        SWAP.clear()
        reg.remove_plugin(name)


def verify(folder: Path) -> str:
    return " ".join(run_cli("verify", str(folder)).output.split())


def test_a_case_picture_edited_after_the_run_is_on_no_leaderboard_and_no_page(data_root, tmp_path):
    """Before: verify said genuine, the run counted and the site showed the edited answer and note."""
    runs = tmp_path / "runs"
    _, run_dir = run_task(TASK, "reference", out=runs, data_root=data_root)
    assert "genuine" in verify(run_dir) and "NOT GENUINE" not in verify(run_dir)
    index_path = run_dir / "pictures" / "index.json"
    index = json.loads(index_path.read_text())
    index["cases"][0]["texts"] = [{"title": "answer", "text": "planted-answer", "role": "output"}]
    index["cases"][0]["note"] = "planted-note: reviewer confirmed"
    index_path.write_text(json.dumps(index))
    assert "NOT GENUINE: pictures/index.json changed since the harness signed the result" in verify(run_dir)
    data = board(runs)
    assert data["runs_used"] == 0 and "pictures/index.json changed" in data["rejected"][0], data["rejected"]
    site = tmp_path / "site"
    made = run_cli("leaderboard", str(runs), "--site", str(site), "--quiet", "--resamples", "100")
    assert made.exit_code == 0, made.output
    pages = " ".join(p.read_text() for p in site.rglob("*.html"))
    assert "planted-answer" not in pages and "planted-note" not in pages


def test_a_version_kept_from_before_a_rejudge_counts_once(data_root, tmp_path):
    """Before: the copy kept in another sweep folder and the re-graded original were two signed bodies: n 2."""
    runs, other = tmp_path / "runs", tmp_path / "other"
    _, run_dir = run_steps(TASK, [("python", HALF)], out=runs, data_root=data_root)
    shutil.copytree(run_dir, other / run_dir.name)
    regraded = run_cli("rejudge", str(run_dir), "--judge", "rules")
    assert regraded.exit_code == 0, regraded.output
    assert (run_dir / "result.json").read_bytes() != (other / run_dir.name / "result.json").read_bytes()
    assert "NOT GENUINE" not in verify(run_dir) + verify(other / run_dir.name)  # both the harness's
    data = board(runs, other)
    assert data["runs_used"] == 1 and sum(row["n"] for row in data["rows"]) == 1, data["rows"]
    (line,) = data["rejected"]
    assert "another version of the run at" in line and "counted once" in line
    assert data["excluded"] == {"copy or other version of a counted run": 1}
    # two runs of the same agent are still two
    run_steps(TASK, [("python", HALF)], out=other, data_root=data_root)
    assert board(runs, other)["runs_used"] == 2


def test_an_evaluation_swapped_while_the_judge_grades_is_neither_scored_nor_signed(swapping, data_root, tmp_path):
    """Before: the half-done run re-graded with the reference run's evaluation.json: its Task 1.0, signed, counted.
    Now its own Task, and the folder (holding the swapped file) is not genuine."""
    runs = tmp_path / "runs"
    donor, donor_dir = run_task(TASK, "reference", out=runs, data_root=data_root)
    victim, victim_dir = run_steps(TASK, [("python", HALF)], out=runs, data_root=data_root)
    assert victim.aggregate.task < donor.aggregate.task
    swapping[victim_dir / "evaluation.json"] = donor_dir / "evaluation.json"
    regraded = run_cli("rejudge", str(victim_dir), "--judge", SWAPPER)
    assert regraded.exit_code == 0, regraded.output
    after = json.loads((victim_dir / "result.json").read_text())
    assert after["aggregate"]["task"] == pytest.approx(victim.aggregate.task)
    assert "NOT GENUINE: evaluation.json changed since the harness signed the result" in verify(victim_dir)
    data = board(runs)
    assert data["runs_used"] == 1 and [r["agent"] for r in data["rows"]] == ["reference"]


def test_a_trajectory_swapped_while_codes_tags_is_not_signed_into_the_run(swapping, data_root, tmp_path):
    """Before: `codes` re-signed the run over the other run's trajectory (genuine, its page showing that work)."""
    runs = tmp_path / "runs"
    _, donor_dir = run_task(TASK, "reference", out=runs, data_root=data_root)
    _, victim_dir = run_steps(TASK, [("python", HALF)], out=runs, data_root=data_root)
    honest = run_cli("codes", str(victim_dir))  # nothing swapped: re-tagged and still the harness's
    assert honest.exit_code == 0 and "NOT GENUINE" not in verify(victim_dir), honest.output
    swapping[victim_dir / "trajectory.jsonl"] = donor_dir / "trajectory.jsonl"
    tagged = run_cli("codes", str(victim_dir))
    assert tagged.exit_code == 0, tagged.output
    assert "NOT GENUINE: trajectory.jsonl changed since the harness signed the result" in verify(victim_dir)
    assert board(runs)["runs_used"] == 1


def test_a_run_page_shows_what_was_signed_not_what_the_folder_holds_by_then(data_root, tmp_path):
    """Before: the site re-read each counted run's folder to draw its page after the table was checked; a
    trajectory and result.json rewritten in between (the site of a large sweep takes minutes) were on the page
    of a run the ranking counted. Now the page is drawn from a copy checked against the proof, or not at all."""
    from automedbench_campaign.site import write_site
    from automedbench_campaign.store import load_table

    runs = tmp_path / "runs"
    _, run_dir = run_task(TASK, "reference", out=runs, data_root=data_root)
    _, other_dir = run_task(TASK, "reference", out=runs, data_root=data_root)
    table = load_table([runs])
    assert len(table) == 2 and not table.rejected
    result = json.loads((run_dir / "result.json").read_text())
    result["header"]["agent"] = "planted-agent"
    (run_dir / "result.json").write_text(json.dumps(result, indent=2))
    with (other_dir / "trajectory.jsonl").open("a") as log:
        log.write(json.dumps({"type": "note", "text": "planted-turn"}) + "\n")
    site = tmp_path / "site"
    write_site(table, site, resamples=100)
    pages = " ".join(p.read_text() for p in (site / "runs").glob("*.html"))
    assert "planted-agent" not in pages and "planted-turn" not in pages
    # an untouched run keeps its page
    _, third = run_task(TASK, "reference", out=tmp_path / "more", data_root=data_root)
    write_site(load_table([tmp_path / "more"]), tmp_path / "site2", resamples=100)
    assert (tmp_path / "site2" / "runs" / f"{third.name}.html").is_file()


@pytest.mark.parametrize("command", ["show", "view"])
def test_show_and_view_check_the_result_they_show(command, data_root, tmp_path, monkeypatch):
    """Before: `show` and `view` read result.json, then checked the folder with a second read: a result rewritten
    (another agent's name) and put back in between was shown as genuine. Now the bytes shown are the bytes checked
    (`view` draws a genuine run from its verified copy)."""
    from automedbench.runfolder import RunFolder

    _, run_dir = run_task(TASK, "reference", out=tmp_path / "runs", data_root=data_root)
    genuine = (run_dir / "result.json").read_bytes()
    forged = genuine.replace(b'"agent": "reference"', b'"agent": "planted-agent"', 1)
    assert forged != genuine
    (run_dir / "result.json").write_bytes(forged)
    read = RunFolder.result_bytes

    def put_back_then_read(folder: RunFolder) -> bytes | None:  # the second user restores the file meanwhile
        (run_dir / "result.json").write_bytes(genuine)
        return read(folder)

    monkeypatch.setattr(RunFolder, "result_bytes", put_back_then_read)
    shown = run_cli(command, str(run_dir))
    assert shown.exit_code == 0, shown.output
    text = " ".join((shown.output if command == "show" else (run_dir / "view.html").read_text()).split())
    assert "planted-agent" not in text or "not verified as this harness's result" in text


ZERO = """
import os
data, out = os.environ['DATA_DIR'], os.path.join(os.environ['WORKSPACE_DIR'], 'outputs')
for case in sorted(c for c in os.listdir(data) if os.path.isdir(os.path.join(data, c))):
    os.makedirs(os.path.join(out, case), exist_ok=True)
    open(os.path.join(out, case, 'answer.txt'), 'w').write('0')
"""


def test_a_staging_written_under_umask_002_is_used_where_the_group_is_the_users_own(tmp_path):
    """Group write is no other user's where the group is this user's private one (umask 002 puts it on every file):
    such a staging is used; a group with other members is refused."""
    from automedbench.ownedpaths import _own_group
    from automedbench.testing import stage_task

    root = tmp_path / "data"
    staged = stage_task(TASK, root)
    (staged.private / staged.case_ids[0] / "answer.txt").chmod(0o664)
    if _own_group(os.getegid()):
        result, _ = run_steps(TASK, [("python", ZERO)], out=tmp_path / "runs", data_root=root)
        assert result.state == "scored"
    else:
        with pytest.raises(UserError, match="writable by its group"):
            run_steps(TASK, [("python", ZERO)], out=tmp_path / "runs", data_root=root)


@pytest.mark.parametrize("loose", ["file", "folder"])
def test_references_another_user_can_write_score_no_run(loose, tmp_path):
    """Before: a staging left writable by others (a shared data root, a umask) had its references replaced by what
    the attacker's agent writes ('0' for every case): Task 1.0, rating A, signed (0.17, C on the true references).
    Now the staging is refused with one line before the run starts; fixed, it is used again."""
    from automedbench.testing import stage_task

    root = tmp_path / "shared-data"
    staged = stage_task(TASK, root)
    for case in staged.case_ids:
        (staged.private / case / "answer.txt").write_text("0\n")
    loosened = staged.private / staged.case_ids[0] / ("answer.txt" if loose == "file" else "")
    loosened.chmod(0o666 if loose == "file" else 0o777)
    with pytest.raises(UserError, match="writable by others; another user could change the references"):
        run_steps(TASK, [("python", ZERO)], out=tmp_path / "runs", data_root=root)
    cli = run_cli("run", "--task", TASK, "--agent", "reference", "--data-root", str(root), "--out",
                  str(tmp_path / "runs"))
    assert cli.exit_code != 0 and "staged data not used" in cli.output, cli.output
    assert not list((tmp_path / "runs").glob("*/result.json"))
    loosened.chmod(0o644 if loose == "file" else 0o755)
    result, _ = run_steps(TASK, [("python", ZERO)], out=tmp_path / "runs", data_root=root)
    assert result.aggregate.task == 1.0  # the references as this user left them: used


class SwappingFolderJudge(Judge):
    """Grades like a slow judge while another user, able to write the runs folder, moves the run folder away and
    puts one of their own in its place (an evaluation of another run's, the rest copied)."""

    name = "folder-swapping-test-judge"
    donor: Path | None = None

    def grade(self, judge_input: Any) -> JudgeVerdict:
        (run_dir,) = [p for p in RUNS_FOLDER[0].iterdir() if p.is_dir() and p != self.donor and p.name[:1] != "."
                      and not (p / "result.json").exists()]
        shutil.copytree(run_dir, run_dir.with_name(".theirs"), ignore=shutil.ignore_patterns("workspace"))
        shutil.copyfile(self.donor / "evaluation.json", run_dir.with_name(".theirs") / "evaluation.json")
        run_dir.rename(run_dir.with_name(".moved"))
        run_dir.with_name(".theirs").rename(run_dir)
        return JudgeVerdict(self.name, self.version, [])


RUNS_FOLDER: list[Path] = []


def test_a_runs_folder_another_user_can_write_is_refused(reg, data_root, tmp_path):
    """Before: in a runs folder writable by others, the run folder swapped while the judge graded (another run's
    evaluation.json put in) was signed as the run's evidence: genuine, and re-graded from it. Now such a runs folder
    is refused with one line before the run starts; made private, runs are written there again."""
    module_name = "test_folder_swapping_judge"

    class Plugin:
        @hookimpl
        def automedbench_register_judges(self, register: Any) -> None:
            register(SwappingFolderJudge.name, SwappingFolderJudge, "test judge: swaps the run folder")

    runs = tmp_path / "shared-runs"
    _, SwappingFolderJudge.donor = run_task(TASK, "reference", out=runs, data_root=data_root)
    RUNS_FOLDER[:] = [runs]
    runs.chmod(0o777)
    reg.add_plugin(Plugin(), name=module_name)
    try:
        with pytest.raises(UserError, match=r"runs folder .* not used: .* is writable by others"):
            run_steps(TASK, [("python", HALF)], out=runs, data_root=data_root,
                      judge=SwappingFolderJudge.name)
    finally:
        reg.remove_plugin(module_name)
    runs.chmod(0o755)
    result, _ = run_steps(TASK, [("python", HALF)], out=runs, data_root=data_root)
    assert result.state == "scored"
