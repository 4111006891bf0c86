"""The agent systems people run, round 3: the model a run names is the model that served it.

Red team round 31: an installed program configured `model=m` asked the gateway for "m" and "big-model" and both
were answered, while the result's options and conditions name only `model=m`: a leaderboard row for one model
could hold runs that used another. The gateway now forwards every request naming the run's model (a helper model,
Claude Code's small one or Gemini CLI's flash one, is served by it too); a request whose model it cannot read (a
body past the gateway's one bound, `MAX_REQUEST_BYTES` and `MAX_REQUEST_ITEMS`, or one with no `model`) is refused
to the program, the agent's problem. The names asked for besides the run's are counted in the result
(`runtime.other_models`) and shown by `show` and the run page. The chat agents and the LLM judges send the
configured model through clients of the harness's own: checked here too.
"""

from __future__ import annotations

import json
import os
import time

import pytest
import test_agents_round1
from automedbench_models.gateway import SOCKET_NAME, ModelGateway
from test_agents_round1 import Provider
from test_installed_agents_runs import _post

cli = test_agents_round1.cli

# a program that asks the gateway for its model, for another one twice and a third once, then sends a request
# naming none, one of too many values for the gateway to read and one of 24 MB of images (under the gateway's one
# bound: read and pinned), writes an empty transcript and exits 0 (the run goes on to its submit)
PROGRAM = r'''#!/usr/bin/env python3
import json, os, urllib.error, urllib.request
url = os.environ["OPENAI_API_BASE"].rstrip("/") + "/chat/completions"
ask = [{"model": name, "messages": [{"role": "user", "content": "go"}]}
       for name in ("m", "big-model", "big-model", "small-model")]
bodies = [json.dumps(body).encode() for body in ask]
bodies.append(b'{"messages": [{"role": "user", "content": "go"}]}')
bodies.append(b'{"model": "big-model", "messages": [{"role": "user", "content": [' + b"0," * 2_000_000 + b'0]}]}')
image = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * (8 << 20)}}
bodies.append(json.dumps({"model": "big-model", "messages": [{"role": "user", "content": [image] * 3}]}).encode())
for body in bodies:
    request = urllib.request.Request(url, body, {"content-type": "application/json", "authorization": "Bearer x"})
    try:
        with urllib.request.urlopen(request, timeout=60) as reply:
            reply.read()
    except urllib.error.HTTPError as exc:
        exc.read()
with open(os.path.join(os.environ["AMB_DIR"], "trajectory.json"), "w") as out:
    json.dump({"messages": []}, out)
'''


def _models(provider: Provider) -> list[str]:
    """The model each POST the provider received names."""
    return [json.loads(body).get("model", "") for _, body in provider.received]


def test_an_installed_program_is_served_only_the_runs_model_and_the_result_counts_what_it_asked_for(cli, tmp_path):
    """Before: the provider was asked for "m", "big-model" (x3, one of them 17 MB) and "small-model", and a request
    with no model went through; the result named only model=m, with nothing recording the others."""
    program = tmp_path / "bin" / "mini"
    program.parent.mkdir()
    program.write_text(PROGRAM)
    program.chmod(0o755)
    with Provider("slow") as provider:
        _, record, _ = test_agents_round1._run(cli, tmp_path, program, provider.url, "--agent-option",
                                               "model=m", wait="30")
    assert record["state"] == "scored", (record["state"], record["error"])
    assert _models(provider) == ["m"] * 5, _models(provider)  # the five it could read, each naming the run's model
    assert len(provider.received[-1][1]) > 24 << 20, len(provider.received[-1][1])  # the images went through
    assert record["runtime"]["other_models"] == {"big-model": 3, "small-model": 1}, record["runtime"]
    assert record["header"]["options"]["agent_options"]["model"] == "m", record["header"]["options"]

    folder = next((tmp_path / "runs").glob("*/result.json")).parent
    events = [json.loads(line) for line in (folder / "trajectory.jsonl").open()]
    gateway = next(e for e in events if e["type"] == "model_gateway")
    assert (gateway["calls"], gateway["refused"]) == (5, 2), gateway
    assert gateway["other_models"] == {"big-model": 3, "small-model": 1}, gateway
    refused = [r["refused"] for r in gateway["records"] if r["refused"]]
    too_many = "cannot be read (over 64 MB, or over 2,000,000 objects, arrays and values"
    assert len(refused) == 2 and "names no model" in refused[0] and too_many in refused[1], refused
    assert all("this run's model is 'm'" in why for why in refused), refused
    asked = [(r["model"], r["asked"]) for r in gateway["records"] if not r["refused"]]
    assert asked == [("m", ""), ("m", "big-model"), ("m", "big-model"), ("m", "small-model"), ("m", "big-model")], asked

    shown = cli("show", str(folder))
    assert shown.exit_code == 0, shown.output
    text = " ".join(shown.output.split())
    assert "also asked for other models, all served by the run's: big-model ×3, small-model ×1" in text, text
    # the run page says it too (polish round 4: only `show` did), the site's run page being the same renderer
    page = (folder / "view.html").read_text()
    assert ("<dt>other models</dt><dd>asked for by the agent&#x27;s program, all served by the run&#x27;s model: "
            "big-model ×3, small-model ×1</dd>") in page, page[:3000]


def test_each_wire_format_is_pinned_to_the_runs_model(tmp_path):
    """Anthropic and OpenAI name the model in the body, Gemini in the path: each is forwarded naming the run's model,
    the name asked for counted; a model list (GET) passes as it is."""
    folder = tmp_path / "gw"
    folder.mkdir()
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    sock = str(folder / SOCKET_NAME)
    try:
        with Provider("slow") as provider:
            for wire, path, body in (("anthropic", "/v1/messages", {"model": "claude-haiku", "max_tokens": 5}),
                                     ("openai", "/v1/responses", {"model": "gpt-5-mini", "input": "hi"}),
                                     ("gemini", "/v1beta/models/gemini-flash:generateContent?alt=sse",
                                      {"contents": []})):
                (folder / SOCKET_NAME).unlink(missing_ok=True)
                gw = ModelGateway(provider.url.removesuffix("/v1"), wire, None, model="the-model", max_calls=5,
                                  deadline=time.monotonic() + 60)
                gw.start(fd)
                status, _ = _post(sock, path, body, {})
                gw.close()
                assert status == 200, (wire, status)
                assert gw.asked_for() == {str(body.get("model", "gemini-flash")): 1}, (wire, gw.asked_for())
    finally:
        os.close(fd)
    sent = [(path, json.loads(data)) for path, data in provider.received]
    assert sent[0][1]["model"] == "the-model" and sent[0][1]["max_tokens"] == 5, sent
    assert sent[1][1] == {"model": "the-model", "input": "hi"}, sent
    assert sent[2] == ("/v1beta/models/the-model:generateContent?alt=sse", {"contents": []}), sent


@pytest.mark.parametrize("flag,more", [("--agent", ()), ("--judge", ("--agent", "reference"))])
def test_the_chat_agents_and_the_judges_send_only_their_configured_model(cli, tmp_path, flag, more):
    """Their SDK clients are the harness's own: every request names the model option (here `m`)."""
    with Provider("slow") as provider:
        result = cli("run", "--task", "toy/vowels", *more, flag, "openai", *(
            arg for option in ("model=m", f"base_url={provider.url}", "api_key_env=none")
            for arg in (f"{flag}-option", option)), "--max-turns", "2", "--out", tmp_path / "runs")
    assert result.exit_code in (0, 1), result.output
    assert provider.received and set(_models(provider)) == {"m"}, _models(provider)

