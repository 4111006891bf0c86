"""automedbench.testing is a face over the test kit (automedbench-testkit): what it forwards, what it says
when the kit is missing, the core's toy track registered through the entry-point group, and the loader of a
track's solution scripts."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import automedbench_testkit
import pytest
from automedbench import testing
from automedbench.testing import fresh_registry, load_solution_script


def test_testing_forwards_exactly_the_kits_exports():
    assert set(automedbench_testkit.EXPORTS) == testing.FROM_TESTKIT
    for name in sorted(testing.FROM_TESTKIT):
        assert getattr(testing, name) is getattr(automedbench_testkit, name), name
    assert set(testing.__all__) >= testing.FROM_TESTKIT
    with pytest.raises(AttributeError):
        testing.not_a_helper  # noqa: B018


def test_testing_offers_its_own_helpers_and_forwards_no_engine_name():
    """What a track's tests use of the engine comes as helpers defined here (built on automedbench.engine), so a
    test never holds an engine class by a forwarded name: every public name is the module's own or the kit's."""
    for name in sorted(set(testing.__all__) - testing.FROM_TESTKIT):
        assert getattr(getattr(testing, name), "__module__", None) == "automedbench.testing", name
    for name in ("Run", "RunOptions", "registry", "Registry", "evaluate_folder", "RulesJudge", "freeze",
                 "grade_evaluation", "render_brief", "cli_main", "judged_stages", "resolve_rubric"):
        with pytest.raises(AttributeError):
            getattr(testing, name)


def test_without_the_kit_a_helper_is_one_line_naming_the_extra():
    """A fresh interpreter where the kit cannot be imported: the engine's names still resolve, a kit
    helper is an ImportError of one line naming the install command, and pytest's probes get AttributeError."""
    code = textwrap.dedent("""
        import sys
        sys.modules["automedbench_testkit"] = None  # as if not installed
        from automedbench import testing
        assert testing.stage_scores and testing.run_task and testing.evaluate_outputs
        assert getattr(testing, "pytest_plugins", "absent") == "absent"
        try:
            from automedbench.testing import StepsAgent
        except ImportError as exc:
            print(exc)
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("\n") == 1 and done.stdout.strip().endswith("pip install 'automedbench[test]'")
    assert "StepsAgent" in done.stdout


def test_the_toy_track_comes_in_through_the_entry_point_group():
    """The core's own track, registered through the core's entry point as a third party's is."""
    reg = fresh_registry()
    toy = reg.components["track"]["toy"]
    assert toy.distribution == "automedbench" and toy.plugin == "toy"
    assert "toy/vowels" in reg.tasks()


def test_load_solution_script_loads_a_fresh_module_each_time(tmp_path, monkeypatch):
    solution = tmp_path / "amb_fake_track" / "solution"
    solution.mkdir(parents=True)
    (tmp_path / "amb_fake_track" / "__init__.py").write_text("")
    (solution / "__init__.py").write_text("")
    (solution / "method.py").write_text("CALLS = []\n\ndef double(x):\n    CALLS.append(x)\n    return 2 * x\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    first = load_solution_script("amb_fake_track", "method")
    assert first.double(21) == 42 and first.CALLS == [21]
    second = load_solution_script("amb_fake_track", "method")
    assert second is not first and second.CALLS == []  # not cached: each test gets its own module
    with pytest.raises((FileNotFoundError, ImportError)):
        load_solution_script("amb_fake_track", "absent").double(1)
