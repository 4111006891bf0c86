"""Review of round 27's merges: what the leaderboard says about attempts and sweeps on a board of part of a folder.

- **A complete sweep called chosen on every task and track page** (`leaderboard --site`, `--public-sources`): a
  board of some of the folder's runs (`RunTable.select`: the site's per-track and per-task pages, the public-source
  filter) counted each sweep's runs within that subset only, so a sweep over two tasks, every run in the folder,
  read "1 of 1 sweep(s) partly present" and was marked chosen on both task pages. Now a selected table keeps the
  attempts of every run the folder holds (`RunTable.every_attempt`) and each row is counted against those.
"""

from __future__ import annotations

import numpy as np
import pytest
from automedbench_campaign.leaderboard import build
from automedbench_campaign.site import _task_page, _track_page, write_site
from automedbench_campaign.store import RunTable


@pytest.fixture(autouse=True)
def own_state(tmp_path, monkeypatch):
    """No ledger of this machine: the rows are counted from the folder alone."""
    monkeypatch.setenv("AUTOMEDBENCH_STATE", str(tmp_path / "state"))


def _row(task_id: str, track: str, sweep: str, size: int) -> dict:
    """One scored run of a sweep, as `store.summarise` makes it (attempt 1 of its own configuration)."""
    return {"run_id": f"{task_id}-run", "agent": "a", "task_id": task_id, "track": track, "tier": "lite",
            "conditions": "c", "scoring": "s", "state": "scored", "end_reason": "", "rating": "C", "path": "",
            "overall": 0.5, "agentic": 0.5, "task": 0.5, **{s: 0.5 for s in ("S1", "S2", "S3", "S4", "S5")},
            "turns": 1, "wall_s": 1.0, "tokens_in": 0, "tokens_out": 0, "cost_usd": 0.0, "judge_cost_usd": 0.0,
            "codes": [], "breached": False, "submitted": True,
            "attempt": ("ledger", f"config-{task_id}", 1, sweep, size)}


def _subset_board(table: RunTable, task_id: str):
    return build(table.select(np.array([t == task_id for t in table["task_id"]])), by=("agent", "tier"),
                 resamples=20)


def test_a_complete_sweep_is_not_chosen_on_a_board_of_part_of_the_folder(tmp_path):
    whole = RunTable.from_rows([_row("toy/one", "one", "S", 2), _row("toy/two", "two", "S", 2)])
    assert [c.attempts.chosen for c in build(whole, resamples=20).cells] == [False, False]
    (cell,) = _subset_board(whole, "toy/one").cells
    # before: partial_sweeps 1, chosen (the other task's run of the sweep was outside the subset)
    assert (cell.attempts.partial_sweeps, cell.attempts.chosen) == (0, False), cell.attempts
    site = tmp_path / "site"
    write_site(whole, site, resamples=20)
    pages = [_task_page("toy/one"), _task_page("toy/two"), _track_page("one"), _track_page("two")]
    for page in pages:
        text = (site / page).read_text()
        assert "runs made" in text and "<b>chosen</b>" not in text, page


def test_a_sweep_partly_in_the_folder_is_still_chosen_on_a_board_of_part_of_it():
    """The fix counts against the whole folder, not against nothing: a sweep of three with one run missing."""
    part = RunTable.from_rows([_row("toy/one", "one", "S", 3), _row("toy/two", "two", "S", 3)])
    (cell,) = _subset_board(part, "toy/one").cells
    assert (cell.attempts.partial_sweeps, cell.attempts.chosen) == (1, True), cell.attempts
    assert "1 of 1 sweep(s) partly present" in cell.attempts.text()


# ------------------------------------------------------------------ a run failing before its agent started

def test_a_run_failing_before_its_agent_leaves_no_folder_and_gives_its_attempt_back(data_root, tmp_path,
                                                                                  monkeypatch):
    """The attempt is drawn once the run folder (and its workspace quota) is made; a failure between that and the
    agent's first turn other than an interrupt (a full disk writing the trajectory, the ledger failing) left the
    half-made folder, its workspace mounted where a quota applies, and the drawn number read as an attempt made
    and left out. Now it is undone as an interrupt there always was: no folder, the number given back."""
    import errno
    import json

    from automedbench import runner
    from automedbench.testing import run_task

    def full_disk(path):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    out = tmp_path / "runs"
    with monkeypatch.context() as patch:
        patch.setattr(runner, "TrajectoryWriter", full_disk)
        with pytest.raises(OSError, match="No space left"):
            run_task("toy/vowels", "batch-first", out=out, data_root=data_root)
    assert not out.exists() or list(out.iterdir()) == []  # before: the run folder, with no result
    _, run_dir = run_task("toy/vowels", "batch-first", out=out, data_root=data_root)
    # before: 2 (the failed run's number stayed drawn: a folder of every run read "1 of 2 runs made", chosen)
    assert json.loads((run_dir / "result.json").read_text())["header"]["attempt"]["number"] == 1


# ------------------------------------------------------------------ the ledger read as a bounded regular file

def test_a_ledger_that_is_no_regular_file_is_started_again_not_waited_on(tmp_path):
    """`attempts._read` opened the ledger blocking and read it with one `os.read` of its bound: a FIFO in its
    place (a botched copy of a state folder) hung every run's draw at its open. It now reads the ledger as every
    bounded file is read (`read_regular`): not a regular file, so the ledger is started again under a new id."""
    import os
    import subprocess
    import sys

    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    os.mkfifo(state / "attempts.json")
    code = ("from automedbench import attempts; "
            "print(attempts.draw('a', 'toy/vowels', 'lite', 'c')['number'])")
    env = {**os.environ, "AUTOMEDBENCH_STATE": str(state)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "1", done.stderr  # before: no answer in 60 s


# ------------------------------------------------------------------ the sweep id a resumed sweep keeps

def test_a_sweep_signs_only_an_id_it_made_whatever_its_manifest_holds(data_root, tmp_path, monkeypatch):
    """A resumed sweep keeps the id in `OUT/sweep.json`, and every run signs it. The manifest was read whole with
    no bound and its `sweep_id` taken as any JSON value made text (a list, a megabyte of text: in every run's
    signed header), and a manifest that was no JSON object stopped the sweep (AttributeError). Now the manifest is
    read within a bound, as an object, and only an id of the form the sweep makes is kept."""
    import json

    from automedbench.testing import run_cli

    monkeypatch.setenv("AUTOMEDBENCH_STATE", str(tmp_path / "state"))
    monkeypatch.setenv("AUTOMEDBENCH_DATA", str(data_root))
    for name, manifest in (("list", ["not", "an", "object"]), ("long", {"sweep_id": "x" * 100_000})):
        out = tmp_path / name
        out.mkdir()
        (out / "sweep.json").write_text(json.dumps(manifest))
        done = run_cli("sweep", "--agents", "batch-first", "--tasks", "toy/vowels", "--executor", "inline",
                       "--out", str(out))
        assert done.exit_code == 0, done.output  # before ("list"): AttributeError: 'list' object has no 'get'
        (result,) = out.glob("*/result.json")
        signed = json.loads(result.read_text())["header"]["attempt"]["sweep"]
        assert len(signed) == 16 and signed == json.loads((out / "sweep.json").read_text())["sweep_id"], name


# ------------------------------------------------------------------ the gateway's pinned model, past its edges

@pytest.mark.parametrize("path", [
    "/v1beta/tunedModels/t:generateContent?x=/models/y",  # the name in the query, the route another model's
    "/v1beta/tunedModels/t:generateContent#/models/y",  # in the fragment, which the forwarded request drops
    "/v1beta/models/m:generateContent/../../tunedModels/t:generateContent",  # a provider resolving `..`
    "/v1beta/models/m:generateContent/%2e%2e/%2E%2E/tunedModels/t:generateContent",
])
def test_a_gemini_route_past_the_pinned_name_is_refused(path):
    """Gemini's model is in its path: `pin_model` looked for `/models/` anywhere in the request line, so a route to
    another model with `/models/NAME` in its query or fragment, or a dot segment leading back out of the pinned
    name, went to the provider with the agent's choice of model and was counted as the run's. Now refused."""
    from automedbench_models.gateway import pin_model

    _, _, _, refused = pin_model("gemini", "POST", path, b'{"contents": []}', "the-model")
    assert refused, path  # before: "" (forwarded)


def test_a_gemini_query_is_kept_where_the_pinned_path_is_read():
    from automedbench_models.gateway import pin_model

    path, _, asked, refused = pin_model("gemini", "POST", "/v1beta/models/gemini-flash:streamGenerateContent?alt=sse",
                                        b"{}", "the/model")
    assert (path, asked, refused) == ("/v1beta/models/the%2Fmodel:streamGenerateContent?alt=sse", "gemini-flash", "")


def test_a_body_is_forwarded_as_the_gateway_read_it():
    """A body naming the run's model last of two (`{"model": "big", "model": "the-model"}`) was forwarded as sent:
    the gateway read the run's model (the last), a provider taking the first served another. And a body with an
    escaped lone surrogate asking for another model raised UnicodeEncodeError while being pinned (no answer)."""
    import json

    from automedbench_models.gateway import pin_model

    _, sent, asked, refused = pin_model("openai", "POST", "/v1/chat/completions",
                                        b'{"model": "big", "model": "the-model", "messages": []}', "the-model")
    assert (asked, refused) == ("the-model", "") and sent.count(b'"model"') == 1, sent  # before: twice
    _, sent, asked, refused = pin_model("anthropic", "POST", "/v1/messages",
                                        b'{"model": "other", "system": "\\ud800"}', "the-model")
    assert (asked, refused) == ("other", "")
    assert json.loads(sent) == {"model": "the-model", "system": "\ud800"}


# ------------------------------------------------------------------ a ledger failing after the record is written

def test_a_ledger_failing_after_the_record_does_not_undo_the_runs_end(reg, data_root, tmp_path, monkeypatch):
    """An infrastructure failure's number is voided after result.json is written. A ledger that could not be
    written then (a full or read-only disk) raised out of the run: the command failed with a traceback, its workspace
    released only by the fallback, the subscribers (the run page) never told. Now the run ends as recorded."""
    import errno

    from automedbench import attempts
    from automedbench.api import ProviderUnavailable
    from automedbench.testing import StepsAgent, register_agent, run_task

    class ProviderGone(StepsAgent):
        name = "review27-provider-gone"

        def next_turn(self, messages):
            raise ProviderUnavailable("the provider never answered")  # the harness's side: infrastructure

    def read_only(attempt):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setenv("AUTOMEDBENCH_STATE", str(tmp_path / "state"))
    register_agent(ProviderGone, reg)
    monkeypatch.setattr(attempts, "void", read_only)
    result, run_dir = run_task("toy/vowels", ProviderGone.name, out=tmp_path / "runs", data_root=data_root)
    assert result.state == "infrastructure_failure" and (run_dir / "result.json").is_file()  # before: OSError


def test_a_refusal_before_the_agent_gives_its_number_back_and_is_never_hidden_by_the_ledger(reg, data_root,
                                                                                           tmp_path, monkeypatch):
    """Through the runner: an agent refusing at its start (before any turn) leaves no folder and gives its number
    back, so the next run is attempt 1. A ledger that could not be written then raised its OSError in place of the
    refusal, whose message (what the user can do) was lost. Now the refusal is what the user sees."""
    import errno
    import json

    from automedbench import attempts
    from automedbench.api import UserError
    from automedbench.testing import StepsAgent, register_agent, run_task

    class Refuses(StepsAgent):
        name = "review27-refuses"
        refuse = True

        def start(self, context):
            if Refuses.refuse:
                raise UserError("review27: this agent needs a key it was not given")
            super().start(context)

    def read_only(attempt):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setenv("AUTOMEDBENCH_STATE", str(tmp_path / "state"))
    register_agent(Refuses, reg)
    out = tmp_path / "runs"
    with pytest.raises(UserError, match="needs a key"):
        run_task("toy/vowels", Refuses.name, out=out, data_root=data_root)
    with monkeypatch.context() as patch:
        patch.setattr(attempts, "release", read_only)
        with pytest.raises(UserError, match="needs a key"):  # before: OSError, Read-only file system
            run_task("toy/vowels", Refuses.name, out=out, data_root=data_root)
    Refuses.refuse = False
    _, run_dir = run_task("toy/vowels", Refuses.name, out=out, data_root=data_root)
    # the first refusal gave 1 back; the second's (ledger failing) stayed drawn, said as an attempt made
    assert json.loads((run_dir / "result.json").read_text())["header"]["attempt"]["number"] == 2
