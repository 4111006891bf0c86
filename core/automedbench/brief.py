"""Render the tier's brief with Jinja2. StrictUndefined: an unfilled placeholder is an error, not a gap."""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

import jinja2
from jinja2.loaders import split_template_path

from .errors import UserError
from .records import TaskSpec

CORE_TEMPLATES = Path(__file__).parent / "templates"
SKILLS_BY_TIER: dict[str, tuple[str, ...]] = {"lite": ("s1", "s2", "s3"), "standard": ("s1",), "pro": ()}
KICKOFF: dict[str, str] = {
    "lite": "Begin. The model has been chosen for you. Research it, then follow S1 through S5.",
    "standard": "Begin. Choose from the candidate model families, then follow S1 through S5.",
    "pro": "Begin. Follow S1 through S5.",
}


class TrackTemplates(jinja2.BaseLoader):
    """A track's template folder first, the core's after it. A core template stays current only while the track
    folder has none of its name: the kept Environment served the core's brief after a track added its own."""

    def __init__(self, track_templates: Path) -> None:
        self.folder = track_templates
        self.track = jinja2.FileSystemLoader(str(track_templates))
        self.core = jinja2.FileSystemLoader(str(CORE_TEMPLATES))

    def get_source(self, environment: jinja2.Environment, template: str) -> tuple[str, str | None, Any]:
        try:
            return self.track.get_source(environment, template)
        except jinja2.TemplateNotFound:
            source, filename, uptodate = self.core.get_source(environment, template)
        shadow = self.folder.joinpath(*split_template_path(template))
        return source, filename, lambda: (uptodate is None or bool(uptodate())) and not shadow.is_file()


@functools.lru_cache(maxsize=32)
def environment(track_templates: Path) -> jinja2.Environment:
    """One per template folder and process: an Environment compiles each template once and recompiles it when its
    file changes (auto_reload), where a new one every run compiled the brief's templates every run (~10 ms)."""
    return jinja2.Environment(
        loader=TrackTemplates(track_templates),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def render_brief(task: TaskSpec, tier: str, track_templates: Path, *, data_dir: str, workspace_dir: str,
                 case_ids: list[str], extra: dict[str, Any] | None = None) -> str:
    if tier not in task.tiers:
        raise UserError(f"task {task.id} has no tier {tier!r}; it offers {', '.join(task.tiers)}")
    env = environment(track_templates)
    skills = []
    for stage in SKILLS_BY_TIER[tier]:
        name = f"skill_{stage}.md.j2"
        if (track_templates / name).exists():
            skills.append(name)
    context = {
        "task": task,
        "tier": tier,
        "info": task.tiers[tier],
        "params": task.params,
        "data_dir": data_dir,
        "workspace_dir": workspace_dir,
        "output_dir": f"{workspace_dir}/outputs",
        "plan_dir": f"{workspace_dir}/plan",
        "case_ids": case_ids,
        "case_count": len(case_ids),
        "skills": skills,
        "requirements_path": f"{workspace_dir}/requirements.txt" if task.tiers[tier].requirements else "",
        "time_limit_min": round(task.time_limit_s / 60),
        "assets_dir": "",  # where the track's read-only assets are (the runner fills it in), "" for none
        **(extra or {}),
    }
    try:
        return env.get_template("brief.md.j2").render(**context)
    except jinja2.UndefinedError as exc:
        raise UserError(f"brief for {task.id} ({tier}): unfilled placeholder: {exc.message}") from None
    except jinja2.TemplateError as exc:
        raise UserError(f"brief for {task.id} ({tier}): template error: {exc}") from None


# A Python dict or list printed into the text ({'a': 'b'} or ['a', 'b']): a task value of the wrong type.
_PY_REPR = re.compile(r"""\{'[^'\n]{0,200}':\s|\['[^'\n]{0,200}'(?:,\s|\])""")


def python_repr(text: str) -> str:
    """The first Python repr of a dict or list in a rendered brief ('' when there is none)."""
    found = _PY_REPR.search(text)
    return text[max(0, found.start() - 20):found.end() + 40].replace("\n", " ") if found else ""
