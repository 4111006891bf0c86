"""Plugin loading and the component registries.

Every entry point in the `automedbench` group is loaded in its own try: one broken plugin is reported
and the rest still load. The core's built-ins come in through the same entry-point group.
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import importlib.metadata as md
import re
import traceback
import types
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

import pluggy
from attrs import Factory, define

from . import hookspecs
from .distheaders import header_fields
from .errors import UserError, did_you_mean
from .yamlfile import read_yaml

GROUP = "automedbench"

# Components and commands of this repository's own optional distributions: (root extra, distribution, what it
# registers by kind). When one is not installed, its names are answered with the install line, not "unknown".
OPTIONAL_PARTS: list[tuple[str, str, dict[str, tuple[str, ...]]]] = [
    ("campaign", "automedbench-campaign", {"command": ("sweep", "codes", "leaderboard", "view", "rejudge",
                                                       "judge-agreement"), "evaluator": ("warm",)}),
    ("codes", "automedbench-codes", {"code_detector": ("submission", "verification", "execution", "setup",
                                                       "understanding", "repetition")}),
    ("docker", "automedbench-docker", {"sandbox": ("docker",), "evaluator": ("docker",), "command": ("images",)}),
    ("openai", "automedbench-models", {"agent": ("openai",), "judge": ("openai",), "model": ("openai",)}),
    ("anthropic", "automedbench-models", {"agent": ("anthropic",), "judge": ("anthropic",), "model": ("anthropic",)}),
    ("models", "automedbench-models", {"agent": ("chat", "replay", "cli"), "judge": ("llm",)}),
    ("test", "automedbench-testkit", {"command": ("validate-task", "new-track")}),
    ("inspect", "automedbench-inspect", {"agent": ("inspect",)}),
]


@functools.lru_cache(maxsize=1)
def release_tracks() -> dict[str, dict[str, Any]]:
    """The tracks this project releases, by name: their root extra, distribution and task ids (a data file,
    `release_tracks.yaml`: the core knows them by name only, so a missing one is named with its extra)."""
    data = read_yaml(Path(__file__).with_name("release_tracks.yaml"), "release track table")
    return {str(name): dict(info) for name, info in (data or {}).items()}


def track_install_line(track: str) -> str | None:
    """How to install a released track by name (`pip install 'automedbench[EXTRA]'`), else None."""
    info = release_tracks().get(track)
    if info is None:
        return None
    return f"the {track} track comes with {info['distribution']}: pip install 'automedbench[{info['extra']}]'"


def install_hint(kind: str, name: str) -> str | None:
    """`kind name` comes with an extra that is not installed: the one line saying which, else None."""
    if kind == "track" and track_install_line(name):
        return f"track {name!r} is not installed; {track_install_line(name)}"
    for extra, distribution, parts in OPTIONAL_PARTS:
        if name in parts.get(kind, ()):
            return (f"{kind} {name!r} comes with {distribution}, which is not installed: "
                    f"pip install 'automedbench[{extra}]'")
    return None


@define
class Component:
    kind: str
    name: str
    factory: Callable[..., Any]
    description: str
    plugin: str
    distribution: str
    version: str
    # what the plugin declares with it besides the factory: `register(name, factory, description, **declared)`
    # (a model backend: `key_env`, the variable its key is read from; `defaults`, its ModelConfig defaults)
    declared: dict[str, Any] = Factory(dict)


def component_options(component: Component) -> list[str] | None:
    """The option names a component takes: those it declared (`register(..., options=[...])`, for a factory taking
    `**options`, e.g. one shared by several systems), else its factory's keyword parameters; None when neither
    says (a `**options` factory that declared none checks its own)."""
    import inspect

    if "options" in component.declared:
        return list(component.declared["options"])
    try:
        params = inspect.signature(component.factory).parameters.values()
    except (TypeError, ValueError):  # a callable without a readable signature: it checks its own options
        return None
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return None
    return [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def check_options(component: Component, options: dict[str, Any], flag: str = "") -> None:
    """Refuse options a component does not take (`--agent-option`, `--judge-option`) in one line naming the ones it
    does, before anything starts: a typo was a TypeError traceback, and in a sweep an infrastructure failure
    retried for every run. The names are `component_options`. `flag`: the command's option that gave them
    (default `--<kind>-option`)."""
    if not options:
        return
    known = component_options(component)
    if known is None:
        return
    unknown = [key for key in options if key not in known]
    if not unknown:
        return
    if "api_key" in unknown and "api_key_env" in known:  # a key itself given: say where it goes, not a near name
        raise UserError("API keys are not accepted as options; put the key in an environment variable and name it "
                        "with api_key_env=VAR")
    if not known:
        raise UserError(f"the {component.name} {component.kind} takes no options "
                        f"({flag or f'--{component.kind}-option'} {unknown[0]}=...)")
    known_line = did_you_mean(unknown[0], known) if len(unknown) == 1 else f"; known: {', '.join(sorted(known))}"
    raise UserError(f"unknown {component.name} {component.kind} option(s) {', '.join(unknown)}{known_line}")


@define(frozen=True)
class CommandContext:
    """What a plugin's command needs of the command line, handed to `automedbench_register_commands` and set
    as each command's click `obj`: where to print, and the registry the command line uses (read at call time)."""

    console: Any
    err_console: Any
    registry: Callable[[], Registry]
    print_problems: Callable[[Registry], None]  # each plugin problem of that registry, one line on err_console


NOT_LISTED = " (that task is not listed)"  # ends a plugin problem naming one task file that did not load


@define
class PluginProblem:
    plugin: str
    distribution: str
    error: str
    detail: str


class Registry:
    """All components by kind and name, plus the problems met while loading them."""

    def __init__(self) -> None:
        self.pm = pluggy.PluginManager(hookspecs.PROJECT)
        self.pm.add_hookspecs(hookspecs)
        self.components: dict[str, dict[str, Component]] = {kind: {} for kind in hookspecs.KINDS}
        self.problems: list[PluginProblem] = []
        self._origin: dict[str, tuple[str, str]] = {}
        self._cache: dict[tuple[str, str], Any] = {}
        # Modules added in code (not through an entry point), by import name: the isolated evaluator
        # process re-adds them so that a programmatically registered track can be scored there too.
        self.added_modules: dict[str, str] = {}
        self._commands: dict[str, Component] | None = None
        self._commands_from: set[Any] = set()  # hook implementations whose commands were collected

    # ------------------------------------------------------------ loading

    def load_entry_points(self) -> None:
        for ep in md.entry_points(group=GROUP):
            dist, version = _name_and_version(ep.dist)
            try:
                module = ep.load()
                self.add_plugin(module, name=ep.name, distribution=dist, version=version)
                self.added_modules.pop(ep.name, None)
            except Exception as exc:  # a broken plugin must not break the others
                self.problems.append(
                    PluginProblem(ep.name, dist, f"{type(exc).__name__}: {exc}", traceback.format_exc())
                )

    def add_plugin(self, module: Any, *, name: str, distribution: str = "local", version: str = "") -> None:
        if self.pm.is_registered(module) or self.pm.has_plugin(name):
            return
        spec = getattr(module, "__spec__", None) if isinstance(module, types.ModuleType) else None
        if spec is not None and spec.origin:  # only a module imported from a file can be re-imported by name
            self.added_modules[name] = module.__name__
        self.pm.register(module, name=name)
        self._origin[name] = (distribution, version)
        for kind, hook_name in hookspecs.KINDS.items():
            hook = getattr(self.pm.hook, hook_name)
            for impl in hook.get_hookimpls():
                if impl.plugin_name != name:
                    continue
                try:
                    impl.function(register=self._registrar(kind, name))
                except Exception as exc:
                    self.problems.append(
                        PluginProblem(
                            name, distribution, f"{hook_name}: {type(exc).__name__}: {exc}",
                            traceback.format_exc(),
                        )
                    )

    def remove_plugin(self, name: str) -> None:
        """Undo `add_plugin`: the plugin's components, its cached tracks and its hooks go (a test's own track,
        added for one module, must not be seen by the next)."""
        module = self.pm.get_plugin(name)
        if module is not None:
            self.pm.unregister(module, name=name)
        for kind, found in self.components.items():
            for component in [c for c in found.values() if c.plugin == name]:
                del found[component.name]
                self._cache.pop((kind, component.name), None)
        self._origin.pop(name, None)
        self.added_modules.pop(name, None)
        self._commands = None
        self._commands_from.clear()

    def _registrar(self, kind: str, plugin: str) -> Callable[..., None]:
        distribution, version = self._origin[plugin]

        def register(name: str, factory: Callable[..., Any], description: str = "", **declared: Any) -> None:
            options = declared.get("options")
            if options is not None:  # names, checked by `check_options`: a bare string would be its letters
                if isinstance(options, str) or not all(isinstance(o, str) and o for o in options):
                    self.problems.append(PluginProblem(plugin, distribution, f"{kind} {name!r}: options= must be "
                                                       f"a list of option names, not {options!r}; not registered", ""))
                    return
                declared["options"] = tuple(options)
            existing = self.components[kind].get(name)
            if existing is not None:
                self.problems.append(
                    PluginProblem(
                        plugin, distribution,
                        f"{kind} {name!r} already registered by {existing.plugin}; kept the first", "",
                    )
                )
                return
            self.components[kind][name] = Component(kind, name, factory, description, plugin,
                                                    distribution, version, dict(declared))

        return register

    def commands(self, reserved: Collection[str] = (), context: CommandContext | None = None) -> dict[str, Component]:
        """Command-line commands the plugins register (`automedbench_register_commands`), by name; collected
        on first call and again for plugins added since. A name in `reserved` (the engine's own commands)
        or taken by an earlier plugin is a plugin problem and is dropped: the first owner keeps it. `context`
        is handed to the hooks that take it."""
        import click

        found = self._commands if self._commands is not None else {}
        self._commands = found
        for impl in self.pm.hook.automedbench_register_commands.get_hookimpls():  # in registration order
            if impl in self._commands_from:
                continue
            self._commands_from.add(impl)
            plugin = impl.plugin_name
            distribution, version = self._origin.get(plugin, ("?", "?"))
            group = click.Group(plugin)
            try:
                call_hook(impl, cli=group, context=context)
            except Exception as exc:
                self.problems.append(PluginProblem(plugin, distribution, f"automedbench_register_commands: "
                                                   f"{type(exc).__name__}: {exc}", traceback.format_exc()))
                continue
            for name, command in group.commands.items():
                owner = "the engine" if name in reserved else found[name].plugin if name in found else None
                if owner is not None:
                    self.problems.append(PluginProblem(
                        plugin, distribution, f"command {name!r} clashes with the one from {owner}; "
                        f"kept {owner}'s: rename the plugin's command", ""))
                    continue
                found[name] = Component("command", name, command, command.get_short_help_str(limit=100), plugin,
                                        distribution, version)
        return found

    # ------------------------------------------------------------ lookup

    def load_failure(self, distribution: str, plugin: str = "") -> str | None:
        """Why an installed distribution (or the entry point `plugin`) gave nothing: it failed to load or to
        register. Its parts are then broken, not missing: "pip install" would not help, and must not be said."""
        def norm(dist: str) -> str:
            return re.sub(r"[-_.]+", "-", dist).lower()

        for problem in self.problems:
            if norm(problem.distribution) == norm(distribution) or (plugin and problem.plugin == plugin):
                return str(problem.error)
        return None

    def broken_part(self, kind: str, name: str) -> str | None:
        """`kind name` belongs to an installed distribution that failed to load: the one line saying so."""
        owners = [info["distribution"] for track, info in release_tracks().items() if kind == "track" and track == name]
        owners += [dist for _, dist, parts in OPTIONAL_PARTS if name in parts.get(kind, ())]
        for dist in owners:
            failure = self.load_failure(dist, name if kind == "track" else "")
            if failure:
                return (f"{kind} {name!r} comes with {dist}, which is installed but failed to load ({failure}): fix "
                        "or reinstall it, not a new install (`automedbench plugins` shows the problem)")
        return None

    def get(self, kind: str, name: str) -> Component:
        found = self.components[kind].get(name)
        if found is None:
            unknown = f"unknown {kind} {name!r}{did_you_mean(name, list(self.components[kind]))}"
            raise UserError(self.broken_part(kind, name) or install_hint(kind, name) or unknown)
        return found

    def distribution(self, kind: str, name: str) -> str:
        """The distribution that registered `kind name` ("" for none): what its install must have brought."""
        found = self.components[kind].get(name)
        return found.distribution if found is not None else ""

    def create(self, kind: str, name: str, **options: Any) -> Any:
        component = self.get(kind, name)
        check_options(component, options)
        return component.factory(**options)

    def track(self, name: str) -> Any:
        key = ("track", name)
        if key not in self._cache:
            self._cache[key] = self.create("track", name)
        return self._cache[key]

    def tracks(self) -> list[Any]:
        return [self.track(name) for name in sorted(self.components["track"])]

    def tasks(self) -> dict[str, Any]:
        """Task id -> (track, TaskSpec) over every track; a track whose tasks fail to load is reported."""
        found: dict[str, Any] = {}
        for name in sorted(self.components["track"]):
            comp = self.components["track"][name]
            try:
                track = self.track(name)
                for spec in track.tasks():
                    found[spec.id] = (track, spec)
                # the file and its field; the track's other tasks listed (a track not made from `Track` has none)
                for why in getattr(track, "task_file_problems", list)():
                    self._problem_once(PluginProblem(comp.plugin, comp.distribution,
                                                     f"tasks of track {name}: {why}{NOT_LISTED}", ""))
            except Exception as exc:
                self.problems.append(PluginProblem(comp.plugin, comp.distribution,
                                                   f"tasks of track {name}: {exc}", traceback.format_exc()))
        return found

    def _problem_once(self, problem: PluginProblem) -> None:
        """A problem met again by a later listing in the same process is said once."""
        if not any(p.plugin == problem.plugin and p.error == problem.error for p in self.problems):
            self.problems.append(problem)

    def tasks_failure(self, track: str, task_id: str = "") -> str:
        """Why the installed track `track`'s tasks (`task_id`'s file first) failed to load in `tasks()` ("" when
        they did or it is not installed)."""
        prefix = f"tasks of track {track}: "
        if track not in self.components["track"]:
            return ""
        failed = [p.error for p in reversed(self.problems) if p.error.startswith(prefix)]
        own = f"/{task_id.partition('/')[2]}.yaml:"
        whole = [e for e in failed if not e.endswith(NOT_LISTED)]  # the track's listing itself failed
        found = next((e for e in failed if task_id and own in e), whole[0] if whole else "")
        return " ".join(found[len(prefix):].removesuffix(NOT_LISTED).split())

    def task(self, task_id: str) -> tuple[Any, Any]:
        # a task's id starts with its track's name (taskfile checks it): that track's files are all a lookup reads
        name = task_id.split("/", 1)[0]
        if name in self.components["track"]:
            with contextlib.suppress(Exception):  # a track that fails to load is reported by the full scan below
                return self.track(name), self.track(name).task(task_id)
        tasks = self.tasks()
        if task_id not in tasks:
            track = task_id.split("/", 1)[0]
            broken = self.broken_part("track", track) if track not in self.components["track"] else None
            if broken:
                raise UserError(f"{task_id!r}: {broken}")
            unloaded = self.tasks_failure(track, task_id)
            if unloaded:  # installed, registered, but a task file of it is wrong: not "no track is installed"
                raise UserError(f"{task_id!r}: the {track} track is installed but its tasks did not load "
                                f"({unloaded}): fix that, then `automedbench tasks` lists them")
            if track not in self.components["track"] and track_install_line(track):
                known = task_id.partition("/")[2] in release_tracks()[track].get("tasks", [])
                what = "is a task of" if known else "names"
                raise UserError(f"{task_id!r} {what} the {track} track, which is not installed: "
                                f"{track_install_line(track).split(': ', 1)[1]}")
            if "/" not in task_id:  # a track's name where a task id goes: its tasks, not the nearest other id
                own = sorted(t for t in tasks if t.split("/", 1)[0] == task_id.lower())
                if own:
                    first = next((t for t in own if t.endswith("/demo")), own[0])
                    raise UserError(f"{task_id!r} is a track, not a task: give one of its tasks, e.g. {first} "
                                    f"(its tasks: {', '.join(own)})")
            installed = sorted({t.split("/", 1)[0] for t in tasks})
            if "/" in task_id and track not in installed and not difflib.get_close_matches(track, installed, n=1):
                # no such track, nor a typo of one: a track package not installed yet (`new-track` wrote it)
                raise UserError(f"unknown task {task_id!r}: no track {track!r} is installed (installed: "
                                f"{', '.join(installed)}); a track package of your own runs once installed: "
                                "pip install -e <its folder>, then `automedbench tasks` lists its tasks")
            raise UserError(f"unknown task {task_id!r}{did_you_mean(task_id, list(tasks), 4, '`automedbench tasks`')}")
        return tasks[task_id]

    def missing_release_tracks(self) -> dict[str, dict[str, Any]]:
        """The released tracks not installed here (name -> extra, distribution, task ids)."""
        return {name: info for name, info in release_tracks().items() if name not in self.components["track"]}


def call_hook(impl: Any, **arguments: Any) -> Any:
    """One hook implementation with only the arguments it names, as pluggy calls it (pluggy lets an implementation
    leave out any of its hook's arguments: given them all, it failed with a TypeError)."""
    return impl.function(**{name: arguments[name] for name in impl.argnames})


def _name_and_version(dist: Any) -> tuple[str, str]:
    """A distribution's name and version from the header lines of its metadata file (`distheaders`: not the
    whole file parsed as an e-mail message, ~1 ms a plugin, every start-up)."""
    if dist is None:
        return "?", "?"
    fields = header_fields(dist, ("Name", "Version"))
    if fields is None:
        return str(getattr(dist, "name", "?")), str(getattr(dist, "version", "?"))
    return (fields["Name"] or ["?"])[0] or "?", (fields["Version"] or ["?"])[0] or "?"


_REGISTRY: Registry | None = None


def registry(*, reload: bool = False) -> Registry:
    """The process-wide registry, loaded from entry points on first use."""
    global _REGISTRY
    if _REGISTRY is None or reload:
        _REGISTRY = Registry()
        _REGISTRY.load_entry_points()
    return _REGISTRY
