"""What was wrong with a reply that ran nothing, told back to the model with one valid call to copy.

Small open-weight models often *almost* call a tool: a fenced "call" that is not JSON (Python triple
quotes inside), a call named after a stage instead of a tool, an XML plan, or the prompt echoed back. A
generic "make a tool call" message teaches them nothing; naming the near miss (with the parser's own
error) and showing one valid call for this task's tools often does. Every scan is bounded: only the first
`MAX_SCAN` characters of a reply are read, and at most `MAX_BLOCKS` fenced blocks are tried. The runner
asks for it through the hook `automedbench_reply_hint` on every reply without a tool call.
"""

from __future__ import annotations

import itertools
import json
import re
from typing import Any

from automedbench.api import ReplyHint, continue_message, execute_code_example

from .textcalls import bare_objects

MAX_SCAN = 20_000  # characters of the reply examined
MAX_BLOCKS = 8  # fenced blocks tried per reply
ECHO_PROBE = 200  # a reply whose first this-many characters appear verbatim in the prompt is an echo
ECHO_SHARE = 0.7  # ... or whose words lie this much in sentences (or runs of ECHO_RUN words) of the prompt
ECHO_MIN_WORDS = 8  # a shorter reply is never called an echo (a phrase quoted back is not an echo)
ECHO_RUN = 4  # words in a row that count as copied from the prompt
MAX_PROMPT_SCAN = 200_000  # characters of the prompt read for the echo test

# A fenced block: ``` or ~~~ with an optional info word; lazy body; linear (no nested quantifiers).
_FENCE = re.compile(r"```([A-Za-z_]*)[ \t]*\n(.*?)```", re.S)
_XML_TAG = re.compile(r"<(plan|step|stage|thinking|think|action|tool|function|code)\b[^>\n]{0,200}>", re.I)
_NAME_FIELD = re.compile(r'"(?:name|tool|function)"\s*:\s*"([^"\n]{1,80})"')
_WORD = re.compile(r"[^\W_]+")
_SENTENCE_END = re.compile(r"[.!?;:]+(?:\s|$)|\n+")


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def _echo_share(reply: str, prompt: str) -> float:
    """How much of the reply is the prompt's own wording, in any order: the share of the reply's words that lie
    in a run of `ECHO_RUN` words found in the prompt as they are (a sentence of 2-3 words: the whole sentence).
    Sentences may be reordered, cut or joined; markdown, case and punctuation do not count. Linear in both."""
    words = _words(reply)
    if len(words) < ECHO_MIN_WORDS:
        return 0.0
    source = _words(prompt[:MAX_PROMPT_SCAN])
    runs = {tuple(source[i:i + n]) for n in range(2, ECHO_RUN + 1) for i in range(len(source) - n + 1)}
    copied = 0
    for sentence in _SENTENCE_END.split(reply):
        part = _words(sentence)
        if len(part) < ECHO_RUN:
            copied += len(part) if len(part) >= 2 and tuple(part) in runs else 0
            continue
        marked = [False] * len(part)
        for i in range(len(part) - ECHO_RUN + 1):
            if tuple(part[i:i + ECHO_RUN]) in runs:
                marked[i:i + ECHO_RUN] = [True] * ECHO_RUN
        copied += sum(marked)
    return copied / len(words)


def _schema_problem(arguments: Any, schema: dict[str, Any]) -> str | None:
    """The first way `arguments` fails a tool's JSON schema (object, required fields, types, enums)."""
    if not isinstance(arguments, dict):
        return f"arguments must be a JSON object, got {type(arguments).__name__}"
    props = schema.get("properties") or {}
    for name in schema.get("required") or []:
        if name not in arguments:
            return f"missing required argument {name!r}"
    for name, value in arguments.items():
        spec = props.get(name)
        if spec is None:
            continue
        if spec.get("type") == "string" and not isinstance(value, str):
            return f"argument {name!r} must be a string"
        if "enum" in spec and value not in spec["enum"]:
            return f"argument {name!r} must be one of {', '.join(map(str, spec['enum']))}, got {value!r}"[:200]
    return None


def example_call(tools: list[dict[str, Any]], data_dir: str = "") -> str:
    """One valid call for these tools, as a fenced JSON block (the shape text-call recovery accepts)."""
    if any(t.get("name") == "execute_code" for t in tools):
        return execute_code_example(data_dir)
    tool = tools[0] if tools else {"name": "submit_results", "parameters": {}}
    props = (tool.get("parameters") or {}).get("properties") or {}
    args = {k: (v.get("enum") or ["..."])[0] for k, v in props.items()
            if k in ((tool.get("parameters") or {}).get("required") or [])}
    return "```json\n" + json.dumps({"name": tool.get("name"), "arguments": args}) + "\n```"


def _message(lead: str, tools: list[dict[str, Any]], data_dir: str) -> str:
    return continue_message(lead, [str(t.get("name")) for t in tools], example_call(tools, data_dir))


def diagnose(reply: str, tools: list[dict[str, Any]], prompt: str = "", data_dir: str = "") -> ReplyHint:
    """Classify a reply that made no tool call and build the corrective message for it."""
    text = (reply or "")[:MAX_SCAN]
    schemas = {str(t.get("name")): (t.get("parameters") or {}) for t in tools}
    if not text.strip():
        return ReplyHint("no_call", "the reply was empty", _message("Your reply was empty.", tools, data_dir))
    # a block tagged with another language (```xml around an echoed tool list, ```python) is no call attempt:
    # text-call recovery reads only untagged, json and tool_call blocks
    fenced = [("a fenced block", m.group(2).strip()) for m in itertools.islice(_FENCE.finditer(text), MAX_BLOCKS)
              if m.group(1).lower() in ("", "json", "tool_call")]
    bare = [("a JSON call outside a fence", body)
            for body in bare_objects(text, MAX_BLOCKS) if _NAME_FIELD.search(body)]
    for where, body in fenced + bare:  # a call written bare at a line's start is a call attempt too
        if not body.startswith(("{", "[")) and not _NAME_FIELD.search(body):
            continue  # an ordinary code block, not a call attempt
        try:
            value = json.loads(body)
        except json.JSONDecodeError as exc:
            detail = f"{where} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
            hint = ' (JSON has no triple quotes: put the code in one string with \\n for new lines)' \
                if '"""' in body or "'''" in body else ""
            return ReplyHint("invalid_json", detail, _message(f"Your reply had {detail}{hint}.", tools, data_dir))
        except (RecursionError, ValueError) as exc:  # ValueError: a number past Python's int-digit limit
            why = "is nested too deeply" if isinstance(exc, RecursionError) else "holds a number too long"
            detail = f"{where} {why} to parse"
            return ReplyHint("invalid_json", detail, _message(f"Your reply had {detail}.", tools, data_dir))
        value = value[0] if isinstance(value, list) and value else value
        if not isinstance(value, dict):
            continue
        name = value.get("name") or value.get("tool") or value.get("function")
        if not isinstance(name, str):
            continue
        if name not in schemas:
            detail = f"{name[:80]!r} is not a tool; the tools are {', '.join(schemas)}"
            return ReplyHint("unknown_tool", detail,
                             _message(f"Your reply wrote a call to {detail} (stages are steps of your work, "
                                      "not tools).", tools, data_dir))
        args = value.get("arguments", value.get("parameters", {}))
        if isinstance(args, str):
            try:
                args = json.loads(args) if args.strip() else {}
            except (ValueError, RecursionError) as exc:
                detail = f"the arguments of {name} are not valid JSON: {getattr(exc, 'msg', type(exc).__name__)}"
                return ReplyHint("bad_arguments", detail, _message(f"In your reply {detail}.", tools, data_dir))
        problem = _schema_problem(args, schemas[name])
        if problem:
            detail = f"the call to {name} has bad arguments: {problem}"
            return ReplyHint("bad_arguments", detail, _message(f"In your reply {detail}.", tools, data_dir))
    probe = text.strip()[:ECHO_PROBE]
    if prompt and ((len(probe) >= 40 and probe in prompt) or _echo_share(text, prompt) >= ECHO_SHARE):
        detail = "the reply repeats the task's instructions"
        return ReplyHint("echo", detail, _message("Your reply repeated the instructions instead of acting.",
                                                  tools, data_dir))
    tag = _XML_TAG.search(text)
    if tag:
        detail = f"the reply is an XML <{tag.group(1)}> outline, not a tool call"
        return ReplyHint("xml_plan", detail,
                         _message(f"Your reply is an XML <{tag.group(1)}> outline; write the plan to plan/plan.md "
                                  "with execute_code instead.", tools, data_dir))
    return ReplyHint("no_call", "no tool call found", _message("Your reply had no tool call.", tools, data_dir))
