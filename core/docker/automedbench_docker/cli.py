"""`automedbench images`: the docker sandbox's own command, registered through `automedbench_register_commands`."""

from __future__ import annotations

import click
from automedbench.engine import CommandContext


@click.group()
def images() -> None:
    """Build the docker sandbox's images locally (no registry needed)."""


@images.command("build")
@click.option("--base-image", default=None,
              help="Use this existing image (with python3) as the base instead of building one with debootstrap.")
@click.option("--force", is_flag=True, help="Rebuild even when an image with the same recipe exists.")
@click.option("--track", "tracks", multiple=True, metavar="NAME",
              help="Build only these tracks' agent images (repeatable; base, default agent and evaluator are "
                   "always built). Default: every track with a recipe. A track without one uses the default image.")
@click.pass_obj
def images_build(context: CommandContext, base_image: str | None, force: bool, tracks: tuple[str, ...]) -> None:
    """Build the base, one agent image per track with a Dockerfile (the track's packaged docker/ folder, or
    agent/<track>/ among the recipes), and the evaluator.

    Images whose recipe (Dockerfile folder, parent image, fetched wheels) is unchanged are kept.
    """
    from .images import build_all

    console = context.console
    for tag in build_all(lambda line: console.print(line), base_image=base_image, force=force,
                         only=set(tracks) if tracks else None):
        console.print(f"[green]ok[/] {tag}")


@images.command("list")
@click.pass_obj
def images_list(context: CommandContext) -> None:
    """The agent image `build` makes for each track with a recipe, and the folder it builds it from (an
    installed track's package data, a third party's too); needs no docker engine."""
    from .images import DEFAULT_AGENT, agent_image, dockerfiles_dir, tracks_with_images

    echo = context.console.echo  # a reader gone away (`| head -1`) ends the listing quietly
    echo(f"{DEFAULT_AGENT}  {dockerfiles_dir() / 'agent' / 'default'}")
    for track, folder in tracks_with_images():
        echo(f"{agent_image(track)}  {folder}")


def register(cli: click.Group) -> None:
    cli.add_command(images)
