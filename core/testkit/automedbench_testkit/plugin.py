"""The test kit's command, registered through the hooks a third-party plugin uses (entry point `testkit`)."""

from __future__ import annotations

from automedbench.api import hookimpl


@hookimpl
def automedbench_register_commands(cli) -> None:
    """validate-task: the checks a track author runs before publishing a task; new-track: a package to start from."""
    from .newtrack import new_track
    from .validation import validate_task

    cli.add_command(validate_task)
    cli.add_command(new_track)
