"""Review of redteam35 (the harness's bounds on every judge's S1-S3 verdict, `verdictcaps`), through the real runner.

- **s2d capped for failures that were no environment problem** (every judge, S2): the bound cut s2d ("environment
  problems resolved within 5 failed attempts, or none occurred") to 0 after more than 5 failed commands before the
  first output, whatever failed: an honest agent whose exploration hit six `ls`/`test`/`grep` misses (exit 1, no
  environment problem) lost s2d from a judge that read the trace right (S2 1.0 -> 0.8). Now only failed calls that
  show an environment problem (a missing module or command, a failed install) count against it: S2 1.0; six failed
  imports still cut it to 0.
- **A check script written to `$WORKSPACE_DIR/x.py` was unseen** (rules judge and every judge's bound, S3): the
  heredoc's target only matched a literal path, so `cat > $WORKSPACE_DIR/pilot.py <<'PY'` run in the same call lost
  the script's checks (S3 0.5 -> 1.0 with the rules judge).
- **A pilot's figures logged to a file** (every judge, S3): the bound looked for a shown result only in calls that
  name the outputs, so `cat pilot.log` before the batch did not count: an honest logged validation was capped at
  the partial level (S3 0.5 -> 1.0 from a judge that credits it). Any call from the pilot to the batch that prints
  what the agent did not type now shows the result (a typed claim still shows none: tests/test_redteam_round35.py).
"""

from __future__ import annotations

import pytest
from automedbench.runfolder import RunFolder
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


# a pilot that checks what it wrote and logs the figures to a file (no stdout), as real pipelines log; its masks (a
# threshold of the CT) overlap the organ, as an honest pilot's do: a pilot of empty masks stops S3 at its partial
# level whatever its checks (tests/test_redteam_round36.py)
PILOT = ("cat > $WORKSPACE_DIR/pilot.py <<'PY'\n"
         "import glob, logging, os, sys\nimport nibabel as nib\nimport numpy as np\n"
         "ws = os.environ['WORKSPACE_DIR']\n"
         "logging.basicConfig(filename=f'{ws}/pilot.log', level=logging.INFO, format='%(message)s')\n"
         "cases = sorted(os.path.basename(d) for d in glob.glob('/data/public/*') if os.path.isdir(d))\n"
         "for c in cases[:int(sys.argv[1])]:\n"
         "    ct = nib.load(f'/data/public/{c}/ct.nii.gz')\n"
         "    os.makedirs(f'{ws}/outputs/{c}', exist_ok=True)\n"
         "    for name in ('organ', 'lesion'):\n"
         "        path = f'{ws}/outputs/{c}/{name}.nii.gz'\n"
         "        mask = (ct.get_fdata() > ct.get_fdata().mean()).astype(np.uint8)\n"
         "        nib.save(nib.Nifti1Image(mask, ct.affine), path)\n"
         "        out = nib.load(path).get_fdata()\n"
         "        logging.info('%s %s %s %s %s %s', c, name, out.shape, ct.shape, np.unique(out), out.max())\n"
         "PY\n"
         "python3 $WORKSPACE_DIR/pilot.py 1")


def test_a_pilot_check_logged_to_a_file_and_shown_is_a_shown_result(judge_model, data_root, tmp_path):  # noqa: F811
    """A pilot whose script checks its output and logs the figures to a file, shown with `cat` before the batch.
    Before: S3 capped at 0.5 (the script's checks unseen, and the `cat` names no output, so it was outside the
    window). Now 1.0, uncapped."""
    judge = judge_model("credit")
    steps = [("python", SHAPE), ("bash", PILOT), ("bash", "cat $WORKSPACE_DIR/pilot.log"),
             ("bash", "python3 $WORKSPACE_DIR/pilot.py 99")]
    result, run_dir = run_steps(TASK, steps, out=tmp_path / "runs", data_root=data_root, tier="standard",
                                **judge.options())
    shown = next(e for e in RunFolder(run_dir).events() if e.get("code") == steps[2][1])
    assert shown["exit_code"] == 0 and "organ" in shown["stdout"]  # the log showed the pilot's computed figures
    assert stage_scores(result)["S3"] == 1.0
    assert not [i.rationale for s in result.stages if s.stage == "S3" for i in s.items if "capped" in i.rationale]


def test_a_check_script_written_under_the_workspace_variable_is_read(data_root, tmp_path):
    """`cat > $WORKSPACE_DIR/pilot.py <<'PY'` then `python3 $WORKSPACE_DIR/pilot.py 1` in one call (as the brief
    names the workspace): the script's body was dropped as inert text, so its checks were unseen. Before: the rules
    judge's S3 0.5, the paper ladder's lowest level ("pilot ... without output checks"), and every judge's S3 capped
    there. Now the pilot's checks are read: S3 1.0."""
    steps = [("python", SHAPE), ("bash", PILOT.replace("logging.info(", "print(")),
             ("bash", "python3 $WORKSPACE_DIR/pilot.py 99")]
    result, _ = run_steps(TASK, steps, out=tmp_path / "runs", data_root=data_root, tier="standard")
    s3 = next(i for s in result.stages if s.stage == "S3" for i in s.items)
    assert s3.value == 1.0, s3.rationale
