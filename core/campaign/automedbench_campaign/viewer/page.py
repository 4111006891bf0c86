"""What every viewer page shares: escaping of hostile text, bounded text, one stylesheet, the page shell.

Pages are single self-contained HTML files: no script, no external stylesheet, font or image, so they
open offline and render the same in a browser or a headless screenshot. Agent text is hostile input: it is
cut to a bound, stripped of control characters (terminal escapes included), bidi controls shown as escapes,
and HTML-escaped everywhere.
"""

from __future__ import annotations

import html
import re
from typing import Any

MAX_FIELD_CHARS = 20_000  # one text field shown in full up to this; longer ones are cut with a note
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
# bidi marks, embeddings, overrides and isolates: raw, they would reorder what follows them on the page (a file
# name ending in U+202E shows its size and rejection reason backwards); shown as visible escapes instead
_BIDI = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")

CSS = """
:root{--fg:#1d2430;--muted:#5b6472;--line:#d5dae2;--head:#eef2f8;--ok:#1a7f37;--bad:#b42318;--warn:#9a6700}
*{box-sizing:border-box}body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:var(--fg);
background:#fff;font-size:14px;line-height:1.45}main{max-width:1200px;margin:0 auto;padding:16px}
h1{font-size:20px;margin:8px 0 4px}h2{font-size:16px;margin:24px 0 8px;border-bottom:1px solid var(--line)}
h3{font-size:14px;margin:14px 0 6px}a{color:#0b5cad}nav a{margin-right:12px}
table{border-collapse:collapse;font-size:13px;width:100%}th,td{border:1px solid var(--line);padding:4px 6px;
text-align:left;vertical-align:top}th{background:var(--head)}td.n,th.n{text-align:right;white-space:nowrap}
.scroll{overflow-x:auto;max-width:100%}pre{background:#f6f8fa;border:1px solid var(--line);padding:6px;
overflow-x:auto;white-space:pre-wrap;word-break:break-word;margin:4px 0;font-size:12px;max-height:480px}
details>summary{cursor:pointer;color:var(--muted)}.muted{color:var(--muted)}
.left-out{display:block;white-space:normal;max-width:20em;margin-left:auto;color:var(--muted);font-size:12px}.note{color:var(--muted);font-size:12px}
.badge{display:inline-block;padding:0 6px;border-radius:8px;font-size:12px;border:1px solid var(--line)}
.A{background:#dafbe1}.B{background:#fff8c5}.C{background:#ffebe9}.F{background:#ffd8d3}
.bad{color:var(--bad);font-weight:600}.ok{color:var(--ok)}.warn{color:var(--warn);font-weight:600}
.turn{border:1px solid var(--line);border-radius:6px;padding:8px;margin:10px 0}.turn:target{outline:3px solid #f0b400}
tr:target{outline:3px solid #f0b400}dl.kv{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:0}
dl.kv dt{color:var(--muted)}dl.kv dd{margin:0;word-break:break-word}ul.commands code{word-break:break-word}
img{max-width:100%;height:auto}figure{margin:8px 0}
.gallery{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(100%,480px),1fr));gap:12px}
figure.case{border:1px solid var(--line);border-radius:6px;padding:6px;margin:0;min-width:0}
figure.case img{display:block;margin:4px 0;image-rendering:auto}
figure.case:target,section:target{outline:3px solid #f0b400}figure.plan img{border:1px solid var(--line)}
.texts{display:grid;grid-template-columns:repeat(auto-fit,minmax(180px,1fr));gap:6px;max-width:820px}
.texts .output pre{border-color:#ffb366}.texts .reference pre{border-color:#5cc08a}td.ev{min-width:110px}
@media (max-width:600px){main{padding:8px}body{font-size:13px}table{font-size:12px}
dl.kv{grid-template-columns:1fr}dl.kv dd{margin-bottom:4px}
table.stages tr{display:grid;grid-template-columns:1fr 4.5em 5.5em}table.stages tr.cols{display:none}
table.stages td:nth-child(n+4){grid-column:1/-1}table.stages th:empty{display:none}}
"""


def clean(value: Any, limit: int = MAX_FIELD_CHARS) -> tuple[str, int]:
    """Text safe to show: control characters replaced, cut at `limit`; returns it and how much was cut."""
    text = value if isinstance(value, str) else ("" if value is None else str(value))
    cut = max(0, len(text) - limit)
    return _BIDI.sub(lambda m: f"\\u{ord(m.group()):04x}", _CONTROL.sub("\ufffd", text[:limit])), cut


def esc(value: Any, limit: int = MAX_FIELD_CHARS) -> str:
    """Escaped, bounded text for an element body or an attribute value (quotes escaped too)."""
    text, cut = clean(value, limit)
    out = html.escape(text, quote=True)
    return out + (f" [… {cut} more characters not shown]" if cut else "")


def pre(value: Any, limit: int = MAX_FIELD_CHARS, fold_over: int = 1200, label: str = "") -> str:
    """A <pre> block; long text is folded in a <details> (open with a click, no script)."""
    text, cut = clean(value, limit)
    if not text:
        return ""
    body = f"<pre>{html.escape(text, quote=True)}</pre>"
    if cut:
        body += f'<p class="note">{cut} more characters not shown (the full text is in the run folder).</p>'
    if len(text) > fold_over:
        return f"<details><summary>{esc(label or 'output')} ({len(text) + cut} characters)</summary>{body}</details>"
    return (f'<div class="muted">{esc(label)}</div>' if label else "") + body


def num(value: Any, places: int = 3) -> str:
    """A score cut (never rounded up) to `places`, as the terminal shows it; '–' for null."""
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return "–"
    scale = 10 ** places
    return f"{int(value * scale) / scale:.{places}f}"


def document(title: str, body: str, nav: str = "") -> str:
    return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
            "img-src data:\">"
            f"<title>{esc(title, 200)}</title><style>{CSS}</style></head><body><main>"
            f"{nav}{body}</main></body></html>\n")
