"""The agent systems people run, round 2: the chat agents and the LLM judges against a provider that stops answering.

Round 1 bounded the installed programs; the built-in chat agents (openai, anthropic, chat) and the LLM judges still
waited `timeout_s` (600 s) on each of `max_retries` + 1 (6) attempts against a provider that accepts and stalls: an
hour. Their SDK now reaches the provider through an HTTP client the same health watch reads: after `outage_after=`
seconds (default 60) with no answer the harness asks the provider itself, and only when that fails too is the call
ended, in the installed agents' words; an infrastructure failure (`provider_unavailable`) when the model never
answered, the agent's failure after. A model slow to reply while its server answers is waited for. A judge that
cannot reach its provider leaves S1-S3 null with the reason, the run scored, as before, only sooner.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import test_cli_newuser
from test_agents_round1 import CHAT_REPLY, Provider
from test_ux_round18 import _one_line

cli = test_cli_newuser.cli

NEEDLES = {"stall": "it accepted the connection but sent no reply in 1 s", "reset": "the connection was reset",
           "refuse": "the connection was refused", "error": "HTTP 500"}


def _options(flag: str, url: str, *more: str, wait: str = "1") -> list[str]:
    return [arg for option in ("model=m", f"base_url={url}", "api_key_env=none", f"outage_after={wait}", *more)
            for arg in (flag, option)]


def _run(cli, tmp_path: Path, *args: str) -> tuple[Any, dict[str, Any], float, Path]:
    out = tmp_path / "runs"
    t0 = time.monotonic()
    result = cli("run", "--task", "toy/vowels", *args, "--time-limit", "120", "--out", out)
    wall = time.monotonic() - t0
    folder = next(out.glob("*/result.json")).parent
    return result, json.loads((folder / "result.json").read_text()), wall, folder


@pytest.mark.parametrize("mode", sorted(NEEDLES))
def test_a_chat_agents_provider_that_never_answers_is_an_outage_in_bounded_time(cli, tmp_path, mode):
    """Before: 600 s per attempt on a stall, six attempts; a refusing or 500-answering provider the back-off
    (2..60 s) six times. Now ~outage_after, then the installed agents' one line and their classification."""
    with Provider(mode) as provider:
        result, record, wall, _ = _run(cli, tmp_path, "--agent", "openai", *_options("--agent-option", provider.url))
    assert wall < 30, wall
    assert (record["state"], record["end_reason"]) == ("infrastructure_failure", "provider_unavailable"), record
    error = record["error"]
    assert "\n" not in error and " ".join(result.output.split()).count(" ".join(error.split())) == 1, result.output
    assert error.startswith(f"openai call to m: the model provider at {provider.url} did not answer: ") and \
        NEEDLES[mode] in error, error
    assert "a request of the harness's own to it failed too" in error and "outage_after=1 s" in error, error
    assert "the agent's model provider did not answer" in result.output and result.exit_code == 3, result.output


def test_the_anthropic_agent_is_bounded_the_same_way(cli, tmp_path):
    with Provider("stall") as provider:
        _, record, wall, _ = _run(cli, tmp_path, "--agent", "anthropic", *_options("--agent-option", provider.url))
    assert wall < 30, wall
    assert record["end_reason"] == "provider_unavailable" and NEEDLES["stall"] in record["error"], record


def test_retries_that_run_out_before_the_wait_are_judged_by_the_harnesss_own_request(cli, tmp_path):
    """max_retries=1 gives up on a refused connection in ~3 s (the wait is 60 s): the harness's own request decides,
    and the line does not claim the harness ended the call."""
    with Provider("refuse") as provider:
        _, record, wall, _ = _run(cli, tmp_path, "--agent", "openai",
                                  *_options("--agent-option", provider.url, "max_retries=1", wait="60"))
    assert wall < 30, wall
    assert record["end_reason"] == "provider_unavailable", record
    assert "2 call(s) failed" in record["error"] and "failed too" in record["error"], record
    assert "the call was ended" not in record["error"], record


def test_a_provider_that_stops_answering_after_the_model_answered_is_the_agents_failure(cli, tmp_path):
    """The model's first reply was answered (and could have been acted on): the agent's failure, never a retryable
    one, ended as fast and said in the same words."""
    with Provider("late") as provider:
        _, record, wall, _ = _run(cli, tmp_path, "--agent", "openai", *_options("--agent-option", provider.url))
    assert wall < 30 and provider.posts >= 2, (wall, provider.posts)
    assert record["state"] == "agent_failure", record
    assert "did not answer: it accepted the connection but sent no reply in 1 s" in record["error"], record


def test_calls_a_live_provider_rejects_stay_the_agents_failure(cli, tmp_path):
    """Every model call answered 500 while the base URL answers the harness: whatever the agent sent may cause that,
    so the retries run out as before and it is never an infrastructure failure the agent could cause."""
    with Provider("picky") as provider:
        _, record, wall, _ = _run(cli, tmp_path, "--agent", "openai",
                                  *_options("--agent-option", provider.url, "max_retries=1", "backoff_s=0.5"))
    assert wall < 30, wall
    assert record["state"] == "agent_failure" and "did not answer" not in record["error"], record


def test_a_slow_model_whose_server_answers_is_waited_for(cli, tmp_path):
    """A CPU llama.cpp server takes minutes per reply but answers the harness's GET: each 2.5 s reply (outage_after
    is 1 s) is waited for, and the run ends as the model's turns do, not as an outage."""
    with Provider("slow", delay=2.5) as provider:
        _, record, wall, folder = _run(cli, tmp_path, "--agent", "openai", *_options("--agent-option", provider.url),
                                       "--max-turns", "2")
    assert wall < 30, wall
    assert record["state"] == "scored" and provider.posts >= 1, record
    events = [json.loads(line) for line in (folder / "trajectory.jsonl").open()]
    assert not any(e.get("type") == "api_retry" for e in events), events


def test_the_watched_client_still_goes_through_the_environments_proxy(cli, tmp_path, monkeypatch):
    """An SDK client given a transport reads no proxy variables: the watch's transport routes as the SDK's own client
    did, so a user behind HTTP(S)_PROXY still reaches the provider (here a host that only the proxy knows)."""
    asked: list[str] = []

    class Proxy(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            asked.append(self.path)
            self.rfile.read(int(self.headers.get("content-length") or 0))
            self.send_response(200)
            self.send_header("content-length", str(len(CHAT_REPLY)))
            self.end_headers()
            self.wfile.write(CHAT_REPLY)

        log_message = staticmethod(lambda *args: None)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True).start()
    for name in ("NO_PROXY", "no_proxy", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{server.server_address[1]}")
    try:
        _, record, _, _ = _run(cli, tmp_path, "--agent", "openai",
                               *_options("--agent-option", "http://provider.invalid/v1"), "--max-turns", "2")
    finally:
        server.shutdown()
        server.server_close()
    assert record["state"] == "scored", record
    assert asked and asked[0] == "http://provider.invalid/v1/chat/completions", asked


@pytest.mark.parametrize("mode", ["stall", "refuse"])
def test_a_judge_that_cannot_reach_its_provider_leaves_the_run_scored_and_says_why(cli, tmp_path, mode):
    """As before (S1-S3 null, the reason in judge.json and the summary, the run scored), only in bounded time."""
    with Provider(mode) as provider:
        result, record, wall, folder = _run(cli, tmp_path, "--agent", "reference", "--judge", "openai",
                                            *_options("--judge-option", provider.url))
    assert wall < 30, wall
    assert record["state"] == "scored" and result.exit_code == 1, record  # recorded, not graded (polish5)
    error = json.loads((folder / "judge.json").read_text())["error"]
    assert error.startswith(f"openai call to m: the model provider at {provider.url} did not answer: ") and \
        NEEDLES[mode] in error, error
    assert "the judge could not grade" in result.output and "automedbench rejudge" in result.output, result.output


@pytest.mark.parametrize("value", ["0", "soon", "100000"])
def test_a_bad_outage_after_for_a_chat_agent_is_one_line(cli, tmp_path, value):
    result = cli("run", "--task", "toy/vowels", "--agent", "openai",
                 *_options("--agent-option", "http://127.0.0.1:9/v1", wait=value), "--out", tmp_path / "runs")
    _one_line(result, "openai agent option: outage_after='soon' is not valid" if value == "soon" else
              "openai: outage_after must be a number of seconds from 1 to 86400")
