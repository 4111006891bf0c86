"""The layering, held by an import-graph check over core/ and every plugins/*/ (tests included).

contract <- engine <- built-ins <- face: a module may import its own layer or a lower one, never a higher.
A track (anything under plugins/<track>/, its tests too) imports the core only through ``automedbench.api``
and ``automedbench.testing``, and never another track. Every import counts, inside functions too.
``python tests/test_layering.py`` prints the graph's broken rules.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "core"

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
    "automedbench.authoring": CONTRACT,
    "automedbench.codes.taxonomy": CONTRACT,
    "automedbench.detectors": CONTRACT,
    "automedbench.errors": CONTRACT,
    "automedbench.fsutil": CONTRACT,
    "automedbench.grades": CONTRACT,
    "automedbench.hookspecs": CONTRACT,
    "automedbench.judge": CONTRACT,
    "automedbench.modelconfig": CONTRACT,
    "automedbench.models": CONTRACT,
    "automedbench.plugins": CONTRACT,  # the registry of the contract's components (no run path in it)
    "automedbench.pricing": CONTRACT,
    "automedbench.refguard": CONTRACT,  # secret per-staging variants of shipped images (demo references)
    "automedbench.replyjson": CONTRACT,  # the one strict reading of a model's JSON reply
    "automedbench.records": CONTRACT,
    "automedbench.rubric": CONTRACT,
    "automedbench.sandbox": CONTRACT,
    "automedbench.serialize": CONTRACT,
    "automedbench.stagearea": CONTRACT,  # the crash- and concurrency-safe swap every stager uses
    "automedbench.taskfile": CONTRACT,
    "automedbench.terminal": CONTRACT,  # agent text made inert for terminals and CSV
    "automedbench.trace": CONTRACT,
    "automedbench.track": CONTRACT,
    "automedbench.trajectory": CONTRACT,
    "automedbench.untrusted": CONTRACT,
    "automedbench.yamlfile": CONTRACT,
    # engine: the run path (stage, run, freeze, evaluate, grade, score, store) and the plugin registry
    "automedbench.brief": ENGINE,
    "automedbench.codes": ENGINE,  # running the detectors over a stored run
    "automedbench.evaluate_cmd": ENGINE,
    "automedbench.evaluator": ENGINE,
    "automedbench.freeze": ENGINE,
    "automedbench.grading": ENGINE,
    "automedbench.harnessstate": ENGINE,
    "automedbench.leaksearch": ENGINE,
    "automedbench.options": ENGINE,
    "automedbench.pilot": ENGINE,
    "automedbench.plan_artefacts": ENGINE,
    "automedbench.provenance": ENGINE,
    "automedbench.rejudge": ENGINE,
    "automedbench.replyhint": ENGINE,
    "automedbench.report": ENGINE,
    "automedbench.runfolder": ENGINE,
    "automedbench.runner": ENGINE,
    "automedbench.runstate": ENGINE,
    "automedbench.sandbox_checks": ENGINE,
    "automedbench.scoring": ENGINE,
    "automedbench.staging": ENGINE,
    "automedbench.steptimer": ENGINE,
    "automedbench.tripwire": ENGINE,
    "automedbench.validate": ENGINE,
    # built-ins: registered through the same hooks a third party uses
    "automedbench.agents": BUILTIN,
    "automedbench.campaign": BUILTIN,
    "automedbench.codes.generic": BUILTIN,
    "automedbench.codes.llm": BUILTIN,
    "automedbench.evalservice": BUILTIN,  # the warm evaluator, an evaluator backend registered by the built-ins
    "automedbench.judges": BUILTIN,
    "automedbench.sandboxes": BUILTIN,
    "automedbench.toy": BUILTIN,
    "automedbench.viewer": BUILTIN,
    # face: the command line (the built-ins' commands included) and the test kit
    "automedbench.builtins": FACE,  # wires every built-in (their commands too) into the registry
    "automedbench.cli": FACE,
    "automedbench.campaign.cli": FACE,
    "automedbench.sandboxes.docker_cli": FACE,
    "automedbench.testing": FACE,
    "automedbench.viewer.cli": FACE,
}
TRACK_MAY_IMPORT = {"automedbench.api", "automedbench.testing"}


def layer_of(module: str) -> int | None:
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in LAYERS:
            return LAYERS[".".join(parts[:end])]
    return None


def _module_name(path: Path, base: Path) -> str:
    parts = list(path.relative_to(base).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str, base: Path) -> bool:
    rel = Path(*name.split("."))
    return (base / rel).with_suffix(".py").is_file() or (base / rel / "__init__.py").is_file()


def imports_of(path: Path, module: str, base: Path | None) -> set[str]:
    """Absolute names of every automedbench* module the file imports (submodules resolved when base is known)."""
    is_package = path.name == "__init__.py"
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
                found.add(sub if base is not None and _is_module(sub, base) else target)
    return {name for name in found if name.startswith("automedbench")}


def broken_rules() -> list[str]:
    broken: list[str] = []
    for path in sorted((CORE / "automedbench").rglob("*.py")):
        module = _module_name(path, CORE)
        own = layer_of(module)
        if own is None:
            broken.append(f"{module}: no layer declared in tests/test_layering.py")
            continue
        for target in sorted(imports_of(path, module, CORE)):
            theirs = layer_of(target)
            if theirs is not None and theirs > own:
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


# Known breaks still to mend (none now); a new break fails, a mended one must be taken off this list.
KNOWN: set[str] = set()


def test_every_core_module_has_a_layer():
    missing = [b for b in broken_rules() if "no layer declared" in b]
    assert missing == []


def test_no_broken_layering_rules():
    broken = set(broken_rules())
    assert sorted(broken - KNOWN) == [], "new broken rules"
    assert sorted(KNOWN - broken) == [], "mended: take these off KNOWN"


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


if __name__ == "__main__":
    rules = broken_rules()
    print("\n".join(rules) or "0 broken rules")
    print(f"{len(rules)} broken", file=sys.stderr)
