"""The test files go to the xdist workers longest first (tests/file_order.py, tests/file_times.json): the order
of this very session, the order function, the table's reading limits and its update."""

from __future__ import annotations

import json
import subprocess
import sys

import file_order
import pytest


def test_this_session_runs_its_files_longest_first(request):
    """The collection this test is part of is sorted by the repository's table (whichever `-m` selected it)."""
    table = file_order.load()
    files: list[str] = []
    tiers: dict[str, set[str]] = {}
    for item in request.session.items:
        name = file_order.file_of(item.nodeid)
        if not files or files[-1] != name:
            assert name not in files, f"{name}: its tests are not together"
            files.append(name)
        tiers.setdefault(name, set()).add(file_order.tier_of(item.keywords))
    groups = file_order.groups_for(file_order.session_tier(request.config.getoption("markexpr")))
    assert files == file_order.order(tiers, table, groups)
    assert "tests/test_file_order.py" in files


def test_longest_first_by_the_tiers_selected_and_unknown_files_before_all():
    table = {"a.py": {"fast": 5.0, "slow": 100.0}, "b.py": {"fast": 20.0}, "c.py": {"slow": 50.0},
             "d.py": {"fast": 1.0}}
    # the fast tier: a's 100 slow seconds do not count there
    assert file_order.order({"a.py": {"fast"}, "b.py": {"fast"}, "d.py": {"fast"}}, table) == ["b.py", "a.py", "d.py"]
    # the slow tier; a file the table does not name goes first, two such keep their given order
    slow = {"c.py": {"slow"}, "new2.py": {"slow"}, "a.py": {"slow"}, "new1.py": {"fast"}}
    assert file_order.order(slow, table) == ["new2.py", "new1.py", "a.py", "c.py"]
    # both tiers at once (a plain `pytest` run): each file's sum
    both = {"a.py": {"fast", "slow"}, "b.py": {"fast"}, "c.py": {"slow"}}
    assert file_order.order(both, table) == ["a.py", "c.py", "b.py"]
    # a file the table names only for the other tier is as unknown as a new one there (its tests there are new)
    assert file_order.order({"a.py": {"slow"}, "b.py": {"slow"}, "c.py": {"slow"}}, table) == ["b.py", "a.py", "c.py"]
    assert file_order.order({"d.py": {"fast"}, "c.py": {"fast", "slow"}, "b.py": {"fast"}}, table) == \
        ["c.py", "b.py", "d.py"]


@pytest.mark.parametrize("text", ["", "[1, 2]", "{not json", '{"a.py": [1]}', '{"a.py": {"fast": "x"}}',
                                  '{"a.py": {"fast": -3, "slow": true, "other": 4}}'])
def test_an_odd_table_orders_nothing_and_fails_nothing(tmp_path, text):
    path = tmp_path / "file_times.json"
    path.write_text(text)
    table = file_order.load(path)
    assert all(entry == {} for entry in table.values())
    assert file_order.order({"x.py": {"fast"}, "a.py": {"fast"}}, table) == ["x.py", "a.py"]


def test_an_outsized_table_is_not_read(tmp_path):
    path = tmp_path / "file_times.json"
    path.write_text(json.dumps({"a.py": {"fast": 1.0}, "pad": "x" * file_order.MAX_TABLE_BYTES}))
    assert file_order.load(path) == {}
    assert file_order.load(tmp_path / "missing.json") == {}


def test_an_update_replaces_only_what_the_session_ran(tmp_path):
    path = tmp_path / "file_times.json"
    path.write_text(json.dumps({"a.py": {"fast": 5.0, "slow": 100.0}, "gone.py": {"fast": 2.0}}))
    file_order.merge({"a.py": {"slow": 61.25}, "b.py": {"fast": 0.04}}, path)
    assert json.loads(path.read_text()) == {"a.py": {"fast": 5.0, "slow": 61.2}, "b.py": {"fast": 0.0},
                                            "gone.py": {"fast": 2.0}}
    assert path.read_text().count("\n") == 5  # one file a line, between the braces
    assert [p.name for p in tmp_path.iterdir()] == ["file_times.json"]  # no temporary file left


def test_the_repositorys_table_is_well_formed():
    raw = json.loads(file_order.FILE_TIMES.read_text())
    assert raw and raw == file_order.load()
    assert all(name.endswith(".py") and "/test_" in name for name in raw)


def test_a_groups_files_follow_each_other_ordered_by_the_groups_sum():
    """A group is one unit: placed by its files' summed seconds, its files together, longest first; files in no
    group and unknown files keep the plain order (above)."""
    table = {"a.py": {"fast": 25.0}, "b.py": {"fast": 20.0}, "g1.py": {"fast": 15.0}, "g2.py": {"fast": 12.0},
             "c.py": {"fast": 5.0}}
    groups = {"jvm": ("g2.py", "g1.py", "absent.py")}
    tiers = {name: {"fast"} for name in ["c.py", "g2.py", "a.py", "new.py", "g1.py", "b.py"]}
    assert file_order.order(tiers, table, groups) == ["new.py", "g1.py", "g2.py", "a.py", "b.py", "c.py"]
    assert file_order.order(tiers, table, {}) == ["new.py", "a.py", "b.py", "g1.py", "g2.py", "c.py"]
    assert file_order.unit_of("g2.py", groups) == file_order.unit_of("g1.py", groups) == "group:jvm"
    assert file_order.unit_of("a.py", groups) == "a.py"


def test_the_groups_name_existing_test_files_once_each():
    root = file_order.FILE_TIMES.parent.parent
    for tier in file_order.TIERS:
        named = [name for files in file_order.groups_for(tier).values() for name in files]
        assert len(named) == len(set(named)), tier
        assert all((root / name).is_file() and "/test_" in name for name in named), named


@pytest.mark.parametrize(("markexpr", "tier"), [
    ("slow or docker", "slow"), ("not slow and not docker", "fast"), ("", "slow"), ("docker", "slow"),
    ("not slow", "slow"), ("not slow and not docker and not gpu", "fast"), ("slow and not docker", "slow")])
def test_a_session_uses_the_slow_groups_when_its_mark_expression_selects_slow_tests(markexpr, tier):
    """scripts/test.sh's two tiers, a plain run (both), and expressions that select docker tests (slow tier)."""
    assert file_order.session_tier(markexpr) == tier


def _fast_group_of(name: str) -> str | None:
    return next((group for group, files in file_order.FAST_GROUPS.items() if name in files), None)


def test_one_tiers_groups_join_their_group_in_that_tier_and_leave_the_other_tiers_alone():
    slow, fast = file_order.groups_for("slow"), file_order.groups_for("fast")
    for tier_groups, own, other in ((file_order.SLOW_GROUPS, slow, fast), (file_order.FAST_GROUPS, fast, slow)):
        for group, files in tier_groups.items():
            assert own[group] == (*file_order.GROUPS.get(group, ()), *files)
            assert not set(files) & set(other.get(group, ())), group
    for group, files in file_order.SLOW_GROUPS.items():
        for name in files:
            assert file_order.unit_of(name, tier="slow") == f"group:{group}"
            # in the fast tier: alone, or with the fast tier's group of the same runs
            fast_group = _fast_group_of(name)
            assert file_order.unit_of(name, tier="fast") == file_order.unit_of(name) == \
                (f"group:{fast_group}" if fast_group else name)
    for group, files in file_order.FAST_GROUPS.items():
        for name in files:
            assert file_order.unit_of(name, tier="fast") == f"group:{group}"
            assert file_order.unit_of(name, tier="slow") != f"group:{group}"
    # the legend cases whose runs these files make are in that group's files in the fast tier
    assert "tests/test_ux_round19.py" in fast["segmentation-reference-run"]
    assert {f"plugins/{t}/tests/test_{t}_runs.py" for t in ("detection", "enhancement", "vqa")} <= \
        set(fast["segmentation-reference-run"])
    # in the slow tier a group's extra files are placed with it, by the whole group's seconds
    table = {"a.py": {"fast": 30.0, "slow": 30.0}, "g.py": {"slow": 20.0}, "x.py": {"fast": 25.0, "slow": 15.0}}
    tiers = {name: {"slow"} for name in table}
    groups = {"run": ("g.py",)}
    assert file_order.order(tiers, table, groups) == ["a.py", "g.py", "x.py"]
    assert file_order.order(tiers, table, {"run": ("g.py", "x.py")}) == ["g.py", "x.py", "a.py"]


class _Config:
    """What xdist's schedulers read from the configuration: the distribution mode and the workers."""

    def __init__(self, dist: str, markexpr: str = "") -> None:
        self.values = {"dist": dist, "tx": ["2*popen"], "markexpr": markexpr}

    def getvalue(self, name: str):
        return self.values[name]


def test_loadfile_hands_out_a_group_whole_and_other_files_alone(request):
    """tests/conftest.py's scheduler (scripts/test.sh's `--dist loadfile`): a group's tests share one scope (xdist
    gives a scope to one worker), every other file is its own scope; other modes keep xdist's own scheduler."""
    if not request.config.pluginmanager.hasplugin("xdist"):
        pytest.skip("pytest-xdist is not loaded (-p no:xdist)")
    hook = request.config.pluginmanager.hook.pytest_xdist_make_scheduler
    scheduler = hook(config=_Config("loadfile"), log=None)
    group, files = next(iter(file_order.GROUPS.items()))
    scopes = {scheduler._split_scope(f"{name}::test_x[1]") for name in files}
    assert scopes == {f"group:{group}"}
    assert scheduler._split_scope("tests/test_file_order.py::test_x") == "tests/test_file_order.py"
    assert scheduler._split_scope("tests/test_file_order.py::Cls::test_x") == "tests/test_file_order.py"
    assert type(hook(config=_Config("load"), log=None)).__name__ != type(scheduler).__name__


@pytest.mark.parametrize("markexpr", ["slow or docker", "not slow and not docker"])
def test_loadfile_hands_out_the_slow_tiers_groups_only_in_the_slow_tier(request, markexpr):
    if not request.config.pluginmanager.hasplugin("xdist"):
        pytest.skip("pytest-xdist is not loaded (-p no:xdist)")
    hook = request.config.pluginmanager.hook.pytest_xdist_make_scheduler
    scheduler = hook(config=_Config("loadfile", markexpr), log=None)
    slow = file_order.session_tier(markexpr) == "slow"
    for group, files in file_order.SLOW_GROUPS.items():
        for name in files:
            fast_group = _fast_group_of(name)
            assert scheduler._split_scope(f"{name}::test_x") == (
                f"group:{group}" if slow else f"group:{fast_group}" if fast_group else name)
        for name in file_order.GROUPS.get(group, ()):
            assert scheduler._split_scope(f"{name}::test_x") == f"group:{group}"
    for group, files in file_order.FAST_GROUPS.items():
        for name in files:
            assert (scheduler._split_scope(f"{name}::test_x") == f"group:{group}") is not slow
    for nodeid, group in file_order.SLOW_TESTS.items():
        assert scheduler._split_scope(nodeid) == (f"group:{group}" if slow else file_order.unit_of(
            file_order.file_of(nodeid)))


def test_the_slow_tests_routed_to_a_group_are_collected_and_their_groups_exist():
    """A renamed test or case would silently go back to its file's worker: each id must be one pytest collects."""
    root = file_order.FILE_TIMES.parent.parent
    assert all(group in file_order.groups_for("slow") for group in file_order.SLOW_TESTS.values())
    files = sorted({file_order.file_of(nodeid) for nodeid in file_order.SLOW_TESTS})
    listed = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                             "-p", "no:xdist", *files], cwd=root, capture_output=True, text=True, timeout=120)
    assert set(file_order.SLOW_TESTS) <= set(listed.stdout.splitlines()), listed.stdout[-2000:]
