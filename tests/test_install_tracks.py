"""Each track installs alone in a fresh venv, from a copy of the checkout and from built wheels, and runs its demo.

What a new user does: `pip install -e '.[detection]'` in a clone, or `pip install --find-links DIR
'automedbench[detection]'` with the wheelhouse `scripts/build-wheelhouse.sh` builds. Slow (one venv per case;
third-party wheels come from the package index or pip's cache).

Editable installs from the clone go through pip, as the README says: the root's build backend turns an extra's
track into a path to its folder only when a build is asked for (uv reads the pyproject's names directly and finds
no such distribution on an index). Installs of built artefacts (the wheelhouse's wheels, the core from the clone)
go through uv where it is installed beside the test interpreter (scripts/test.sh installs it): the same wheels and
requirements, 0.4 CPU-s against pip's 7 for a track and its dependencies from the caches.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest
from automedbench.testing import full_check, sampled

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
DEMOS = {
    "segmentation": "segmentation/demo",
    "vqa": "vqa/demo",
    "enhancement": "enhancement/demo-ldct",
    "detection": "detection/demo",
    "report_gen": "report_gen/demo",
    "classification": "classification/demo",
    "synthesis": "synthesis/demo",
}
DISTRIBUTION = {track: "automedbench-" + track.replace("_", "-") for track in DEMOS}
# The built-in distributions beside the core (core/<name>/), each installed by a root extra (its name; the kit: test).
BUILTINS = {"campaign": "automedbench-campaign", "codes": "automedbench-codes", "docker": "automedbench-docker",
            "inspect": "automedbench-inspect", "models": "automedbench-models", "test": "automedbench-testkit"}
# What an extra installs besides its own distribution (the campaign re-tags runs with the codes' tagging step).
ALSO = {"campaign": {"automedbench-codes"}}


def _checkout_copy(dest: Path) -> Path:
    """The checkout's tracked and unignored files (what a fresh clone of this commit would hold)."""
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           check=True, capture_output=True).stdout.decode().split("\0")
    for name in filter(None, files):
        source = ROOT / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    return dest


def _fresh_venv(path: Path) -> Path:
    """An empty venv: nothing but the interpreter (no pip of its own, see `_pip_argv`)."""
    venv.EnvBuilder(with_pip=False).create(path)
    return path / "bin" / "python"


def _pip_argv(python: Path) -> list[str]:
    """This interpreter's pip working on the venv of `python` (`pip --python`): the venv gets exactly what a pip of
    its own would install, without ensurepip's copy of pip in every fresh venv (4 CPU-s each)."""
    return [sys.executable, "-m", "pip", "--python", str(python), "--disable-pip-version-check"]


def _pip(python: Path, *args: str, cwd: Path | None = None) -> None:
    # --no-compile: no bytecode for every installed module up front (what the demo imports is compiled as it is
    # imported); 10.6 -> 3.8 CPU-s for numpy, scipy, scikit-image and pillow from pip's cache, measured
    proc = subprocess.run([*_pip_argv(python), "install", "-q", "--no-compile", *args],
                          cwd=cwd, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]


def _uv_argv(python: Path) -> list[str] | None:
    """`uv pip install` into the venv of `python` from the package sources pip is configured with
    (scripts/uv-from-pip-config.py); None where uv is not installed beside this interpreter or pip cannot say."""
    uv = Path(sys.executable).with_name("uv")
    if not uv.is_file():
        return None
    sources = subprocess.run([sys.executable, str(ROOT / "scripts" / "uv-from-pip-config.py")],
                             capture_output=True, text=True, timeout=120)
    if sources.returncode != 0:
        return None
    return [str(uv), "pip", "install", "-q", "--python", str(python), *sources.stdout.split()]


def _install_built(python: Path, *args: str) -> None:
    """Install built artefacts (wheels, or a folder built into one) with uv where it is installed, else pip."""
    uv = _uv_argv(python)
    if uv is None:
        _pip(python, *args)
        return
    proc = subprocess.run([*uv, *args], capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]


def _automedbench_distributions(python: Path) -> set[str]:
    """The automedbench distributions the venv of `python` holds, as its own interpreter finds them (what `pip
    list` shows, without a pip start: 0.9 CPU-s a call)."""
    code = ("import importlib.metadata as m, json; "
            "print(json.dumps([d.metadata['Name'] or '' for d in m.distributions()]))")
    out = subprocess.run([str(python), "-I", "-c", code], check=True, capture_output=True, text=True).stdout
    return {name.lower().replace("_", "-") for name in json.loads(out) if name.lower().startswith("automedbench")}


def _run_demo(python: Path, task: str, tmp: Path) -> dict:
    return _run_demo_out(python, task, tmp, tmp / "data")[0]


def _run_demo_out(python: Path, task: str, tmp: Path, data: Path) -> tuple[dict, str]:
    """The demo run's result and what the command printed (runs in `tmp/runs`, staged data in `data`)."""
    tmp.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "AUTOMEDBENCH_DATA": str(data), "COLUMNS": "400"}
    cli = python.parent / "automedbench"
    proc = subprocess.run([str(cli), "run", "--task", task, "--agent", "reference", "--out", str(tmp / "runs")],
                          env=env, cwd=tmp, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (result,) = (tmp / "runs").glob("*/result.json")
    return json.loads(result.read_text()), proc.stdout


def _build_backend_installed() -> bool:
    """Whether this interpreter already satisfies every distribution's `build-system.requires`: then the
    wheelhouse is built without pip's isolated build environment per distribution (byte-identical wheel
    contents, measured; 43 -> 17 CPU-s for the 12 wheels)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        import tomllib
        from packaging.requirements import Requirement
    except ImportError:  # Python 3.10, or no packaging: build isolated
        return False
    for pyproject in [ROOT / "pyproject.toml", *ROOT.glob("plugins/*/pyproject.toml"),
                      *ROOT.glob("core/*/pyproject.toml")]:
        for spec in tomllib.loads(pyproject.read_text()).get("build-system", {}).get("requires", []):
            requirement = Requirement(spec)
            try:
                if not requirement.specifier.contains(version(requirement.name), prereleases=True):
                    return False
            except PackageNotFoundError:
                return False
    return True


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheelhouse")
    isolation = {"NO_BUILD_ISOLATION": "1"} if _build_backend_installed() else {}
    subprocess.run(["bash", str(ROOT / "scripts" / "build-wheelhouse.sh"), str(out)], check=True,
                   capture_output=True, env={**os.environ, "PYTHON": sys.executable, **isolation}, timeout=1800)
    return out


def test_wheelhouse_holds_every_distribution(wheelhouse):
    names = {wheel.name.split("-")[0] for wheel in wheelhouse.glob("*.whl")}
    assert names >= {"automedbench", *(d.replace("-", "_") for d in [*DISTRIBUTION.values(), *BUILTINS.values()])}


def test_the_readme_install_runs_the_demo_whole_and_the_core_alone_says_what_it_leaves_out(tmp_path):
    """The core alone (`pip install -e . -e plugins/segmentation`) holds no built-in distribution, runs the demo
    and says in one line what it left out (the run page, the error codes) and the extra that adds them; a command
    of a part not installed is one line naming its extra (exit 2). The README's first command adds the campaign
    extra (`-e '.[campaign]' -e plugins/segmentation`): the same demo then has its codes and its view.html, with
    every case's picture. One venv, installed in those two steps."""
    clone = _checkout_copy(tmp_path / "clone")
    python = _fresh_venv(tmp_path / "venv")
    _pip(python, "-e", ".", "-e", "plugins/segmentation", cwd=clone)
    assert _automedbench_distributions(python) == {"automedbench", "automedbench-segmentation"}
    result, out = _run_demo_out(python, "segmentation/demo", tmp_path / "core", tmp_path / "data")
    assert result["task"]["strict"] > 0 and result["aggregate"]["rating"] != "F"
    # no error-code tagging step: no codes, and the one note that says why (and how to get them)
    assert [c["code"] for c in result["error_codes"]] == ["H-UNTAGGED"]
    assert "pip install 'automedbench[codes]'" in result["error_codes"][0]["message"]
    (line,) = [x for x in out.splitlines() if "left out by the core alone" in x]
    assert "view.html" in line and "error codes" in line and "pip install 'automedbench[campaign]'" in line
    proc = subprocess.run([str(python.parent / "automedbench"), "sweep", "--agents", "reference", "--tasks",
                           "segmentation/demo"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "pip install 'automedbench[campaign]'" in proc.stderr
    readme = (ROOT / "README.md").read_text()
    assert "pip install -e '.[campaign]' -e plugins/segmentation &&" in readme  # the command this checks
    _pip(python, "-e", ".[campaign]", "-e", "plugins/segmentation", cwd=clone)
    result, out = _run_demo_out(python, "segmentation/demo", tmp_path / "whole", tmp_path / "data")
    assert "H-UNTAGGED" not in [c["code"] for c in result["error_codes"]]
    (page,) = (tmp_path / "whole" / "runs").glob("*/view.html")
    assert f"page: {page}" in out.replace("\n", "")
    assert page.read_text().count('id="picture-') == len(result["cases"]) > 0


def test_the_core_alone_runs_the_helps_first_example_to_a_rating(tmp_path):
    """`pip install automedbench` (the core built from this checkout, no extra, no track) into a fresh venv: it
    has a task of its own, the toy track, and the command the help starts with runs it to a rating offline."""
    clone = _checkout_copy(tmp_path / "clone")
    python = _fresh_venv(tmp_path / "venv")
    _install_built(python, str(clone))
    assert _automedbench_distributions(python) == {"automedbench"}
    cli = python.parent / "automedbench"
    shown = subprocess.run([str(cli), "--help"], capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    first = re.search(r"`(automedbench run [^`]*)`", " ".join(shown.stdout.split())).group(1)
    assert first == "automedbench run --task toy/vowels --agent reference"
    env = {**os.environ, "AUTOMEDBENCH_DATA": str(tmp_path / "data")}
    proc = subprocess.run([str(cli), *shlex.split(first)[1:], "--out", str(tmp_path / "runs")], env=env,
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (stored,) = (tmp_path / "runs").glob("*/result.json")
    result = json.loads(stored.read_text())
    assert result["state"] == "scored" and result["aggregate"]["rating"] == "A", result["aggregate"]
    listed = subprocess.run([str(cli), "tasks"], capture_output=True, text=True, timeout=120, env=env)
    assert "toy/vowels" in listed.stdout


@pytest.mark.parametrize("extra", sampled(sorted(BUILTINS)))
def test_a_builtin_extra_installs_its_distribution_and_registers_it(extra, tmp_path):
    """`pip install -e '.[campaign]'` adds the built-in distribution, found through the entry-point group."""
    clone = _checkout_copy(tmp_path / "clone")
    python = _fresh_venv(tmp_path / "venv")
    _pip(python, "-e", f".[{extra}]", cwd=clone)
    assert _automedbench_distributions(python) == {"automedbench", BUILTINS[extra], *ALSO.get(extra, ())}
    listing = subprocess.run([str(python.parent / "automedbench"), "plugins"], capture_output=True, text=True,
                             timeout=120, env={**os.environ, "COLUMNS": "200"})
    assert listing.returncode == 0 and BUILTINS[extra] in listing.stdout, listing.stdout + listing.stderr


# One track from wheels and one editable spelling by default (each is a fresh venv and a demo run: minutes
# on two cores); AUTOMEDBENCH_ALL_LAYOUT_CHECKS=1 runs every track, every spelling and `.[all]`.
@pytest.mark.parametrize("track", sampled(["detection", *sorted(set(DEMOS) - {"detection"})]))
def test_track_installs_alone_from_wheels_and_runs_its_demo(track, wheelhouse, tmp_path):
    python = _fresh_venv(tmp_path / "venv")
    _install_built(python, "--find-links", str(wheelhouse), f"automedbench[{track}]")
    assert _automedbench_distributions(python) == {"automedbench", DISTRIBUTION[track]}
    result = _run_demo(python, DEMOS[track], tmp_path)
    assert result["task"]["strict"] > 0 and result["aggregate"]["rating"] != "F"


@pytest.mark.parametrize("extra", sampled(["report_gen", "report-gen", "detection"]))
def test_editable_extra_from_a_clone_installs_exactly_that_track(extra, tmp_path):
    clone = _checkout_copy(tmp_path / "clone")
    python = _fresh_venv(tmp_path / "venv")
    _pip(python, "-e", f".[{extra}]", cwd=clone)
    assert _automedbench_distributions(python) == {"automedbench", DISTRIBUTION[extra.replace("-", "_")]}
    # the core is the clone's, editable: its files are imported from the clone
    where = subprocess.run([str(python), "-c", "import automedbench; print(automedbench.__file__)"],
                           check=True, capture_output=True, text=True).stdout.strip()
    assert Path(where).resolve().is_relative_to(clone.resolve())


@full_check
def test_editable_all_installs_every_track(tmp_path):
    clone = _checkout_copy(tmp_path / "clone")
    python = _fresh_venv(tmp_path / "venv")
    _pip(python, "-e", ".[all]", cwd=clone)
    assert _automedbench_distributions(python) == {"automedbench", *DISTRIBUTION.values()}
