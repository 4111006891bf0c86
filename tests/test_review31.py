"""Review 31 of testtime16, speed16, review30 and the YAML bounds: what the merged changes left unsound. Each test
failed before its fix (the script-mode check guards what the fix must keep)."""

from __future__ import annotations

import importlib.metadata as md
import subprocess
import sys

import pytest
from automedbench.distheaders import MAX_HEADER_CHARS, header_fields

METHODS = ("automedbench_segmentation.solution.method", "automedbench_segmentation.solution.airway_method")


def python(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=120)


def test_importing_a_scripted_method_leaves_pydicom_importable():
    """The methods refused pydicom (sys.modules['pydicom'] = None) at import: the airway demo's test imports one into
    the pytest worker, after which every `import pydicom` there failed ('halted; None in sys.modules'): the harness's
    DICOM header reading (untrusted.py) and each later `importorskip("pydicom")` test, skipped in silence."""
    pytest.importorskip("pydicom")
    done = python("-c", "import importlib, sys\nfor m in sys.argv[1:]: importlib.import_module(m)\n"
                  "import pydicom\nprint(pydicom.__name__)", *METHODS)
    assert done.returncode == 0 and done.stdout.strip() == "pydicom", done.stderr[-600:]


@pytest.mark.parametrize("name", ["method.py", "airway_method.py"])
def test_a_scripted_method_run_as_the_agents_script_still_skips_pydicom(tmp_path, name):
    """What NIFTI_ONLY is for stays: run as `python segment.py DATA OUT`, nibabel loads without pydicom."""
    pytest.importorskip("pydicom")
    from automedbench.api import solution_source

    script = tmp_path / "segment.py"
    script.write_text(solution_source("automedbench_segmentation.solution", name))
    (tmp_path / "data").mkdir()
    done = python("-X", "importtime", str(script), str(tmp_path / "data"), str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr[-600:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time")}
    loaded = sorted(m for m in imported if m.startswith(("pydicom.", "requests")))  # a refused import logs its name
    assert "nibabel" in imported and not loaded, loaded


class Dist:
    """A stand-in distribution whose METADATA is `text`."""

    def __init__(self, text: str) -> None:
        self.text = text

    def read_text(self, name: str) -> str | None:
        return self.text if name == "METADATA" else None


LICENSED = ("Metadata-Version: 2.1\nName: amb-licensed\nVersion: 0.1\nLicense: Copyright (c) the authors\n"
            "        \n        \x0cSee: the notice below\n        more terms\nRequires-Dist: numpy>=1.24\n"
            "Requires-Dist: amb-absent-two\n\nRequires-Dist: amb-absent-in-the-description\n")


def test_requirements_after_a_license_with_paragraph_breaks_are_read(tmp_path, monkeypatch):
    """A folded License header with a line of blanks (a paragraph break; scipy's and scikit-image's wheels) ended the
    header reading there: no Requires-Dist found, so every such track fell back to the e-mail parser the change
    avoids. A form feed inside the license (str.splitlines breaks there) could also end it or start a 'header'."""
    assert header_fields(Dist(LICENSED), ("Requires-Dist", "See")) == {
        "Requires-Dist": ["numpy>=1.24", "amb-absent-two"], "See": []}
    from automedbench.needs import unmet_requirements

    info = tmp_path / "site" / "amb_licensed-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(LICENSED)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))

    def parsed(self):
        raise AssertionError("the metadata file was parsed as an e-mail message")

    monkeypatch.setattr(md.PathDistribution, "metadata", property(parsed))
    assert unmet_requirements.__wrapped__("amb-licensed") == ("amb-absent-two",)


def test_headers_past_the_bound_are_not_taken_for_all_of_them():
    """Headers that do not end within MAX_HEADER_CHARS were cut there and the part read answered as the whole: a
    requirement past the cut was never checked. Now the caller asks the distribution its own way."""
    filler = "".join(f"Classifier: Topic :: Number {n}\n" for n in range(MAX_HEADER_CHARS // 28))
    text = f"Name: amb-long\nVersion: 1\nRequires-Dist: numpy\n{filler}Requires-Dist: amb-after-the-cut\n\nbody\n"
    assert header_fields(Dist(text), ("Requires-Dist",)) is None
    assert header_fields(Dist(text[:2000] + "\n\nbody\n"), ("Requires-Dist",)) == {"Requires-Dist": ["numpy"]}


def test_a_brief_template_a_track_adds_later_is_what_the_next_run_renders(reg, tmp_path):
    """The brief's Environment is kept per template folder; a template taken from the core stayed cached after the
    track's folder gained its own of that name (a track author's override, added while a sweep runs): every later
    run of the process rendered the core's brief, where a fresh process rendered the track's."""
    from automedbench.brief import render_brief

    _track, task = reg.task("segmentation/demo")
    (tmp_path / "task.md.j2").write_text("Body for {{ task.id }}\n")
    args = {"data_dir": "/d", "workspace_dir": "/w", "case_ids": ["a"]}
    first = render_brief(task, "lite", tmp_path, **args)
    (tmp_path / "brief.md.j2").write_text("The track's own brief for {{ task.id }}\n")
    second = render_brief(task, "lite", tmp_path, **args)
    (tmp_path / "brief.md.j2").unlink()
    third = render_brief(task, "lite", tmp_path, **args)
    assert "Body for segmentation/demo" in first and "The track's own brief" not in first
    assert second == "The track's own brief for segmentation/demo\n"
    assert third == first
