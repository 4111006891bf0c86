"""Round thirteen of the red team: hidden answers public information decides, results anyone can put on a
leaderboard, state shared across trust levels; through the real runner.

- **A run made under other conditions pooled into a row** (leaderboards): a row is (agent, task, tier), and every
  genuine, finished run of that agent, task and tier was pooled into it, whatever the run's score-changing
  options: its budgets (`--max-turns`, `--time-limit`), `--task-score`, `--judge`, `--sandbox`, `--memory-mb`,
  agent and evaluator options (the model an `openai` agent ran). The options were hashed into each result, but
  no reader looked. On toy/vowels, an agent answering three of six words scored Task 0.0 (strict, the task's
  default); the same agent run once more with `--task-score partial` scored 0.5, and the leaderboard showed one
  row of two runs at Task 0.25: any run made under easier terms lifts the row it joins, and a row named for one
  agent could hold two models. Each result now carries `header.hashes.conditions` (the score-changing options but
  agent and tier), and a leaderboard whose counted runs differ in it keys every row by it too (a `conditions`
  column in the terminal, CSV, JSON, HTML and the site): such runs are other rows, never pooled.
- **An `evaluate` result counted as an agent's run** (leaderboards): `automedbench evaluate` scores a folder of
  outputs anyone made (`--baseline perfect` copies the references; `--submission DIR` takes any folder) and writes
  a genuine, signed result, state `scored`, agent `baseline:perfect` or `folder:DIR`. Put in a runs folder, the
  leaderboard counted it as a finished run: a row rated A with Task 1.0 in the ranking beside the agents, and in
  every pooled mean (`--by task_id` or `track`: an agent's Task 0.0 on toy/vowels became 0.5; the stage analyses).
  A result with no agent (`end_reason` `no_agent`) is now listed apart ("no agent (evaluate)"), never counted.

Held (through the real runner unless noted; no test kept): the demo stagers' public trees (classification,
detection, enhancement x2, report_gen, segmentation x3, synthesis x2, VQA, staged here once each): inode numbers
and mtimes of the classification demo's 42 images show no label order (one timestamp; inodes interleave
with reused ones), every JPEG has the same quantisation tables and JFIF fields (no per-class encoder setting),
case ids are secret draws; the proof's evidence (what rejudge, codes and the run page read: trajectory, brief,
verdict, evaluation, grades, manifest, pilot checks, artefacts, tool output) are all bound by digest, a copy
of a genuine run under its own name is counted once (deduplicated by signed bytes); a kept-script path that climbs
out of the workspace (`..` components refused at every level); outputs nested past 64 levels or with paths over
the freeze's limit (listed as rejected, run scored); the warm evaluator's caches (synthesis' reference cache,
its last-parse cache and enhancement's SSIM cache) are keyed by file identity and confirmed element by element
or on harness-written files only, so one run's submission cannot answer for another's.
"""

from __future__ import annotations

import json

from automedbench.testing import run_steps

# answers three of the six words right (the first three case folders in name order), writes nothing else
HALF = """
import os
data, out = os.environ['DATA_DIR'], os.path.join(os.environ['WORKSPACE_DIR'], 'outputs')
cases = sorted(c for c in os.listdir(data) if os.path.isdir(os.path.join(data, c)))
for case in cases[:3]:
    word = open(os.path.join(data, case, 'input.txt')).read().strip()
    os.makedirs(os.path.join(out, case), exist_ok=True)
    open(os.path.join(out, case, 'answer.txt'), 'w').write(str(sum(ch in 'aeiou' for ch in word)))
print('answered', len(cases[:3]), 'of', len(cases))
"""


def test_runs_under_other_conditions_are_never_pooled_into_one_row(data_root, tmp_path):
    """Before: one row (StepsAgent, toy/vowels, lite) of two runs, Task 0.25, the partial-scored run lifting the
    strict one's 0.0. Now two rows, one per condition, each with its own run's Task."""
    from automedbench_campaign.leaderboard import build, flat_rows, to_json
    from automedbench_campaign.render import to_csv
    from automedbench_campaign.site import write_site
    from automedbench_campaign.store import load_table

    runs = tmp_path / "runs"
    strict, strict_dir = run_steps("toy/vowels", [("python", HALF)], out=runs, data_root=data_root)
    lenient, lenient_dir = run_steps("toy/vowels", [("python", HALF)], out=runs, data_root=data_root,
                                     task_score="partial")
    assert (strict.state, lenient.state) == ("scored", "scored"), (strict.error, lenient.error)
    assert strict.aggregate.task == 0.0 and lenient.aggregate.task == 0.5
    conditions = {r.header.hashes.get("conditions") for r in (strict, lenient)}
    assert len(conditions) == 2 and None not in conditions
    assert strict.header.agent == lenient.header.agent and strict.header.tier == lenient.header.tier

    table = load_table([runs])
    assert len(table) == 2 and not table.rejected
    board = build(table, resamples=50)
    assert board.by == ("agent", "task_id", "tier", "conditions")
    assert sorted(c.n for c in board.cells) == [1, 1]
    assert sorted(c.scores["task"]["mean"] for c in board.cells) == [0.0, 0.5]
    rows = flat_rows(board)
    assert len({r["conditions"] for r in rows}) == 2
    assert "conditions" in to_json(board)["by"] and "conditions" in to_csv(board).splitlines()[0]
    site = tmp_path / "site"
    write_site(table, site, resamples=50)
    ranking = (site / "index.html").read_text()
    assert all(r["conditions"] in ranking for r in rows)

    # runs under one condition stay one row, keyed as before
    same, _ = run_steps("toy/vowels", [("python", HALF)], out=runs, data_root=data_root)
    assert same.header.hashes["conditions"] == strict.header.hashes["conditions"]
    strict_only = table.select([c == strict.header.hashes["conditions"][:12] for c in table["conditions"]])
    alone = build(load_table([strict_dir, runs / same.header.run_id]), resamples=50)
    assert alone.by == ("agent", "task_id", "tier") and [c.n for c in alone.cells] == [2]
    assert len(strict_only) == 1
    assert json.loads((lenient_dir / "result.json").read_text())["header"]["hashes"]["conditions"]


def test_conditions_split_rows_only_where_a_row_would_pool_them():
    """Runs of two agents under their own conditions (an `evaluate` result beside runs, another agent's options)
    are rows apart already: the board keeps its usual keys; one row holding two conditions splits every row."""
    from automedbench_campaign.leaderboard import build
    from automedbench_campaign.store import RunTable

    def row(agent, condition, task):
        return {"run_id": f"{agent}{condition}", "agent": agent, "task_id": "toy/vowels", "track": "toy",
                "tier": "lite", "conditions": condition, "state": "scored", "end_reason": "", "rating": "C",
                "path": "", "overall": task, "agentic": task, "task": task,
                **{s: task for s in ("S1", "S2", "S3", "S4", "S5")}, "turns": 1, "wall_s": 1.0, "tokens_in": 0,
                "tokens_out": 0, "cost_usd": 0.0, "judge_cost_usd": 0.0, "codes": [], "breached": False,
                "submitted": True}

    apart = build(RunTable.from_rows([row("a", "x", 0.0), row("b", "y", 1.0)]), resamples=20)
    assert apart.by == ("agent", "task_id", "tier") and len(apart.cells) == 2
    pooled = build(RunTable.from_rows([row("a", "x", 0.0), row("a", "y", 1.0), row("b", "y", 1.0)]), resamples=20)
    assert pooled.by[-1] == "conditions" and sorted(c.n for c in pooled.cells) == [1, 1, 1]
    across = build(RunTable.from_rows([row("a", "x", 0.0), row("b", "y", 1.0)]), by=("track",), resamples=20)
    assert across.by == ("track", "conditions") and len(across.cells) == 2


def test_an_evaluate_result_is_no_agents_run_on_a_leaderboard(data_root, tmp_path):
    """Before: `automedbench evaluate --baseline perfect` (or `--submission` of any folder, named as the user
    likes) into the runs folder was a finished, genuine run: a row `baseline:perfect`, Task 1.0, rating A, in the
    ranking beside agents, and in every pooled mean (`--by task_id`, the stage analyses). Now it is listed apart."""
    from automedbench.testing import evaluate_outputs
    from automedbench_campaign.leaderboard import build
    from automedbench_campaign.store import load_table

    runs = tmp_path / "runs"
    run, _ = run_steps("toy/vowels", [("python", HALF)], out=runs, data_root=data_root)
    made = evaluate_outputs("toy/vowels", data_root=data_root, work=runs / "gpt-5", baseline="perfect")
    assert made.state == "scored" and made.aggregate.task == 1.0 and made.header.agent == "baseline:perfect"
    table = load_table([runs])
    assert len(table) == 2 and not table.rejected  # both genuine: the harness wrote them
    for by in (("agent", "task_id", "tier"), ("task_id",), ("track",)):
        board = build(table, by=by, resamples=20)
        assert board.runs_used == 1 and board.excluded.get("no agent (evaluate)") == 1
        assert [c.scores["task"]["mean"] for c in board.cells] == [run.aggregate.task]
        assert all(c.key.get("agent") != "baseline:perfect" for c in board.cells)
