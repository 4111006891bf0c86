"""Adversarial review: reading or replacing references through paths the old directory-only tripwire missed.

Without filesystem isolation (`local-plain`) the tripwire is the only guard; each attack here went unseen
before files themselves were watched and changes counted.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from review_steps import DEMO, exec_events, register_steps, run_steps


@pytest.fixture(scope="module")
def reg_steps(reg):
    return register_steps(reg)


@pytest.fixture(scope="module")
def pristine(reg_steps, tmp_path_factory) -> Path:
    """The demo staged once for this module; each attack gets a copy of it."""
    from automedbench import staging

    track, task = reg_steps.task(DEMO)
    root = tmp_path_factory.mktemp("pristine")
    staging.ensure(track, task, root)
    return root


def _fresh_data_root(reg, pristine: Path, path: Path) -> Path:
    """A private copy of the staged demo (copied, not staged again: a fresh draw per test is not what these
    attacks are about): these attacks may damage the references they reach."""
    from automedbench import staging

    shutil.copytree(pristine, path, symlinks=True)
    track, task = reg.task(DEMO)
    staging.ensure(track, task, path)  # the copy is recognised as staged: nothing is generated again
    return path


PREAMBLE = """
import os, shutil
import nibabel as nib, numpy as np
data = os.environ['DATA_DIR']
ws = os.environ['WORKSPACE_DIR']
private = os.path.normpath(os.path.join(data, '..', 'private'))
for case in sorted(os.listdir(data)):
    os.makedirs(f'{ws}/outputs/{case}', exist_ok=True)
"""
LINK_READ = PREAMBLE + """
    for name in ('organ.nii.gz', 'lesion.nii.gz'):
        ref, tmp = f'{private}/{case}/{name}', f'{ws}/.tmp/{case}-{name}'
        {how}
"""
HARD_LINK = ("os.link(ref, tmp); shutil.copyfile(tmp, f'{ws}/outputs/{case}/{name}'); os.unlink(tmp)")
RENAME = ("os.rename(ref, tmp); shutil.copyfile(tmp, f'{ws}/outputs/{case}/{name}'); os.rename(tmp, ref)")


@pytest.mark.parametrize("how", [HARD_LINK, RENAME], ids=["hard-link", "rename"])
def test_reading_references_through_another_directory_is_a_breach(reg_steps, pristine, tmp_path, how):
    """Without filesystem isolation, a reference opened through a hard link or after a move is still read.
    Since each plain call's namespace has everything but the workspace read-only (issue 35) the link or move
    itself fails (the workspace is a mount of its own, the data root read-only): prevented, or detected."""
    data_root = _fresh_data_root(reg_steps, pristine, tmp_path / "data")
    code = LINK_READ.replace("{how}", how)
    result, run_dir = run_steps(reg_steps, tmp_path / "runs", data_root, [["python", code]], sandbox="local-plain")
    if not result.isolation.breached:  # prevented: the call failed before it could read anything
        (call,) = exec_events(run_dir)
        assert call["exit_code"] != 0 and ("Read-only" in call["stderr"] or "cross-device" in call["stderr"]), call
    assert result.aggregate.task == 0.0 and result.aggregate.rating == "F"


OVERWRITE = PREAMBLE + """
    ct = nib.load(f'{data}/{case}/ct.nii.gz')
    for name in ('organ.nii.gz', 'lesion.nii.gz'):
        out = f'{ws}/outputs/{case}/{name}'
        nib.save(nib.Nifti1Image(np.zeros(ct.shape, np.uint8), ct.affine), out)  # an empty mask
        shutil.copyfile(out, f'{ws}/.tmp/x')
        os.rename(f'{ws}/.tmp/x', f'{private}/{case}/{name}')  # ... made the reference, never opened
"""


def test_replacing_references_is_a_breach(reg_steps, pristine, tmp_path):
    """Moving one's own prediction over the reference opens nothing in private/, but it is tampering. Since
    each plain call's namespace has the data root read-only (issue 35) the move fails: the references stay
    as staged, and the empty masks score what empty masks score."""
    data_root = _fresh_data_root(reg_steps, pristine, tmp_path / "data")
    private = data_root / DEMO / "private"
    before = {p: p.read_bytes() for p in sorted(private.rglob("*")) if p.is_file()}
    result, run_dir = run_steps(reg_steps, tmp_path / "runs", data_root, [["python", OVERWRITE]], sandbox="local-plain")
    assert {p: p.read_bytes() for p in sorted(private.rglob("*")) if p.is_file()} == before
    if result.isolation.breached:
        assert any(e.kind == "change to private references" for e in result.isolation.evidence)
    else:
        (call,) = exec_events(run_dir)
        assert call["exit_code"] != 0 and ("Read-only" in call["stderr"] or "cross-device" in call["stderr"]), call
    assert result.aggregate.task == 0.0




def test_tripwire_says_when_it_could_not_watch_everything(tmp_path):
    """A watch limit hit (inotify's max_user_watches, or max_paths) must be reported, not silently unwatched."""
    from automedbench.tripwire import Tripwire

    for case in ("a", "b"):
        (tmp_path / case).mkdir()
        (tmp_path / case / "ref.nii.gz").write_bytes(b"r")
    wire = Tripwire()
    if not wire.active:
        pytest.skip("inotify unavailable")
    try:
        assert wire.watch_tree(tmp_path, max_paths=3) == 3
        assert wire.unwatched == 2
        assert wire.watch_tree(tmp_path / "a") == 2 and wire.unwatched == 2
    finally:
        wire.close()
