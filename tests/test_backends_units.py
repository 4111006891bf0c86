"""Pieces of the model backends checked on their own: prices, config, argument repair, context, kappa."""

from __future__ import annotations

import json

import pytest
from automedbench.api import Usage
from automedbench.errors import UserError
from automedbench.modelconfig import resolve
from automedbench.records import ItemVerdict, JudgeVerdict
from automedbench_campaign.rejudge import agreement, cohen_kappa
from automedbench_models.chat_common import ELIDED, estimate_tokens, fit_context, repair_json, retry_after
from automedbench_models.pricing import Price, PriceTable, config_prices, price_table

# ------------------------------------------------------------------ pricing


def test_price_lookup_prefers_the_longest_prefix_and_drops_provider_prefixes():
    table = PriceTable({"gpt-4o": Price(2.5, 10), "gpt-4o-mini": Price(0.15, 0.6)})
    assert table.lookup("gpt-4o-mini-2024-07-18")[0] == "gpt-4o-mini"
    assert table.lookup("openai/gpt-4o-2024-08-06")[0] == "gpt-4o"
    assert table.lookup("llama-3") is None


def test_cost_counts_cached_and_fresh_prompt_tokens_at_their_rates():
    table = PriceTable({"m": Price(input=2.0, output=8.0, cached_input=0.5, cache_write=2.5)})
    # 1000 prompt tokens of which 400 cached and 100 written to cache; 250 completion tokens
    cost = table.cost("m", Usage(prompt=1000, completion=250, cached=400, cache_write=100))
    by_hand = (500 * 2.0 + 400 * 0.5 + 100 * 2.5 + 250 * 8.0) / 1e6
    assert cost.priced and cost.usd == pytest.approx(by_hand)
    unknown = table.cost("nobody", Usage(1000, 1000))
    assert unknown.usd == 0.0 and not unknown.priced


def test_price_file_extends_and_overrides_defaults(tmp_path, monkeypatch):
    monkeypatch.delenv("AUTOMEDBENCH_PRICES", raising=False)
    path = tmp_path / "prices.yaml"
    path.write_text("pricing:\n  my-local-model: {input: 1, output: 3}\n  gpt-4o: {input: 100, output: 100}\n")
    table = price_table([path])
    assert table.cost("my-local-model", Usage(1_000_000, 1_000_000)).usd == pytest.approx(4.0)
    assert table.prices["gpt-4o"].input == 100
    assert "claude-sonnet-4" in table.prices  # defaults are still there
    path.write_text("pricing:\n  broken: {input: 1}\n")
    with pytest.raises(UserError, match="needs 'input' and 'output'"):
        price_table([path])


# ------------------------------------------------------------------ config and keys


def test_config_entry_then_options_and_key_from_named_env(tmp_path, monkeypatch):
    cfg_file = tmp_path / "agents.yaml"
    cfg_file.write_text("models:\n  local:\n    provider: openai\n    model: qwen\n    base_url: http://x/v1\n"
                        "    api_key_env: MY_KEY\n    context_window: 32768\n"
                        "pricing:\n  qwen: {input: 0.1, output: 0.2}\n")
    monkeypatch.setenv("MY_KEY", "sk-secret")
    cfg = resolve("openai", {"config": str(cfg_file), "entry": "local", "max_tokens": "512"})
    assert (cfg.model, cfg.base_url, cfg.context_window, cfg.max_tokens) == ("qwen", "http://x/v1", 32768, 512)
    assert cfg.api_key() == "sk-secret"
    assert config_prices(cfg).prices["qwen"].output == 0.2
    monkeypatch.delenv("MY_KEY")
    with pytest.raises(UserError, match="MY_KEY is not set") as info:
        cfg.api_key()
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("options, message", [
    ({"model": "m", "api_key": "sk-123"}, "not accepted as options"),
    ({}, "no model given"),
    ({"model": "m", "colour": "red"}, "unknown openai agent option"),
    ({"model": "m", "max_tokens": "many"}, "max_tokens='many' is not valid"),
    ({"entry": "x"}, "needs config=FILE"),
])
def test_bad_model_options_are_one_line_errors(options, message, monkeypatch):
    monkeypatch.delenv("AUTOMEDBENCH_MODELS", raising=False)
    with pytest.raises(UserError, match=message):
        resolve("openai", options)


def test_literal_key_in_config_is_refused(tmp_path):
    path = tmp_path / "a.yaml"
    path.write_text("models:\n  x: {provider: openai, model: m, api_key: sk-live}\n")
    with pytest.raises(UserError, match="literal api_key"):
        resolve("openai", {"config": str(path), "entry": "x"})


def test_keyless_servers_need_an_explicit_none():
    assert resolve("openai", {"model": "m", "api_key_env": "none"}).api_key() == "no-key"


# ------------------------------------------------------------------ tool-argument repair


def test_repair_fixes_raw_newlines_and_trailing_commas_but_not_garbage():
    raw = '{"language": "python", "code": "import os\nprint(\'a,\tb\')",}'
    fixed = json.loads(repair_json(raw))
    assert fixed == {"language": "python", "code": "import os\nprint('a,\tb')"}
    quoted = '{"code": "x = \\"a\\nb\\"\n", "language": "bash", }'
    assert json.loads(repair_json(quoted))["code"] == 'x = "a\nb"\n'
    assert repair_json('{"language": "python", "code": "print(1)"') == '{"language": "python", "code": "print(1)"'
    good = '{"a": [1, 2]}'
    assert repair_json(good) is good
    assert json.loads(repair_json('```json\n{"a": [1, 2,],}\n```')) == {"a": [1, 2]}


# ------------------------------------------------------------------ context rule


def _conversation(turns: int, output_chars: int) -> list[dict]:
    msgs = [{"role": "system", "content": "S" * 400}, {"role": "user", "content": "Begin."}]
    for t in range(turns):
        msgs.append({"role": "assistant", "content": f"turn {t}",
                     "tool_calls": [{"id": f"c{t}", "type": "function",
                                     "function": {"name": "execute_code", "arguments": "{}"}}]})
        msgs.append({"role": "tool", "tool_call_id": f"c{t}", "content": "o" * output_chars})
    return msgs


def test_context_under_budget_is_untouched():
    msgs = _conversation(3, 100)
    sent, stats = fit_context(msgs, context_window=100_000, max_tokens=1000, keep_turns=2)
    assert sent is msgs and stats == {"elided": 0, "dropped": 0}


def test_context_elides_old_outputs_then_drops_oldest_whole_turns():
    msgs = _conversation(10, 8000)  # ~20k tokens of tool output
    sent, stats = fit_context(msgs, context_window=14_000, max_tokens=1000, keep_turns=3)
    assert sent[0] == msgs[0] and sent[1]["role"] == "user"
    assert stats["elided"] == 7 and stats["dropped"] == 0
    assert [m["content"] for m in sent if m["role"] == "tool"][-3:] == ["o" * 8000] * 3
    assert [m["content"] for m in sent if m["role"] == "tool"][:7] == [ELIDED] * 7
    assert estimate_tokens(sent) <= 14_000 - 1000 - 1024
    # three recent outputs alone (~6000 tokens) exceed this budget: the oldest whole turns go, recent ones too
    tight, stats = fit_context(msgs, context_window=7_000, max_tokens=1000, keep_turns=3)
    assert stats["dropped"] == 8 and "8 earlier turn(s)" in tight[1]["content"]
    assert estimate_tokens(tight) <= 7_000 - 1000 - 1024
    ids = [m.get("tool_call_id") for m in tight if m["role"] == "tool"]
    calls = [c["id"] for m in tight if m["role"] == "assistant" for c in m["tool_calls"]]
    assert ids == calls == ["c8", "c9"]  # whole turns: every kept call still has its result
    assert msgs[3]["content"] == "o" * 8000  # the runner's own list is not modified


# ------------------------------------------------------------------ retry-after parsing


class _Resp:
    def __init__(self, headers):
        self.headers = headers


class _Err(Exception):
    def __init__(self, headers):
        self.response = _Resp(headers)


def test_retry_after_seconds_milliseconds_and_absent():
    assert retry_after(_Err({"retry-after": "3"})) == 3.0
    assert retry_after(_Err({"retry-after-ms": "250"})) == 0.25
    assert retry_after(_Err({})) is None
    assert retry_after(ValueError()) is None


# ------------------------------------------------------------------ agreement


def test_cohen_kappa_by_hand():
    a = [1, 1, 0, 0, 1]
    b = [1, 0, 0, 0, 1]
    # p_o = 4/5; p_e = (3/5)(2/5) + (2/5)(3/5) = 0.48; kappa = 0.32 / 0.52
    assert cohen_kappa(a, b) == pytest.approx(0.32 / 0.52)
    assert cohen_kappa([1, 0], [1, 0]) == pytest.approx(1.0)
    assert cohen_kappa([1, 0], [0, 1]) == pytest.approx(-1.0)
    assert cohen_kappa([1, 1], [1, 1]) is None
    assert cohen_kappa([], []) is None


def _verdict(name: str, values: dict[str, float | None]) -> JudgeVerdict:
    return JudgeVerdict(name, "1", [ItemVerdict(k, "S1", "", v, "r") for k, v in values.items()])


def test_agreement_per_item_and_pooled():
    pairs = [
        (_verdict("a", {"x": 1, "y": 0, "z": 1}), _verdict("b", {"x": 1, "y": 1})),
        (_verdict("a", {"x": 0, "y": 0}), _verdict("b", {"x": 0, "y": 0, "z": None})),
        (_verdict("a", {"x": 1, "y": 1}), _verdict("b", {"x": 0, "y": 1})),
    ]
    items, pooled = agreement(pairs)
    rows = {i.item: i for i in items}
    assert set(rows) == {"x", "y"}  # z was graded by both judges in no run
    assert rows["x"].n == 3 and rows["x"].agreement == pytest.approx(2 / 3, abs=1e-4)
    # x: a = [1, 0, 1], b = [1, 0, 0]: p_o 2/3, p_e = (2/3)(1/3) + (1/3)(2/3) = 4/9 -> kappa 0.4
    assert rows["x"].kappa == pytest.approx(0.4, abs=1e-4)
    assert pooled.n == 6 and pooled.agreement == pytest.approx(4 / 6, abs=1e-4)
    # pooled a = [1,0,1,0,0,1], b = [1,0,0,1,0,1]: p_o 4/6, p_e = .5*.5 + .5*.5 = .5 -> kappa 1/3
    assert pooled.kappa == pytest.approx(1 / 3, abs=1e-4)


def test_a_backend_declares_its_own_key_variable_and_defaults(monkeypatch):
    """A provider the core has never heard of names its key variable and its defaults when it registers; the
    core's model config lists no provider's variable (the built-in providers declare theirs the same way)."""
    import types

    from automedbench import modelconfig
    from automedbench.hookspecs import hookimpl
    from automedbench.models import get_model
    from automedbench.plugins import Registry
    from automedbench.testing import fresh_registry

    plugin = types.ModuleType("acme_models")

    @hookimpl
    def automedbench_register_model_backends(register):
        register("acme", lambda cfg: cfg, "a third party's provider", key_env="ACME_KEY",
                 defaults={"temperature": 0.7, "max_tokens": 99})

    plugin.automedbench_register_model_backends = automedbench_register_model_backends
    reg = Registry()
    reg.add_plugin(plugin, name="acme")
    cfg = get_model("acme", {"model": "m"}, reg=reg)
    assert (cfg.api_key_env, cfg.temperature, cfg.max_tokens) == ("ACME_KEY", 0.7, 99)
    monkeypatch.delenv("ACME_KEY", raising=False)
    with pytest.raises(UserError, match="environment variable ACME_KEY is not set"):
        cfg.api_key()
    given = get_model("acme", {"model": "m", "temperature": "0.1", "api_key_env": "OTHER"}, reg=reg)
    assert (given.api_key_env, given.temperature, given.max_tokens) == ("OTHER", 0.1, 99)
    assert not hasattr(modelconfig, "DEFAULT_KEY_ENV")
    assert resolve("acme", {"model": "m"}).api_key_env == ""  # undeclared: nothing guessed for it
    declared = {name: c.declared for name, c in fresh_registry().components["model"].items()}
    if "openai" in declared:  # automedbench-models installed: its providers declare theirs
        assert declared["openai"]["key_env"] == "OPENAI_API_KEY"
        assert declared["anthropic"] == {"key_env": "ANTHROPIC_API_KEY", "defaults": {"temperature": None}}
