"""Red-team attacks run end to end on the isolating local backend (bubblewrap): tests/redteam_runs.py holds the
attacks, the invariants checked after each and what counts as a gap; the other backends have their own files
(test_redteam_runs_plain.py, test_redteam_runs_docker.py) so that pytest-xdist runs them side by side. Here
also the checks that need no attack world."""

from __future__ import annotations

import gzip
import json

import pytest
from automedbench.runner import Run, RunOptions
from redteam_runs import *  # noqa: F403 - the shared tests and their `world` fixture (its __all__), collected here
from redteam_runs import Script, _nifti_header
from review_steps import DEMO, register_agent

# A full run per attack: minutes; scripts/test.sh runs it in the slow tier.
pytestmark = pytest.mark.slow
BACKEND = "local"


def test_demo_staging_has_a_secret_seed(reg, tmp_path):
    """Two stagings of the demo differ: the generator and the seed in the task file cannot rebuild references."""
    from automedbench import staging

    track, task = reg.task(DEMO)
    one = staging.stage(track, task, tmp_path / "a")
    two = staging.stage(track, task, tmp_path / "b")
    ref = "case_000/organ.nii.gz"
    assert (one.private / ref).read_bytes() != (two.private / ref).read_bytes()
    stamp = json.loads((tmp_path / "a" / task.id / "staging.json").read_text())
    assert str(task.params.get("seed")) not in json.dumps(stamp)


def test_nifti_precheck_refuses_declared_sizes(tmp_path):
    from automedbench_segmentation.io import precheck

    cases = {"ext": _nifti_header(352 + 16, (1 << 31) - 16), "gap": _nifti_header(1e9, None),
             "nan": _nifti_header(float("nan"), None)}
    for name, head in cases.items():
        path = tmp_path / f"{name}.nii.gz"
        with gzip.open(path, "wb") as fh:
            fh.write(head + bytes(4096))
        with pytest.raises(ValueError):
            precheck(path)
    fine = tmp_path / "fine.nii.gz"
    with gzip.open(fine, "wb") as fh:
        fh.write(_nifti_header(352, None) + bytes(32 * 32 * 16))
    precheck(fine)


def test_silent_downgrade_is_recorded_and_warned(reg, tmp_path, data_root, monkeypatch):
    """Without bubblewrap `--sandbox local` runs plain: the header says local-plain and a warning is sent."""
    import automedbench.sandboxes.local as local

    register_agent(reg, Script)
    monkeypatch.setattr(local, "bwrap_path", lambda: None)
    seen: list[dict] = []
    runner = Run(RunOptions(DEMO, "lite", Script.name, sandbox="local", out=tmp_path, data_root=data_root,
                            agent_options={"turns": [[("bash", "echo hi")]]}), reg, seen.append)
    result = runner.execute()
    assert result.header.sandbox == "local-plain" and result.isolation.sandbox == "local-plain"
    warnings = [e["text"] for e in seen if e["kind"] == "warning"]
    assert len(warnings) == 2 and warnings[0].startswith("WARNING: bubblewrap is not usable")
    assert warnings[1].startswith("UNVERIFIED: no filesystem isolation") and not result.isolation.verified
    assert any("no filesystem isolation" in gap for gap in result.isolation.gaps)
    refused = Run(RunOptions(DEMO, "lite", Script.name, sandbox="local", out=tmp_path, data_root=data_root,
                             require_isolation=True), reg)
    from automedbench.errors import UserError

    with pytest.raises(UserError, match="isolation is required"):
        refused.execute()
    assert not refused.run_dir.exists()


def test_cli_progress_survives_lone_surrogates(reg, tmp_path, data_root):
    """A lone surrogate in the model's words must not crash the terminal progress line (a harness failure)."""
    from automedbench.cli import main
    from click.testing import CliRunner

    register_agent(reg, Script)
    outcome = CliRunner().invoke(main, ["run", "--task", DEMO, "--agent", Script.name, "--agent-option",
                                        "text=<surrogates>", "--out", str(tmp_path), "--data-root", str(data_root)])
    assert outcome.exit_code == 0, outcome.output
    assert "\\ud800 surrogate" in outcome.output

