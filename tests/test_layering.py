"""The layering, held by an import-graph check over core/ and every plugins/*/ (tests included).

contract <- engine <- built-ins <- face: a module may import its own layer or a lower one, never a higher.
The built-in distributions under core/<name>/ (import package ``automedbench_<name>``) are written as a third
party would write them: they import the core only through ``automedbench.api`` and ``automedbench.engine`` (the
engine's curated surface), never another built-in distribution, and their own modules by these layers; the
core (package ``automedbench``) never imports one of them, as it never imports a third party's plugin.
A track (anything under plugins/<track>/, its tests too) imports the core only through ``automedbench.api``
and ``automedbench.testing``, and never another track. Every import counts, inside functions too.
One forwarding is allowed and nothing else: the face module ``automedbench.testing`` imports the test kit's
package ``automedbench_testkit`` (the package itself, not its modules), so tracks' tests keep importing only
the core's two public modules while the kit is its own distribution. The core's toy track (``automedbench.toy``)
is held to a track's rule (it imports ``automedbench.api`` only, and nothing else of the core imports it), since
it is registered through the entry-point group like a third-party track.
``python tests/test_layering.py`` prints the graph's broken rules.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "core"
# The built-in distributions beside the core package: folder -> import package (core/campaign -> automedbench_campaign).
BUILTIN_DISTS = {d: f"automedbench_{d.name}" for d in sorted(CORE.iterdir()) if (d / "pyproject.toml").is_file()}

CONTRACT, ENGINE, BUILTIN, FACE = 0, 1, 2, 3
LAYER_NAMES = {CONTRACT: "contract", ENGINE: "engine", BUILTIN: "built-ins", FACE: "face"}
# Module (or package prefix) -> layer; the longest matching prefix wins. Every core module must match one.
LAYERS: dict[str, int] = {
    # contract: what a track, sandbox, agent, judge or detector is written against, and the small file helpers
    # those need (atomic writes, bounded reads, YAML/JSON); all of it exported through automedbench.api.
    "automedbench": CONTRACT,  # the package's __init__
    "automedbench.api": CONTRACT,
    "automedbench.agent": CONTRACT,
    "automedbench.agenttext": CONTRACT,
    "automedbench.codetext": CONTRACT,  # what a call's code runs and what its output observed (trace and rules)
    "automedbench.authoring": CONTRACT,
    "automedbench.detectors": CONTRACT,  # the error-code taxonomy and the detector interface
    "automedbench.errors": CONTRACT,
    "automedbench.evidence": CONTRACT,  # the trajectory as the rules read it (rules judge and verdict bounds)
    "automedbench.fsutil": CONTRACT,
    "automedbench.grades": CONTRACT,
    "automedbench.hookspecs": CONTRACT,
    "automedbench.judge": CONTRACT,
    "automedbench.modelconfig": CONTRACT,
    "automedbench.models": CONTRACT,
    "automedbench.pictures": CONTRACT,  # per-case pictures: what a track draws, the helpers, the renderer
    "automedbench.plugins": CONTRACT,  # the registry of the contract's components (no run path in it)
    "automedbench.refguard": CONTRACT,  # secret per-staging variants of shipped images (demo references)
    "automedbench.replyjson": CONTRACT,  # the one strict reading of a model's JSON reply
    "automedbench.records": CONTRACT,
    "automedbench.rubric": CONTRACT,
    "automedbench.sandbox": CONTRACT,
    "automedbench.sandboxcall": CONTRACT,  # what one sandboxed call is made of, shared by every sandbox backend
    "automedbench.serialize": CONTRACT,
    "automedbench.stagearea": CONTRACT,  # the crash- and concurrency-safe swap every stager uses
    "automedbench.staging": CONTRACT,  # where staged data lives, staged once under a lock (api.stage_task)
    "automedbench.stagesecret": CONTRACT,  # the per-staging secret every hidden choice of a staging is drawn from
    "automedbench.taskfile": CONTRACT,
    "automedbench.terminal": CONTRACT,  # agent text made inert for terminals and CSV
    "automedbench.trace": CONTRACT,
    "automedbench.track": CONTRACT,
    "automedbench.trajectory": CONTRACT,
    "automedbench.untrusted": CONTRACT,
    "automedbench.yamlfile": CONTRACT,
    # engine: the run path (stage, run, freeze, evaluate, grade, score, store) and the plugin registry
    "automedbench.attempts": ENGINE,  # the ledger of attempts per configuration each run signs its number from
    "automedbench.brief": ENGINE,
    "automedbench.conversation": ENGINE,  # the agent phase's turns, yielded as trajectory events
    "automedbench.evaluate_cmd": ENGINE,
    "automedbench.evaluator": ENGINE,
    "automedbench.freeze": ENGINE,
    "automedbench.harnessstate": ENGINE,
    "automedbench.interrupt": ENGINE,  # SIGTERM/SIGHUP as an orderly unwind, installed by the processes that own runs
    "automedbench.needs": ENGINE,  # what a task's sandbox needs, checked before a run
    "automedbench.nextstep": ENGINE,  # what a user can do about a run, by how it ended (report and run page)
    "automedbench.observed": ENGINE,  # steps inside an agent program's session, recorded as the runner's own
    "automedbench.options": ENGINE,
    "automedbench.pilot": ENGINE,
    "automedbench.plan_artefacts": ENGINE,
    "automedbench.planimage": ENGINE,  # plan.png read under caps, and the checks a diagram passes (s1e, s1f)
    "automedbench.provenance": ENGINE,
    "automedbench.repeats": ENGINE,  # noticing identical calls with identical answers in a row
    "automedbench.report": ENGINE,
    "automedbench.resultproof": ENGINE,  # the proof a result carries that the harness wrote it
    "automedbench.run_origin": ENGINE,  # `evaluate` of a run's outputs: whether that run had today's staging
    "automedbench.runfolder": ENGINE,
    "automedbench.runner": ENGINE,
    "automedbench.runstate": ENGINE,
    "automedbench.scoring": ENGINE,
    "automedbench.steptimer": ENGINE,
    "automedbench.tripwire": ENGINE,
    "automedbench.verdictcaps": ENGINE,  # every judge's verdict bounded by what the harness observed
    # built-ins: registered through the same hooks a third party uses
    "automedbench.engine": BUILTIN,  # the engine's surface for built-in distributions and third parties
    "automedbench.agents": BUILTIN,
    "automedbench.judges": BUILTIN,
    "automedbench.sandboxes": BUILTIN,
    "automedbench.toy": BUILTIN,  # the core's toy track, registered through the entry-point group
    # the built-in distributions (core/<name>/): built-ins, their command lines and hook modules face
    "automedbench_campaign": BUILTIN,
    "automedbench_codes": BUILTIN,
    "automedbench_docker": BUILTIN,
    "automedbench_inspect": BUILTIN,
    "automedbench_models": BUILTIN,
    # face: the command line (the built-ins' commands included) and the test kit
    "automedbench.builtins": FACE,  # wires every built-in (their commands too) into the registry
    "automedbench.cli": FACE,
    "automedbench.taskcard": FACE,  # `tasks TASK`: one task's needs in full
    "automedbench.progress": BUILTIN,  # progress of long commands (stage, sweep) on a terminal and off one
    "automedbench.testing": FACE,
    "automedbench_campaign.cli": FACE,
    "automedbench_campaign.judgecli": FACE,
    "automedbench_campaign.plugin": FACE,  # registers the campaign (its commands too), like automedbench.builtins
    "automedbench_campaign.viewer.cli": FACE,
    "automedbench_codes.plugin": FACE,
    "automedbench_docker.cli": FACE,
    "automedbench_docker.plugin": FACE,
    "automedbench_inspect._registry": FACE,  # inspect_ai's entry point: registers the tasks with inspect
    "automedbench_inspect.plugin": FACE,
    "automedbench_models.plugin": FACE,
    "automedbench_testkit": FACE,  # the test kit: what automedbench.testing forwards to
}
TRACK_MAY_IMPORT = {"automedbench.api", "automedbench.testing"}
# What a built-in distribution (core/<name>/) may import of the core: what a third party's could.
BUILTIN_MAY_IMPORT = {"automedbench.api", "automedbench.engine"}
# The only imports of a built-in distribution the core makes: (core module, the package it forwards to).
FORWARDS = {("automedbench.testing", "automedbench_testkit")}
# Packages of the built-in distributions that are tracks: they import the core as a track does.
BUILTIN_TRACKS = ("automedbench.toy",)


def layer_of(module: str) -> int | None:
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in LAYERS:
            return LAYERS[".".join(parts[:end])]
    return None


def _module_name(path: Path, base: Path) -> str:
    parts = list(path.relative_to(base).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str, bases: list[Path]) -> bool:
    rel = Path(*name.split("."))
    return any((base / rel).with_suffix(".py").is_file() or (base / rel / "__init__.py").is_file() for base in bases)


def imports_of(path: Path, module: str, base: Path | list[Path] | None) -> set[str]:
    """Absolute names of every automedbench* module the file imports (submodules resolved when base is known)."""
    is_package = path.name == "__init__.py"
    bases = [base] if isinstance(base, Path) else base
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = module.split(".")
                anchor = anchor[: len(anchor) - node.level + (1 if is_package else 0)]
                target = ".".join([*anchor, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            for alias in node.names:  # `from automedbench import staging` imports the module staging
                sub = f"{target}.{alias.name}"
                found.add(sub if bases and _is_module(sub, bases) else target)
    return {name for name in found if name.startswith("automedbench")}


def _core_files() -> list[tuple[Path, Path]]:
    """(file, folder its module name is relative to) for the core package and each built-in distribution."""
    files = [(path, CORE) for path in sorted((CORE / "automedbench").rglob("*.py"))]
    for folder, package in BUILTIN_DISTS.items():
        files += [(path, folder) for path in sorted((folder / package).rglob("*.py"))]
    return files


def _track_of(module: str) -> str | None:
    """The built-in track a module belongs to, if any."""
    return next((t for t in BUILTIN_TRACKS if module == t or module.startswith(t + ".")), None)


def _foreign_to_track(module: str, target: str) -> bool:
    """A built-in track's module importing the core beyond api/testing, or another part of its distribution."""
    track = next((t for t in BUILTIN_TRACKS if module == t or module.startswith(t + ".")), None)
    if track is None or target in TRACK_MAY_IMPORT or target == track or target.startswith(track + "."):
        return False
    return target.startswith("automedbench")


def broken_rules() -> list[str]:
    broken: list[str] = []
    bases = [CORE, *BUILTIN_DISTS]
    builtin_packages = set(BUILTIN_DISTS.values())
    for path, base in _core_files():
        module = _module_name(path, base)
        own = layer_of(module)
        if own is None:
            broken.append(f"{module}: no layer declared in tests/test_layering.py")
            continue
        for target in sorted(imports_of(path, module, bases)):
            theirs = layer_of(target)
            if (module, target) in FORWARDS:
                continue
            top, their_top = module.split(".")[0], target.split(".")[0]
            if _foreign_to_track(module, target):
                broken.append(f"{module} (a track) imports {target}")
            elif _track_of(target) is not None and _track_of(target) != _track_of(module):
                broken.append(f"{module} imports {target} (a track: the core never names one)")
            elif top == "automedbench" and their_top in builtin_packages:
                broken.append(f"{module} (the core) imports {target} (a built-in distribution)")
            elif top != "automedbench" and their_top == "automedbench" and target not in BUILTIN_MAY_IMPORT:
                broken.append(f"{module} (a built-in distribution) imports {target}: only "
                              f"{' and '.join(sorted(BUILTIN_MAY_IMPORT))}")
            elif top != "automedbench" and their_top not in (top, "automedbench"):
                broken.append(f"{module} (a built-in distribution) imports {target} (another distribution)")
            elif theirs is not None and theirs > own:
                broken.append(f"{module} ({LAYER_NAMES[own]}) imports {target} ({LAYER_NAMES[theirs]})")
    for plugin in sorted(p for p in (ROOT / "plugins").iterdir() if (p / "pyproject.toml").is_file()):
        own_packages = {p.name for p in plugin.iterdir() if (p / "__init__.py").is_file()}
        for path in sorted(plugin.rglob("*.py")):
            if {".venv", "build"} & set(path.parts):  # a venv, setuptools' scratch copies
                continue
            rel = path.relative_to(plugin)
            for target in sorted(imports_of(path, _module_name(path, plugin), None)):
                top = target.split(".")[0]
                if top in own_packages or target in TRACK_MAY_IMPORT:
                    continue
                if top == "automedbench" or top.startswith("automedbench_"):
                    broken.append(f"plugins/{plugin.name}/{rel} -> {target}")  # a track: api/testing only
    return broken


# Modules that left the core for a built-in distribution (issue 23's thin core): none may come back, and
# importing the core's engine and command line loads none of the built-in distributions.
MOVED_OUT = ["automedbench.campaign", "automedbench.viewer", "automedbench.evalservice", "automedbench.codes.llm",
             "automedbench.sandboxes.docker", "automedbench.sandboxes.docker_images",
             "automedbench.sandboxes.docker_cli", *(f"automedbench.agents.{m}" for m in (
                 "chat", "chat_common", "openai_chat", "anthropic_chat", "textcalls", "replay", "cli_agent")),
             "automedbench.judges.llm", "automedbench.judges.digest",
             "automedbench.leaksearch", "automedbench.sandbox_checks", "automedbench.validate",
             "automedbench.rejudge", "automedbench.pricing", "automedbench.grading", "automedbench.replyhint",
             "automedbench.codes"]


def test_the_core_holds_and_imports_none_of_the_moved_packages():
    core_modules = {_module_name(path, CORE) for path in (CORE / "automedbench").rglob("*.py")}
    assert sorted(m for m in core_modules if any(m == p or m.startswith(p + ".") for p in MOVED_OUT)) == []
    imported = {target for path, base in _core_files() if base == CORE
                for target in imports_of(path, _module_name(path, CORE), [CORE, *BUILTIN_DISTS])}
    builtin_packages = tuple(BUILTIN_DISTS.values())
    forwarded = {target for _, target in FORWARDS}
    assert sorted(t for t in imported if (t.startswith(builtin_packages) and t not in forwarded)
                  or t in MOVED_OUT) == []


def test_loading_the_core_engine_imports_no_builtin_distribution():
    """The run path and the command line, imported in a fresh interpreter, pull in no automedbench_* package."""
    import subprocess

    code = ("import sys, automedbench.cli, automedbench.runner, automedbench.api, automedbench.engine\n"
            "import automedbench.testing\n"
            "print(sorted({m.split('.')[0] for m in sys.modules if m.startswith('automedbench_')}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.fixture(scope="module")
def found() -> list[str]:
    """The repository's broken rules, checked once for the two tests below (every file parsed: about a second)."""
    return broken_rules()


def test_every_core_module_has_a_layer(found):
    missing = [b for b in found if "no layer declared" in b]
    assert missing == []


def test_no_broken_layering_rules(found):
    assert found == []


def test_the_check_sees_a_break(tmp_path):
    """The checker itself: a contract module importing the runner, and a track importing the engine, are found."""
    pkg = tmp_path / "automedbench"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "runner.py").write_text("")
    (pkg / "track.py").write_text("def f():\n    from .runner import Run\n    from . import runner\n")
    assert imports_of(pkg / "track.py", "automedbench.track", tmp_path) == {"automedbench.runner"}
    assert layer_of("automedbench.track") < layer_of("automedbench.runner")
    plugin = tmp_path / "mytrack.py"
    plugin.write_text("from automedbench.api import Track\nfrom automedbench.runner import Run\n")
    assert imports_of(plugin, "mytrack", None) == {"automedbench.api", "automedbench.runner"}


def test_the_check_sees_the_core_importing_a_builtin_distribution(tmp_path, monkeypatch):
    """A core module importing a built-in distribution's package is a break, at whatever layer either is."""
    core = tmp_path / "core"
    (core / "automedbench").mkdir(parents=True)
    (core / "automedbench" / "__init__.py").write_text("")
    (core / "automedbench" / "cli.py").write_text("def f():\n    from automedbench_campaign import sweep\n")
    (core / "automedbench" / "engine.py").write_text("")
    (core / "automedbench" / "runner.py").write_text("")
    dist = core / "campaign"
    (dist / "automedbench_campaign").mkdir(parents=True)
    (dist / "pyproject.toml").write_text('[project]\nname = "automedbench-campaign"\n')
    (dist / "automedbench_campaign" / "__init__.py").write_text("")
    (dist / "automedbench_campaign" / "sweep.py").write_text("from automedbench import engine, runner\n")
    (dist / "automedbench_campaign" / "cli.py").write_text("from automedbench.api import UserError\n"
                                                           "from automedbench.engine import Run\n"
                                                           "from automedbench_codes import tagging\n")
    (tmp_path / "plugins").mkdir()
    monkeypatch.setattr(sys.modules[__name__], "CORE", core)
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    monkeypatch.setattr(sys.modules[__name__], "BUILTIN_DISTS", {dist: "automedbench_campaign"})
    broken = broken_rules()
    assert "automedbench.cli (the core) imports automedbench_campaign.sweep (a built-in distribution)" in broken
    # a built-in distribution reaches the core through api and engine only, and no other distribution
    assert [b for b in broken if b.startswith("automedbench_campaign.")] == [
        "automedbench_campaign.cli (a built-in distribution) imports automedbench_codes (another distribution)",
        "automedbench_campaign.sweep (a built-in distribution) imports automedbench.runner: only automedbench.api and "
        "automedbench.engine"]


def test_the_check_allows_the_testing_forward_and_nothing_else(tmp_path, monkeypatch):
    """automedbench.testing may import the test kit's package; not one of its modules, and no other core
    module may import the kit at all. The core's toy track imports only automedbench.api, and no other core
    module imports it."""
    core = tmp_path / "core"
    (core / "automedbench").mkdir(parents=True)
    (core / "automedbench" / "__init__.py").write_text("")
    (core / "automedbench" / "runner.py").write_text("")
    (core / "automedbench" / "testing.py").write_text(
        "def f():\n    import automedbench_testkit\n    from automedbench_testkit import leaksearch\n")
    (core / "automedbench" / "cli.py").write_text("def f():\n    import automedbench_testkit\n"
                                                  "    from automedbench.toy import track\n")
    (core / "automedbench" / "toy").mkdir()
    (core / "automedbench" / "toy" / "__init__.py").write_text("")
    (core / "automedbench" / "toy" / "plugin.py").write_text("from automedbench.api import hookimpl\n"
                                                             "from . import track\n")
    (core / "automedbench" / "toy" / "track.py").write_text(
        "from automedbench.api import Track\nfrom automedbench import runner\n")
    kit = core / "testkit"
    (kit / "automedbench_testkit").mkdir(parents=True)
    (kit / "pyproject.toml").write_text('[project]\nname = "automedbench-testkit"\n')
    (kit / "automedbench_testkit" / "__init__.py").write_text("")
    (kit / "automedbench_testkit" / "leaksearch.py").write_text("")
    (tmp_path / "plugins").mkdir()
    monkeypatch.setattr(sys.modules[__name__], "CORE", core)
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    monkeypatch.setattr(sys.modules[__name__], "BUILTIN_DISTS", {kit: "automedbench_testkit"})
    broken = broken_rules()
    assert not any(b.startswith("automedbench.testing (the core) imports automedbench_testkit ") for b in broken)
    assert "automedbench.testing (the core) imports automedbench_testkit.leaksearch (a built-in distribution)" in broken
    assert "automedbench.cli (the core) imports automedbench_testkit (a built-in distribution)" in broken
    assert "automedbench.toy.track (a track) imports automedbench.runner" in broken
    assert "automedbench.cli imports automedbench.toy.track (a track: the core never names one)" in broken
    assert not any(b.startswith("automedbench.toy.plugin") for b in broken)  # its own module and the api


if __name__ == "__main__":
    rules = broken_rules()
    print("\n".join(rules) or "0 broken rules")
    print(f"{len(rules)} broken", file=sys.stderr)
