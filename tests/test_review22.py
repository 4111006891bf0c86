"""Review round 22: the evaluator container's start, retried since round 22, through `evaluate_in_container` with
a fake engine (no docker needed). A start refused once, then a container the submission drove into its memory
limit: the run must end on the submission (SubmissionError, the agent's doing), not on the refused start or the
retry (a harness failure, retryable)."""

from __future__ import annotations

import types
from pathlib import Path

import pytest
from automedbench.errors import InfrastructureError, SubmissionError

sandbox = pytest.importorskip("automedbench_docker.sandbox")


class Container:
    def __init__(self, refused: bool, status: int) -> None:
        self.refused, self.status, self.removed = refused, status, False

    def start(self) -> None:
        if self.refused:
            raise RuntimeError("OCI runtime create failed: runc: exec: python3: not found")

    def wait(self, timeout: float) -> dict:
        return {"StatusCode": self.status}

    def logs(self, stdout: bool, stderr: bool) -> bytes:
        return b"evaluating\nKilled\n"

    def remove(self, force: bool = False) -> None:
        self.removed = True


class Engine:
    def __init__(self, refusals: int, status: int) -> None:
        self.refusals, self.status, self.made = refusals, status, []
        self.containers = self

    def create(self, **config) -> Container:
        assert config["labels"] == {"org.automedbench.role": "evaluator"} and "detach" not in config
        self.made.append(Container(len(self.made) < self.refusals, self.status))
        return self.made[-1]


def _evaluate(monkeypatch, tmp_path: Path, engine: Engine) -> None:
    monkeypatch.setattr(sandbox, "client", lambda: engine)
    monkeypatch.setattr(sandbox, "_has_image", lambda cli, image: True)
    monkeypatch.setattr(sandbox, "stage_harness", lambda dest: dest.mkdir(parents=True))
    monkeypatch.setattr(sandbox, "grant", lambda path, uid, gid: None)
    monkeypatch.setattr(sandbox, "evaluator_user", lambda private: (1000, 1000))
    for name in ("submission", "public", "private"):
        (tmp_path / name).mkdir()
    (tmp_path / "manifest.json").write_text("{}")
    request = types.SimpleNamespace(task_id="vqa/demo", case_ids=["q1"], submission=str(tmp_path / "submission"),
                                    public=str(tmp_path / "public"), private=str(tmp_path / "private"),
                                    manifest=str(tmp_path / "manifest.json"), out=str(tmp_path / "evaluation.json"),
                                    pictures=False)
    sandbox.evaluate_in_container(request, timeout_s=60)


def test_a_refused_start_then_a_submission_over_its_memory_limit_is_the_submission_s_failure(monkeypatch, tmp_path):
    engine = Engine(refusals=1, status=137)  # 128 + SIGKILL: the container's memory limit
    with pytest.raises(SubmissionError, match="limit"):
        _evaluate(monkeypatch, tmp_path, engine)
    assert len(engine.made) == 2 and all(c.removed for c in engine.made)


def test_two_refused_starts_are_the_harness_s_failure_naming_the_evaluator(monkeypatch, tmp_path):
    engine = Engine(refusals=2, status=0)
    with pytest.raises(InfrastructureError, match="could not start the evaluator container"):
        _evaluate(monkeypatch, tmp_path, engine)
    assert len(engine.made) == 2 and all(c.removed for c in engine.made)
