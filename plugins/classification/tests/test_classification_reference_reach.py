"""Conformance: no file a sandbox can read gives away the classification track's demo references (the same
bytes, the same long text, or an image closer to a reference than the case's own input), whatever the
staging's seed."""

from __future__ import annotations

import pytest
from automedbench.testing import reference_leaks

DEMOS = ["classification/demo"]


@pytest.mark.parametrize("task_id", DEMOS)
def test_no_sandbox_readable_file_reveals_a_reference(task_id, amb_data_root):
    assert reference_leaks(task_id, amb_data_root) == []


def test_the_search_covers_the_tasks_read_only_assets(amb_data_root, tmp_path, monkeypatch):
    """The pinned checkpoint's folder is mounted in the sandbox, so the conformance check walks it too: a
    reference planted there is found."""
    import shutil

    from automedbench.testing import stage_task
    from automedbench_classification.track import ClassificationTrack

    staged = stage_task(DEMOS[0], amb_data_root)
    planted = tmp_path / "assets"
    planted.mkdir()
    reference = staged.private / staged.case_ids[0] / "label.json"
    assert reference.stat().st_size >= 64  # the byte comparison's floor
    shutil.copy(reference, planted / "notes.bin")
    monkeypatch.setattr(ClassificationTrack, "assets", lambda self, task: planted)
    leaks = reference_leaks(DEMOS[0], amb_data_root)
    assert any(leak.source == str(planted / "notes.bin") and leak.how == "same bytes" for leak in leaks), leaks
