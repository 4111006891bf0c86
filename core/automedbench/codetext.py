"""What an agent's code *does*, for the rules judge: code without comments or inert text, output without echoes.

A keyword in a comment, in a docstring, or printed back by `echo`/`print` satisfies a regex without any
work behind it. So patterns about code are matched against the code's effective content: comments,
bare string statements, the text arguments of print/write/logging calls and `echo`/`printf` commands,
and heredocs that are only written to a file are removed; strings used as data (paths, dict keys),
`python -c "..."`, f-string expressions and heredocs fed to an interpreter (or to a script the same
call runs) are kept. Patterns about output are matched against the lines of stdout that are not just
the code's own literals printed back. A heuristic, not a proof: it raises the bar from "say the word"
to "run something that produces it".
"""

from __future__ import annotations

import bisect
import functools
import io
import itertools
import re
import tokenize
from collections.abc import Sequence

INTERPRETERS = {"python": "python", "python3": "python", "bash": "bash", "sh": "bash"}
NO_OPS = {"echo", "printf", ":", "true", "false"}
# calls whose string arguments are text shown or stored, not code: print("model loaded") does nothing
OUTPUT_CALLS = {"print", "write", "writelines", "write_text", "info", "debug", "warning", "warn", "error", "log",
                "echo", "pprint", "display"}
# `<<<` is a here-string, not a heredoc
_HEREDOC = re.compile(r"(?<!<)<<(?!<)-?[ \t]*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")
_FSTRING_EXPR = re.compile(r"(?<!\{)\{([^{}]+)\}")
_STRING_PREFIX = re.compile(r"^([rRbBuUfF]{0,2})('''|\"\"\"|'|\")")
MAX_LITERALS = 500
MAX_HEREDOCS = 200  # heredocs looked into per call; later ones are read as plain lines
# the first word after an interpreter and its flags (`python -u`, `python3 -B`, `-W ignore` with its argument; `-c`
# is no flag: its code is no script's name), or the module after `-m`: a script it runs
_RUNS = re.compile(r"(?:python3?|bash|sh)(?:\s+(?:-[WXo]\s*(?!-)\S+|-(?![cmWXo]\b)[A-Za-z]+))*\s+(-m\s+)?(\S+)")
# a script run as a program by its path (`./seg.py`, `nohup /workspace/seg.py`), where a command starts
_EXECUTES = re.compile(r"(?:^|[;&|(`]|\b(?:then|do|else|exec|nohup|time|env|sudo))[ \t]*"
                       r"((?:\.\.?|~)?/[\w./-]*\.(?:py|sh))(?![\w./-])", re.MULTILINE)
_QUOTED = re.compile(r"'([^'\\]*)'|\"([^\"\\]*)\"")
_WORD = re.compile(r"[^\W_]+")  # the runs of letters and digits an echo is compared by
MAX_SPELL_STEPS = 200_000  # word-splitting steps per call; past them a word counts as spelt from the literals


# ------------------------------------------------------------------ python


def _python_tokens(code: str) -> Sequence[tokenize.TokenInfo] | None:
    """The code's tokens, or None where it is no Python. A call's code is read for its literals, its effective text
    and the scripts it writes, by the rules judge and the bound alike: 21 tokenizings of 7 codes a demo run (6-9 ms),
    so the last few codes' tokens are kept (up to TOKENS_KEPT_CHARS each: a larger one is tokenized each time)."""
    return _kept_tokens(code) if len(code) <= TOKENS_KEPT_CHARS else _tokens(code)


TOKENS_KEPT_CHARS = 20_000  # ~1 MB of tokens; 16 of them at most (`_kept_tokens`)


def _tokens(code: str) -> tuple[tokenize.TokenInfo, ...] | None:
    try:
        return tuple(tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return None


_kept_tokens = functools.lru_cache(maxsize=16)(_tokens)


def _string_body(token: str) -> tuple[str, str]:
    found = _STRING_PREFIX.match(token)
    if not found:
        return "", token
    prefix, quote = found.groups()
    body = token[len(prefix) + len(quote):]
    return prefix.lower(), body[: len(body) - len(quote)] if body.endswith(quote) else body


def _inert_strings(tokens: Sequence[tokenize.TokenInfo]) -> set[int]:
    """Indices of STRING tokens that do nothing: a bare string statement (docstring), or a direct
    argument of a printing/logging/writing call. A string used as data (a path, a dict key) is code."""
    inert: set[int] = set()
    frames: list[bool] = []  # per open bracket: is it the argument list of an output call?
    significant = [i for i, t in enumerate(tokens)
                   if t.type not in (tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT)]
    previous: dict[int, tokenize.TokenInfo | None] = {}
    following: dict[int, tokenize.TokenInfo | None] = {}
    for n, i in enumerate(significant):
        previous[i] = tokens[significant[n - 1]] if n else None
        following[i] = tokens[significant[n + 1]] if n + 1 < len(significant) else None
    for i, tok in enumerate(tokens):
        if tok.type == tokenize.OP and tok.string in "([{":
            before = previous.get(i)
            frames.append(tok.string == "(" and before is not None and before.type == tokenize.NAME
                          and before.string in OUTPUT_CALLS)
        elif tok.type == tokenize.OP and tok.string in ")]}":
            if frames:
                frames.pop()
        elif tok.type == tokenize.STRING:
            before, after = previous.get(i), following.get(i)
            statement = (before is None or before.type == tokenize.NEWLINE or before.string == ";") and (
                after is None or after.type in (tokenize.NEWLINE, tokenize.ENDMARKER) or after.string == ";")
            if statement or (frames and frames[-1]):
                inert.add(i)
    return inert


def python_effective(code: str) -> str:
    tokens = _python_tokens(code)
    if tokens is None:  # not Python after all (or broken): drop comments by pattern
        return re.sub(r"(?m)#.*$", "", code)
    starts = [0]
    for line in code.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    offset = lambda pos: starts[pos[0] - 1] + pos[1] if pos[0] - 1 < len(starts) else len(code)  # noqa: E731
    inert = _inert_strings(tokens)
    out: list[str] = []
    done = 0
    for index, tok in enumerate(tokens):
        if tok.type != tokenize.COMMENT and index not in inert:
            continue
        begin, end = offset(tok.start), offset(tok.end)
        out.append(code[done:begin])
        if tok.type == tokenize.STRING:
            prefix, body = _string_body(tok.string)
            # f-string expressions run; the literal text around them does not
            out.append(" ".join(_FSTRING_EXPR.findall(body)) if "f" in prefix else "''")
        done = end
    out.append(code[done:])
    return "".join(out)


def python_literals(code: str, scripts: dict[str, tuple[str, str]] | None = None) -> list[str]:
    """The string and number literals of Python code; with `scripts`, the scripts it writes whole from one string go
    there (name -> (language, body)), not into the literals."""
    tokens = _python_tokens(code)
    if tokens is None:
        return [a or b for a, b in re.findall(r"'([^'\n]*)'|\"([^\"\n]*)\"", code)]
    bodies: set[int] = set()
    if scripts is not None:
        bodies = _python_scripts(tokens, scripts)
    found = []
    for index, tok in enumerate(tokens):
        if index in bodies:
            continue
        if tok.type == tokenize.STRING:
            prefix, body = _string_body(tok.string)
            if "f" in prefix:  # the text around the expressions, and the strings inside them ({'model'})
                parts = _FSTRING_EXPR.split(body)
                found += parts[::2] + [a or b for expr in parts[1::2] for a, b in _QUOTED.findall(expr)]
            else:
                found.append(body)
        elif tok.type == tokenize.NUMBER:
            found.append(tok.string)
    return found


def _plain(token: tokenize.TokenInfo | None) -> str | None:
    """The text of a plain string literal (no f/b prefix), or None."""
    if token is None or token.type != tokenize.STRING:
        return None
    prefix, body = _string_body(token.string)
    return None if "f" in prefix or "b" in prefix else body


def _python_scripts(tokens: Sequence[tokenize.TokenInfo], scripts: dict[str, tuple[str, str]]) -> set[int]:
    """The scripts Python code writes whole from one string (`open('seg.py', 'w').write(CODE)`,
    `Path('seg.py').write_text(CODE)`, CODE a literal or a name bound to one) into `scripts`; the indices of the
    body tokens. A write goes to the file the latest `open`/`Path` named, and only the first write after it."""
    significant = [i for i, t in enumerate(tokens)
                   if t.type not in (tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT)]
    at = lambda n: tokens[significant[n]] if 0 <= n < len(significant) else None  # noqa: E731
    bound: dict[str, int] = {}  # NAME = "literal" statements: name -> the literal's token index
    target: tuple[str, str] | None = None  # (opener, file) of the latest open()/Path() call
    bodies: set[int] = set()
    for n, i in enumerate(significant):
        tok, after = tokens[i], at(n + 1)
        if tok.type != tokenize.NAME or after is None:
            continue
        if after.string == "=" and _plain(at(n + 2)) is not None and (at(n + 3) is None or at(n + 3).type in (
                tokenize.NEWLINE, tokenize.ENDMARKER)) and (n == 0 or at(n - 1).type == tokenize.NEWLINE):
            bound[tok.string] = significant[n + 2]
        if after.string != "(":
            continue
        if tok.string in ("open", "Path"):
            path = _plain(at(n + 2)) or ""
            # open's mode among its next few arguments; a Path is written by write_text
            mode = False
            for k in range(n + 3, n + 12):
                if at(k) is None or at(k).string == ")":
                    break
                mode = mode or bool(re.fullmatch(r"[wax]t?\+?", _plain(at(k)) or ""))
            target = (tok.string if tok.string == "Path" or mode else "read", path)
        elif tok.string in ("write", "write_text") and target and at(n - 1) is not None and at(n - 1).string == "." \
                and at(n + 3) is not None and at(n + 3).string == ")":
            arg = at(n + 2)
            index = significant[n + 2] if _plain(arg) is not None else bound.get(arg.string) if arg else None
            opener, path = target
            script = re.search(r"([\w.-]+)\.(py|sh)$", path)
            if index is not None and script and opener == ("Path" if tok.string == "write_text" else "open"):
                scripts[script.group(0)] = ("python" if script.group(2) == "py" else "bash",
                                            _plain(tokens[index]) or "")
                bodies.add(index)
            target = None
    return bodies


# ------------------------------------------------------------------ bash


def _bash_words(line: str) -> list[tuple[str, str]]:
    """(kind, text) tokens of one shell line: word, quoted, op; a comment ends the line."""
    tokens: list[tuple[str, str]] = []
    i, word = 0, ""
    while i < len(line):
        ch = line[i]
        if ch in "'\"":
            end = line.find(ch, i + 1)
            end = len(line) if end < 0 else end
            if word:
                tokens.append(("word", word))
                word = ""
            tokens.append(("quoted", line[i + 1:end]))
            i = end + 1
            continue
        if ch == "#" and not word:
            break
        if ch in ";&|":
            if word:
                tokens.append(("word", word))
                word = ""
            tokens.append(("op", ch))
        elif ch.isspace():
            if word:
                tokens.append(("word", word))
                word = ""
        else:
            word += ch
        i += 1
    if word:
        tokens.append(("word", word))
    return tokens


def _segments(tokens: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    segments: list[list[tuple[str, str]]] = [[]]
    for tok in tokens:
        if tok[0] == "op":
            segments.append([])
        else:
            segments[-1].append(tok)
    return [s for s in segments if s]


def _program(segment: list[tuple[str, str]]) -> str:
    words = [t for k, t in segment if k == "word" and "=" not in t.split("/")[0]]
    return words[0].rsplit("/", 1)[-1] if words else ""


def _bash_line(line: str, literals: list[str] | None) -> str:
    kept: list[str] = []
    for segment in _segments(_bash_words(line)):
        program = _program(segment)
        if program in NO_OPS:  # echo/printf print their arguments: text, not work
            if literals is not None:
                literals += [t for _, t in segment[1:]]
            continue
        for index, (kind, text) in enumerate(segment):
            if kind == "word":
                kept.append(text)
            elif index > 0 and segment[index - 1] == ("word", "-c") and program in INTERPRETERS:
                kept.append(effective(INTERPRETERS[program], text))  # python -c "...": code that runs
                if literals is not None:
                    literals += code_literals(INTERPRETERS[program], text)
            else:  # a quoted argument of a real command (a path, a pattern) is part of what runs
                kept.append(text)
                if literals is not None:
                    literals.append(text)
    return " ".join(kept)


def _unquoted(line: str) -> str:
    """The line with its quoted text and escaped characters blanked, cut at a comment (offsets kept)."""
    out, i, quote = [], 0, ""
    while i < len(line):
        ch = line[i]
        if ch == "\\" and quote != "'":  # an escaped character, outside quotes or in double ones
            out.append(" " * len(line[i:i + 2]))
            i += 1
        elif quote or ch in "'\"":
            quote = "" if ch == quote else quote or ch
            out.append(" ")
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            break
        else:
            out.append(ch)
        i += 1
    return "".join(out)


def _heredoc_start(line: str, ends: set[str]) -> re.Match[str] | None:
    """The first `<<WORD` of a line that starts a heredoc: not a shift in arithmetic (`$((1 << bits))`,
    `((x = m << n))`), which an unquoted `((` open before it marks when no line of the call (`ends`) is WORD."""
    if "((" not in line:
        return _HEREDOC.search(line)
    bare: str | None = None
    opened, done = 0, 0
    for found in _HEREDOC.finditer(line):
        if found.group(2) in ends:
            return found
        bare = _unquoted(line) if bare is None else bare
        opened += bare.count("((", done, found.start()) - bare.count("))", done, found.start())
        done = found.start()
        if opened <= 0:
            return found
    return None


def _split_heredocs(code: str) -> list[tuple[str, str, str]]:
    """(command line, heredoc body or '', language of body or '') in order."""
    lines, out, i, seen = code.split("\n"), [], 0, 0
    runs: set[str] | None = None
    ends = {line.strip() for line in lines} if "((" in code else set()  # the lines a heredoc could end at
    while i < len(lines):
        line = lines[i]
        found = _heredoc_start(line, ends) if seen < MAX_HEREDOCS else None
        if not found:
            out.append((line, "", ""))
            i += 1
            continue
        delimiter, body, seen = found.group(2), [], seen + 1
        i += 1
        while i < len(lines) and lines[i].strip() != delimiter:
            body.append(lines[i])
            i += 1
        i += 1
        before = _segments(_bash_words(line[: found.start()]))
        program = _program(before[-1]) if before else ""
        target = _SCRIPT_TARGET.search(line)
        if program in INTERPRETERS:
            language = INTERPRETERS[program]
        elif target and _runs_script(runs := runs if runs is not None else run_scripts(code),
                                     target.group(1).rsplit("/", 1)[-1]):
            language = "python" if target.group(2) == "py" else "bash"  # a script this call runs
        else:
            language = ""
        out.append((line, "\n".join(body), language))
    return out


# the script a heredoc is written to: `> seg.py`, `>> "seg.py"`, `tee seg.py`, `| tee -a seg.py`, and under a
# variable's folder as the brief names it (`> $WORKSPACE_DIR/seg.py`, `> "${WORKSPACE_DIR}/seg.py"`)
_SCRIPT_TARGET = re.compile(r"(?:>\s*|\btee\s+(?:-a\s+)?)['\"]?((?:\$\{?\w{1,64}\}?/)?[\w./-]+\.(py|sh))")


def written_scripts(code: str) -> dict[str, tuple[str, str]]:
    """The scripts a shell call writes with a heredoc (`cat > check.py <<EOF`): file name -> (language, body), so a
    later call that runs the script can be read with the code it runs."""
    found: dict[str, tuple[str, str]] = {}
    if "<<" not in code:
        return found
    for line, body, _ in _split_heredocs(code):
        target = _SCRIPT_TARGET.search(line) if body else None
        if target:
            found[target.group(1).rsplit("/", 1)[-1]] = ("python" if target.group(2) == "py" else "bash", body)
    return found


def run_scripts(code: str) -> set[str]:
    """The file names of the scripts a call runs: with an interpreter (`python3 /workspace/check.py ...`, `python -m
    check` runs check.py) or by their path (`./check.py`)."""
    names = {(word.rsplit(".", 1)[-1] + ".py" if module else word).rsplit("/", 1)[-1]
             for module, word in _RUNS.findall(code)}
    return names | {path.rsplit("/", 1)[-1] for path in _EXECUTES.findall(code)}


def _runs_script(runs: set[str], name: str) -> bool:
    """Whether a word an interpreter runs names `name` (the set is found once per call, not per heredoc)."""
    return any(name in word for word in runs)


def bash_effective(code: str, literals: list[str] | None = None,
                   scripts: dict[str, tuple[str, str]] | None = None) -> str:
    """The shell code as it runs; with `literals`, its literals appended; with `scripts`, the bodies of the scripts
    it writes and does not run itself (name -> (language, body)) go there, not into `literals`."""
    parts = []
    for line, body, language in _split_heredocs(code):
        parts.append(_bash_line(line, literals))
        target = _SCRIPT_TARGET.search(line) if body and not language and scripts is not None else None
        if body and language:
            parts.append(effective(language, body))
            if literals is not None:
                literals += code_literals(language, body)
        elif target:
            scripts[target.group(1).rsplit("/", 1)[-1]] = ("python" if target.group(2) == "py" else "bash", body)
        elif body and literals is not None:
            literals.append(body)
    return "\n".join(parts)


# ------------------------------------------------------------------ both


def effective(language: str, code: str) -> str:
    """The code with comments, string literals and no-op prints removed (what runs, roughly)."""
    return bash_effective(code) if language == "bash" else python_effective(code)


def code_literals(language: str, code: str, limit: int | None = MAX_LITERALS) -> list[str]:
    """The text the code could print without computing anything: its string and number literals (the first
    `limit`; all of them with None, the code being bounded by its caller)."""
    if language == "bash":
        found: list[str] = []
        bash_effective(code, found)
        return found[:limit]
    return python_literals(code)[:limit]


def literal_words(language: str, code: str, limit: int | None = MAX_LITERALS) -> set[str]:
    """The words (case-folded) of the code's string and number literals: text the agent typed, not computed. A shell
    call with more heredocs than are looked into types every word it holds (the later bodies are read as lines)."""
    if language == "bash" and sum(1 for _ in itertools.islice(_HEREDOC.finditer(code), MAX_HEREDOCS + 1)) > \
            MAX_HEREDOCS:
        return {w.casefold() for w in _WORD.findall(code)}
    return {w.casefold() for lit in code_literals(language, code, limit) for w in _WORD.findall(lit)}


class Authored:
    """The literal words of every call so far, each with the index of the first call that typed it: a line a later
    call shows (`cat run.log`) made only of them is text the agent wrote earlier (a log forged with a heredoc, a
    script that only prints), replayed. Bounded by what is added (the calls' analysed code).

    A script a shell call writes with a heredoc (or a Python call from one string, `open('seg.py', 'w').write(CODE)`)
    is typed whole too, but once a call has run it (`python -m seg`, `./seg.py` count), output is read
    as the same code run at once is: only the script's literals are typed (`print(type(model).__name__)` in
    `seg.py` computes the name it prints when `python3 seg.py` runs; `cat seg.py` before that shows it typed).
    A script's name words are typed from the call after the one that writes it until the call that first runs it:
    kept per word as merged spans, so a lookup is one bisection, not a walk over every script and every run
    (an honest 1000-call write-then-run loop took 83 CPU-s to read that way)."""

    def __init__(self) -> None:
        self.first: dict[str, int] = {}
        self.scripts: dict[str, dict[str, int]] = {}  # a word of a written script's code -> {script: first call}
        self.runs: dict[str, int] = {}  # a word an interpreter runs (`run_scripts`) -> the first call running it
        self._first_run: dict[str, int] = {}  # script name -> the first call running it (cache)
        self._spans: dict[str, tuple[list[int], list[int]]] = {}  # word -> merged spans' starts and ends (cache)

    def add(self, index: int, words: set[str]) -> None:
        for word in words:
            self.first.setdefault(word, index)

    def add_call(self, index: int, language: str, code: str) -> None:
        """The words call `index` typed: its literals, and the words of each script it writes and does not run;
        and the scripts it runs."""
        self._first_run.clear()
        self._spans.clear()
        for word in run_scripts(code):
            self.runs.setdefault(word, index)
        scripts: dict[str, tuple[str, str]] = {}
        if language == "bash" and sum(1 for _ in itertools.islice(_HEREDOC.finditer(code), MAX_HEREDOCS + 1)) <= \
                MAX_HEREDOCS:
            found: list[str] = []
            bash_effective(code, found, scripts)
            self.add(index, {w.casefold() for lit in found for w in _WORD.findall(lit)})
        elif language == "python":
            literals = python_literals(code, scripts)
            self.add(index, {w.casefold() for lit in literals for w in _WORD.findall(lit)})
        else:
            self.add(index, literal_words(language, code, None))
        for name, (script_language, body) in scripts.items():
            literals = literal_words(script_language, body, None)
            self.add(index, literals)
            for word in {w.casefold() for w in _WORD.findall(body)} - literals:
                self.scripts.setdefault(word, {}).setdefault(name, index)

    def before(self, index: int) -> _Before:
        """The words typed before call `index` (a written script's code words only while no call up to `index` has
        run it: their output may be shown by this call, a background run's log)."""
        return _Before(self, index)

    def first_run(self, name: str) -> int:
        """The first call that ran script `name` (an interpreter's argument naming it), or a number past every call."""
        if name not in self._first_run:
            self._first_run[name] = min((i for word, i in self.runs.items() if name in word), default=1 << 62)
        return self._first_run[name]

    def script_typed(self, word: str, index: int) -> bool:
        """Whether call `index` falls after a call that wrote a script holding `word` and before any call ran it."""
        if word not in self._spans:
            spans = sorted((first + 1, self.first_run(name) - 1) for name, first in self.scripts[word].items())
            starts: list[int] = []
            ends: list[int] = []
            for start, end in spans:
                if start > end:
                    continue
                if starts and start <= ends[-1] + 1:
                    ends[-1] = max(ends[-1], end)
                else:
                    starts.append(start)
                    ends.append(end)
            self._spans[word] = starts, ends
        starts, ends = self._spans[word]
        at = bisect.bisect_right(starts, index) - 1
        return at >= 0 and index <= ends[at]


class _Before:
    """The authored words typed by calls before one call (a container for `_Spelling`)."""

    def __init__(self, authored: Authored, index: int) -> None:
        self.authored, self.index = authored, index

    def __contains__(self, word: object) -> bool:
        if not isinstance(word, str):
            return False
        if self.authored.first.get(word, self.index) < self.index:
            return True
        return word in self.authored.scripts and self.authored.script_typed(word, self.index)


def observed_output(language: str, code: str, stdout: str, earlier: _Before | None = None,
                    typed: set[str] | None = None) -> str:
    """stdout without the lines that only repeat the code's literals (an echo of a keyword is no evidence), or,
    with `earlier`, literals earlier calls typed (a log the agent wrote and now shows with `cat`); `typed` is the
    call's own literal words when the caller has them already.

    Compared without case and word by word: a line is an echo when each of its words is a literal's word or
    several of them run together, so `'MODEL LOADED'.lower()`, `'mo' + 'del loaded'` and `f"{'model'} loaded"`
    are echoes as `'model loaded'` is. A word computed otherwise (a shape, a digest) keeps the line."""
    # a literal echoed whole is words of literals too: the word check alone marks it, with no pass removing the
    # literals first (that pass compiled an alternation of up to 500 literals per call)
    spelling = _Spelling(literal_words(language, code) if typed is None else typed, earlier)
    kept = []
    for line in (stdout or "").split("\n"):
        if any(not spelling.spelt(w) for w in _WORD.findall(line.casefold())):
            kept.append(line)
    return "\n".join(kept)


class _Spelling:
    """Whether a word is one of the literals' words or, letters only, several run together (`mo` + `del`), by dynamic
    programming over the word's positions; bounded per call (past the budget a word counts as spelt: an
    outsized output loses evidence rather than letting an echo count)."""

    def __init__(self, own: set[str], earlier: _Before | None = None) -> None:
        self.own, self.earlier = own, earlier
        # pieces run together are the call's own (`'mo' + 'del'`); an earlier call's words count whole
        self.lengths = sorted({len(w) for w in own})
        self.steps = 0
        self.known: dict[str, bool] = {}

    def spelt(self, word: str) -> bool:
        if self.known_word(word):
            return True
        if not word.isalpha():  # a number or a digest is computed unless it is a literal itself
            return False
        if word not in self.known:
            reach = [True] + [False] * len(word)
            for end in range(1, len(word) + 1):
                self.steps += len(self.lengths)
                if self.steps > MAX_SPELL_STEPS:
                    return True
                reach[end] = any(n <= end and reach[end - n] and self.known_word(word[end - n:end])
                                 for n in self.lengths)
            self.known[word] = reach[-1]
        return self.known[word]

    def known_word(self, word: str) -> bool:
        return word in self.own or (self.earlier is not None and word in self.earlier)
