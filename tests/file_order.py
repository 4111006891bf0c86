"""The order pytest-xdist hands out the test files in: longest first, by the seconds each file took per tier.

scripts/test.sh runs each tier with `--dist loadfile --no-loadscope-reorder`: whole files per worker, in
collection order. Longest first, the workers end within about one short file of each other; in the old order
(a hand-kept list of long files first, then the rest as collected) a long file started late held one worker
while the other had finished. tests/conftest.py sorts the collection with `order` and, with
AUTOMEDBENCH_FILE_TIMES=update, writes the seconds a session measured into the table with `merge`.
The table only orders: a file missing from it, or from the tier it runs in, goes first (new tests may be long); a
stale entry costs at most a late long file.

Files that pay the same cost the first time a process needs it, or share a cached run, form a group (`GROUPS`):
one unit of work that xdist hands to one worker whole (tests/conftest.py's scheduler), ordered by the group's
summed seconds. Spread over the workers, each one paid the cost again (fast tier, CPU-s of a cgroup around pytest
`-n 0`): the six torch files took 94 in six processes, 45 in one; five report_gen files (METEOR, nltk) 92 and 58;
the run page test's classification case and the classification tests' slow tier 98 and 74 (one run fewer).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

FILE_TIMES = Path(__file__).with_name("file_times.json")
FILE_TIMES_ENV = "AUTOMEDBENCH_FILE_TIMES"
TIERS = ("fast", "slow")
MAX_TABLE_BYTES = 1 << 20  # the table is a few KB: anything larger is not ours, and ordering falls back


def tier_of(keywords: Iterable[str]) -> str:
    """The scripts/test.sh tier a test with these keywords runs in (`slow or docker`, and the rest)."""
    names = set(keywords)
    return "slow" if "slow" in names or "docker" in names else "fast"


def file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def load(path: Path = FILE_TIMES) -> dict[str, dict[str, float]]:
    """file -> {tier: seconds}; only well-formed entries (an unreadable or odd table orders nothing)."""
    try:
        with path.open("rb") as fh:
            data = fh.read(MAX_TABLE_BYTES + 1)
        raw = json.loads(data) if len(data) <= MAX_TABLE_BYTES else None
    except (OSError, ValueError):
        return {}
    if not isinstance(raw, dict):
        return {}
    table: dict[str, dict[str, float]] = {}
    for name, tiers in raw.items():
        if isinstance(name, str) and isinstance(tiers, dict):
            table[name] = {t: float(s) for t, s in tiers.items()
                           if t in TIERS and isinstance(s, (int, float)) and not isinstance(s, bool) and s >= 0}
    return table


# group name -> its files (repository-relative, as in the table); a file is in at most one group
GROUPS: dict[str, tuple[str, ...]] = {
    # report_gen's evaluations start METEOR's JVM in the process's warm evaluator, its metric tests import nltk
    "report_gen-meteor": (*(f"plugins/report_gen/tests/test_report_gen_{name}.py" for name in (
        "reference_reach", "demo_seeds", "metric", "grader", "runs", "stagers", "stager_conformance")),
        # the report template cap's two evaluations, on the warm evaluator (and its JVM) these files use
        "tests/test_caps_omissions.py"),
    # torch (+ MONAI, which imports transformers, or transformers) in the test process: the reference SSIM, Dice
    # and surface metrics, the CheXbert and Hugging Face scorers, the shipped classification checkpoint; and the
    # run page test, which shares the classification demo's Standard reference run with the classification tests
    "torch-in-process": ("plugins/enhancement/tests/test_enhancement_metric.py",
                         "plugins/segmentation/tests/test_segmentation_primary_label.py",
                         "plugins/segmentation/tests/test_segmentation_dice.py",
                         "plugins/segmentation/tests/test_segmentation_surface.py",
                         "plugins/segmentation/tests/test_segmentation_conformance_round15.py",
                         "plugins/report_gen/tests/test_report_gen_chexbert.py",
                         "plugins/report_gen/tests/test_report_gen_hf.py",
                         "plugins/classification/tests/test_classification_runs.py",
                         "tests/test_runpage_demos.py"),
    # the segmentation demo's Lite runs cached per process by tests/conftest.py's `run_agent` (about 5 CPU-s each):
    # these files compare their runs with the reference's or read its folder, and test_scripted_runs.py and
    # test_codes_detectors.py run the same flawed variants; spread over the workers, each worker ran them again.
    # The UX rounds' run page tests read the same runs, and both make the VQA demo's Lite reference run
    "segmentation-reference-run": tuple(f"tests/test_{name}.py" for name in (
        "scripted_runs", "warm_evaluator", "judge_trust", "backends_anthropic", "backends_replay_cli",
        "backends_openai", "cli_newuser", "codes_detectors", "rubric_model", "ux_round18", "ux_round19")),
}

# groups for the slow tier only: group name -> files that join GROUPS' group of that name (or form one) in a session
# running slow tests. Their fast tests share nothing with the group's, so in the fast tier each file goes alone.
SLOW_GROUPS: dict[str, tuple[str, ...]] = {
    # the run page test's skip-validate Lite run of these demos (and synthesis/demo-mrct's Standard reference run)
    # is the same run (same `amb_run` key) as these files' slow tests make: ~17 CPU-s of runs made once
    "torch-in-process": tuple(f"plugins/{track}/tests/test_{track}_runs.py"
                              for track in ("detection", "enhancement", "synthesis", "vqa")),
    # their slow tests compare their runs with the segmentation demo's Lite (and Pro) reference run; the red-team
    # round 21's with the Standard one, the run page's (routed to this group, SLOW_TESTS)
    "segmentation-reference-run": tuple(f"tests/test_{name}.py" for name in (
        "inspect_bridge", "backends_openweight", "paper_rules", "backends_textshapes", "redteam_round21")),
}

# groups for the fast tier only, as SLOW_GROUPS for the slow one: the fast reference runs of these demos are the ones
# test_ux_round19.py's picture-legend cases make (the same `amb_run` key), and test_ux_round18.py's VQA one; in two
# workers each was made twice (~13 CPU-s: BENCHMARKS.md, "Test time, round 13")
FAST_GROUPS: dict[str, tuple[str, ...]] = {
    "segmentation-reference-run": tuple(f"plugins/{track}/tests/test_{track}_runs.py"
                                        for track in ("detection", "enhancement", "vqa")),
}

# single tests that go with a group in the slow tier (node id -> group), not with their file: xdist's scheduler
# hands out node ids, so one case of a parametrized test can run where its costs are paid already
SLOW_TESTS: dict[str, str] = {
    # the run page of report_gen/demo: its two runs are evaluated on the warm evaluator, whose METEOR JVM the
    # report_gen group's worker has started already (alone with test_caps_omissions.py 35.5 CPU-s, together 23.9)
    "tests/test_runpage_demos.py::test_every_item_links_its_evidence_and_every_case_has_its_picture"
    "[report_gen/demo]": "report_gen-meteor",
    # the warm-against-cold check of report_gen/demo: its submission is the run page's Standard reference run (the
    # same `amb_run` key), made once for both; in its file's group it made a run of its own (38.8 CPU-s with two cold
    # evaluations, one now: BENCHMARKS.md, "The slow tier mapped")
    "tests/test_warm_evaluator.py::test_report_demo_scores_the_same_warm_and_cold": "report_gen-meteor",
    # the run page of segmentation/demo: its Standard reference run is test_redteam_round21.py's slow test's
    # (run_agent is amb_run; its skip-validate Lite run was test_codes_detectors.py's slow tests', which now run in
    # the fast tier beside test_scripted_runs.py's same runs)
    "tests/test_runpage_demos.py::test_every_item_links_its_evidence_and_every_case_has_its_picture"
    "[segmentation/demo]": "segmentation-reference-run",
}


def groups_for(tier: str) -> dict[str, tuple[str, ...]]:
    """The groups of a session whose tests are of `tier` ("slow": a session running any slow test): GROUPS, with
    SLOW_GROUPS' files joined in for the slow tier and FAST_GROUPS' for the fast one."""
    groups = dict(GROUPS)
    for group, files in (SLOW_GROUPS if tier == "slow" else FAST_GROUPS).items():
        groups[group] = (*groups.get(group, ()), *files)
    return groups


def session_tier(markexpr: str) -> str:
    """The tier whose groups a session selected by `-m markexpr` uses: "slow" when it selects slow or docker tests
    (scripts/test.sh's slow tier, or no `-m` at all), "fast" otherwise. Both the collection's order and xdist's
    scheduler (which sees node ids, not markers) read it from the same option, so they agree."""
    if not markexpr:
        return "slow"
    from _pytest.mark.expression import Expression  # what `-m` itself evaluates (pytest exports no public name)

    expr = Expression.compile(markexpr)
    return "slow" if any(expr.evaluate(lambda name, /, mark=mark, **_: name == mark) for mark in ("slow", "docker")) \
        else "fast"


_GROUP_OF = {tier: {name: group for group, files in groups_for(tier).items() for name in files} for tier in TIERS}


def unit_of(name: str, groups: Mapping[str, Iterable[str]] | None = None, tier: str = "fast") -> str:
    """The unit of work a file goes to a worker in: its group's name (`group:NAME`), or the file itself; the groups
    are `groups`, or else the tier's (`groups_for`)."""
    group = (_GROUP_OF[tier].get(name) if groups is None
             else next((g for g, files in groups.items() if name in files), None))
    return f"group:{group}" if group else name


def scope_of(nodeid: str, tier: str) -> str:
    """The unit a test goes to a worker in: its own (SLOW_TESTS, slow tier), else its file's (`unit_of`)."""
    group = SLOW_TESTS.get(nodeid) if tier == "slow" else None
    return f"group:{group}" if group else unit_of(file_of(nodeid), tier=tier)


def order(tiers_by_file: Mapping[str, set[str]], table: Mapping[str, Mapping[str, float]],
          groups: Mapping[str, Iterable[str]] | None = None) -> list[str]:
    """The files, longest unit first: a file's length is its seconds in the tiers its selected tests are in, a
    group's the sum of its files' (`GROUPS`, or `groups`), whose files follow each other, longest first; files
    the table does not name for a tier their selected tests are in come first, in their given order (the sorts
    are stable). Such a file's tests in that tier are new: counted as 0 s, a whole-demo-run test added to a file
    the table knew only in the other tier went last and left its worker running alone."""
    def seconds(name: str) -> float:
        known = table.get(name, {})
        tiers = tiers_by_file[name]
        return sum(known[tier] for tier in tiers) if all(tier in known for tier in tiers) else float("inf")

    units: dict[str, list[str]] = {}
    for name in tiers_by_file:
        units.setdefault(unit_of(name, groups), []).append(name)
    ranked = sorted(units.values(), key=lambda files: sum(seconds(name) for name in files), reverse=True)
    return [name for files in ranked for name in sorted(files, key=seconds, reverse=True)]


def merge(spent: Mapping[str, Mapping[str, float]], path: Path = FILE_TIMES) -> None:
    """Write the seconds a session measured (file -> {tier: seconds}) into the table: those files' entries for
    those tiers are replaced, everything else kept; one file a line, sorted, replaced atomically."""
    table = load(path)
    for name, tiers in spent.items():
        table[name] = {**table.get(name, {}), **{tier: round(s, 1) for tier, s in tiers.items()}}
    lines = ",\n".join(f"  {json.dumps(name)}: {json.dumps(dict(sorted(table[name].items())))}"
                       for name in sorted(table))
    temp = path.with_name(f".{path.name}.{os.getpid()}")
    temp.write_text("{\n" + lines + "\n}\n")
    temp.replace(path)
