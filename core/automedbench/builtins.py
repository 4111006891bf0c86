"""The core's own components, registered through the same hooks a third-party plugin uses."""

from __future__ import annotations

from functools import partial

from .hookspecs import Register, hookimpl


@hookimpl
def automedbench_register_agents(register: Register) -> None:
    from .agents.scripted import VARIANTS, ScriptedAgent

    for variant, description in VARIANTS.items():
        register(variant, partial(ScriptedAgent, variant), f"scripted: {description}")


@hookimpl
def automedbench_register_sandboxes(register: Register) -> None:
    from .sandboxes.local import LocalSandbox

    register("local", partial(LocalSandbox, "auto"),
             "host process in a bubblewrap namespace when bwrap works here, else plain (default)")
    register("local-plain", partial(LocalSandbox, "none"),
             "host process, scrubbed environment and limits only (no filesystem isolation)")


@hookimpl
def automedbench_register_judges(register: Register) -> None:
    from .judges.rules import RulesJudge

    register("rules", RulesJudge, "deterministic evidence checks over plan.md, plan.png and the trajectory")


@hookimpl(specname="automedbench_register_agents")
def register_model_agents(register: Register) -> None:
    def openai_agent(**options):
        from .agents.openai_chat import OpenAIChatAgent

        return OpenAIChatAgent(**options)

    def anthropic_agent(**options):
        from .agents.anthropic_chat import AnthropicChatAgent

        return AnthropicChatAgent(**options)

    def replay_agent(**options):
        from .agents.replay import ReplayAgent

        return ReplayAgent(**options)

    def cli_agent(**options):
        from .agents.cli_agent import CliAgent

        return CliAgent(**options)

    register("openai", openai_agent, "chat model over an OpenAI-compatible endpoint (OpenAI, vLLM, SGLang, "
             "Ollama, LiteLLM, OpenRouter): model=, base_url=, api_key_env=, or config= entry=")
    register("anthropic", anthropic_agent, "Anthropic messages API: model=, api_key_env=, or config= entry=")
    def chat_agent(**options):
        from .agents.chat import ChatAgent

        return ChatAgent(**options)

    register("chat", chat_agent, "chat model through any registered model backend: provider=NAME plus its options")
    register("replay", replay_agent, "re-run a stored trajectory without a model: trajectory=runs/ID/trajectory.jsonl")
    register("cli", cli_agent, "installed CLI coding agent run inside the sandbox: spec=cli.yaml")


@hookimpl(specname="automedbench_register_judges")
def register_model_judges(register: Register) -> None:
    def llm_judge(provider: str):
        def factory(**options):
            from .judges.llm import LlmJudge

            return LlmJudge(provider, **options)

        return factory

    def any_llm_judge(provider: str = "", **options):
        from .judges.llm import LlmJudge

        if not provider:
            from .errors import UserError

            raise UserError("the llm judge needs provider=NAME (a model backend: see `automedbench plugins`)")
        return LlmJudge(provider, **options)

    register("llm", any_llm_judge, "LLM judge through any registered model backend: provider=NAME plus its options")
    register("openai", llm_judge("openai"), "LLM judge over an OpenAI-compatible endpoint (same options as the agent)")
    register("anthropic", llm_judge("anthropic"), "LLM judge over the Anthropic messages API")
@hookimpl
def automedbench_register_code_detectors(register: Register) -> None:
    from .codes.generic import GENERIC_DETECTORS

    for name, cls in GENERIC_DETECTORS.items():
        register(name, cls, f"error codes, every track: {(cls.__doc__ or '').strip().splitlines()[0]}")


@hookimpl
def automedbench_run_finished(result, run_dir, registry, output_names) -> None:
    """Post-run error codes E1–E5 from the registered detectors (diagnostic: scores are untouched)."""
    from .codes import tag_run
    from .records import FiredCode

    try:
        tag_run(run_dir, result, registry, output_names)
    except Exception as exc:
        result.error_codes.append(FiredCode("H-DETECTOR", f"tagging failed: {type(exc).__name__}: {exc}"))


@hookimpl
def automedbench_register_evaluators(register: Register) -> None:
    def process():
        from .evaluator import evaluate_in_process

        return evaluate_in_process

    register("process", process, "local `python -I` subprocess, scrubbed environment (default)")


@hookimpl
def automedbench_register_model_backends(register: Register) -> None:
    def openai_backend(cfg):
        from .agents.openai_chat import OpenAIBackend

        return OpenAIBackend(cfg)

    def anthropic_backend(cfg):
        from .agents.anthropic_chat import AnthropicBackend

        return AnthropicBackend(cfg)

    register("openai", openai_backend, "OpenAI-compatible chat completions (OpenAI, vLLM, SGLang, Ollama, LiteLLM)")
    register("anthropic", anthropic_backend, "Anthropic messages API")
