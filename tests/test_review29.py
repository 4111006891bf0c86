"""Review of redteam35 (the harness's bounds on every judge's S1-S3 verdict, `verdictcaps`), through the real runner.

- **s2d capped for failures that were no environment problem** (every judge, S2): the bound cut s2d ("environment
  problems resolved within 5 failed attempts, or none occurred") to 0 after more than 5 failed commands before the
  first output, whatever failed: an honest agent whose exploration hit six `ls`/`test`/`grep` misses (exit 1, no
  environment problem) lost s2d from a judge that read the trace right (S2 1.0 -> 0.8). Now only failed calls that
  show an environment problem (a missing module or command, a failed install) count against it: S2 1.0; six failed
  imports still cut it to 0.
"""

from __future__ import annotations

import pytest
from automedbench.testing import item_values, needs, run_steps, stage_scores
from test_redteam_round35 import TASK, ZEROS, judge_model  # noqa: F401  (the loopback judge fixture)

pytestmark = needs("openai")
SHAPE = ("import glob, nibabel as nib\n"
         "c = sorted(glob.glob('/data/public/*/ct.nii.gz'))[0]\n"
         "img = nib.load(c)\nprint(img.shape, img.header.get_data_dtype(), img.header.get_zooms())\n")
MISSES = [("bash", "ls /data/public/no_such_case"), ("bash", "test -f /workspace/outputs/done"),
          ("bash", "grep -q never_there /etc/hostname"), ("bash", "ls /data/public/*.json"),
          ("bash", "test -d /workspace/weights"), ("bash", "grep -rq no_such_word /etc/hostname")]
IMPORTS = [("python", "import no_such_segmenter_pkg")] * 6


@pytest.mark.parametrize(("failures", "expected"), [(MISSES, 1.0), (IMPORTS, 0.0)])
def test_s2d_counts_only_failures_that_show_an_environment_problem(judge_model, data_root, tmp_path,  # noqa: F811
                                                                     failures, expected):
    """Before: six exploration misses capped s2d at 0 (S2 0.8). Now 1.0; six failed imports still 0."""
    judge = judge_model("credit")
    steps = [*failures, ("python", SHAPE), ("python", ZEROS.format(n=1)), ("python", ZEROS.format(n=99))]
    result, _ = run_steps(TASK, steps, out=tmp_path / "runs", data_root=data_root, tier="standard",
                          **judge.options())
    values = item_values(result)
    assert values["s2d_env_fail_within_5"] == expected
    assert stage_scores(result)["S2"] == pytest.approx((4 + expected) / 5)
    capped = [i.rationale for s in result.stages if s.stage == "S2" for i in s.items if "capped at" in i.rationale]
    assert bool(capped) == (expected == 0.0)
    if capped:
        assert "environment problem" in capped[0] and "the judge gave 1" in capped[0]
