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
