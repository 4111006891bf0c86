"""A demanding user's walk, round 21: the agent systems people run, named with options. A factory taking `**options`
(each installed system's, replay's, a third party's) declares them with `register(..., options=[...])`, so the
engine's one check refuses a misspelt or foreign option before any run, in `run` and in a sweep alike."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest
import test_cli_newuser
from automedbench.api import hookimpl
from automedbench.cli import main
from automedbench.needs import install_line
from automedbench.plugins import registry
from automedbench.staging import STAMP
from automedbench_models.systems import SYSTEMS
from click.testing import CliRunner
from test_agents_round1 import Provider  # a loopback provider that misbehaves one way
from test_ux_round18 import _one_line  # exit 2 and one line on stderr holding the needle

cli = test_cli_newuser.cli  # the new user's command line (CliRunner, errors as a pipe sees them), shared


def test_a_sweep_refuses_an_option_one_installed_system_does_not_read_before_any_run(cli, tmp_path):
    """`sweep --agents codex,claude-code --agent-option wire_api=chat`: codex ran (4 s), then claude-code's factory
    refused wire_api three times as an infrastructure failure (retried twice, exit 3): the sweep's option check
    skipped a factory taking **options. Now one line, exit 2, nothing run."""
    out = tmp_path / "sweep"
    result = cli("sweep", "--agents", "codex,claude-code", "--tasks", "toy/vowels", "--agent-option",
                 "api_key_env=none", "--agent-option", "wire_api=chat", "--out", out)
    _one_line(result, "unknown claude-code agent option(s) wire_api; known: api_key_env, args, base_url, bin, model, "
                      "outage_after, prices; every agent of a sweep gets the same --agent-option: sweep "
                      "claude-code in a sweep of its own")
    assert not out.exists() or not any(out.iterdir())
    assert "wire_api" in SYSTEMS["codex"].options() and "wire_api" not in SYSTEMS["claude-code"].options()


def test_replays_options_are_checked_and_listed(cli, tmp_path):
    """`--agent-option allow_tron=true` was found only after the trajectory was (its own check, a second wording);
    `automedbench plugins` named trajectory= only, not rewrite_paths= or allow_torn=."""
    result = cli("run", "--task", "toy/vowels", "--agent", "replay", "--agent-option", "trajectory=nowhere.jsonl",
                 "--agent-option", "allow_tron=true", "--out", tmp_path / "runs")
    _one_line(result, "unknown replay agent option(s) allow_tron (did you mean 'allow_torn'?); known: allow_torn, "
                      "rewrite_paths, trajectory")
    replay = _description("agent", "replay")
    assert replay.endswith("trajectory=runs/ID/trajectory.jsonl (options: rewrite_paths=, allow_torn=)"), replay


def _description(kind: str, name: str) -> str:
    """A component's description in `automedbench plugins`, its wrapped table lines joined."""
    listing = CliRunner().invoke(main, ["plugins"], prog_name="automedbench", catch_exceptions=False)
    assert listing.exit_code == 0, listing.output
    found: list[str] = []
    for line in listing.output.splitlines():
        cells = [cell.strip() for cell in line.strip()[1:-1].split("│")]
        if len(cells) != 5:
            continue
        if cells[:2] == [kind, name] or (found and cells[:2] == ["", ""]):
            found.append(cells[4])
        elif found:
            break
    return " ".join(found)


def _third_party(options: Any, made: list[dict[str, Any]]) -> types.ModuleType:
    """A plugin registering agent `amb-kw` through the public hook: a factory taking **options, with `options`
    declared (the agent it makes is the core's noop)."""
    module = types.ModuleType("amb_kw_plugin")

    @hookimpl
    def automedbench_register_agents(register) -> None:
        def factory(**given: Any) -> Any:
            made.append(given)
            return registry().create("agent", "noop")

        register("amb-kw", factory, "a third party's agent", options=options)

    module.automedbench_register_agents = automedbench_register_agents  # type: ignore[attr-defined]
    return module


def test_a_third_party_factory_taking_kwargs_declares_its_options(cli, tmp_path):
    """A third party's `**options` factory had no way to say its options: a typo reached it (a traceback or a run
    with the default). Declared, a typo is one line before the factory runs; a declared one reaches it."""
    made: list[dict[str, Any]] = []
    registry().add_plugin(_third_party(["model", "temperature"], made), name="amb-kw", distribution="amb-kw-dist")
    try:
        out = tmp_path / "runs"
        bad = cli("run", "--task", "toy/vowels", "--agent", "amb-kw", "--agent-option", "modle=m1", "--out", out)
        _one_line(bad, "unknown amb-kw agent option(s) modle (did you mean 'model'?); known: model, temperature")
        assert made == [] and (not out.exists() or not any(out.iterdir()))
        good = cli("run", "--task", "toy/vowels", "--agent", "amb-kw", "--agent-option", "model=m1", "--out", out,
                   "--quiet")
        assert made == [{"model": "m1"}], (made, good.output)
        assert len(list(out.iterdir())) == 1, good.output
    finally:
        registry().remove_plugin("amb-kw")


@pytest.mark.parametrize("declared", ["model", ["model", 3]])
def test_options_that_are_not_a_list_of_names_are_a_plugin_problem(declared):
    """`options="model"` would have declared the options m, o, d, e, l: the component is refused by name instead."""
    made: list[dict[str, Any]] = []
    registry().add_plugin(_third_party(declared, made), name="amb-kw", distribution="amb-kw-dist")
    try:
        assert "amb-kw" not in registry().components["agent"]
        listing = CliRunner().invoke(main, ["plugins"], prog_name="automedbench", env={"COLUMNS": "400"})
        assert "agent 'amb-kw': options= must be a list of option names" in listing.output, listing.output
    finally:
        registry().remove_plugin("amb-kw")
        registry().problems[:] = [p for p in registry().problems if p.plugin != "amb-kw"]


@pytest.mark.parametrize("task,module", [("report_gen/demo", "pydicom")])
def test_a_demo_whose_staging_lacks_a_library_says_what_to_install(cli, tmp_path, monkeypatch, task, module):
    """With the report_gen track installed without its dependencies (`pip install --no-deps`), `run report_gen/demo`
    was a 30-line traceback ending in `No module named 'pydicom'` (exit 1): the demo's staging imports it on the
    host, where no sandbox check looks. Now one line naming the module and the install, exit 2, no run folder."""
    from automedbench_report_gen.data import demo

    demo.base_image.cache_clear()  # staged before in this process: the import would not run again
    monkeypatch.setitem(sys.modules, module, None)  # `import pydicom` fails as on a machine without it
    out = tmp_path / "runs"
    try:
        result = cli("run", "--task", task, "--agent", "reference", "--data-root", tmp_path / "data", "--out", out)
    finally:
        demo.base_image.cache_clear()
    _one_line(result, f"staging {task} needs the Python module '{module}', which this Python cannot import: "
                      "pip install 'automedbench[report_gen]'")
    assert not out.exists() or not any(out.iterdir())
    assert not list((tmp_path / "data").rglob(STAMP)), "a half staging was published"


def test_a_track_installed_without_its_dependencies_is_refused_before_any_work(cli, tmp_path, monkeypatch):
    """`pip install --no-deps` of a track (or a dependency removed since): `run report_gen/demo` met the first missing
    library as a traceback while staging, and `automedbench tasks` called the demo ready. Now the run, a sweep and
    the listing say which requirements are missing and the install, as `pip check` would, before staging."""
    from automedbench.needs import unmet_requirements

    site = tmp_path / "site"
    info = site / "amb_needy-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: amb-needy\nVersion: 0.1\n"
                                   "Requires-Dist: numpy>=1.24\nRequires-Dist: amb-absent-dependency>=1.0\n"
                                   "Requires-Dist: amb-absent-extra; extra == \"more\"\n")
    monkeypatch.syspath_prepend(str(site))
    unmet_requirements.cache_clear()
    monkeypatch.setattr(registry().components["track"]["report_gen"], "distribution", "amb-needy")
    needle = ("report_gen/demo cannot run: the report_gen track (amb-needy) is installed without "
              "amb-absent-dependency, which it requires: pip install 'automedbench[report_gen]'")
    out, data = tmp_path / "runs", tmp_path / "data"
    try:
        _one_line(cli("run", "--task", "report_gen/demo", "--agent", "reference", "--data-root", data, "--out", out),
                  needle)
        _one_line(cli("sweep", "--agents", "reference", "--tasks", "report_gen/demo", "--data-root", data, "--out",
                      out), needle)
        listing = cli("tasks", "--data-root", data)
    finally:
        unmet_requirements.cache_clear()
    assert not out.exists() and not data.exists()  # nothing staged, no run folder
    assert listing.exit_code == 0, listing.output
    assert ("not ready: report_gen/demo: the report_gen track (amb-needy) is installed without amb-absent-dependency, "
            "which it requires: pip install 'automedbench[report_gen]'") in listing.output, listing.output
    assert "not ready: vqa/demo" not in listing.output  # every other track's install is whole


@pytest.mark.parametrize("args,needle", [
    (["--agent", "no-submit", "--max-turns", "2"],
     "the agent spent the run's whole turn budget and was scored as it stood; to give it more: --max-turns N"),
    # a live server that fails the model's call (a refused port is now the provider's outage: test_agents_round2)
    (["--agent", "openai", "--agent-option", "model=x", "--agent-option", "base_url={url}",
      "--agent-option", "api_key_env=none", "--agent-option", "max_retries=0"],
     "the agent failed, not the task: fix what the error names (for a model: its endpoint, key or name; for an "
     "installed system: its program), then run again: automedbench run --task toy/vowels --tier lite --agent openai"),
])
def test_a_run_that_did_not_submit_says_what_to_do_next(cli, tmp_path, args, needle):
    """A run cut off by its turn budget, or whose agent failed, said its state and error in `run`, `show` and on its
    page, but not what to do about it. Now each says the next step; a submitted run says none."""
    out = tmp_path / "runs"
    with Provider("picky") as provider:
        ran = cli("run", "--task", "toy/vowels", *[a.format(url=provider.url) for a in args], "--out", out, "--quiet")
    assert ran.exit_code == 0, ran.output
    (run_dir,) = out.iterdir()
    shown = cli("show", run_dir)
    viewed = cli("view", run_dir)
    assert viewed.exit_code == 0, viewed.output
    for output in (ran.output, shown.output):
        assert "next: " + needle in " ".join(output.split()), output
    page = (run_dir / "view.html").read_text()
    assert "<dt>next</dt><dd>" + needle.replace("'", "&#x27;") + "</dd>" in page
    fine = cli("run", "--task", "toy/vowels", "--agent", "reference", "--out", tmp_path / "fine", "--quiet")
    assert fine.exit_code == 0 and "next:" not in fine.output, fine.output


def test_a_tracks_page_on_the_site_says_what_the_track_measures(cli, tmp_path):
    """A track's page on the leaderboard site (`leaderboard --site`) held tables and a chart of numbers and no word
    of what they score. Now it says what the stages and the Task are, and each task's title and metric, read from
    the installed track, a task with runs linked to its page."""
    out, site = tmp_path / "runs", tmp_path / "site"
    ran = cli("run", "--task", "toy/vowels", "--agent", "reference", "--out", out, "--quiet")
    assert ran.exit_code == 0, ran.output
    built = cli("leaderboard", out, "--site", site, "--quiet")
    assert built.exit_code == 0, built.output
    (page,) = (site / "track").iterdir()
    text = page.read_text()
    spec = registry().track("toy").task("toy/vowels")
    (task_page,) = (site / "task").iterdir()
    assert (f'<li><a href="../task/{task_page.name}">toy/vowels</a>: {spec.title}; metric: {spec.metric}; rated A at '
            in text), text[:3000]  # then its bands (round 29)
    assert "Overall is 0.5 Agentic + 0.5 Task" in text and "S3 Validate" in text


def test_plugins_name_shows_one_components_options(cli):
    """`automedbench plugins codex` was "Got unexpected extra argument": the one way to find an agent's options was
    the whole table, its descriptions wrapped in a narrow column. Now NAME shows that component's options in full
    (declared or from its factory's signature), and a misspelt name is one line with the nearest."""
    shown = cli("plugins", "codex")
    assert shown.exit_code == 0, shown.output
    listed = " ".join(shown.output.split()).split("options: ", 1)[1]
    assert listed == ", ".join(f"--agent-option {o}=..." for o in SYSTEMS["codex"].options()), listed
    assert "options: none" in cli("plugins", "reference").output
    assert "options: --agent-option variant=..." in cli("plugins", "scripted").output
    _one_line(cli("plugins", "kodex"), "no installed component is named 'kodex' (did you mean 'codex'?); known: ")


@pytest.mark.parametrize("make_root", [False, True])
def test_a_dataset_task_not_staged_names_its_download_and_the_stage_command(cli, tmp_path, make_root):
    """`run segmentation/kidney` before any staging said "data root ... does not exist (set --data-root ...)" on a
    fresh machine (no task staged yet), and with a root "run: automedbench stage ... --from PATH" without a word of
    what PATH is. Now both name the task's download (its `dataset`) and the command, in one line."""
    root = tmp_path / "data"
    if make_root:
        root.mkdir()
    spec = registry().task("segmentation/kidney")[1]
    where = f"under {root}" if make_root else f"(the data root {root} does not exist; staged elsewhere: --data-root"
    _one_line(cli("run", "--task", "segmentation/kidney", "--agent", "noop", "--data-root", root, "--out",
                  tmp_path / "runs"),
              f"task segmentation/kidney is not staged {where}")
    result = cli("run", "--task", "segmentation/kidney", "--agent", "noop", "--data-root", root, "--out",
                 tmp_path / "runs")
    assert (f"download its data ({spec.dataset}), then: automedbench stage segmentation/kidney --from PATH"
            in result.stderr), result.stderr
    assert spec.dataset and not (tmp_path / "runs").exists()


def test_tasks_task_says_a_demos_needs_in_full(cli, tmp_path):
    """`automedbench tasks` had no column for a task's time budget or the disk its workspace reserves, and its
    narrow columns cut what the sandbox must import; `tasks segmentation/demo` was "Got unexpected extra argument".
    Now TASK prints its budget, disk, sandbox imports with the install, network, readiness and where its data is."""
    track, spec = registry().task("segmentation/demo")
    shown = cli("tasks", "segmentation/demo", "--data-root", tmp_path / "data")
    assert shown.exit_code == 0, shown.output
    text = " ".join(shown.output.split())
    needs = track.sandbox_needs(spec)
    assert f"time: {spec.time_limit_s} s per run" in text and f"{spec.max_turns} turns" in text, text
    assert f"disk: a {spec.workspace_mb} MB workspace, reserved whole before the run starts" in text, text
    # the install from this checkout's folder, the track being installed editable from it (round 25)
    assert f"sandbox: imports {', '.join(needs.modules)} ({install_line(spec, needs)})" in text, text
    assert install_line(spec, needs).startswith("pip install -e "), text
    assert "network: none" in text and "ready here: yes" in text, text
    assert "data: generated and staged on its first run (no download)" in text, text
    kidney = " ".join(cli("tasks", "segmentation/kidney", "--data-root", tmp_path / "data").output.split())
    assert "then: automedbench stage segmentation/kidney --from PATH" in kidney, kidney
    _one_line(cli("tasks", "segmentaton/demo"), "unknown task 'segmentaton/demo' (did you mean 'segmentation/demo'?)")


@pytest.mark.parametrize("agent", ["mini-swe-agent", "codex"])
def test_an_installed_system_whose_provider_cannot_be_resolved_is_refused_before_the_run(cli, tmp_path, agent):
    """On a machine whose DNS cannot resolve the provider (offline, a typo'd host), each system ran and retried for
    minutes (mini-swe-agent 280 s, gemini-cli 194 s) before an agent_failure; the harness's gateway connects from
    this machine, without a proxy, so every call was bound to fail. Now one line before any run folder, exit 2.
    (`.invalid` is reserved: it resolves nowhere.)"""
    out = tmp_path / "runs"
    (tmp_path / "bin").mkdir()  # the program need not be installed here: a stub stands in (it never runs)
    stub = tmp_path / "bin" / agent
    stub.write_text("#!/bin/sh\nexit 0\n")
    stub.chmod(0o755)
    result = cli("run", "--task", "toy/vowels", "--agent", agent, "--agent-option", "api_key_env=none",
                 "--agent-option", f"bin={stub}", "--agent-option", "base_url=https://provider.invalid/v1",
                 "--out", out)
    _one_line(result, f"{agent}: the model provider's host provider.invalid (https://provider.invalid/v1) cannot be "
                      "resolved on this machine (")
    assert "name another endpoint with --agent-option base_url=URL" in result.stderr
    assert not out.exists() or not any(out.iterdir())
