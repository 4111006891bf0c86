"""Red team round 20: results anyone can put on a leaderboard, hidden answers public information decides, state
shared across trust levels; through the real runner and CLI.

- **A re-graded run pooled with the runs graded as they were made** (leaderboards, class 2): round 13 keyed a row
  by `header.hashes.conditions` (the score-changing options, the judge and its options among them) and round 16
  by `header.hashes.scoring` (the task definition, the harness's and track's versions), but `rejudge` rewrote
  and re-signed S1-S3 and the aggregate with another judge, its options and the rubric installed now, and kept
  both digests as the run had them. Two runs of one agent on toy/vowels graded by the rules judge, one of them
  re-graded by a judge that credits every item (any judge plugin, or an LLM judge told by its options to use a
  lenient model): one row of two runs, its S1 the mean of the two judges' (the lenient grade lifting the row it
  joined). Now a re-graded result's digests name the grading (`provenance.regraded_hashes`): it is a row of
  its own, runs re-graded alike pool together, and grading again with the same judge changes nothing.
- **A stage profile that pools what the ranking keeps apart** (leaderboards and the site, same class): the ranking
  splits an agent's runs by their conditions, but the stage profile per agent (`analyses.stages.by_agent`: the
  site's "Mean stage score per agent" chart on the ranking page, the stages page, the HTML report) pooled every run
  of the agent, whatever its options or grading: above, the agent's S1 was 0.5, the lenient grade lifting it. It is
  now keyed as a board by agent keys its rows (`leaderboard.agent_labels`): S1 0.0 and 1.0, each labelled.
- **A cached grade answering for another grader** (state shared across runs, the grading cache): replies were
  keyed by the grader, `provider:model` and the prompt; a model served at another `base_url` under one name, asked
  at another temperature, or named by a models file's entry (no `model` option: every entry was "provider:") got
  the other configuration's cached grade (1.0 for its own 0.0, no call). VQA's model answer judge folds its
  grades into the Task, and a VQA answer ("yes", "the left lung") recurs across runs of one staging, so the first
  configuration to grade it decided for every later run, whatever grader those runs named (their conditions
  differ, their grades did not). The key now holds every setting that can change a reply
  (`grades.grader_identity`).
- **A GPU run pooled with CPU-only runs** (leaderboards, round 13's class): `--gpus` was not among the conditions,
  as `--memory-mb` is; the GPU count now is (not the device ids, which a sweep varies).
"""

from __future__ import annotations

import json
import types
from typing import Any

import pytest
from automedbench.api import ItemVerdict, Judge, JudgeVerdict, hookimpl
from automedbench.testing import run_cli, run_steps, stage_scores
from test_grading import model  # noqa: F401 (a fixture: the scripted grader model's registry)
from test_redteam_round13 import HALF

PLAN = "mkdir -p $WORKSPACE_DIR/plan && echo '# plan: half the cases' > $WORKSPACE_DIR/plan/plan.md"

GENEROUS = "generous-test-judge"


class GenerousJudge(Judge):
    """A judge that credits every item it is asked: the grading a lenient judge (or model) gives."""

    name = GENEROUS

    def grade(self, judge_input: Any) -> JudgeVerdict:
        items = [ItemVerdict(i.id, i.stage, i.description, 1.0, "credited") for i in judge_input.rubric]
        return JudgeVerdict(self.name, self.version, items)


@pytest.fixture
def generous(reg):
    module = types.ModuleType("test_generous_judge")

    @hookimpl
    def automedbench_register_judges(register: Any) -> None:
        register(GENEROUS, GenerousJudge, "test judge: every item credited")

    module.automedbench_register_judges = automedbench_register_judges  # type: ignore[attr-defined]
    reg.add_plugin(module, name=module.__name__)
    yield GENEROUS
    reg.remove_plugin(module.__name__)


def test_a_run_graded_again_by_another_judge_is_never_pooled_with_runs_graded_as_made(generous, data_root,
                                                                                    tmp_path):
    """Before: one row of two runs, S1 the mean of the rules judge's grade and the generous judge's 1.0. Now two
    rows, each with its own run's grade; the same judge twice gives the same digests (runs re-graded alike pool)."""
    from automedbench.runfolder import RunFolder
    from automedbench_campaign.leaderboard import build
    from automedbench_campaign.site import write_site
    from automedbench_campaign.store import load_table

    runs = tmp_path / "runs"
    # a plan.md: the generous judge's S1 1.0 rests on one (round 35 caps plan items where the file is missing)
    steps = [("bash", PLAN), ("python", HALF)]
    first, first_dir = run_steps("toy/vowels", steps, out=runs, data_root=data_root)
    second, second_dir = run_steps("toy/vowels", steps, out=runs, data_root=data_root)
    assert first.header.hashes["conditions"] == second.header.hashes["conditions"]
    rules_s1 = stage_scores(first)["S1"]
    assert rules_s1 is not None and rules_s1 < 1.0 and stage_scores(second)["S1"] == rules_s1

    regraded = run_cli("rejudge", str(second_dir), "--judge", generous)
    assert regraded.exit_code == 0, regraded.output
    after = RunFolder(second_dir).load_result()
    assert after.header.judge == generous and stage_scores(after)["S1"] == 1.0
    assert after.header.hashes["conditions"] != first.header.hashes["conditions"]
    assert after.header.hashes["run_conditions"] == first.header.hashes["conditions"]

    table = load_table([runs])
    assert len(table) == 2 and not table.rejected  # both genuine: rejudge re-signs what it verified
    board = build(table, resamples=50)
    assert board.by[-1] == "conditions" and sorted(c.n for c in board.cells) == [1, 1]
    assert sorted(c.scores["S1"]["mean"] for c in board.cells) == [pytest.approx(rules_s1), 1.0]
    # and so is the stage profile per agent (before: one agent, S1 the mean of both judges' grades)
    profile = board.analyses["stages"]["by_agent"]
    assert sorted(v["stages"]["S1"]["mean"] for v in profile.values()) == [pytest.approx(rules_s1), 1.0]
    site = tmp_path / "site"
    write_site(table, site, resamples=20)
    ranking, stages = (site / "index.html").read_text(), (site / "stages.html").read_text()
    (track_page,) = (site / "track").glob("toy-*.html")
    track = track_page.read_text()
    assert all(label in ranking and label in stages and label in track for label in profile)

    # graded again by the same judge: the same digests, so runs re-graded alike are one row again
    again = run_cli("rejudge", str(second_dir), "--judge", generous)
    assert again.exit_code == 0, again.output
    assert RunFolder(second_dir).load_result().header.hashes == after.header.hashes
    assert run_cli("rejudge", str(first_dir), "--judge", generous).exit_code == 0
    pooled = build(load_table([runs]), resamples=50)
    assert pooled.by == ("agent", "task_id", "tier") and [c.n for c in pooled.cells] == [2]
    assert list(pooled.analyses["stages"]["by_agent"]) == [first.header.agent]


@pytest.mark.parametrize("setting", ["base_url", "temperature", "entry"])
def test_a_cached_grade_answers_only_the_grader_settings_that_gave_it(model, tmp_path, monkeypatch, setting):  # noqa: F811
    """Before: the grading cache keyed a reply by `provider:model` and the prompt only. A grader model served at
    another `base_url` under the same name (a lenient local stand-in, a cheaper quantisation), asked at another
    temperature, or named by a models file's entry (no `model` option: every entry keyed "scripted:") was
    answered from the cache with the other's grade, 1.0 where its own was 0.0, without a call: a VQA answer
    judge's grades are its Task. Now the key holds every setting that can change a reply; the same settings
    still hit."""
    from test_grading import OPTIONS, ScriptedModel, evaluation, grade, request

    models_file = tmp_path / "models.yaml"
    models_file.write_text("models:\n  lenient: {provider: scripted, model: m-lenient}\n"
                           "  strict: {provider: scripted, model: m-strict}\n")
    first, second = {
        "base_url": ({**OPTIONS, "judge.base_url": "http://127.0.0.1:1/v1"},
                     {**OPTIONS, "judge.base_url": "http://127.0.0.1:2/v1"}),
        "temperature": ({**OPTIONS, "judge.temperature": "1.5"}, OPTIONS),
        "entry": ({"judge.provider": "scripted", "judge.config": str(models_file), "judge.entry": "lenient"},
                  {"judge.provider": "scripted", "judge.config": str(models_file), "judge.entry": "strict"}),
    }[setting]
    monkeypatch.setattr(ScriptedModel, "reply", staticmethod(lambda s, p: '{"score": 1, "rationale": "lenient"}'))
    lenient, _ = grade(model, evaluation(request("q1", "the left lung")), tmp_path, first)
    assert lenient.metric.per_case[0]["judge"] == 1.0 and len(ScriptedModel.calls) == 1

    monkeypatch.setattr(ScriptedModel, "reply", staticmethod(lambda s, p: '{"score": 0, "rationale": "strict"}'))
    strict, folder = grade(model, evaluation(request("q1", "the left lung")), tmp_path, second)
    assert strict.metric.per_case[0]["judge"] == 0.0 and len(ScriptedModel.calls) == 2
    assert json.loads((folder / "grades.json").read_text())["grades"][0]["cached"] is False

    again, folder = grade(model, evaluation(request("q1", "the left lung")), tmp_path, second)
    assert again.metric.per_case[0]["judge"] == 0.0 and len(ScriptedModel.calls) == 2  # its own reply, cached
    assert json.loads((folder / "grades.json").read_text())["grades"][0]["cached"] is True


def test_runs_given_gpus_are_other_conditions_than_runs_without():
    """Before: `--gpus` was no score-changing option, so a run whose agent could train on a GPU was pooled with
    CPU-only runs in one leaderboard row (`--memory-mb` was kept apart). Now the GPU count is in the conditions:
    a run with GPUs is another row, runs with as many GPUs (other devices: a sweep spreads them) share one, and
    a run without any keeps the digest it always had."""
    from automedbench.engine import RunOptions
    from automedbench.options import conditions_record, score_record

    def conditions(gpus: str) -> dict[str, Any]:
        return conditions_record(RunOptions("toy/vowels", "lite", "steps", gpus=gpus))

    assert conditions("") != conditions("0") != conditions("0,1")
    assert conditions("0") == conditions("1") and conditions("0,1") == conditions("2,3")
    cpu_only = RunOptions("toy/vowels", "lite", "steps")
    assert conditions("") == {k: v for k, v in score_record(cpu_only).items() if k not in ("agent", "tier")}
