"""Adversarial review of the CLI's live progress: the model's text is printed, so it must not be markup."""

from __future__ import annotations

import json

from automedbench.agent import Agent
from automedbench.cli import main
from automedbench.records import AgentTurn, ToolCall
from click.testing import CliRunner
from review_steps import register_agent

CONTENT = "Closing [/] and [/dim] tags, an open [bold red] one"


class MarkupTalker(Agent):
    """Says something that is rich markup (an unmatched closing tag), runs one command, stops."""

    name = "review-markup"

    def __init__(self) -> None:
        self.turn = 0

    def next_turn(self, messages):
        self.turn += 1
        if self.turn == 1:
            args = json.dumps({"language": "bash", "code": "true"})
            return AgentTurn(CONTENT, [ToolCall("c1", "execute_code", args)])
        return AgentTurn("done", [])


def test_agent_text_in_progress_lines_is_not_rich_markup(reg, data_root, staged, tmp_path, monkeypatch):
    """An unmatched '[/]' in the model's message raised MarkupError mid-run: an infrastructure failure."""
    register_agent(reg, MarkupTalker)
    monkeypatch.setenv("AUTOMEDBENCH_DATA", str(data_root))
    out = CliRunner().invoke(main, ["run", "--task", "segmentation/demo", "--agent", MarkupTalker.name,
                                    "--out", str(tmp_path)], catch_exceptions=False)
    assert "Closing [/] and [/dim] tags" in out.output, out.output
    assert out.exit_code == 0, out.output
