"""Issue 35, classes 1, 2 and 8 in the engine: every hidden choice of a staging comes from a per-staging secret
(`StagingSecret`, on every staging area), kept only in private/; public/ holds regular files only; a download is
read through no link; a stager's parser failure is one line; task files declare a public labelled source, and
`automedbench tasks`, result.json and the README's tasks table show it."""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path

import pytest
from automedbench.api import StagingSecret, UserError, staging_area
from automedbench.cli import main
from automedbench.plugins import registry
from automedbench.staging import _run_stager, secret_for, stage
from automedbench.taskfile import parse_task
from automedbench.untrusted import hostile_download_guard
from click.testing import CliRunner

ROOT = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------- the secret and what it draws


def test_draws_are_per_purpose_reproducible_from_the_key_and_never_shown():
    secret = StagingSecret(bytes(range(32)))
    again = StagingSecret(bytes(range(32)))
    assert secret.seed("noise/a") == again.seed("noise/a") != secret.seed("noise/b")
    assert secret.shuffled(range(50), "order") == again.shuffled(range(50), "order") != list(range(50))
    assert sorted(secret.sample(range(50), 10)) != sorted(StagingSecret().sample(range(50), 10))
    ids = secret.case_ids(500, "kidney")
    assert len(set(ids)) == 500 and all(re.fullmatch(r"kidney_[0-9a-f]{8}", i) for i in ids)
    assert ids != sorted(ids)  # handed out in no order: sorted, they say nothing about the stager's order
    assert secret.generator("noise").normal() == again.generator("noise").normal()
    assert bytes(range(32)).hex() not in repr(secret) and "hidden" in repr(secret)
    with pytest.raises(ValueError):
        StagingSecret(b"short")


def test_every_area_of_one_staging_draws_from_the_engines_secret(tmp_path):
    secret = StagingSecret()
    with secret_for(tmp_path / "dest", secret), staging_area(tmp_path / "dest", durable=False) as area:
        assert area.secret is secret
        (area.public / "a").mkdir()
        (area.private / "a").mkdir()
        area.commit(["a"])
    saved = tmp_path / "dest" / "private" / "staging.secret"
    assert StagingSecret.load(saved).seed("x") == secret.seed("x")
    assert stat.S_IMODE(saved.stat().st_mode) == 0o600
    with staging_area(tmp_path / "other", durable=False) as area:  # outside the engine: a fresh one of its own
        assert area.secret.seed("x") != secret.seed("x")


@pytest.mark.parametrize("kind", ["symlink", "hardlink", "fifo"])
def test_nothing_but_regular_files_with_one_name_is_published(tmp_path, kind):
    host = tmp_path / "host.txt"
    host.write_text("a host file")
    with staging_area(tmp_path / "dest", durable=False) as area:
        (area.public / "case").mkdir(parents=True)
        (area.private / "case").mkdir(parents=True)
        target = area.public / "case" / "input.txt"
        {"symlink": lambda: target.symlink_to(host), "hardlink": lambda: os.link(host, target),
         "fifo": lambda: os.mkfifo(target)}[kind]()
        refused = r"staging would publish .*input.txt, (a symlink|a hard link|not a regular)"
        with pytest.raises(UserError, match=refused):
            area.commit(["case"])
    assert not (tmp_path / "dest" / "public").exists()


# ---------------------------------------------------------------- a download read through no link


def test_the_guard_refuses_links_devices_and_fifos_below_the_download_only(tmp_path):
    download, outside = tmp_path / "dl", tmp_path / "outside"
    (download / "real").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret.txt").write_text("host")
    (download / "real" / "plain.txt").write_text("fine")
    os.link(outside / "secret.txt", download / "real" / "hard.txt")
    (download / "soft.txt").symlink_to(outside / "secret.txt")
    (download / "linked").symlink_to(download / "real")
    os.mkfifo(download / "pipe")
    with hostile_download_guard(download, tmp_path / "dest"):
        assert (download / "real" / "plain.txt").read_text() == "fine"
        for name, why in (("real/hard.txt", "a hard link"), ("soft.txt", "a symlink"),
                          ("linked/plain.txt", "reached through a symlink"), ("pipe", "not a regular file")):
            with pytest.raises(UserError, match=why):
                open(download / name, "rb").close()
        (tmp_path / "dest").mkdir()
        os.link(outside / "secret.txt", tmp_path / "dest" / "own")  # the staging's own output is not checked
        assert (tmp_path / "dest" / "own").read_text() == "host"
    assert (download / "real" / "hard.txt").read_text() == "host"  # outside a staging: not the guard's business


class _Failing:
    """A track whose stager hits a parser's own exception (a damaged archive member, a NaN in a header)."""

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    def stage(self, task, dest, source):
        raise self.exc


@pytest.mark.parametrize("exc", [EOFError("Compressed file ended before the end-of-stream marker was reached"),
                                 ValueError("cannot convert float NaN to integer\nsecond line"),
                                 MemoryError()])
def test_a_stagers_parser_failure_on_a_download_is_one_line(tmp_path, exc):
    _, task = registry().task("classification/brain-tumour-mri")
    with pytest.raises(UserError) as info:
        _run_stager(_Failing(exc), task, tmp_path / "dest", tmp_path)
    message = str(info.value)
    assert "\n" not in message and type(exc).__name__ in message and "test_staging_secret.py" in message
    with pytest.raises(type(exc)):  # a demo's generator failing is a bug: its traceback stays
        _run_stager(_Failing(exc), task, tmp_path / "dest", None)


# ---------------------------------------------------------------- the engine: two stagings of one download


def _class_folders(root: Path, per_class: int = 12) -> Path:
    import numpy as np
    from PIL import Image

    for k, folder in enumerate(["glioma", "meningioma", "notumor", "pituitary"]):
        for n in range(per_class):
            path = root / "Testing" / folder / f"{folder}-{n:04d}.jpg"
            path.parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(np.random.default_rng(100 * k + n).integers(0, 255, (24, 24)).astype(np.uint8)).save(path)
    return root


def test_two_stagings_of_one_download_share_no_id_order_or_secret(tmp_path):
    """On main the case order was the task file's seed applied to a class-sorted list: case i's label was the
    same in every staging (and predictable without opening an image). Now ids, draw and secret are fresh."""
    import attrs

    track, task = registry().task("classification/brain-tumour-mri")
    task = attrs.evolve(task, case_count=40)
    download = _class_folders(tmp_path / "dl")
    labels, secrets_seen = [], set()
    for k in range(3):
        staged = stage(track, task, tmp_path / f"root{k}", download)
        assert (staged.private / "staging.secret").is_file()
        secrets_seen.add((staged.private / "staging.secret").read_text())
        stamp = json.loads((staged.root / "staging.json").read_text())
        assert stamp["case_ids"] == sorted(stamp["case_ids"]) == staged.case_ids
        labels.append([json.loads((staged.private / c / "label.json").read_text())["label"] for c in staged.case_ids])
        for path in staged.public.rglob("*"):
            assert not path.is_file() or secrets_seen.isdisjoint({path.read_bytes().decode("latin-1").strip()})
    assert len(secrets_seen) == 3
    same = sum(a == b for a, b in zip(labels[0], labels[1], strict=True))
    assert same < 25, same  # a label sequence of its own: position i agrees with another staging by chance only


def test_a_real_task_file_may_not_carry_a_seed_and_public_source_is_an_address(tmp_path):
    import attrs

    _, spec = registry().task("classification/brain-tumour-mri")
    data = json.loads(json.dumps(attrs.asdict(spec)))
    for key in ("seed", "subset_seed", "noise_seed"):
        with pytest.raises(UserError, match=rf"params {key}: a real task's hidden choices .* per-staging secret"):
            parse_task({**data, "params": {**data["params"], key: 42}}, "t.yaml")
    demo = {**data, "id": "classification/x", "demo": True, "public_source": ""}
    assert parse_task({**demo, "params": {**data["params"], "seed": 1}}, "t.yaml").demo  # a demo's seed is replaced
    for bad in ("kaggle.com/x", "http://x.org", "https://x.org a space"):
        with pytest.raises(UserError, match="public_source must be the https:// address"):
            parse_task({**data, "public_source": bad}, "t.yaml")
    with pytest.raises(UserError, match="public_source"):
        parse_task({**demo, "public_source": "https://x.org"}, "t.yaml")


def test_tasks_shows_which_tasks_have_a_public_labelled_source():
    from automedbench.cli import tasks_table
    from rich.console import Console

    console = Console(record=True, width=260, no_color=True)
    console.print(tasks_table([spec for _, spec in registry().tasks().values()], 260))
    text = console.export_text()
    assert "Public labels" in text
    for _, spec in registry().tasks().values():
        line = next(row for row in text.splitlines() if row.startswith(f"│ {spec.id} "))
        expected = "-" if spec.demo else ("yes, online" if spec.public_source and spec.network else "no")
        assert f"│ {expected}" in line, (spec.id, line)


def test_the_readme_tasks_table_lists_every_public_source():
    """The trust section's table of network tasks with public labelled sources is the task files'."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("<!-- public-sources -->"):text.index("<!-- /public-sources -->")]
    listed = dict(re.findall(r"^\| `([a-z_]+/[a-z0-9-]+)` \| <(https://[^>]+)> \|", section, re.M))
    declared = {spec.id: spec.public_source for _, spec in registry().tasks().values()
                if spec.public_source and spec.network}
    assert listed == declared
    private = sorted(spec.id for _, spec in registry().tasks().values() if not spec.demo and not spec.public_source)
    assert all(f"`{task_id}`" in section for task_id in private)


def test_a_run_on_a_task_with_a_public_source_records_it(tmp_path):
    import attrs

    track, task = registry().task("classification/brain-tumour-mri")
    stage(track, attrs.evolve(task, case_count=40), tmp_path / "root", _class_folders(tmp_path / "dl"))
    result = CliRunner().invoke(main, ["evaluate", "--task", task.id, "--baseline", "perfect", "--data-root",
                                       str(tmp_path / "root"), "--out", str(tmp_path / "ev")])
    assert result.exit_code == 0, result.output
    record = json.loads((tmp_path / "ev" / "result.json").read_text())
    assert record["header"]["public_source"] == task.public_source.strip() != ""
    assert record["task"]["strict"] == 1.0


def test_every_release_task_is_in_a_stager_conformance_test():
    """Every real task of every track here runs `check_stager` on a fixture download (its track's
    tests/test_<track>_stager_conformance.py; a sample by default, all with AUTOMEDBENCH_ALL_LAYOUT_CHECKS=1)."""
    named = set()
    for path in (ROOT / "plugins").glob("*/tests/test_*_stager_conformance.py"):
        text = path.read_text()
        assert "assert_stager_conforms" in text, path
        named |= set(re.findall(r'"([a-z_]+/[a-z0-9-]+)"', text))
    real = {spec.id for _, spec in registry().tasks().values() if not spec.demo and spec.track != "toy"}
    assert real and real <= named, sorted(real - named)
