"""The leaderboard and the paper's analyses over stored runs.

Rows are (agent, task, tier) cells by default: Overall, Agentic, Task and S1–S5 with seeded bootstrap
95 % CIs, the rating distribution, turns, wall time, tokens and cost. The analyses reproduce the paper's
findings as computations: mean score per stage, share of fired E-codes per category, Overall of runs
with versus without an error code, recovery rate. Only finished runs count (scored, agent_failure);
infrastructure failures and cancelled runs are the harness's, not the agent's, and are listed apart.
"""

from __future__ import annotations

import shlex
from collections import Counter
from typing import Any

import numpy as np
from attrs import define, field
from automedbench.api import E_CODES, END_NO_AGENT, STAGE_NAMES, STAGES, TAXONOMY

from .attemptcount import AttemptIndex, Attempts
from .stats import bootstrap_means, group_seed
from .store import FINISHED, UNVERIFIED, RunTable

SCORES = ("overall", "agentic", "task", *STAGES)
RATINGS = ("A", "B", "C", "F")
GROUP_KEYS = ("agent", "task_id", "track", "tier")
CONDITIONS = "conditions"  # added to the keys when the runs counted were made under different conditions
SCORING = "scoring"  # what scored a run besides its options: runs of one task that differ in it are rows apart


@define
class Cell:
    key: dict[str, str]
    n: int
    scores: dict[str, dict[str, float | None]]  # metric -> mean, lo, hi, n
    ratings: dict[str, int]
    turns: float
    wall_s: float
    tokens: float
    cost_usd: float
    judge_cost_usd: float
    with_code_share: float
    # how many of the attempts made of the row's configurations the folder holds (`attemptcount`)
    attempts: Attempts = field(factory=Attempts)


@define
class Leaderboard:
    by: tuple[str, ...]
    cells: list[Cell]
    analyses: dict[str, Any]
    runs_total: int
    runs_used: int
    excluded: dict[str, int] = field(factory=dict)
    skipped: list[str] = field(factory=list)
    rejected: list[str] = field(factory=list)  # not the harness's results (or copies): never counted, with why
    resamples: int = 2000
    seed: int = 0
    conditions: dict[str, str] = field(factory=dict)  # when rows split by conditions: each one's options in words


def _none(x: float) -> float | None:
    return None if x is None or np.isnan(x) else round(float(x), 4)


def _groups(table: RunTable, keys: tuple[str, ...]) -> dict[tuple[str, ...], np.ndarray]:
    groups: dict[tuple[str, ...], list[int]] = {}
    cols = [table[k] for k in keys]
    for i in range(len(table)):
        groups.setdefault(tuple(c[i] for c in cols), []).append(i)
    return {k: np.array(v) for k, v in sorted(groups.items())}


def _mixed(table: RunTable, by: tuple[str, ...], column: str) -> bool:
    """Whether some group of `by` would pool runs that differ in `column`."""
    seen: dict[tuple[str, ...], str] = {}
    groups = (tuple(table[k][i] for k in by) for i in range(len(table)))
    return any(seen.setdefault(group, value) != value for group, value in zip(groups, table[column], strict=True))


def _split_conditions(table: RunTable, by: tuple[str, ...]) -> tuple[RunTable, bool]:
    """The runs, with what tells apart runs no row may pool in their conditions column, and whether `by` needs it:
    other options anywhere in a row, or one task's runs scored differently (another task definition, harness or
    track version, weights; runs of different tasks in a `--by agent` row differ in it by nature)."""
    scored_apart = _mixed(table, (*by, "task_id"), SCORING)
    if scored_apart:  # the conditions column then names both
        marked = [f"{c}/{s}" for c, s in zip(table[CONDITIONS], table[SCORING], strict=True)]
        table = RunTable({**table.columns, CONDITIONS: marked}, table.skipped, table.rejected, table.held)
    return table, scored_apart or _mixed(table, by, CONDITIONS)


def conditions_legend(table: RunTable) -> dict[str, str]:
    """Each conditions value of `table` with the options its runs were made with beyond task, tier and agent, as
    their commands give them ("the defaults" for none): a row showed a 12-digit digest, and a researcher could not
    tell which row had the shorter time limit or the other agent option."""
    seen: dict[str, set[str]] = {}
    for value, command in zip(table[CONDITIONS], table["command"], strict=True):
        words = shlex.split(command) if command else []
        text = (shlex.join(words[RUN_WORDS:]) or "the defaults") if len(words) >= RUN_WORDS else "not recorded"
        if "/" in value:  # scored apart as well (`_split_conditions`)
            text += ", scored apart (another task definition, harness or track version)"
        seen.setdefault(value, set()).add(text)
    return {value: "; ".join(sorted(texts))[:MAX_CONDITION_CHARS] for value, texts in sorted(seen.items())}


def conditions_words(board: Leaderboard) -> str:
    """The board's conditions legend in one line: "069f7370a2f9 the defaults; e31120c0dc80 --time-limit 3.0"."""
    return "; ".join(f"{value} {text}" for value, text in board.conditions.items())


def judges_words(board: Leaderboard) -> str:
    """Which judge graded the counted runs' S1–S3, in one sentence for the terminal, the site and the HTML report
    ("" when no run names one); more than one is flagged, since their S1–S3, Agentic and Overall do not compare."""
    judges = board.analyses.get("judges") or {}
    if len(judges) == 1:
        return f"S1–S3 graded by one judge: {next(iter(judges))}, every run"
    named = "; ".join(f"{label}: {n} run(s)" for label, n in judges.items())
    return (f"S1–S3 graded by {len(judges)} judges ({named}): S1–S3, Agentic and Overall of rows graded by other "
            "judges do not compare; `automedbench rejudge RUNS --judge J` grades them alike") if judges else ""


def chosen_words(board: Leaderboard, cell: Cell) -> str:
    """A row of runs chosen among attempts, in words, for every output that shows the row (a mark in a column alone
    was missed; the HTML report had not even the column)."""
    return (f"{' '.join(cell.key[k] for k in board.by)}: {cell.attempts.text()} (the folder holds only some of the "
            "attempts made)")


def not_counted_words(board: Leaderboard) -> str:
    """What the board left out and why, in one line ("" when it counted every run)."""
    if not board.excluded:
        return ""
    return ("Not counted: " + ", ".join(f"{n} {s.replace('_', ' ')}" for s, n in board.excluded.items())
            + (" (--include-unverified counts unverified runs)" if "unverified" in board.excluded else ""))


RUN_WORDS = 8  # "automedbench run --task T --tier X --agent A" opens every command `rerun_command` gives
MAX_CONDITION_CHARS = 600


def build(table: RunTable, *, by: tuple[str, ...] = ("agent", "task_id", "tier"), resamples: int = 2000,
          seed: int = 0, include_unverified: bool = False) -> Leaderboard:
    """Cells and analyses over finished runs; unverified runs (no filesystem isolation...) only when asked."""
    for key in by:
        if key not in GROUP_KEYS:
            raise ValueError(f"cannot group by {key!r}; choose from {', '.join(GROUP_KEYS)}")
    finished = _finished(table)
    excluded: dict[str, int] = {}
    for state, ok in zip(table["state"], finished, strict=True):
        if not ok:
            excluded[state] = excluded.get(state, 0) + 1
    forged = sum(UNVERIFIED in why for why in table.rejected)
    if forged:
        excluded["not harness-written"] = forged
    if len(table.rejected) > forged:  # a copy of a run counted elsewhere, or another version of one
        excluded["copy or other version of a counted run"] = len(table.rejected) - forged
    # an `evaluate` result scores a folder of outputs anyone made (a baseline, the references themselves): genuine,
    # but no agent's run, so never a row or a mean beside agents' runs
    agentless = finished & _agentless(table)
    if agentless.any():
        excluded["no agent (evaluate)"] = int(agentless.sum())
        finished &= ~agentless
    if not include_unverified:
        unverified = finished & ~table["verified"]
        if unverified.any():
            excluded["unverified"] = int(unverified.sum())
        finished &= table["verified"]
    counted = table.select(finished)
    used, split = _split_conditions(counted, by)
    if split:
        # runs made under other budgets, task score, judge, sandbox or options are another row, never pooled:
        # a run with ten times the turns or a lenient task score would lift the row it joined; so are runs of a
        # task scored by another harness or track version or made on another task definition
        by = (*by, CONDITIONS)
    matrix = np.column_stack([used[m] for m in SCORES]) if len(used) else np.empty((0, len(SCORES)))
    cells = []
    made = AttemptIndex.of(table)  # every run in the folder: an attempt that failed was made all the same
    for key, index in _groups(used, by).items():
        mean, lo, hi, counts = bootstrap_means(matrix[index], resamples=resamples, seed=group_seed(seed, key))
        scores = {m: {"mean": _none(mean[j]), "lo": _none(lo[j]), "hi": _none(hi[j]), "n": int(counts[j])}
                  for j, m in enumerate(SCORES)}
        ratings = {r: 0 for r in RATINGS}
        for i in index:
            rating = used["rating"][i]
            ratings[rating] = ratings.get(rating, 0) + 1
        cells.append(Cell(dict(zip(by, key, strict=True)), len(index), scores, ratings,
                          float(np.mean(used["turns"][index])), float(np.mean(used["wall_s"][index])),
                          float(np.mean(used["tokens_in"][index] + used["tokens_out"][index])),
                          float(np.mean(used["cost_usd"][index])), float(np.mean(used["judge_cost_usd"][index])),
                          float(np.mean(used["n_codes"][index] > 0)), made.row(used["attempt"][i] for i in index)))
    return Leaderboard(by, cells, analyses(counted, resamples=resamples, seed=seed), len(table), len(used),
                       excluded, table.skipped, table.rejected, resamples, seed,
                       conditions_legend(used) if split else {})


def stage_analysis(table: RunTable, *, resamples: int, seed: int) -> dict[str, Any]:
    """Mean score per stage over all runs (and per agent), with the weakest and strongest stage."""
    def one(sub: RunTable, key: tuple[str, ...]) -> dict[str, Any]:
        matrix = np.column_stack([sub[s] for s in STAGES])
        mean, lo, hi, counts = bootstrap_means(matrix, resamples=resamples, seed=group_seed(seed, key))
        stages = {s: {"name": STAGE_NAMES[s], "mean": _none(mean[j]), "lo": _none(lo[j]), "hi": _none(hi[j]),
                      "n": int(counts[j])} for j, s in enumerate(STAGES)}
        scored = {s: v["mean"] for s, v in stages.items() if v["mean"] is not None}
        low, high = (min(scored.values()), max(scored.values())) if scored else (None, None)
        return {"stages": stages, "weakest": min(scored, key=scored.get) if scored else None,
                "strongest": max(scored, key=scored.get) if scored else None,
                # every stage at the lowest and at the highest mean: a tie named by its first stage alone read as
                # that stage standing out ("weakest S3, strongest S1" with S1, S2, S4 and S5 all at 0.769)
                "weakest_all": [s for s, v in scored.items() if v == low],
                "strongest_all": [s for s, v in scored.items() if v == high]}

    if not len(table):
        return {"all": {"stages": {}, "weakest": None, "strongest": None}, "by_agent": {}}
    labels = agent_labels(table)
    return {"all": one(table, ("stages",)),
            "by_agent": {a: one(table.select(np.array([x == a for x in labels])), ("stages", a))
                         for a in sorted(set(labels))}}


def tied(stages: dict[str, Any], which: str) -> list[str]:
    """Every stage at a stage analysis' `which` ("weakest" or "strongest") mean; an analysis without the tie lists
    (none scored) gives its one named stage, if any."""
    return list(stages.get(f"{which}_all") or ([stages[which]] if stages.get(which) else []))


def extremes(stages: dict[str, Any]) -> str:
    """"weakest S3, strongest S2" of a stage analysis, a tie named whole ("strongest S1, S2 (tied)"), and "every
    stage scored the same" when no stage stands out; "" without stages."""
    weakest, strongest = tied(stages, "weakest"), tied(stages, "strongest")
    if not weakest:
        return ""
    if weakest == strongest:
        return "every stage scored the same"

    def named(found: list[str]) -> str:
        return ", ".join(found) + (" (tied)" if len(found) > 1 else "")

    return f"weakest {named(weakest)}, strongest {named(strongest)}"


def _finished(table: RunTable) -> np.ndarray:
    return np.array([s in FINISHED for s in table["state"]], dtype=bool)


def _agentless(table: RunTable) -> np.ndarray:
    return np.array([r == END_NO_AGENT for r in table["end_reason"]], dtype=bool)


def run_labels(table: RunTable, *, include_unverified: bool = False) -> list[str | None]:
    """Each run's agent as `build(by=("agent",))` names its row (`agent_labels` over the runs it counts), None for
    a run it leaves out (not finished, an `evaluate` result, unverified unless asked): per-run charts drawn with
    the ranking (its points, its histograms) must split and colour runs as its rows do."""
    counted = _finished(table) & ~_agentless(table)
    if not include_unverified:
        counted &= table["verified"]
    labels: list[str | None] = [None] * len(table)
    for i, label in zip(np.flatnonzero(counted), agent_labels(table.select(counted)), strict=True):
        labels[int(i)] = label
    return labels


def agent_labels(table: RunTable) -> list[str]:
    """Each run's agent as a board by agent keys it: `agent [conditions]` when that board splits an agent's runs
    by their conditions (`_split_conditions`), so a per-agent mean never pools runs no row would pool (one
    re-graded by a lenient judge lifted its agent's stage profile while the ranking kept it apart). Labelled as
    the site labels a row (plain `agent` for a result made before conditions were recorded: no digest)."""
    marked, split = _split_conditions(table, ("agent",))
    if not split:
        return list(table["agent"])
    return [agent_label(a, c) for a, c in zip(table["agent"], marked[CONDITIONS], strict=True)]


def agent_label(agent: str, condition: str | None) -> str:
    """An agent's name with the conditions its runs were split by, as charts, tables and stage profiles name it;
    plain when there is none to name (a result made before conditions were recorded has no digest)."""
    return f"{agent} [{condition}]" if condition else agent


def code_analysis(table: RunTable) -> dict[str, Any]:
    """Share of fired E-codes per category, and the engineering : knowledge ratio (paper Fig. 7a)."""
    counts = {c: 0 for c in E_CODES}
    for codes in table["codes"]:
        for code in codes:
            counts[code] += 1
    total = sum(counts.values())
    knowledge = sum(v for c, v in counts.items() if TAXONOMY[c].category == "knowledge")
    engineering = total - knowledge
    return {
        "fired_total": total,
        "runs_with_codes": int(np.sum(table["n_codes"] > 0)) if len(table) else 0,
        "counts": counts,
        "shares": {c: (round(v / total, 4) if total else None) for c, v in counts.items()},
        "engineering_to_knowledge": round(engineering / knowledge, 2) if knowledge else None,
        "names": {c: TAXONOMY[c].name for c in E_CODES},
    }


def cliff_analysis(table: RunTable, *, resamples: int, seed: int) -> dict[str, Any]:
    """Overall of runs with no code, exactly one, two or more, and with vs without (paper Fig. 7b).

    Breached runs are left out: they are zeroed and never tagged, so they would sit in the no-code group."""
    clean = ~table["breached"]
    overall = table["overall"][clean]
    n_codes = table["n_codes"][clean]
    groups = {"0": n_codes == 0, "1": n_codes == 1, "2+": n_codes >= 2, "with": n_codes > 0}
    out: dict[str, Any] = {}
    for name, mask in groups.items():
        mean, lo, hi, counts = bootstrap_means(overall[mask], resamples=resamples,
                                               seed=group_seed(seed, ("cliff", name)))
        out[name] = {"mean": _none(mean[0]), "lo": _none(lo[0]), "hi": _none(hi[0]), "n": int(counts[0])}
    base, one, with_ = out["0"]["mean"], out["1"]["mean"], out["with"]["mean"]
    out["drop_one_vs_none"] = round(1 - one / base, 4) if base and one is not None else None
    out["drop_with_vs_none"] = round(1 - with_ / base, 4) if base and with_ is not None else None
    out["excluded_breached"] = int((~clean).sum())
    return out


def recovery_analysis(table: RunTable) -> dict[str, Any]:
    """Per agent: runs with >= 2 codes that still submitted and got a positive Task score (paper Fig. 8)."""
    out = {}
    for agent in sorted(set(table["agent"])):
        mask = np.array([a == agent for a in table["agent"]]) & (table["n_codes"] >= 2)
        recovered = mask & table["submitted"] & (np.nan_to_num(table["task"]) > 0)
        n = int(mask.sum())
        out[agent] = {"runs_2plus": n, "recovered": int(recovered.sum()),
                      "rate": round(float(recovered.sum()) / n, 4) if n else None,
                      "codes_per_run": round(float(np.mean(table["n_codes"][[a == agent for a in table["agent"]]])),
                                             3)}
    return out


def analyses(table: RunTable, *, resamples: int = 2000, seed: int = 0) -> dict[str, Any]:
    return {
        "stages": stage_analysis(table, resamples=resamples, seed=seed),
        "codes": code_analysis(table),
        "cliff": cliff_analysis(table, resamples=resamples, seed=seed),
        "recovery": recovery_analysis(table),
        "turns_per_run": round(float(np.mean(table["turns"])), 2) if len(table) else None,
        # label -> runs it graded
        "judges": dict(sorted(Counter(j for j in table.columns.get("judge") or [] if j).items())),
    }


# ---------------------------------------------------------------- flat rows (CSV / JSON)


def flat_rows(board: Leaderboard) -> list[dict[str, Any]]:
    rows = []
    for cell in board.cells:
        row: dict[str, Any] = {**cell.key, "n": cell.n}
        for metric, v in cell.scores.items():
            row[metric] = v["mean"]
            row[f"{metric}_lo"] = v["lo"]
            row[f"{metric}_hi"] = v["hi"]
            row[f"{metric}_n"] = v["n"]  # runs with a value: a null (no verdict, no Task) is left out of the mean
        for rating in RATINGS:
            row[f"rating_{rating}"] = cell.ratings.get(rating, 0)
        row.update({"turns": round(cell.turns, 2), "wall_s": round(cell.wall_s, 2), "tokens": round(cell.tokens),
                    "cost_usd": round(cell.cost_usd, 4), "judge_cost_usd": round(cell.judge_cost_usd, 4),
                    "with_code_share": round(cell.with_code_share, 4)})
        attempts = cell.attempts
        row.update({"attempts_present": attempts.present, "attempts_made": attempts.made,
                    "attempts_unnumbered": attempts.unnumbered, "partial_sweeps": attempts.partial_sweeps,
                    "chosen": attempts.chosen, "attempts": attempts.text()})
        rows.append(row)
    return rows


def null_overall_runs(board: Leaderboard) -> int:
    """Counted runs without an Overall (a stage or the Task null): left out of every Overall mean and CI."""
    return sum(cell.n - cell.scores["overall"]["n"] for cell in board.cells)


def to_json(board: Leaderboard) -> dict[str, Any]:
    return {"by": list(board.by), "runs_total": board.runs_total, "runs_used": board.runs_used,
            "excluded": board.excluded, "skipped": board.skipped, "rejected": board.rejected,
            "bootstrap": {"resamples": board.resamples, "seed": board.seed, "level": 0.95},
            "rows": flat_rows(board), "conditions": board.conditions, "analyses": board.analyses}
