"""The public face of AutoMedBench: everything a plugin author imports, and nothing else.

Plugins (tracks, agents, sandboxes, judges, metrics, error-code detectors) import from here only, so
the core can reorganise its internals without breaking them. A test keeps the plugins in this
repository to that rule. Names not in `__all__` are internal and may change without notice.
"""

from __future__ import annotations

from typing import Any

from .agent import Agent, AgentContext
from .agenttext import AGENT_TEXT_NOTE, fence_agent_text
from .authoring import pipeline_diagram_code, plan_step
from .detectors import CodeContext, Detector
from .errors import AgentError, ContentRefused, InfrastructureError, UserError, did_you_mean
from .fsutil import append_line_locked, atomic_write_bytes, atomic_write_text, sha256_file
from .grades import Grade, fold_grades
from .hookspecs import Register, hookimpl
from .judge import Judge, JudgeInput
from .models import ModelBackend, ModelConfig, ReplyError, Usage, extract_json, get_model
from .records import (
    CaseVerdict,
    FiredCode,
    GradeRequest,
    ItemVerdict,
    JudgeVerdict,
    MetricBlock,
    PromptPart,
    RatingThresholds,
    Result,
    Rubric,
    RubricItem,
    SandboxNeeds,
    StageRule,
    TaskSpec,
    TierInfo,
)
from .rubric import (
    CONDITIONS,
    S3_LEVELS,
    S3_PAPER_LEVELS,
    default_rubric,
    ladder_stage,
    mean_stage,
    reword,
    with_items,
    with_ladder,
)
from .sandbox import Sandbox, SandboxSession, SandboxSpec
from .sandboxcall import EXEC_MOUNT, CallEnd, CallFolder, OutputCapture, call_result, sandbox_env, unsupported_language
from .stagearea import StagingArea, staging_area
from .trace import Trace
from .track import (
    PHASES,
    CaseScore,
    PackagedTrack,
    Phase,
    ScriptedSolution,
    ScriptStep,
    StagedData,
    TaskEvaluation,
    Track,
)
from .untrusted import (
    check_image,
    check_pixels,
    gunzip,
    inside,
    loads_json,
    open_zip,
    parse_xml,
    read_zip_member,
    tar_member_ok,
)
from .untrusted import read_bytes as read_download_bytes
from .untrusted import read_text as read_download_text

__all__ = [
    "AGENT_TEXT_NOTE",
    "CONDITIONS",
    "EXEC_MOUNT",
    "PHASES",
    "S3_LEVELS",
    "S3_PAPER_LEVELS",
    "Agent",
    "AgentContext",
    "AgentError",
    "CallEnd",
    "CallFolder",
    "CaseScore",
    "CaseVerdict",
    "CodeContext",
    "ContentRefused",
    "Detector",
    "FiredCode",
    "Grade",
    "GradeRequest",
    "InfrastructureError",
    "ItemVerdict",
    "Judge",
    "JudgeInput",
    "JudgeVerdict",
    "MetricBlock",
    "ModelBackend",
    "ModelConfig",
    "OutputCapture",
    "PackagedTrack",
    "Phase",
    "PromptPart",
    "RatingThresholds",
    "Register",
    "ReplyError",
    "Result",
    "Rubric",
    "RubricItem",
    "Sandbox",
    "SandboxNeeds",
    "SandboxSession",
    "SandboxSpec",
    "ScriptStep",
    "ScriptedSolution",
    "StageRule",
    "StagedData",
    "StagingArea",
    "TaskEvaluation",
    "TaskSpec",
    "TierInfo",
    "Trace",
    "Track",
    "Usage",
    "UserError",
    "append_line_locked",
    "atomic_write_bytes",
    "atomic_write_text",
    "call_result",
    "check_image",
    "check_pixels",
    "default_rubric",
    "did_you_mean",
    "extract_json",
    "fence_agent_text",
    "fold_grades",
    "get_model",
    "gunzip",
    "hookimpl",
    "inside",
    "ladder_stage",
    "loads_json",
    "mean_stage",
    "open_zip",
    "parse_xml",
    "pipeline_diagram_code",
    "plan_step",
    "read_download_bytes",
    "read_download_text",
    "read_zip_member",
    "reword",
    "sandbox_env",
    "secret_variant",  # noqa: F822 (defined on first use by __getattr__ below)
    "sha256_file",
    "staging_area",
    "tar_member_ok",
    "unsupported_language",
    "with_items",
    "with_ladder",
]


def __getattr__(name: str) -> Any:
    """`secret_variant` is loaded on first use: it needs numpy and SciPy, which `automedbench plugins`,
    `tasks` and every track's plugin module must not pay for."""
    if name == "secret_variant":
        from .refguard import secret_variant

        return secret_variant
    raise AttributeError(f"module automedbench.api has no attribute {name!r}")
