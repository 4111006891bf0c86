"""BLEU-1..4, METEOR and ROUGE-L exactly as the original scorer computes them: pycocoevalcap's COCO
scorers on MLRG-preprocessed text (full stops detached, no lower-casing, whitespace tokens), corpus-level
(BLEU's n-gram statistics pooled over all cases, METEOR the jar's aggregate, ROUGE-L the case mean).

METEOR runs pycocoevalcap's bundled meteor-1.5.jar on Java: one JVM per process (seconds to start), kept for
the process's later calls (a warm evaluator serves many evaluations with it)."""

from __future__ import annotations

import atexit
import contextlib
import io
import shutil
from typing import TYPE_CHECKING, Any

from attrs import define, field

from .text import mlrg_preprocess

if TYPE_CHECKING:
    from automedbench.api import ScoringNeed


class JavaMissing(RuntimeError):
    """METEOR needs a Java runtime; plugins/report_gen/setup.sh installs one."""


@define
class NLGScores:
    bleu_n: list[float]  # corpus BLEU-1..4
    meteor: float | None
    rouge_l: float
    per_case_bleu: list[float] = field(factory=list)  # per case mean of BLEU-1..4
    per_case_meteor: list[float] = field(factory=list)
    per_case_rouge_l: list[float] = field(factory=list)

    @property
    def bleu(self) -> float:
        return sum(self.bleu_n) / len(self.bleu_n)


def _coco(texts: list[str], one_line: bool = False) -> dict[int, list[str]]:
    """Texts as pycocoevalcap takes them. METEOR's jar reads one request per line, so for it (`one_line`)
    line breaks become spaces: a report with a newline would otherwise break the protocol (the original's
    scorer fails on one); BLEU and ROUGE-L keep them, as the original does."""
    done = (mlrg_preprocess(t) for t in texts)
    # and a pipe becomes a space: " ||| " separates the jar's fields, so a report holding it could write its
    # own request (an agent's text steering its own METEOR score)
    return {i: [" ".join(t.replace("|", " ").splitlines()) if one_line else t] for i, t in enumerate(done)}


def bleu(references: list[str], hypotheses: list[str]) -> tuple[list[float], list[float]]:
    """Corpus BLEU-1..4 and the per-case mean of BLEU-1..4 (pycocoevalcap, closest reference length)."""
    from pycocoevalcap.bleu.bleu import Bleu

    with contextlib.redirect_stdout(io.StringIO()):  # the scorer prints its n-gram ratios
        corpus, per_case = Bleu(4).compute_score(_coco(references), _coco(hypotheses), verbose=0)
    cases = [sum(per_case[n][i] for n in range(4)) / 4 for i in range(len(references))]
    return [float(v) for v in corpus], cases


def rouge_l(references: list[str], hypotheses: list[str]) -> tuple[float, list[float]]:
    """ROUGE-L F (beta 1.2, longest common subsequence of whitespace tokens), mean over cases."""
    from pycocoevalcap.rouge.rouge import Rouge

    mean, per_case = Rouge().compute_score(_coco(references), _coco(hypotheses))
    return float(mean), [float(v) for v in per_case]


_METEOR: Any = None  # one METEOR JVM per process, reused by every evaluation it serves (closed at exit)


def _meteor_scorer() -> Any:
    """The process's METEOR scorer, started on first use and again if its JVM has died."""
    global _METEOR
    if _METEOR is not None and _METEOR.meteor_p.poll() is None:
        return _METEOR
    _close_meteor()
    from pycocoevalcap.meteor.meteor import Meteor

    _METEOR = Meteor()
    return _METEOR


def _close_meteor() -> None:
    global _METEOR
    scorer, _METEOR = _METEOR, None
    if scorer is None:
        return
    with contextlib.suppress(Exception):
        scorer.meteor_p.stdin.close()
        scorer.meteor_p.kill()
        scorer.meteor_p.wait()
    scorer.__class__ = _Closed  # its __del__ would close the pipe a second time


atexit.register(_close_meteor)


def java_need() -> ScoringNeed:
    """METEOR's Java runtime: where `java` is on PATH ("" when it is not), and the fix when it is not."""
    from automedbench.api import ScoringNeed

    return ScoringNeed("a Java runtime (java, for METEOR)", shutil.which("java") or "",
                       "METEOR needs Java (java not on PATH): run plugins/report_gen/setup.sh "
                       "or install a headless JRE (apt-get install default-jre-headless)")


def java_missing() -> str | None:
    """Why METEOR cannot run here (no `java` on PATH), naming the fix; None when it can."""
    need = java_need()
    return None if need.found else need.gap


def meteor(references: list[str], hypotheses: list[str]) -> tuple[float, list[float]]:
    """METEOR 1.5 (`-l en -norm`): the jar's aggregate over all cases, and its per-case scores.

    Each call sends its own SCORE lines and one EVAL over exactly those, so a reused JVM gives the same
    numbers as a fresh one; a call that fails drops the JVM (the next call starts a new one)."""
    missing = java_missing()
    if missing is not None:
        raise JavaMissing(missing)
    scorer = _meteor_scorer()
    try:
        score, per_case = scorer.compute_score(_coco(references, True), _coco(hypotheses, True))
    except BaseException:
        _close_meteor()
        raise
    return float(score), [float(v) for v in per_case]


class _Closed:
    pass


def score_texts(references: list[str], hypotheses: list[str], with_meteor: bool = True) -> NLGScores:
    """All three text metrics over one corpus (texts already reduced to the scored section)."""
    if len(references) != len(hypotheses):
        raise ValueError(f"{len(references)} references but {len(hypotheses)} hypotheses")
    if not references:
        return NLGScores([0.0] * 4, 0.0 if with_meteor else None, 0.0)
    bleu_n, bleu_cases = bleu(references, hypotheses)
    rouge, rouge_cases = rouge_l(references, hypotheses)
    met, met_cases = meteor(references, hypotheses) if with_meteor else (None, [])
    return NLGScores(bleu_n, met, rouge, bleu_cases, met_cases, rouge_cases)
