"""Every enhancement stager passes the stager conformance check (`automedbench.testing.check_stager`) on a
small download in its dataset's layout: a fresh secret per staging (which slices, their ids, and for the
simulated low-dose CT tasks the noise itself: an item staged twice gets unrelated noise, and adding another
staging's residual to an input scores as a guess does), nothing but regular files published, the perfect
baseline exactly 1.0, and hostile downloads (links, FIFOs, damaged files) refused in one line."""

from __future__ import annotations

import itertools
import re
import sys
from pathlib import Path

import attrs
import pytest
from automedbench.api import StagingSecret
from automedbench.testing import assert_stager_conforms, check_stager, load_task, sampled

sys.path.insert(0, str(Path(__file__).parent))
import release_layouts as layouts  # a helper module beside the tests (tests/ is not a package)
from test_enhancement_stagers import write_fastmri, write_simnict

pytest.importorskip("pydicom")
pytest.importorskip("skimage")


def simnict(src: Path) -> Path:
    write_simnict(src, 6, shape=(512, 512))
    return src


def fastmri(src: Path) -> Path:
    src.mkdir(parents=True)
    for i in range(6):  # names of different lengths: write_fastmri seeds each volume by its name's length
        write_fastmri(src / f"file_brain_{i:0{i + 1}d}.h5", shape=(330, 324))
    return src


def release(task_id: str, n: int):
    def build(src: Path) -> Path:
        layouts.WRITERS[task_id](src, n)
        return src
    return build


# (task, fixture download writer, case count, random degradation)
FIXTURES = [
    ("enhancement/lidc-idri-denoising", release("enhancement/lidc-idri-denoising", 5), 5, True),
    ("enhancement/ixi-t1-sr", release("enhancement/ixi-t1-sr", 6), 5, False),
    ("enhancement/ldct", simnict, 5, False),
    ("enhancement/deeplesion-denoising", release("enhancement/deeplesion-denoising", 5), 5, True),
    ("enhancement/brats-t1c-sr", release("enhancement/brats-t1c-sr", 6), 5, False),
    ("enhancement/nih-cxr-sr", release("enhancement/nih-cxr-sr", 6), 5, False),
    ("enhancement/mri-sr", fastmri, 5, False),
]


@pytest.mark.parametrize(("task_id", "write", "count", "noise"), sampled(FIXTURES, keep=3))
def test_stager_conformance(tmp_path, task_id, write, count, noise):
    if task_id.endswith("mri-sr"):
        pytest.importorskip("h5py")
    assert_stager_conforms(task_id, write(tmp_path / "download"), tmp_path / "work", case_count=count,
                           random_degradation=noise)


def test_ldct_ids_sorting_in_source_order_fail_the_public_knowledge_check(tmp_path, monkeypatch):
    """The check still catches a public order on the SimNICT fixture: a leaky staging taking the rows in the
    download's order under ids that differ per staging but sort in the order they were drawn (sorted position
    i is row i on every staging). Replaying another staging's answers, or adding its residuals, by sorted
    position scores 1.0 on the target and on every staging it is confirmed on."""
    real_ids = StagingSecret.id_stream

    def ordered_ids(self, prefix="case", purpose="case ids", sep="_"):
        fresh = real_ids(self, prefix, purpose, sep)  # this staging's own hex, behind the draw's number
        return (f"{prefix}{sep}{i:02d}{next(fresh)[-6:]}" for i in itertools.count())

    monkeypatch.setattr(StagingSecret, "shuffled", lambda self, items, purpose="order": list(items))
    monkeypatch.setattr(StagingSecret, "id_stream", ordered_ids)
    task = attrs.evolve(load_task("enhancement/ldct")[1], case_count=5)
    (result,) = check_stager(task, simnict(tmp_path / "download"), tmp_path / "work", checks=["public-knowledge"])
    assert not result.passed
    perfect_everywhere = r"by same position in sorted ids scores (1\.000, )+1\.000 and 1\.000 on \d+ stagings"
    assert re.search(f"answers {perfect_everywhere}", result.reason), result.reason
    assert re.search(rf"residual \(reference - input\) {perfect_everywhere}", result.reason), result.reason
    assert "same case id" not in result.reason  # the ids themselves differ: only their order leaks
