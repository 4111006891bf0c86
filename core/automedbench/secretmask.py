"""Credentials kept out of what a run stores and shows of its options (the result header's `options`, the rerun
command line): result.json and the run pages are meant to be shared, and an option's value can hold a key.

A value is masked whole under a name that says credential (`api_key`, `access_token`, `password`; never a
variable's name, `api_key_env`, nor a count, `max_tokens`); inside any value, a URL's user:password, a query
parameter, `name=value`, `"name": value` or a `--flag value` under such a name, an `Authorization` scheme's
credential and the keys whose form gives them away (`sk-...`, `hf_...`) are masked too."""

from __future__ import annotations

import re
from typing import Any

MASK = "***"
# A name part that says credential (parts split at anything not a letter or digit); `tokens` is a count
_SECRET_PARTS = frozenset({"key", "apikey", "token", "secret", "password", "passwd", "pwd", "auth", "authorization",
                           "credential", "credentials", "bearer", "sig", "signature", "cookie"})
_SECRET_ENDS = ("apikey", "token", "secret", "password")
_URL_USER = re.compile(r"(?<=://)[^/?#\s]*@")  # up to the authority's last @: a password may hold one
_SCHEME = re.compile(r"(?i)\b(bearer|basic)(\s+)[^\s\"',;]+")
# keys whose form gives them away: OpenAI/Anthropic-style, Hugging Face, GitHub, Google, Slack
_KNOWN = re.compile(r"\b(?:sk|pk|rk)-[\w-]{16,}|\bhf_\w{16,}|\bgh[pousr]_\w{16,}|\bAIza[\w-]{16,}"
                    r"|\bxox[abpr]-[\w-]{10,}")
# a name is tried from its first character only (its dashes, then a letter), so each word once: linear in a value
_ASSIGNED = re.compile(r"""(?<![\w.-])(?P<name>-{0,2}[A-Za-z][\w.-]*)(?P<sep>["']?\s*[:=]\s*["']?)"""
                       r"""(?P<value>(?!//)[^\s"'&#,;}]+)""")
_FLAG = re.compile(r"(?<![\w-])(?P<name>--?[A-Za-z][\w.-]*)(?P<sep>\s+)(?P<value>[^\s-]\S*)")


def secret_name(name: str) -> bool:
    """Whether a value under this name is a credential: `api_key`, `x-api-key`, `hf_token`, `password`; not
    `api_key_env` (a variable's name) nor `max_tokens` (a count)."""
    parts = [p for p in re.split(r"[^a-z0-9]+", name.lower()) if p]
    if not parts or parts[-1] == "env":
        return False
    return any(p in _SECRET_PARTS or p.endswith(_SECRET_ENDS) for p in parts)


def _unless_secret(match: re.Match[str]) -> str:
    if not secret_name(match["name"]) or match["value"] == MASK:
        return match[0]
    return f"{match['name']}{match['sep']}{MASK}"


def mask_text(text: str) -> str:
    """`text` with every credential it shows masked (see the module's docstring)."""
    text = _URL_USER.sub(MASK + "@", text)
    text = _SCHEME.sub(lambda m: f"{m[1]}{m[2]}{MASK}", text)
    text = _KNOWN.sub(MASK, text)
    text = _ASSIGNED.sub(_unless_secret, text)
    return _FLAG.sub(_unless_secret, text)


def mask_value(name: str, value: Any) -> Any:
    """An option's value as it may be stored or shown: masked whole under a credential's name, its credentials
    masked inside a text, each item of a mapping by its own name; numbers and flags as they are."""
    if isinstance(value, dict):
        return {key: mask_value(str(key), item) for key, item in value.items()}
    if secret_name(name) and value not in (None, ""):
        return MASK
    return mask_text(value) if isinstance(value, str) else value
