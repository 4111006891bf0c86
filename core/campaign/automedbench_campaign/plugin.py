"""The campaign's components and commands, registered through the hooks a third-party plugin uses."""

from __future__ import annotations

from automedbench.api import hookimpl


@hookimpl
def automedbench_register_commands(cli) -> None:
    """sweep, codes, leaderboard, view, rejudge and judge-agreement: the campaign owns its commands."""
    from .cli import register
    from .judgecli import register as register_judge
    from .viewer.cli import register as register_view

    register(cli)
    register_view(cli)
    register_judge(cli)


@hookimpl
def automedbench_register_evaluators(register) -> None:
    def warm():
        from .evalservice import evaluate_warm

        return evaluate_warm

    register("warm", warm, "the local evaluator kept running between runs of one process, served over its pipes "
             "(sweeps, --warm-evaluator)")


@hookimpl(trylast=True)
def automedbench_result_written(result, run_dir) -> None:
    """view.html in every run folder, from the result as written (its final times; the tagger's codes on it):
    written before result.json, the page's wall and harness times were short of the record's by the tail."""
    from .viewer.cli import result_json, write_view

    write_view(run_dir, result_json(result))
