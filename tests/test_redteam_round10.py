"""Round ten of the red team: attacks through the real runner that got through, each now a test that failed before.

- **A number no JSON can hold** (class 7, agent bytes): the evaluator writes its record with `allow_nan=False`, and
  nothing between a track's numbers and that write kept them finite. An enhancement output saved as float128
  (a float kind the contract accepts) holding one finite pixel beyond float64's range passed the contract's
  finiteness check, and the output facts computed in float64 (`out_max`) became `inf`: the evaluator exited on
  "Out of range float values are not JSON compliant" and the run ended `infrastructure_failure` (which sweeps retry
  and leaderboards drop). Now every number of the evaluation that is not finite is written as null (a Task value
  as 0), counted in the metric's components, whatever track made it.
- **A reply's cost or token count too large to record** (class 7, an agent plugin's numbers): `turn_problem` refused a
  NaN cost and a token count that is not a count, but two replies of a finite 1e308 USD each summed to an infinite
  run cost, and a token count of 10**5000 has no decimal text Python will write: the run ended in a traceback with
  no result.json at all and its workspace image still mounted. A reply now counts at most 10**12 tokens of each
  kind and 10**9 USD; past that it is the agent's failure, like a NaN. And any fault while scoring or writing the
  record (a track hook's bug) now releases the workspace before the error propagates.
- **A NIfTI header nibabel refuses** (synthesis): the contract turned ValueError into a reason, but nibabel refuses a
  bad magic or an unknown data type with HeaderDataError, which escaped: the pre-submit gate failed open (a broken
  first case and nothing else was accepted as a submission, no E5) and the checker said 'checker error'. Every
  header refusal is now the contract's reason, for the gate and the checker alike.

Held (a test here, cheap): the synthesis demo's input in six encodings (float64, big-endian, NIfTI-2, uncompressed,
scl_slope, scl_inter with a 512 KB extension) scores bit for bit the input's staged SSIM after the SSIM rewrite.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import ClassVar

import pytest
from automedbench.agent import Agent
from automedbench.records import AgentTurn, ToolCall
from automedbench.testing import register_agent, register_toy_track, run_steps, run_task

# each case's input (2x2 repeated for super-resolution), returned as float128 with one pixel finite there but past
# float64's largest value
BEYOND_FLOAT64 = """
import os, numpy as np
scale = {scale}
data, out = os.environ['DATA_DIR'], os.path.join(os.environ['WORKSPACE_DIR'], 'outputs')
for case in sorted(os.listdir(data)):
    if not os.path.isfile(os.path.join(data, case, 'input.npy')):
        continue
    image = np.load(os.path.join(data, case, 'input.npy')).repeat(scale, 0).repeat(scale, 1).astype(np.longdouble)
    image[0, 0] = np.longdouble('1e4000')
    assert np.isfinite(image).all() and image.dtype.kind == 'f'
    os.makedirs(os.path.join(out, case), exist_ok=True)
    np.save(os.path.join(out, case, 'enhanced.npy'), image)
print('written')
"""


@pytest.mark.slow  # one enhancement demo run each
@pytest.mark.parametrize(("task_id", "scale"), [("enhancement/demo-ldct", 1), ("enhancement/demo-sr", 2)])
def test_a_number_beyond_float64_in_an_output_never_fails_the_harness(data_root, tmp_path, task_id, scale):
    """Before: infrastructure_failure, 'evaluator failed: ... ValueError: Out of range float values are not JSON
    compliant: inf'. The error-code detectors read the null too (the super-resolution one compared it with a number)."""
    result, run_dir = run_steps(task_id, [("python", BEYOND_FLOAT64.format(scale=scale))], out=tmp_path / "runs",
                                data_root=data_root, warm_evaluator=False)
    assert result.state == "scored", (result.state, result.error)
    assert not [c for c in result.error_codes if c.code.startswith("H-")], result.error_codes
    evaluation = json.loads((run_dir / "evaluation.json").read_text())
    rows = evaluation["metric"]["per_case"]
    assert rows and all(row["valid"] for row in rows)  # the contract accepts these outputs: they are scored
    assert all(row["out_max"] is None for row in rows)  # the one number no JSON holds, written as null
    assert all(0 < row["ssim"] <= 1 for row in rows)  # everything else as it was
    assert evaluation["metric"]["components"]["non_finite_numbers"] == len(rows)
    assert result.task is not None and result.task.partial > 0


# ------------------------------------------------------------------ synthesis: one volume, six encodings (held)

# each case's input copied back in another encoding of the very same values: float64; big-endian float32; NIfTI-2;
# uncompressed bytes under the .gz name; halved values with scl_slope 2; values less 1024 in float64 with scl_inter
# 1024 and a 512 KB header extension. Each decodes to the input's float32 values exactly.
SIX_ENCODINGS = """
import gzip, os, numpy as np, nibabel as nib
data, out = os.environ['DATA_DIR'], os.path.join(os.environ['WORKSPACE_DIR'], 'outputs')
cases = sorted(c for c in os.listdir(data) if os.path.isfile(os.path.join(data, c, 'ct.nii.gz')))
for k, case in enumerate(cases):
    source = nib.load(os.path.join(data, case, 'ct.nii.gz'))
    volume, affine = np.asarray(source.dataobj, dtype=np.float32), source.affine
    kind = k % 6
    if kind == 0:
        image = nib.Nifti1Image(volume.astype(np.float64), affine)
    elif kind == 1:
        image = nib.Nifti1Image(volume.astype('>f4'), affine)
    elif kind == 2:
        image = nib.Nifti2Image(volume, affine)
    elif kind == 3:
        image = nib.Nifti1Image(volume, affine)
    elif kind == 4:
        image = nib.Nifti1Image(volume / np.float32(2), affine)
        image.header.set_slope_inter(2.0, 0.0)
    else:
        image = nib.Nifti1Image(volume.astype(np.float64) - 1024.0, affine)
        image.header.set_slope_inter(1.0, 1024.0)
        image.header.extensions.append(nib.nifti1.Nifti1Extension(6, b'x' * (512 << 10)))
    folder = os.path.join(out, case)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, 'sct.nii.gz')
    if kind == 3:  # gzipped by hand at another level (plain bytes under .nii.gz are invalid, as in the release)
        open(path, 'wb').write(gzip.compress(image.to_bytes(), compresslevel=1))
    else:
        nib.save(image, path)
print(len(cases), 'written')
"""


@pytest.mark.slow  # one synthesis demo run
def test_the_same_volume_in_any_encoding_scores_as_the_input_itself(data_root, tmp_path):
    """Held (the axial SSIM was rewritten for speed): every encoding the contract accepts scores bit for bit what
    the unchanged input scores at staging, is read as the input copy, and never more."""
    result, run_dir = run_steps("synthesis/demo", [("python", SIX_ENCODINGS)], out=tmp_path / "runs",
                                data_root=data_root, warm_evaluator=False)
    assert result.state == "scored", (result.state, result.error)
    rows = json.loads((run_dir / "evaluation.json").read_text())["metric"]["per_case"]
    assert len(rows) == 6 and all(row["valid"] for row in rows), rows
    assert all(row["ssim"] == row["ssim_identity"] for row in rows), [(r["ssim"], r["ssim_identity"]) for r in rows]
    assert all(row["same_as_input"] for row in rows)
    assert result.aggregate.rating not in ("A", "B"), result.aggregate.rating_reason


# ------------------------------------------------------------------ numbers an agent reports (class 7)


class Boastful(Agent):
    """One harmless call, then a submit; every reply reports `Boastful.numbers` (its tokens and cost)."""

    name = "redteam-boastful"
    numbers: ClassVar[dict] = {}

    def __init__(self, **options) -> None:
        self.turn = 0

    def next_turn(self, messages) -> AgentTurn:
        self.turn += 1
        call = (ToolCall("c1", "execute_code", json.dumps({"language": "bash", "code": "echo hi"})) if self.turn == 1
                else ToolCall("s", "submit_results", "{}"))
        return AgentTurn(f"turn {self.turn}", [call], **self.numbers)


@pytest.mark.parametrize("numbers", [{"cost_usd": 1e308}, {"tokens_in": 10 ** 5000}, {"tokens_out": 10 ** 5000}],
                         ids=["cost-summing-to-inf", "tokens-in-no-text", "tokens-out-no-text"])
def test_a_replys_numbers_too_large_to_record_are_the_agents_failure(reg, data_root, tmp_path, numbers):
    """Before: a traceback (ValueError: Out of range float values / Exceeds the limit for integer string
    conversion) out of the runner, no result.json, the workspace image left mounted."""
    register_toy_track()
    Boastful.numbers = numbers
    register_agent(Boastful, reg)
    result, run_dir = run_task("toy/vowels", Boastful.name, out=tmp_path / "runs", data_root=data_root, registry=reg)
    assert result.state == "agent_failure", (result.state, result.error)
    assert "not a" in (result.error or ""), result.error
    recorded = json.loads((run_dir / "result.json").read_text())
    assert recorded["state"] == "agent_failure"
    assert not (run_dir / "workspace").exists()


# ------------------------------------------------------------------ synthesis: a header nibabel refuses (class 7)

BAD_MAGIC = """
import gzip, os, numpy as np, nibabel as nib
data, out = os.environ['DATA_DIR'], os.path.join(os.environ['WORKSPACE_DIR'], 'outputs')
case = sorted(c for c in os.listdir(data) if os.path.isfile(os.path.join(data, c, 'ct.nii.gz')))[0]
source = nib.load(os.path.join(data, case, 'ct.nii.gz'))
raw = bytearray(nib.Nifti1Image(np.asarray(source.dataobj, dtype=np.float32), source.affine).to_bytes())
raw[344:348] = b'xx\\0\\0'  # the magic: nibabel raises HeaderDataError, not ValueError
os.makedirs(os.path.join(out, case), exist_ok=True)
open(os.path.join(out, case, 'sct.nii.gz'), 'wb').write(bytes(raw))
"""


@pytest.mark.slow  # one synthesis demo run
def test_a_header_nibabel_refuses_is_a_contract_reason_for_the_gate_and_the_checker(data_root, tmp_path):
    """Before: the contract turned only ValueError into a reason; nibabel's HeaderDataError escaped it, so the
    pre-submit gate failed open (one broken file and nothing else was accepted as a submission) and the checker's
    verdict was a 'checker error'."""
    result, run_dir = run_steps("synthesis/demo", [("python", BAD_MAGIC)], out=tmp_path / "runs",
                                data_root=data_root, warm_evaluator=False)
    events = [json.loads(line) for line in (run_dir / "trajectory.jsonl").read_text().splitlines()]
    submits = [e for e in events if e.get("name") == "submit_results"]
    assert submits and submits[0].get("refused") is True, submits
    assert "sct.nii.gz: " in submits[0]["result"]["reason"] and "magic" in submits[0]["result"]["reason"]
    assert not [e for e in events if "submit gate error" in str(e.get("note", ""))]
    case = next(c for c in json.loads((run_dir / "evaluation.json").read_text())["cases"] if c["present"])
    assert case["reasons"][0].startswith("sct.nii.gz: ") and "magic" in case["reasons"][0], case
    assert result.state == "scored"


def test_a_fault_while_recording_leaves_no_workspace_mounted(reg, data_root, tmp_path, monkeypatch, capsys):
    """What the unrecordable numbers above also showed: an exception out of scoring or the record's write (here a
    track hook's bug) left the run's workspace image loop-mounted on the host after the runner had returned, and
    no record of the run. Now the run is recorded as the harness's failure, naming the fault (traceback on
    stderr), its workspace released."""
    register_toy_track()
    track, _ = reg.task("toy/vowels")

    def broken_cap(task, metric):
        raise RuntimeError("a track hook's bug")

    monkeypatch.setattr(track, "rating_cap", broken_cap)
    result, run_dir = run_task("toy/vowels", "reference", out=tmp_path / "runs", data_root=data_root, registry=reg)
    assert result.state == "infrastructure_failure" and "a track hook's bug" in result.error
    assert "RuntimeError: a track hook's bug" in capsys.readouterr().err
    assert [p.name for p in (tmp_path / "runs").iterdir()] == [run_dir.name]
    recorded = json.loads((run_dir / "result.json").read_text())
    assert recorded["state"] == "infrastructure_failure" and "a track hook's bug" in recorded["error"]
    assert not os.path.ismount(run_dir / "workspace")
    assert str(run_dir) not in Path("/proc/self/mountinfo").read_text()
