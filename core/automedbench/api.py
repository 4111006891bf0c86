"""The public face of AutoMedBench: everything a plugin author imports, and nothing else.

Plugins (tracks, agents, sandboxes, judges, metrics, error-code detectors) import from here only, so
the core can reorganise its internals without breaking them. A test keeps the plugins in this
repository to that rule. Names not in `__all__` are internal and may change without notice.
"""

from __future__ import annotations

from typing import Any

from .agent import TOOLS, Agent, AgentContext, ReplyHint, continue_message, execute_code_example
from .agenttext import AGENT_TEXT_NOTE, fence_agent_text, quote_line
from .authoring import (
    NIFTI_ONLY,
    flawed_batches,
    pipeline_diagram_code,
    plan_step,
    solution_source,
    verify_and_submit,
    verify_each_case,
)
from .detectors import E_CODES, NOT_TAGGED, TAXONOMY, CodeContext, Detector, is_error_code
from .errors import (
    END_AGENT_STOPPED,
    END_NO_AGENT,
    AgentError,
    ContentRefused,
    InfrastructureError,
    ProviderUnavailable,
    SubmissionError,
    UserError,
    did_you_mean,
)
from .fsutil import (
    append_line_locked,
    atomic_write_bytes,
    atomic_write_text,
    open_below,
    open_path,
    read_json_object,
    read_regular,
    sha256_file,
    walk_fd,
)
from .grades import (
    Grade,
    GradeError,
    GradeLog,
    GraderUse,
    fold_grades,
    grader_backend,
    grader_identity,
    grader_options,
    render_grade_request,
)
from .hookspecs import Register, hookimpl
from .judge import Judge, JudgeInput, asked_items, verdict_schema
from .modelconfig import OUTAGE_AFTER_S, outage_after_seconds
from .models import ModelBackend, ModelConfig, ReplyError, Usage, extract_json, get_model, structured_reply
from .pictures import (
    Box,
    CasePicture,
    Panel,
    default_case_picture,
    file_panel,
    focus_index,
    max_projection,
    read_image,
    read_text_head,
    volume_slice,
)
from .records import (
    CASE_LEFT_OUT,
    STAGE_NAMES,
    STAGE_WEIGHTS,
    STAGES,
    TIERS,
    AgentTurn,
    Aggregate,
    BreachEvidence,
    CaseVerdict,
    Evaluation,
    ExecResult,
    FiredCode,
    GradeRequest,
    Header,
    Isolation,
    ItemVerdict,
    JudgeVerdict,
    MetricBlock,
    PromptPart,
    RatingThresholds,
    Result,
    Rubric,
    RubricItem,
    Runtime,
    SandboxNeeds,
    ScoringNeed,
    StageRule,
    StageScore,
    SubmissionManifest,
    TaskSpec,
    TierInfo,
    ToolCall,
)
from .replyjson import final_json, require_keys
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
from .sandbox import ASSETS_MOUNT, DEFAULT_QUOTA_MB, Sandbox, SandboxSession, SandboxSpec
from .sandboxcall import EXEC_MOUNT, CallEnd, CallFolder, OutputCapture, call_result, sandbox_env, unsupported_language
from .stagearea import StagingArea, staging_area
from .stagesecret import StagingSecret
from .staging import stage_task
from .trace import Trace, workspace_path
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
    valid_output_gate,
)
from .trajectory import read_events, torn_line
from .untrusted import (
    check_download_file,
    check_image,
    check_pixels,
    finite_numbers,
    grey_content,
    gunzip,
    inflate,
    inside,
    loads_json,
    one_colour_mode,
    open_zip,
    parse_xml,
    png_bytes,
    read_zip_member,
    reencode_image,
    tar_member_ok,
)
from .untrusted import read_bytes as read_download_bytes
from .untrusted import read_text as read_download_text
from .yamlfile import read_yaml

# Loaded on first use by __getattr__ below: the names and the module that holds them.
_LAZY = {"secret_variant": "refguard", "dumps": "serialize", "from_dict": "serialize", "read_json": "serialize",
         "to_dict": "serialize", "write_json": "serialize"}

__all__ = [
    "AGENT_TEXT_NOTE",
    "ASSETS_MOUNT",
    "CASE_LEFT_OUT",
    "CONDITIONS",
    "DEFAULT_QUOTA_MB",
    "END_AGENT_STOPPED",
    "END_NO_AGENT",
    "EXEC_MOUNT",
    "E_CODES",
    "NIFTI_ONLY",
    "NOT_TAGGED",
    "OUTAGE_AFTER_S",
    "PHASES",
    "S3_LEVELS",
    "S3_PAPER_LEVELS",
    "STAGES",
    "STAGE_NAMES",
    "STAGE_WEIGHTS",
    "TAXONOMY",
    "TIERS",
    "TOOLS",
    "Agent",
    "AgentContext",
    "AgentError",
    "AgentTurn",
    "Aggregate",
    "Box",
    "BreachEvidence",
    "CallEnd",
    "CallFolder",
    "CasePicture",
    "CaseScore",
    "CaseVerdict",
    "CodeContext",
    "ContentRefused",
    "Detector",
    "Evaluation",
    "ExecResult",
    "FiredCode",
    "Grade",
    "GradeError",
    "GradeLog",
    "GradeRequest",
    "GraderUse",
    "Header",
    "InfrastructureError",
    "Isolation",
    "ItemVerdict",
    "Judge",
    "JudgeInput",
    "JudgeVerdict",
    "MetricBlock",
    "ModelBackend",
    "ModelConfig",
    "OutputCapture",
    "PackagedTrack",
    "Panel",
    "Phase",
    "PromptPart",
    "ProviderUnavailable",
    "RatingThresholds",
    "Register",
    "ReplyError",
    "ReplyHint",
    "Result",
    "Rubric",
    "RubricItem",
    "Runtime",
    "Sandbox",
    "SandboxNeeds",
    "SandboxSession",
    "SandboxSpec",
    "ScoringNeed",
    "ScriptStep",
    "ScriptedSolution",
    "StageRule",
    "StageScore",
    "StagedData",
    "StagingArea",
    "StagingSecret",
    "SubmissionError",
    "SubmissionManifest",
    "TaskEvaluation",
    "TaskSpec",
    "TierInfo",
    "ToolCall",
    "Trace",
    "Track",
    "Usage",
    "UserError",
    "append_line_locked",
    "asked_items",
    "atomic_write_bytes",
    "atomic_write_text",
    "call_result",
    "check_download_file",
    "check_image",
    "check_pixels",
    "continue_message",
    "default_case_picture",
    "default_rubric",
    "did_you_mean",
    "dumps",  # noqa: F822 (defined on first use by __getattr__ below)
    "execute_code_example",
    "extract_json",
    "fence_agent_text",
    "file_panel",
    "final_json",
    "finite_numbers",
    "flawed_batches",
    "focus_index",
    "fold_grades",
    "from_dict",  # noqa: F822 (defined on first use by __getattr__ below)
    "get_model",
    "grader_backend",
    "grader_identity",
    "grader_options",
    "grey_content",
    "gunzip",
    "hookimpl",
    "inflate",
    "inside",
    "is_error_code",
    "ladder_stage",
    "loads_json",
    "max_projection",
    "mean_stage",
    "one_colour_mode",
    "open_below",
    "open_path",
    "open_zip",
    "outage_after_seconds",
    "parse_xml",
    "pipeline_diagram_code",
    "plan_step",
    "png_bytes",
    "quote_line",
    "read_download_bytes",
    "read_download_text",
    "read_events",
    "read_image",
    "read_json",  # noqa: F822 (defined on first use by __getattr__ below)
    "read_json_object",
    "read_regular",
    "read_text_head",
    "read_yaml",
    "read_zip_member",
    "reencode_image",
    "render_grade_request",
    "require_keys",
    "reword",
    "sandbox_env",
    "secret_variant",  # noqa: F822 (defined on first use by __getattr__ below)
    "sha256_file",
    "solution_source",
    "stage_task",
    "staging_area",
    "structured_reply",
    "tar_member_ok",
    "to_dict",  # noqa: F822 (defined on first use by __getattr__ below)
    "torn_line",
    "unsupported_language",
    "valid_output_gate",
    "verdict_schema",
    "verify_and_submit",
    "verify_each_case",
    "volume_slice",
    "walk_fd",
    "with_items",
    "with_ladder",
    "workspace_path",
    "write_json",  # noqa: F822 (defined on first use by __getattr__ below)
]


def __getattr__(name: str) -> Any:
    """Names whose modules are loaded on first use: `secret_variant` needs numpy and SciPy, the JSON helpers
    cattrs, which `automedbench plugins`, `tasks` and every track's plugin module must not pay for."""
    where = _LAZY.get(name)
    if where == "refguard":
        from . import refguard

        return getattr(refguard, name)
    if where == "serialize":
        from . import serialize

        return getattr(serialize, name)
    raise AttributeError(f"module automedbench.api has no attribute {name!r}")
