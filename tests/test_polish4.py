"""Items named at stop 50 and mended here (polish round 4), each through the path a user takes.

1. The model gateway has one bound on a request's body: the 64 MB it accepts is also what it reads to pin the model
   (it refused 16-64 MB bodies as unreadable, so an installed program attaching a few images failed), the values a
   parse may make bounded apart (`MAX_REQUEST_ITEMS`); the refusal of a longer body states the bound. The request
   the real runner forwards is covered in test_agents_round3 (24 MB of images, pinned).
3. The environment snapshot of a local-plain run: a file hard-linked from uv's cache gets a new ctime when another
   venv links the same inode (a concurrent `uv pip install` on the machine), and the honest run was marked
   unverified. A file whose ctime alone moved is excused when it hashes to what its wheel's unchanged RECORD says;
   a rewrite with its mtime set back still counts, with a link made to cover it or its RECORD rewritten to match.
5. Segmentation's `publish_volume` kept the source's dtype: int16 and float32 volumes of the same kind of values in
   one download went out as stored. Each volume now goes out in the dtype its values need (`content_dtype`).
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import time
from pathlib import Path

import pytest
from automedbench import runner as runner_module
from automedbench.evaluator import environment_snapshot, snapshot_changes
from automedbench_models.gateway import MAX_REQUEST_BYTES, SOCKET_NAME, ModelGateway
from test_agents_round1 import Provider
from test_unverified_runs import _run


def test_a_body_over_the_gateways_bound_is_refused_naming_the_bound(tmp_path):
    """Before: "automedbench: request too large", no bound named (while 16 MB bodies were refused as unreadable)."""
    folder = tmp_path / "gw"
    folder.mkdir()
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with Provider("slow") as provider:
            gw = ModelGateway(provider.url.removesuffix("/v1"), "openai", None, model="m", max_calls=5,
                              deadline=time.monotonic() + 60)
            gw.start(fd)
            try:
                with socket.socket(socket.AF_UNIX) as sock:
                    sock.connect(str(folder / SOCKET_NAME))
                    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                                 b"content-length: %d\r\n\r\n" % (MAX_REQUEST_BYTES + 1))
                    reply = http.client.HTTPResponse(sock)
                    reply.begin()
                    status, body = reply.status, reply.read()
            finally:
                gw.close()
        assert provider.received == [], provider.received
    finally:
        os.close(fd)
    assert status == 413, status
    message = json.loads(body)["error"]["message"]
    assert f"at most {MAX_REQUEST_BYTES >> 20} MB" in message and str(MAX_REQUEST_BYTES + 1) in message, message


def _installed(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A site folder as uv leaves it: a module and its wheel's RECORD (the module's SHA-256); (site, module, RECORD)."""
    import base64
    import hashlib

    site = tmp_path / "site"
    (site / "pkg").mkdir(parents=True)
    (site / "pkg-1.0.dist-info").mkdir()
    module = site / "pkg" / "m.py"
    module.write_bytes(b"SCORE = 0\n")
    digest = base64.urlsafe_b64encode(hashlib.sha256(module.read_bytes()).digest()).rstrip(b"=").decode()
    record = site / "pkg-1.0.dist-info" / "RECORD"
    record.write_text(f"pkg/m.py,sha256={digest},10\npkg-1.0.dist-info/RECORD,,\n")
    return site, module, record


def _rewrite_keeping_mtime(path: Path, data: bytes) -> None:
    """In place, at the same size, the mtime set back: what only the ctime shows."""
    info = path.stat()
    time.sleep(0.02)
    with open(path, "r+b") as handle:
        handle.write(data)
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))


def test_a_link_made_by_another_venv_is_no_change_a_rewrite_still_is(tmp_path):
    """Before: linking the module from elsewhere (what uv does for another venv) moved its ctime, a change."""
    site, module, _ = _installed(tmp_path)
    before = environment_snapshot([str(site)])
    time.sleep(0.02)
    os.link(module, tmp_path / "other-venv-m.py")
    after = environment_snapshot([str(site)])
    assert after[str(module)][3] != before[str(module)][3]  # the ctime moved
    assert snapshot_changes(before, after) == []
    # a rewrite at the same size with the mtime set back, covered by a link: still a change
    _rewrite_keeping_mtime(module, b"SCORE = 1\n")
    os.link(module, tmp_path / "cover.py")
    assert snapshot_changes(before, environment_snapshot([str(site)])) == [str(module)]


def test_a_record_rewritten_to_match_a_rewrite_is_a_change_too(tmp_path):
    import base64
    import hashlib

    site, module, record = _installed(tmp_path)
    before = environment_snapshot([str(site)])
    _rewrite_keeping_mtime(module, b"SCORE = 1\n")
    forged = base64.urlsafe_b64encode(hashlib.sha256(b"SCORE = 1\n").digest()).rstrip(b"=").decode()
    _rewrite_keeping_mtime(record, record.read_bytes().replace(record.read_text().split("sha256=")[1][:43].encode(),
                                                               forged.encode()))
    assert forged in record.read_text()
    assert snapshot_changes(before, environment_snapshot([str(site)])) == sorted([str(module), str(record)])


def test_a_file_no_record_names_whose_ctime_moved_is_a_change(tmp_path):
    site, _, _ = _installed(tmp_path)
    loose = site / "loose.py"
    loose.write_text("X = 1\n")
    before = environment_snapshot([str(site)])
    time.sleep(0.02)
    os.link(loose, tmp_path / "other.py")
    assert snapshot_changes(before, environment_snapshot([str(site)])) == [str(loose)]


def test_an_honest_plain_run_stays_verified_while_another_venv_links_the_harnesss_files(reg, data_root, tmp_path,
                                                                                         monkeypatch):
    """Through the real runner (local-plain): between its two snapshots the harness venv's attrs files are linked
    from elsewhere, as uv does for another venv on the machine. Before: unverified, "the harness's Python
    environment changed during the agent phase (30-odd path(s) ...)"."""
    import attr

    package = Path(attr.__file__).parent
    if len(environment_snapshot([str(package)])) < 2 or not list(package.parent.glob("attrs-*.dist-info/RECORD")):
        pytest.skip("attrs is not installed from a wheel here")
    real, linked = runner_module.environment_snapshot, tmp_path / "other-venv"

    def snapshot_then_link(*args, **kwargs):
        taken = real(*args, **kwargs)
        if not linked.exists():
            linked.mkdir()
            time.sleep(0.02)
            for source in package.glob("*.py"):
                os.link(source, linked / source.name)
        return taken

    monkeypatch.setattr(runner_module, "environment_snapshot", snapshot_then_link)
    plain, _, _ = _run(reg, tmp_path / "runs", data_root, "local-plain")
    assert len(list(linked.iterdir())) > 3
    assert not any("Python environment changed" in r for r in plain.isolation.unverified), plain.isolation.unverified


def test_a_release_download_storing_cases_in_two_dtypes_publishes_one(tmp_path):
    """KiTS19 layout through the real release stager: two cases stored int16, two float32, the same kind of values
    (whole HU). Before: published int16 and float32 as stored, so the header said which way each case was stored
    (two sites, two converters: whatever that correlates with). Now each volume goes out in the dtype its values
    need, the values unchanged; a volume of fractional values stays float32."""
    import attrs
    import nibabel as nib
    import numpy as np
    from automedbench.testing import load_task, stage_from_folder

    rng = np.random.default_rng(5)
    affine = np.diag([0.8, 0.8, 2.5, 1.0])
    stored = {}
    for i, dtype in enumerate((np.int16, np.float32, np.int16, np.float32, np.float32)):
        folder = tmp_path / "src" / f"case_{i:05d}"
        folder.mkdir(parents=True)
        ct = rng.integers(-1000, 1500, (20, 18, 10)).astype(dtype)
        if i == 4:
            ct = ct + np.float32(0.25)  # fractional: content that needs a float
        image = nib.Nifti1Image(ct, affine)
        image.set_data_dtype(dtype)
        nib.save(image, str(folder / "imaging.nii.gz"))
        labels = np.zeros(ct.shape, np.uint8)
        labels[4:12, 4:12, 2:8] = 1
        labels[6:9, 6:9, 3:6] = 2
        nib.save(nib.Nifti1Image(labels, affine), str(folder / "segmentation.nii.gz"))
        stored[folder.name] = ct
    track, spec = load_task("segmentation/kidney")
    spec = attrs.evolve(spec, case_count=5)
    staged = stage_from_folder(track, spec, tmp_path / "data", tmp_path / "src")
    published = {case: nib.load(str(staged.public / case / "ct.nii.gz")) for case in staged.case_ids}
    dtypes = sorted(str(image.get_data_dtype()) for image in published.values())
    assert dtypes == ["float32", "int16", "int16", "int16", "int16"], dtypes
    values = sorted(np.asanyarray(image.dataobj).tobytes() for image in published.values())
    assert values == sorted(ct.astype(np.float32 if i == 4 else np.int16).tobytes()
                            for i, ct in enumerate(stored.values()))  # every case's values, unchanged
