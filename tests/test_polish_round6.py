"""Polish round 6: the items earlier rounds named and left. report_gen/iu-xray staged however many studies a short
(truncated) download held, silently; a sweep joining a Ray cluster with no token (so only a cluster without token
authentication would let it in) only warned, after connecting, where a local instance without one is refused; the
METADATA header reader read each distribution's whole file, its long description included; `tasks report_gen/...`
named the Java runtime METEOR needs only once it was missing. (One way to find libc: tests/test_libc_lookup.py.)"""

from __future__ import annotations

import importlib.metadata as md
import io
import json
import sys
from pathlib import Path

import attrs
import numpy as np
import pytest
from automedbench.errors import UserError
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


NO_TOKEN = ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "RAY_AUTH_MODE")


TOKENLESS = {"no token anywhere": "no RAY_AUTH_TOKEN nor ", "RAY_AUTH_MODE=disabled": "RAY_AUTH_MODE=disabled",
             "a token file, RAY_AUTH_MODE unset": "RAY_AUTH_MODE is not token"}


@pytest.mark.parametrize("mode", sorted(TOKENLESS))
def test_a_sweep_joining_a_cluster_with_no_token_is_refused_naming_the_option(tmp_path, monkeypatch, mode):
    """Before: the sweep connected and said "the cluster accepted this driver without a token" (a warning), then ran;
    a local instance without a token was refused (polish 5). Now one line before any run, as that one."""
    from test_campaign_ray_edges import FakeRay  # the stand-in `ray` module: nothing of Ray starts or connects

    ray = FakeRay()
    monkeypatch.setitem(sys.modules, "ray", ray)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.ray/auth_token
    monkeypatch.setenv("AUTOMEDBENCH_DATA", str(tmp_path / "data"))
    for name in NO_TOKEN:
        monkeypatch.delenv(name, raising=False)
    if mode == "RAY_AUTH_MODE=disabled":
        monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    if mode.startswith("a token file"):  # Ray sends it to a given address only under RAY_AUTH_MODE=token
        (tmp_path / ".ray").mkdir()
        (tmp_path / ".ray" / "auth_token").write_text("t" * 32)
    out = tmp_path / "sweep"
    done = run_cli("sweep", "--agents", "reference", "--tasks", "toy/vowels", "--executor", "ray", "--ray-address",
                   "127.0.0.2:6379", "--out", str(out))
    assert done.exit_code == 2, done.output
    (line,) = done.stderr.strip().splitlines()
    assert f"would join the cluster at 127.0.0.2:6379 presenting no token ({TOKENLESS[mode]}" in line, line
    assert "which only a cluster without token authentication lets in" in line
    assert line.endswith("or pass --ray-allow-no-auth to accept a cluster without one"), line
    assert not ray.inited and not (out / "sweep.json").exists()


def test_a_sweep_presenting_a_token_to_a_cluster_is_not_refused(tmp_path, monkeypatch):
    """With a token the cluster checks or not: that cannot be told before connecting, and is not refused."""
    from automedbench.plugins import registry
    from automedbench_campaign.sweep import SweepConfig, validate

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    monkeypatch.setenv("RAY_AUTH_TOKEN", "t" * 32)
    config = SweepConfig.of(["reference"], ["toy/vowels"], ["lite"], executor="ray", ray_address="127.0.0.2:6379",
                            require_isolation=False)
    validate(config, registry())
    monkeypatch.delenv("RAY_AUTH_TOKEN")  # token mode with no token: refused as tokenless
    with pytest.raises(UserError, match="--ray-allow-no-auth"):
        validate(config, registry())
    (tmp_path / ".ray").mkdir()  # a token file with the mode unset: sent to a cluster Ray finds itself ("auto")
    (tmp_path / ".ray" / "auth_token").write_text("t" * 32)
    monkeypatch.delenv("RAY_AUTH_MODE")
    validate(attrs.evolve(config, ray_address="auto"), registry())
    validate(attrs.evolve(config, ray_allow_no_auth=True), registry())  # accepted: said after connecting


class _CountingFile:
    """A metadata file that counts the characters it hands out, read whole (`read_text`) or opened."""

    def __init__(self, text: str, served: list[int]) -> None:
        self.text, self.served = text, served

    def read_text(self, encoding: str = "utf-8") -> str:
        self.served.append(len(self.text))
        return self.text

    def open(self, mode: str = "r", encoding: str = "utf-8") -> io.StringIO:
        served, text = self.served, self.text

        class Counted(io.StringIO):
            def read(self, size: int | None = -1) -> str:
                block = super().read(size)
                served.append(len(block))
                return block

        return Counted(text)


class _Folder:
    def __init__(self, files: dict[str, str], served: list[int]) -> None:
        self.files, self.served = files, served

    def joinpath(self, name: str) -> _CountingFile:
        if name not in self.files:
            raise FileNotFoundError(name)
        return _CountingFile(self.files[name], self.served)


def test_the_metadata_headers_are_read_without_the_description_after_them():
    """Before: the whole METADATA file was read (automedbench's is 200 KB of README) to take three header lines."""
    from automedbench.distheaders import MAX_HEADER_CHARS, header_fields

    served: list[int] = []
    description = "A long README.\n" * (2_000_000 // 15) + "Requires-Dist: not-a-header\n"
    metadata = "Metadata-Version: 2.1\nName: amb-big\nVersion: 3.1\nRequires-Dist: numpy\n\n" + description
    dist = md.PathDistribution(_Folder({"METADATA": metadata}, served))
    assert header_fields(dist, ("Name", "Version", "Requires-Dist")) == {
        "Name": ["amb-big"], "Version": ["3.1"], "Requires-Dist": ["numpy"]}
    assert 0 < sum(served) <= 8192, sum(served)
    served.clear()  # headers that do not end within the bound: read one block past it, then left to the parser
    endless = "Name: amb-endless\n" + "Classifier: x\n" * (MAX_HEADER_CHARS // 14 + 10) + "\n" + description
    assert header_fields(md.PathDistribution(_Folder({"PKG-INFO": endless}, served)), ("Name",)) is None
    assert MAX_HEADER_CHARS < sum(served) <= MAX_HEADER_CHARS + 8192, sum(served)


def test_the_header_reader_agrees_with_the_email_parser_on_every_installed_distribution():
    """Every distribution installed here: the fields the harness reads (plugins: Name, Version; needs: Requires-Dist)
    are those `Distribution.metadata` parses, or None (then the callers ask it)."""
    from automedbench.distheaders import header_fields

    names = ("Name", "Version", "Requires-Dist")
    checked = 0
    for dist in md.distributions():
        fields = header_fields(dist, names)
        if fields is not None:
            parsed = dist.metadata
            assert fields == {name: parsed.get_all(name) or [] for name in names}, dist.metadata["Name"]
            checked += 1
    assert checked > 50


def test_tasks_lists_what_scoring_needs_present_or_missing(tmp_path, monkeypatch):
    """Before: `tasks report_gen/...` named the Java runtime only in "ready here: no" once it was missing; a user
    choosing a machine saw nothing of it on one that had Java. Now listed present (where) or missing, for every
    track whose tasks need such a program (`Track.scoring_needs`), on the card and under the listing."""
    import shutil

    java = tmp_path / "bin" / "java"
    java.parent.mkdir()
    java.write_text("#!/bin/sh\nexit 0\n")
    java.chmod(0o755)
    monkeypatch.setenv("PATH", str(java.parent))
    card = run_cli("tasks", "report_gen/iu-xray", "--data-root", str(tmp_path / "data"))
    assert card.exit_code == 0, card.output
    said = " ".join(card.stdout.split())
    assert f"needs: a Java runtime (java, for METEOR): present ({java})" in said, said
    assert "ready here: yes" in said
    listing = run_cli("tasks", "--data-root", str(tmp_path / "data"))
    lines = [line for line in listing.stdout.splitlines() if line.startswith("scoring ")]
    assert lines == [f"scoring report_gen here (a local evaluator) needs: a Java runtime (java, for METEOR): present "
                     f"({java}) ({len(_track_tasks('report_gen'))} task(s))"], listing.stdout[-2000:]
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert shutil.which("java") is None
    card = " ".join(run_cli("tasks", "report_gen/iu-xray", "--data-root", str(tmp_path / "data")).stdout.split())
    assert "needs: a Java runtime (java, for METEOR): missing ready here: no: METEOR needs Java" in card, card
    assert "scoring" not in " ".join(run_cli("tasks", "segmentation/demo", "--data-root", str(tmp_path)).stdout.split())


def _track_tasks(name: str) -> list[str]:
    from automedbench.plugins import registry

    return [task_id for task_id in registry().tasks() if task_id.startswith(f"{name}/")]
