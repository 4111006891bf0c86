"""Model endpoint settings for chat agents and LLM judges, from `--agent-option`s and/or a YAML file.

Precedence: provider defaults < the named entry of the config file < options on the command line.
API keys are never written in the config: `api_key_env` names the environment variable that holds one
(`none` for keyless local servers such as vLLM or Ollama). An unset variable is a one-line error before
anything is sent — a placeholder is never sent literally.

    models:                      # agents.yaml
      gpt4o:
        provider: openai
        model: gpt-4o
        api_key_env: OPENAI_API_KEY
      local-qwen:
        provider: openai
        model: Qwen/Qwen2.5-7B-Instruct
        base_url: http://localhost:8000/v1
        api_key_env: none
        context_window: 32768
    pricing:                     # optional, USD per 1M tokens
      Qwen/Qwen2.5-7B-Instruct: {input: 0, output: 0}
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import yaml
from attrs import Factory, define

from .errors import UserError
from .yamlfile import read_yaml

CONFIG_ENV = "AUTOMEDBENCH_MODELS"
OUTAGE_AFTER_S = 60.0  # seconds a provider may go with no answer before the harness asks it itself (every agent)
OUTAGE_AFTER_MAX_S = 86_400
NO_KEY = ("none", "")


@define
class ModelConfig:
    provider: str
    model: str = ""
    base_url: str | None = None
    api_key_env: str = ""
    max_tokens: int = 4096
    temperature: float | None = 0.0
    context_window: int = 128_000
    keep_turns: int = 12
    timeout_s: float = 600.0
    outage_after: float = OUTAGE_AFTER_S  # seconds with no answer before the harness asks the provider itself
    max_retries: int = 5
    backoff_s: float = 2.0
    max_backoff_s: float = 60.0
    length_retries: int = 2
    overflow_retries: int = 3  # retries after a context-overflow error, each with a smaller context
    continues: int | None = None  # continue messages after a text-only reply (None: the task's setting)
    text_tool_calls: bool = False  # recover tool calls written in the reply text (agents/textcalls.py)
    reasoning_effort: str | None = None
    thinking_tokens: int = 0
    json_mode: str = "schema"
    prices: list[str] = Factory(list)
    pricing: dict[str, Any] = Factory(dict)
    extra_body: dict[str, Any] = Factory(dict)

    def api_key(self) -> str:
        """The key from the named environment variable; a one-line error if it is unset."""
        if self.api_key_env.lower() in NO_KEY:
            return "no-key"  # keyless endpoint: the SDKs insist on a value; this one is not a secret
        value = os.environ.get(self.api_key_env, "").strip()
        if not value:
            raise UserError(f"{self.provider} model {self.model!r}: environment variable {self.api_key_env} is not "
                            "set (or name another: api_key_env=VAR; none if keyless)")
        return value


_FIELDS = {f.name: f for f in attrs.fields(ModelConfig)}
_OPTION_ONLY = {"config", "entry", "api_key"}
_POSITIVE = {"max_tokens", "context_window", "timeout_s"}  # 0 would refuse every call


def _coerce(name: str, value: Any, where: str) -> Any:
    field = _FIELDS[name]
    kind = str(field.type)
    try:
        if value is None or (isinstance(value, str) and value.lower() == "null" and "None" in kind):
            return None
        if kind == "bool":
            if isinstance(value, bool):
                return value
            if str(value).lower() in ("1", "true", "yes", "on"):
                return True
            if str(value).lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError("expected true or false")
        if kind.startswith(("int", "float")):  # counts, sizes, seconds, temperature: finite, not negative
            # (continues has its own bounds below)
            number = (int if kind.startswith("int") else float)(value)
            if name != "continues" and (not math.isfinite(number) or number < 0 or (number == 0 and name in _POSITIVE)):
                raise ValueError("expected a finite number " + ("above 0" if name in _POSITIVE else ">= 0"))
            return number
        if kind.startswith("list"):
            return [str(v) for v in value] if isinstance(value, list) else [s for s in str(value).split(",") if s]
        if kind.startswith("dict"):
            if isinstance(value, str):
                value = yaml.safe_load(value)
            if not isinstance(value, dict):
                raise ValueError("expected a mapping")
            return dict(value)
        return str(value)
    except (TypeError, ValueError) as exc:
        raise UserError(f"{where}: {name}={value!r} is not valid ({exc})") from None


def load_entries(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(models, pricing) sections of a model config file."""
    data = read_yaml(path, "model config") or {}
    if not isinstance(data, dict) or not isinstance(data.get("models", {}), dict):
        raise UserError(f"model config {path}: expected a 'models:' mapping of entry name -> settings")
    return data.get("models", {}) or {}, data.get("pricing", {}) or {}


def resolve(provider: str, options: Mapping[str, Any], role: str = "agent",
            declared: Mapping[str, Any] | None = None) -> ModelConfig:
    """Merge defaults, the config entry (`config=FILE entry=NAME`) and explicit options.

    `declared` is what the provider's backend registered with it (`key_env`: the variable its key is read from
    by default; `defaults`: its own field defaults): the core names no provider's variable. `role` (agent or
    judge) only words the errors: `--agent-option` or `--judge-option`."""
    declared = declared or {}
    flag = f"--{role}-option"
    if "api_key" in options:
        raise UserError("API keys are not accepted as options; put the key in an environment variable and "
                        "name it with api_key_env=VAR")
    settings: dict[str, Any] = {}
    config_path = options.get("config") or os.environ.get(CONFIG_ENV)
    entry = options.get("entry")
    pricing: dict[str, Any] = {}
    if entry and not config_path:
        raise UserError(f"entry={entry} needs config=FILE (or ${CONFIG_ENV}) naming the models file")
    if config_path and entry:
        models, pricing = load_entries(Path(str(config_path)).expanduser())
        if entry not in models:
            known = ", ".join(sorted(models)) or "none"
            raise UserError(f"model config {config_path}: no entry {entry!r}; entries: {known}")
        raw = models[entry]
        if not isinstance(raw, dict):
            raise UserError(f"model config {config_path}: entry {entry!r} must be a mapping")
        if "api_key" in raw:
            raise UserError(f"model config {config_path}: entry {entry!r} holds a literal api_key; use "
                            "api_key_env: VAR instead")
        settings.update(raw)
    settings.update({k: v for k, v in options.items() if k not in _OPTION_ONLY})
    chosen = str(settings.pop("provider", provider))
    if chosen != provider:
        raise UserError(f"entry {entry!r} is for provider {chosen!r}; use --{role} {chosen}")
    unknown = sorted(set(settings) - set(_FIELDS))
    if unknown:
        raise UserError(f"unknown {provider} {role} option(s) {', '.join(unknown)}; known: "
                        f"{', '.join(sorted(set(_FIELDS) - {'provider'} | {'config', 'entry'}))}")
    values = {name: _coerce(name, value, f"{provider} {role} option") for name, value in settings.items()}
    for name, value in dict(declared.get("defaults") or {}).items():  # the provider's own, unless given
        if name in _FIELDS and name != "provider":
            values.setdefault(name, value)
    cfg = ModelConfig(provider, **values)
    if cfg.json_mode not in ("schema", "object", "none"):
        raise UserError(f"{provider}: json_mode must be schema, object or none (got {cfg.json_mode!r})")
    cfg.outage_after = outage_after_seconds(cfg.outage_after, provider)
    if cfg.continues is not None and not 0 <= cfg.continues <= 100:
        raise UserError(f"{provider}: continues must be between 0 and 100 (got {cfg.continues})")
    if not cfg.model:
        raise UserError(f"{provider} {role}: no model given ({flag} model=NAME, or {flag} config=FILE "
                        f"{flag} entry=NAME)")
    if not cfg.api_key_env:
        cfg.api_key_env = str(declared.get("key_env") or "")
    cfg.pricing = {**pricing, **cfg.pricing}
    return cfg


def outage_after_seconds(value: object, who: str) -> float:
    """`outage_after=` as seconds, 1 to a day: a chat agent's (`resolve`) and an installed program's option, checked
    by one rule in one message."""
    try:
        seconds = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        seconds = math.nan
    if not 1 <= seconds <= OUTAGE_AFTER_MAX_S:
        shown = f"{seconds:g}" if math.isfinite(seconds) else repr(value)
        raise UserError(f"{who}: outage_after must be a number of seconds from 1 to {OUTAGE_AFTER_MAX_S} "
                        f"(got {shown})")
    return seconds
