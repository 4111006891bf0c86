"""Polish round 6: the items earlier rounds named and left. report_gen/iu-xray staged however many studies a short
(truncated) download held, silently; ..."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
from automedbench.testing import run_cli
from PIL import Image


def _png(seed: int) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray((np.random.default_rng(seed).random((16, 16)) * 255).astype(np.uint8), "L").save(buffer, "PNG")
    return buffer.getvalue()


def _r2gen_download(root: Path, listed: int, extracted: int) -> None:
    """R2Gen's iu_xray layout whose annotation.json lists `listed` test studies, only the first `extracted` of
    them with both images (an extraction stopped part-way)."""
    entries = []
    for k in range(listed):
        paths = [f"CXR{k}_IM-{k}/0.png", f"CXR{k}_IM-{k}/1.png"]
        for v, rel in enumerate(paths):
            if k < extracted or v == 0:
                (root / "iu_xray" / "images" / rel).parent.mkdir(parents=True, exist_ok=True)
                (root / "iu_xray" / "images" / rel).write_bytes(_png(10 * k + v))
        entries.append({"id": f"CXR{k}_IM-{k}", "report": "The heart size is normal. The lungs are clear.",
                        "image_path": paths, "split": "test"})
    (root / "iu_xray" / "annotation.json").write_text(json.dumps({"train": [], "val": [], "test": entries}))


def test_iu_xray_refuses_a_short_download_naming_what_is_missing(tmp_path):
    """Before: exit 0, 3 studies staged for a task whose card says 590, nothing said."""
    _r2gen_download(tmp_path / "download", listed=7, extracted=3)
    data = tmp_path / "data"
    done = run_cli("stage", "report_gen/iu-xray", "--from", str(tmp_path / "download"), "--data-root", str(data))
    assert done.exit_code != 0
    (line,) = done.stderr.strip().splitlines()
    assert "only 3 usable studies with images and a reference report, report_gen/iu-xray needs 590" in line, line
    assert "4 file(s) its lists name are missing (iu_xray/images/CXR3_IM-3/1.png, " in line, line
    assert "truncated or partial download" in line
    assert not list(data.rglob("manifest.json"))  # nothing staged
