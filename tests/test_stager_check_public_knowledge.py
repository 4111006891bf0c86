"""The stager conformance check's public-knowledge replay (automedbench_testkit.stagercheck) on a real stager
(segmentation/kidney, KiTS layout): a replay past the bar on one target staging is tried on further stagings
(`CONFIRMATIONS`), so a public order still fails the check while a few cases coinciding by chance no longer do.
With 8 of 10 cases drawn per staging, replaying another staging by sorted id position matched 5 or more cases
about once in 900 checks (a Poisson(0.8) tail): the segmentation conformance file's 8 checks failed CI about once
in a hundred runs."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import attrs
from automedbench.plugins import registry
from automedbench.stagesecret import StagingSecret
from automedbench_testkit import stagercheck

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "plugins" / "segmentation" / "tests"))
from test_segmentation_stager_conformance import kits  # the KiTS fixture download writer

TASK = "segmentation/kidney"


def _check(tmp_path: Path) -> stagercheck.CheckResult:
    spec = attrs.evolve(registry().task(TASK)[1], case_count=8)
    (result,) = stagercheck.check_stager(spec, kits(tmp_path / "download"), tmp_path / "work",
                                         checks=["public-knowledge"])
    return result


def test_a_public_order_fails_on_every_staging(tmp_path, monkeypatch):
    """A stager taking the download's first cases in its own order under numbered ids: replaying another
    staging by case id scores 1.0 on the target and on every further staging."""
    monkeypatch.setattr(StagingSecret, "shuffled", lambda self, items, purpose="order": list(items))
    monkeypatch.setattr(StagingSecret, "id_stream",
                        lambda self, prefix="case", purpose="case ids", sep="_":
                        (f"{prefix}{sep}{i:03d}" for i in itertools.count()))
    result = _check(tmp_path)
    assert not result.passed
    scores = ", ".join(["1.000"] * stagercheck.CONFIRMATIONS)
    assert f"by same case id scores {scores} and 1.000 on {stagercheck.CONFIRMATIONS + 1} stagings" in result.reason, \
        result.reason


def test_a_chance_coincidence_on_one_staging_is_confirmed_before_it_fails(tmp_path, monkeypatch):
    """The first replay scored as if every case had coincided (what 5 of 8 chance matches approach); the
    confirming replay on a further staging, scored for real, stays at chance: the check passes."""
    real_score, real_further = stagercheck.StagerProbe.score, stagercheck.StagerProbe.further
    seen: list[str] = []

    def score(self, root, submission):
        seen.append(submission.name)
        if submission.name.startswith("replay-") and sum(n.startswith("replay-") for n in seen) == 1:
            return 1.0, 1.0
        return real_score(self, root, submission)

    further = []
    monkeypatch.setattr(stagercheck.StagerProbe, "score", score)
    monkeypatch.setattr(stagercheck.StagerProbe, "further", lambda self, k: further.append(k) or real_further(self, k))
    result = _check(tmp_path)
    assert result.passed, result.reason
    assert further and any(n.startswith("confirm-") for n in seen), seen
