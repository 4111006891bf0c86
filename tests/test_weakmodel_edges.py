"""A weak model's rough edges, measured with a real 0.5 B model: it repeated one call 22 times until the time limit
and nothing noticed; a model call that timed out counted as the harness's time; an echo of the brief's sentences in
another order was taken for prose. Each through the real runner on the toy track (seconds), the chat agent through
its real SDK client against the loopback fake server."""

from __future__ import annotations

import json
import random
import re
import time

import pytest
from automedbench.agent import TOOLS, Agent
from automedbench.brief import render_brief
from automedbench.errors import AgentError
from automedbench.records import AgentTurn, ToolCall
from automedbench.runner import Run, RunOptions
from automedbench.testing import fresh_registry, needs, register_agent, register_toy_track
from automedbench.trajectory import read_events
from automedbench_models.replyhint import diagnose
from test_backends_fakes import Reply, openai_reply, serve_fake_llm

fake_llm = pytest.fixture(serve_fake_llm, name="fake_llm")
KEY_ENV = "AMB_TEST_EDGES_KEY"
TOLD: list[str] = []  # what the Repeater was answered, in order
LISTDIR = json.dumps({"language": "python", "code": "import os; print(sorted(os.listdir('.'))[:20])"})


@pytest.fixture(scope="module")
def toy_reg():
    register_toy_track()
    return fresh_registry()


def toy_run(reg, tmp_path, agent: str, **options):
    run = Run(RunOptions("toy/vowels", "lite", agent, out=tmp_path / "runs", data_root=tmp_path / "data",
                         judge="rules", **options), reg)
    return run.execute(), read_events(run.run_dir / "trajectory.jsonl")


class Repeater(Agent):
    """Makes the example call of the corrective message again and again, as the 0.5 B model did."""

    name = "repeater"

    def next_turn(self, messages):
        if messages[-1]["role"] == "tool":
            TOLD.append(messages[-1]["content"])
        return AgentTurn(tool_calls=[ToolCall(f"c{len(messages)}", "execute_code", LISTDIR)])


class Retrier(Agent):
    """Retries one identical call whose outcome alternates (fails, then works, then fails...): never a streak."""

    name = "retrier"

    def next_turn(self, messages):
        code = ("import pathlib, sys; p = pathlib.Path('n.txt'); n = int(p.read_text()) + 1 if p.exists() else 0; "
                "p.write_text(str(n)); sys.exit(n % 2)")
        return AgentTurn(tool_calls=[ToolCall(f"c{len(messages)}", "execute_code",
                                              json.dumps({"language": "python", "code": code}))])


def test_repeated_identical_calls_are_told_recorded_coded_and_stop_the_run(toy_reg, tmp_path):
    register_agent(Repeater, toy_reg)
    TOLD.clear()
    result, events = toy_run(toy_reg, tmp_path, "repeater", repeat_limit=5, max_turns=40)
    assert result.state == "scored" and result.end_reason == "repeated_calls"
    assert result.runtime.tool_calls == 5  # stopped at the bound, not at the turn limit
    repeated = [e for e in events if e["type"] == "repeated_call"]
    assert [e["streak"] for e in repeated] == [3, 4, 5]
    assert [e["action"] for e in repeated] == ["notice", "notice", "stop"]
    # the agent is told under the answer from the third identical call on, never before
    assert ["NOTE from the harness" in t for t in TOLD] == [False, False, True, True]
    assert "3 times in a row" in TOLD[2] and "stops at 5" in TOLD[2]
    (code,) = [c for c in result.error_codes if c.source == "detector:repetition"]
    assert code.code == "E3" and "5 times in a row" in code.message and "repeat limit" in code.message
    assert code.evidence_turns == [3, 4, 5]


def test_with_no_limit_the_run_goes_on_and_the_header_hash_changes(toy_reg, tmp_path):
    register_agent(Repeater, toy_reg)
    result, events = toy_run(toy_reg, tmp_path, "repeater", repeat_limit=0, max_turns=6)
    assert result.end_reason == "turn_limit"
    assert [e["streak"] for e in events if e["type"] == "repeated_call"] == [3, 4, 5, 6]
    assert any(c.source == "detector:repetition" for c in result.error_codes)
    other, _ = toy_run(toy_reg, tmp_path, "repeater", repeat_limit=4, max_turns=6)
    assert other.header.hashes["options"] != result.header.hashes["options"]


def test_a_retry_whose_outcome_changes_is_not_a_repeat(toy_reg, tmp_path):
    register_agent(Retrier, toy_reg)
    result, events = toy_run(toy_reg, tmp_path, "retrier", repeat_limit=3, max_turns=6)
    assert result.end_reason == "turn_limit"
    assert [e["exit_code"] for e in events if e["type"] == "tool"] == [0, 1, 0, 1, 0, 1]
    assert not [e for e in events if e["type"] == "repeated_call"]
    assert not any(c.source == "detector:repetition" for c in result.error_codes)


class SlowFailure(Agent):
    """A model call that takes its time and then fails (the provider's timeout, retries exhausted)."""

    name = "slow-failure"

    def next_turn(self, messages):
        time.sleep(0.6)
        raise AgentError("model request timed out after 3 attempts")


def test_a_failed_model_call_is_the_agents_time_not_the_harnesss(toy_reg, tmp_path):
    register_agent(SlowFailure, toy_reg)
    result, _ = toy_run(toy_reg, tmp_path, "slow-failure")
    assert result.state == "agent_failure" and "timed out" in result.error
    assert result.runtime.agent_s >= 0.6  # was 0: the wait was booked as the harness's


class Interrupted(Agent):
    """Waits on its model, then the run is interrupted (Ctrl-C, SIGTERM), as a real 0.5 B run was after 625 s."""

    name = "interrupted"

    def next_turn(self, messages):
        time.sleep(0.6)
        raise KeyboardInterrupt


def test_an_interrupted_model_call_is_the_agents_time(toy_reg, tmp_path):
    register_agent(Interrupted, toy_reg)
    result, _ = toy_run(toy_reg, tmp_path, "interrupted")
    assert result.state == "cancelled"
    assert result.runtime.agent_s >= 0.6  # was 0: the whole wait showed as harness_s


@needs("openai")
def test_a_timed_out_chat_call_is_model_time(toy_reg, tmp_path, fake_llm, monkeypatch):
    """The chat agent through the real SDK: the server answers after the client's timeout, twice (one retry)."""
    monkeypatch.setenv(KEY_ENV, "sk-fake")
    late = Reply(200, openai_reply("late").body, delay_s=1.5)
    fake_llm.fallback = lambda request: late
    options = {"model": "m", "base_url": f"{fake_llm.url}/v1", "api_key_env": KEY_ENV, "timeout_s": "0.5",
               "max_retries": "1", "backoff_s": "0.1", "max_backoff_s": "0.1"}
    result, events = toy_run(toy_reg, tmp_path, "openai", agent_options=options)
    assert result.state == "agent_failure", result.error
    assert result.runtime.agent_s >= 1.0, result.runtime  # two attempts of half a second each
    assert len([e for e in events if e["type"] == "api_retry"]) == 1


# ------------------------------------------------------------------ the echo, in any order


@pytest.fixture(scope="module")
def real_brief(reg):
    track, task = reg.task("segmentation/demo")
    return render_brief(task, "lite", track.template_dir(), data_dir="/data/public", workspace_dir="/workspace",
                        case_ids=["case_000", "case_001"], extra={"assets_dir": ""})


def sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?])\s+|\n+", text) if len(s.split()) >= 3]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_briefs_sentences_in_another_order_are_an_echo(real_brief, seed):
    picked = sentences(real_brief)
    random.Random(seed).shuffle(picked)
    reply = " ".join(picked[:12])
    assert reply[:200].strip() not in real_brief  # the old test (a verbatim start) misses it
    hint = diagnose(reply, TOOLS, prompt=real_brief)
    assert hint.kind == "echo", reply[:300]
    # restyled too: lower case, markdown stripped, one sentence per bullet
    restyled = "\n".join("- " + re.sub(r"[`*#]", "", s).lower() for s in picked[:8])
    assert diagnose(restyled, TOOLS, prompt=real_brief).kind == "echo"


def test_own_words_that_mention_the_task_are_not_an_echo(real_brief):
    own = ("I will look at the CT volumes first, then pick a thresholding approach for the kidney, try it on "
           "one case and check that the mask is not empty before running all of them.")
    assert diagnose(own, TOOLS, prompt=real_brief).kind == "no_call"
    # one sentence of the brief quoted, then a longer answer of its own: not an echo
    quoted = sentences(real_brief)[1] + " " + own + " " + own.replace("kidney", "tumour")
    assert diagnose(quoted, TOOLS, prompt=real_brief).kind == "no_call"
    # a short reply made of the brief's words is too short to call
    assert diagnose("Plan first.", TOOLS, prompt=real_brief).kind == "no_call"


def test_the_echo_test_is_bounded_on_huge_inputs():
    reply = ("lorem ipsum dolor sit amet. " * 4000)[:20_000]
    prompt = "lorem ipsum dolor sit amet " * 100_000
    start = time.process_time()
    assert diagnose(reply, TOOLS, prompt=prompt).kind == "echo"
    assert time.process_time() - start < 2.0
