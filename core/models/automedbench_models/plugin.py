"""Model-backed agents, judges, model backends, the model-graded scoring step and reply hints, registered through
the hooks a third party uses."""

from __future__ import annotations

from functools import partial
from typing import Any

from automedbench.api import hookimpl


@hookimpl
def automedbench_register_agents(register) -> None:
    def openai_agent(**options):
        from .openai_chat import OpenAIChatAgent

        return OpenAIChatAgent(**options)

    def anthropic_agent(**options):
        from .anthropic_chat import AnthropicChatAgent

        return AnthropicChatAgent(**options)

    def chat_agent(**options):
        from .chat import ChatAgent

        return ChatAgent(**options)

    def replay_agent(**options):
        from .replay import ReplayAgent

        return ReplayAgent(**options)

    def cli_agent(**options):
        from .cli_agent import CliAgent

        return CliAgent(**options)

    # a chat agent's options are its model's settings (`ModelConfig`): declared, so `plugins openai` lists them and
    # a typo is refused with the nearest name by the engine's own check, in `run` and before a sweep's first run
    model = model_options()
    register("openai", openai_agent, "chat model over an OpenAI-compatible endpoint (OpenAI, vLLM, SGLang, "
             "Ollama, LiteLLM, OpenRouter): model=, base_url=, api_key_env=, or config= entry=", options=model)
    register("anthropic", anthropic_agent, "Anthropic messages API: model=, api_key_env=, or config= entry=",
             options=model)
    register("chat", chat_agent, "chat model through any registered model backend: provider=NAME plus its options",
             options=["provider", *model])
    register("replay", replay_agent, "re-run a stored trajectory without a model: trajectory=runs/ID/trajectory.jsonl",
             options=["trajectory", "rewrite_paths", "allow_torn"])
    register("cli", cli_agent, "installed CLI coding agent run inside the sandbox: spec=cli.yaml", options=["spec"])

    from .systems import SYSTEMS  # light: the systems' declarations; the agent's module is imported by its run

    for name, system in SYSTEMS.items():  # options declared: the engine refuses a typo'd or another system's one
        register(name, partial(_installed_agent, system),
                 f"{system.title} run inside the sandbox ({system.install}): "
                 + ", ".join(f"{option}=" for option in system.options()), options=system.options())


def model_options() -> list[str]:
    """The options a model backend reads (every `ModelConfig` setting but the provider, and a models file's
    `config=` and `entry=`), as a chat agent declares them."""
    import attrs
    from automedbench.api import ModelConfig

    return sorted({f.name for f in attrs.fields(ModelConfig)} - {"provider"} | {"config", "entry"})


def _installed_agent(system: Any, **options: Any) -> Any:
    """An installed agent system's agent (`installed.InstalledAgent`), its module imported only now: the gateway and
    relay it brings cost a run of any other agent ~27 ms of start-up."""
    from .installed import InstalledAgent

    return InstalledAgent(system, **options)


@hookimpl
def automedbench_register_judges(register) -> None:
    def llm_judge(provider: str):
        def factory(**options):
            from .llm_judge import LlmJudge

            return LlmJudge(provider, **options)

        return factory

    def any_llm_judge(provider: str = "", **options):
        from automedbench.api import UserError

        from .llm_judge import LlmJudge

        if not provider:
            raise UserError("the llm judge needs provider=NAME (a model backend: see `automedbench plugins`)")
        return LlmJudge(provider, **options)

    judge = [*model_options(), "parse_retries", "images"]  # its model's settings and the judge's own two
    register("llm", any_llm_judge, "LLM judge through any registered model backend: provider=NAME plus its options",
             options=["provider", *judge])
    register("openai", llm_judge("openai"), "LLM judge over an OpenAI-compatible endpoint (same options as the agent)",
             options=judge)
    register("anthropic", llm_judge("anthropic"), "LLM judge over the Anthropic messages API", options=judge)


@hookimpl
def automedbench_register_model_backends(register) -> None:
    def openai_backend(cfg):
        from .openai_chat import OpenAIBackend

        return OpenAIBackend(cfg)

    def anthropic_backend(cfg):
        from .anthropic_chat import AnthropicBackend

        return AnthropicBackend(cfg)

    # each provider declares the variable its key is read from (api_key_env= names another, none if keyless)
    register("openai", openai_backend, "OpenAI-compatible chat completions (OpenAI, vLLM, SGLang, Ollama, LiteLLM)",
             key_env="OPENAI_API_KEY")
    register("anthropic", anthropic_backend, "Anthropic messages API", key_env="ANTHROPIC_API_KEY",
             defaults={"temperature": None})  # Anthropic's own sampling unless a temperature is asked for


@hookimpl
def automedbench_grade_requests(requests, options, registry, trusted):
    from .grading import grade_requests

    return grade_requests(requests, options, registry, persistent=trusted)


@hookimpl
def automedbench_reply_hint(reply, tools, prompt, data_dir):
    from .replyhint import diagnose

    return diagnose(reply, tools, prompt=prompt, data_dir=data_dir)
