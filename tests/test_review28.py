"""Review of stop 51's merges (red team 33/34, ux26, polish4, testtime15, agents4).

- **A credential variable naming a folder the plain call reads** (red team 34's hide list): DOCKER_CONFIG,
  DOCKER_CERT_PATH and RAY_AUTH_TOKEN_PATH are covered in every `local-plain` call unless the harness's own Python
  lies inside. A variable naming a folder that holds the run's public data (here DOCKER_CONFIG set to the data root)
  covered the inputs too: the agent listed an empty DATA_DIR and the run scored Task 0.0 for the harness's setting,
  not the agent's doing. A named folder holding what the call is given (data, assets, the program) is left shown now.
"""

from __future__ import annotations

import os
import shutil

import pytest
from automedbench.sandboxes import local
from automedbench.testing import StepsAgent, register_agent, register_toy_track, run_task
from test_agent_bytes_runs import SOLVE, TASK


def test_a_named_credential_folder_holding_the_calls_data_is_not_hidden(tmp_path, monkeypatch):
    """The hide list keeps a named file apart from the data, and leaves out a named folder that holds it."""
    data = tmp_path / "cfg" / "data"
    data.mkdir(parents=True)
    token = tmp_path / "token"
    token.write_text("T")
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "cfg"))
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(token))
    hidden = local.service_credentials([data])
    assert str(token.resolve()) in hidden
    assert str((tmp_path / "cfg").resolve()) not in hidden
    assert str((tmp_path / "cfg").resolve()) in local.service_credentials()  # nothing given: covered as before


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None or not local.pid_namespace_prefix(),
                    reason="a local-plain run as root (unshare)")
def test_a_plain_run_reads_its_data_when_docker_config_names_the_data_root(reg, data_root, tmp_path, monkeypatch):
    """Before: DATA_DIR was an empty folder in the call, Task 0.0. Now the run solves the task, 1.0."""
    register_toy_track()
    register_agent(StepsAgent, reg)
    monkeypatch.setenv("DOCKER_CONFIG", str(data_root))
    result, _ = run_task(TASK, StepsAgent.name, out=tmp_path / "runs", data_root=data_root, sandbox="local-plain",
                         agent_options={"steps": [["python", SOLVE]]})
    assert result.state == "scored" and result.task.strict == 1.0


@pytest.mark.parametrize("value, stored", [(2**53 + 1, "int64"), (2**64 - 1, "uint64"), (2**31 + 3, "uint32")])
def test_published_whole_numbers_beyond_int32_keep_their_values(tmp_path, value, stored):
    """polish4's `publish_volume` writes each volume in the dtype its values need. Whole numbers beyond int32 went
    to the float test, where float32 compared equal after numpy's float64 promotion: 2**53 + 1 (int64) and
    2**64 - 1 (uint64) were published as float32 and read back changed. They keep the stored dtype now."""
    nib = pytest.importorskip("nibabel")
    np = pytest.importorskip("numpy")
    from automedbench_segmentation.data.stagers import publish_volume

    data = np.array([[[0, 1], [2, value]]], dtype=stored)
    source, target = tmp_path / "in.nii.gz", tmp_path / "out.nii.gz"
    nib.save(nib.Nifti1Image(data, np.eye(4), dtype=data.dtype), str(source))
    publish_volume(source, target)
    back = np.asanyarray(nib.load(str(target)).dataobj)
    assert back.dtype.kind in "iu", back.dtype
    assert [int(v) for v in back.reshape(-1)] == [int(v) for v in data.reshape(-1)]


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None or not local.pid_namespace_prefix(),
                    reason="a local-plain run as root (unshare)")
def test_a_plain_call_on_a_host_of_many_users_starts(reg, data_root, tmp_path, monkeypatch):
    """As root, every user's ~/.ray and ~/.docker were named in the call's one-argument spec whether they existed or
    not: 6000 accounts (a shared cluster's passwd) made it over Linux's 128 KB bound on one argument, and no call
    could start (E2BIG). Only those that exist are named now (a missing one cannot be covered anyway)."""
    register_toy_track()
    register_agent(StepsAgent, reg)
    homes = [str(tmp_path / "homes" / f"user{i:05d}") for i in range(6000)]
    monkeypatch.setattr(local, "user_homes", lambda: homes)
    result, _ = run_task(TASK, StepsAgent.name, out=tmp_path / "runs", data_root=data_root, sandbox="local-plain",
                         agent_options={"steps": [["python", SOLVE]]})
    assert (result.state, result.error, result.task.strict) == ("scored", None, 1.0)
    assert len(local.plain_spec(tmp_path)) < 128 << 10
