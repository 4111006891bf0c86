"""`automedbench view RUN`: write (and say where) the run's offline page; registered as a plugin command."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from automedbench.engine import CommandContext


def write_view(run_dir: Path, result: dict[str, Any] | None = None, out: Path | None = None,
               pictures: bool = True) -> Path:
    """Render the run in `run_dir` to `out` (default: `view.html` in the run folder), atomically, readable."""
    from automedbench.api import atomic_write_text
    from automedbench.engine import RunFolder

    from .runpage import render_run

    target = out or Path(run_dir) / RunFolder.VIEW
    atomic_write_text(target, render_run(RunFolder(run_dir), result, pictures=pictures), shared=True)
    return target


@click.command()
@click.argument("run")
@click.option("--runs", type=click.Path(file_okay=False), default="runs", show_default=True,
              help="Folder to look in when RUN is a run id.")
@click.option("--out", type=click.Path(dir_okay=False), default=None,
              help="Write the page here instead of RUN/view.html.")
@click.option("--pictures/--no-pictures", default=True, show_default=True,
              help="Show each case's picture (input, output, reference); --no-pictures leaves them out, e.g. for a "
                   "page published where the dataset's licence allows no images (plan.png, the agent's, stays).")
@click.pass_obj
def view(context: CommandContext, run: str, runs: str, out: str | None, pictures: bool) -> None:
    """Write one self-contained, offline HTML page for a stored run and print its path.

    The page holds the header (task, tier, agent, sandbox, isolation, versions, cost, tokens, times), every
    stage with each rubric item's verdict and rationale linked to its evidence (the turns, files and cases it
    was decided from), the Task per case with each invalid case's reason, its submitted files and its picture,
    plan.md and plan.png, the scripts the agent ran, error codes, breach evidence and the trajectory turn by
    turn (long outputs folded). No script and no network: open it in any browser. A result the harness did
    not write (`automedbench verify`) is shown as unverified, with the reason."""
    import tempfile

    from automedbench.engine import RunFolder, copy_verified

    folder = RunFolder.locate(run, Path(runs))
    target = Path(out) if out else folder.path / RunFolder.VIEW
    with tempfile.TemporaryDirectory(prefix="automedbench-view-") as private:
        # a genuine run is drawn from a copy checked against its proof: the folder may change between the check
        # and the reads that draw the page (a swapped result.json shown without the unverified mark)
        verified = copy_verified(folder, Path(private))
        if not isinstance(verified, str):
            context.console.echo(str(write_view(verified[0].path, out=target, pictures=pictures)))
            return
        data = folder.json_data(RunFolder.RESULT)
        if data is not None:
            # through the record's schema, as `show` reads it: a result.json anyone wrote may hold any value (a cost
            # given as text ended `view` in a traceback); one that is no Result is refused in one line
            data = result_json(folder.load_result())
            iso = data["isolation"] if isinstance(data.get("isolation"), dict) else {}
            reasons = iso.get("unverified") if isinstance(iso.get("unverified"), list) else []
            data["isolation"] = {**iso, "verified": False,
                                 "unverified": [f"not verified as this harness's result: {verified}", *reasons]}
        context.console.echo(str(write_view(folder.path, data, out=target, pictures=pictures)))


def register(cli: click.Group) -> None:
    cli.add_command(view)


def result_json(result: Any) -> dict[str, Any]:
    """A Result record as the plain JSON `result.json` will hold."""
    from automedbench.api import dumps

    return json.loads(dumps(result))
