"""Fixtures for the VQA plugin's own tests (amb_run, amb_data_root, stage_medframeqa)."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest

pytest_plugins = ["automedbench.testing"]


def _jpeg(value: int) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (12, 10), (value % 256, 40, 90)).save(buffer, format="JPEG")
    return buffer.getvalue()


@pytest.fixture
def stage_medframeqa() -> Callable[[Path, list[dict[str, Any]]], tuple[Any, Any]]:
    """Stages MedFrameQA rows (options and answer given; id, question and a one-frame clip filled in) through the
    real stager: (task spec, staged data). Conformance rounds 23 and 24 hand it option lists."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    from automedbench.testing import load_task, stage_from_folder

    def stage(tmp_path: Path, rows: list[dict[str, Any]]) -> tuple[Any, Any]:
        for i, row in enumerate(rows):
            row.setdefault("question_id", f"v{i}")
            row.setdefault("question", f"Which lesion is shown in clip {i}?")
            row |= {"image": [{"bytes": _jpeg(i), "path": None}], "system": "Digestive", "organ": "Liver",
                    "modality": "CT"}
        path = tmp_path / "src" / "data" / "test-00000-of-00001.parquet"
        path.parent.mkdir(parents=True)
        pq.write_table(pa.Table.from_pylist(rows), path)
        track, spec = load_task("vqa/medframeqa")
        spec = attrs.evolve(spec, params={**spec.params, "sample": None}, case_count=len(rows))  # all of them
        return spec, stage_from_folder(track, spec, tmp_path / "data", tmp_path / "src")

    return stage
