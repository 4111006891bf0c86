"""Build the docker sandbox's images locally, with no registry: base, one agent image per track, evaluator.

The base is a Debian root filesystem made by debootstrap and imported (`recipes/base/build-rootfs.sh`),
or any existing image given with `--base-image`. Layers on top are built with `--network none`; the
evaluator's Python dependencies are fetched on the host into the build context first. Each image
carries a recipe label (hash of its Dockerfile folder, its parent image and its inputs), so a rebuild
is skipped while nothing changed.
"""

from __future__ import annotations

import hashlib
import importlib.metadata as md
import importlib.util
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from attrs import define
from automedbench.api import InfrastructureError, UserError

BASE_IMAGE = "automedbench/base:bookworm"
DEFAULT_AGENT = "automedbench/agent:default"
EVALUATOR_IMAGE = "automedbench/evaluator:latest"
RECIPE_LABEL = "org.automedbench.recipe"
GROUP = "automedbench"

Say = Callable[[str], None]


def agent_image(track: str) -> str:
    return f"automedbench/agent:{re.sub(r'[^a-z0-9_.-]', '-', track.lower()) or 'default'}"


def dockerfiles_dir() -> Path:
    """The image recipes (base/, agent/default/, evaluator/): this package's `recipes/` (package data, so an
    installed release builds its images too), or the folder AUTOMEDBENCH_DOCKERFILES names."""
    env = os.environ.get("AUTOMEDBENCH_DOCKERFILES")
    return Path(env) if env else Path(__file__).resolve().parent / "recipes"


def client(timeout: int = 120):
    """A docker SDK client that has answered a ping, or a one-line error saying what is missing."""
    try:
        import docker
    except ImportError:
        raise UserError("the docker sandbox needs the docker package: pip install 'automedbench[docker]'") from None
    try:
        cli = docker.from_env(timeout=timeout)
        cli.ping()
    except Exception as exc:
        raise UserError(f"no docker engine reachable ({type(exc).__name__}: {str(exc)[:200]}); "
                        "start dockerd (scripts/docker-up.sh does it as root)") from None
    return cli


def image_label(cli, name: str) -> str | None:
    """The recipe label of an existing image, '' if unlabelled, None if there is no such image."""
    import docker

    try:
        image = cli.images.get(name)
    except docker.errors.ImageNotFound:
        return None
    return (image.labels or {}).get(RECIPE_LABEL, "")


def tree_digest(*roots: Path, extra: str = "") -> str:
    """sha256 over the relative paths and bytes of every file below the roots (stable order)."""
    digest = hashlib.sha256(extra.encode())
    for root in roots:
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
        for path in files:
            if "__pycache__" in path.parts:
                continue
            digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


# ---------------------------------------------------------------- harness code for the evaluator


@define
class HarnessDist:
    name: str
    version: str
    packages: list[Path]
    entry_points: str
    requires: list[str]


def harness_dists() -> list[HarnessDist]:
    """Every installed distribution with an `automedbench` entry point: the harness and its plugins."""
    found: dict[str, HarnessDist] = {}
    for dist in md.distributions():
        eps = [ep for ep in dist.entry_points if ep.group == GROUP]
        name = dist.metadata["Name"]
        if not eps or name in found:
            continue
        packages: list[Path] = []
        for top in sorted({ep.value.split(":")[0].split(".")[0] for ep in eps}):
            spec = importlib.util.find_spec(top)
            if spec is None:
                continue
            if spec.submodule_search_locations:
                packages.append(Path(next(iter(spec.submodule_search_locations))))
            elif spec.origin:
                packages.append(Path(spec.origin))
        requires = [r for r in (dist.requires or []) if "extra ==" not in r.replace("extra==", "extra ==")]
        found[name] = HarnessDist(name, dist.version, packages, dist.read_text("entry_points.txt") or "", requires)
    return sorted(found.values(), key=lambda d: d.name)


def stage_harness(dest: Path) -> Path:
    """Copy the trusted harness and plugin packages (with minimal dist-info) into `dest` for mounting."""
    dest.mkdir(parents=True, exist_ok=True)
    for dist in harness_dists():
        for pkg in dist.packages:
            if pkg.is_dir():
                shutil.copytree(pkg, dest / pkg.name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
                                dirs_exist_ok=True)
            else:
                shutil.copyfile(pkg, dest / pkg.name)
        info = dest / f"{dist.name.replace('-', '_')}-{dist.version}.dist-info"
        info.mkdir(exist_ok=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist.name}\nVersion: {dist.version}\n")
        (info / "entry_points.txt").write_text(dist.entry_points)
    return dest


# ---------------------------------------------------------------- building


PROBE = """
import importlib.metadata as md, json, sys
from packaging.requirements import Requirement
missing = []
for line in sys.argv[1:]:
    req = Requirement(line)
    if req.marker is not None and not req.marker.evaluate():
        continue
    try:
        version = md.version(req.name)
    except md.PackageNotFoundError:
        missing.append(line)
        continue
    if req.specifier and not req.specifier.contains(version, prereleases=True):
        missing.append(line)
print(json.dumps([sys.version_info[0], sys.version_info[1], missing]))
"""


def run_in_image(cli, image: str, argv: list[str]) -> str:
    out = cli.containers.run(image, argv, network_mode="none", remove=True, stdout=True, stderr=True)
    return out.decode()


def missing_requirements(cli, base: str) -> tuple[str, list[str]]:
    """(python X.Y of the base image, the harness requirements the base image does not satisfy)."""
    own = {d.name.lower() for d in harness_dists()}
    reqs = sorted({r for d in harness_dists() for r in d.requires
                   if re.split(r"[\s<>=!~;\[]", r, maxsplit=1)[0].lower() not in own})
    major, minor, missing = json.loads(run_in_image(cli, base, ["python3", "-c", PROBE, *reqs]).strip())
    return f"{major}.{minor}", missing


def fetch_wheels(target: Path, python: str, requirements: list[str]) -> None:
    """Install binary wheels for the image's Python and platform into `target` with the host's pip."""
    target.mkdir(parents=True, exist_ok=True)
    if not requirements:
        return
    arch = platform.machine()
    tag = python.replace(".", "")
    argv = [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-compile",
            "--target", str(target), "--only-binary=:all:", "--python-version", python,
            "--implementation", "cp", "--abi", f"cp{tag}",
            "--platform", f"manylinux2014_{arch}", "--platform", f"manylinux_2_17_{arch}",
            "--platform", f"manylinux_2_28_{arch}", *requirements]
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode != 0:
        raise InfrastructureError("fetching the evaluator's wheels failed: " + proc.stderr.strip()[-400:])


# Distributions the image's own compiled Debian packages are built against: a copy that pip pulls in only
# as a dependency (numpy for pycocotools) must not shadow the image's, or those packages break.
SHARED_ABI = ("numpy",)


def drop_shadowing(cli, base: str, target: Path, requirements: list[str]) -> list[str]:
    """Remove SHARED_ABI wheels pip pulled in only as dependencies when the image already has them
    (numpy 2 beside Debian's nibabel 4 breaks it). Returns the distribution names removed."""
    asked = {re.split(r"[\s<>=!~;\[]", r, maxsplit=1)[0].lower().replace("_", "-") for r in requirements}
    infos = {p.name.split("-", 1)[0].lower().replace("_", "-"): p for p in target.glob("*.dist-info")}
    extra = sorted(name for name in infos if name not in asked and name in SHARED_ABI)
    if not extra:
        return []
    present = json.loads(run_in_image(cli, base, ["python3", "-c", PRESENT, *extra]).strip())
    for name in present:
        info = infos[name]
        record = (info / "RECORD").read_text().splitlines() if (info / "RECORD").is_file() else []
        for line in record:
            path = target / line.split(",", 1)[0]
            if path.is_file() and target in path.resolve().parents:
                path.unlink()
        shutil.rmtree(info, ignore_errors=True)
    for folder in sorted(target.iterdir()):  # folders the removals left empty (numpy/, numpy.libs/)
        if folder.is_dir() and not any(p.is_file() for p in folder.rglob("*")):
            shutil.rmtree(folder)
    return present


PRESENT = """
import importlib.metadata as md, json, sys
found = []
for name in sys.argv[1:]:
    try:
        md.version(name)
        found.append(name)
    except md.PackageNotFoundError:
        pass
print(json.dumps(found))
"""


def _build(cli, tag: str, context: Path, recipe: str, base: str, say: Say) -> None:
    from docker.errors import BuildError

    say(f"building {tag}")
    try:
        _image, logs = cli.images.build(path=str(context), tag=tag, network_mode="none", rm=True, forcerm=True,
                                        buildargs={"BASE": base}, labels={RECIPE_LABEL: recipe})
    except BuildError as exc:
        lines = [str(entry.get("stream", entry.get("error", ""))).strip() for entry in exc.build_log]
        raise InfrastructureError(f"docker build of {tag} failed: " + " | ".join(x for x in lines if x)[-600:]) \
            from None
    for _ in logs:
        pass


def _image_id(cli, name: str) -> str:
    return cli.images.get(name).id


def build_base(cli, tag: str, say: Say, force: bool = False) -> None:
    """The debootstrap base, rebuilt when its recipe (build-rootfs.sh) changed: track images are built
    without network, so the packages they need must come from this base."""
    script = dockerfiles_dir() / "base" / "build-rootfs.sh"
    recipe = tree_digest(script.parent)
    if not force and image_label(cli, tag) == recipe:
        say(f"{tag}: up to date")
        return
    if os.geteuid() != 0 or shutil.which("debootstrap") is None:
        raise UserError(f"no image {tag}: building it needs root and debootstrap ({script}); "
                        "or pass --base-image with an existing image that has python3")
    say(f"building {tag} with debootstrap (about 2-3 minutes)")
    proc = subprocess.run(["bash", str(script), tag], capture_output=True, text=True,
                          env={**os.environ, "AUTOMEDBENCH_RECIPE": recipe})
    if proc.returncode != 0:
        raise InfrastructureError("base image build failed: " + proc.stderr.strip()[-600:])


def layered(cli, tag: str, folder: Path, base: str, say: Say, force: bool = False, inputs: str = "",
            fill: Callable[[Path], None] | None = None) -> None:
    """Build `folder`'s Dockerfile on `base` unless an image with the same recipe exists.

    `inputs` names what `fill` adds to the build context, so the recipe is known before fetching it.
    """
    recipe = tree_digest(folder, extra=_image_id(cli, base) + inputs)
    if not force and image_label(cli, tag) == recipe:
        say(f"{tag}: up to date")
        return
    with tempfile.TemporaryDirectory(prefix="automedbench-build-") as tmp:
        context = Path(tmp) / "context"
        shutil.copytree(folder, context)
        if fill is not None:
            fill(context)
        _build(cli, tag, context, recipe, base, say)


# A track recipe may list Python requirements in this file (one a line, `#` comments): fetched on the host for
# the image's Python into the build context's `wheels/` before the offline build, for its Dockerfile to COPY.
TRACK_WHEELS = "wheels.txt"


def track_wheels(folder: Path) -> list[str]:
    """The requirements a track recipe's `wheels.txt` lists ([] without one)."""
    path = Path(folder) / TRACK_WHEELS
    if not path.is_file():
        return []
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return [line for line in lines if line]


def _wheel_filler(cli, python: str, wanted: list[str]) -> Callable[[Path], None] | None:
    """What fills a track image's build context with its `wheels.txt` packages (None: it lists none)."""
    if not wanted:
        return None

    def fill(context: Path) -> None:
        fetch_wheels(context / "wheels", python, wanted)
        drop_shadowing(cli, DEFAULT_AGENT, context / "wheels", wanted)

    return fill


def tracks_with_images(reg: Any = None) -> Iterator[tuple[str, Path]]:
    """(track, recipe folder): `agent/<track>/` among the recipes (here or under AUTOMEDBENCH_DOCKERFILES),
    else each installed track's own recipe (`Track.agent_image()`, package data: a third party's track too)."""
    root = dockerfiles_dir() / "agent"
    seen: set[str] = set()
    for folder in sorted(root.iterdir()) if root.is_dir() else []:
        if folder.name != "default" and (folder / "Dockerfile").is_file():
            seen.add(folder.name)
            yield folder.name, folder
    if reg is None:
        from automedbench.engine import registry

        reg = registry()
    for track in sorted(reg.tracks(), key=lambda t: t.name):
        folder = track.agent_image()
        if track.name not in seen and folder is not None and (Path(folder) / "Dockerfile").is_file():
            yield track.name, Path(folder)


def build_all(say: Say, base_image: str | None = None, force: bool = False,
              only: set[str] | None = None) -> list[str]:
    """Build (or confirm up to date) every image the docker sandbox and evaluator use; returns the tags.

    `only` names the tracks whose agent images to build (a test run builds what its tests use); an unknown
    name is refused before anything is built."""
    if only is not None:
        offered = {track for track, _ in tracks_with_images()}
        unknown = sorted(only - offered)
        if unknown:
            raise UserError(f"no agent image recipe for track(s) {', '.join(unknown)}; "
                            f"tracks with one: {', '.join(sorted(offered)) or 'none'}")
    root = dockerfiles_dir()
    if not (root / "agent" / "default" / "Dockerfile").is_file():
        raise UserError(f"no Dockerfiles at {root}: reinstall automedbench-docker or set AUTOMEDBENCH_DOCKERFILES")
    cli = client(timeout=1200)
    base = base_image or BASE_IMAGE
    if base_image is None:
        build_base(cli, base, say, force=force)
    elif image_label(cli, base) is None:
        raise UserError(f"no image {base_image!r} in the local engine")
    layered(cli, DEFAULT_AGENT, root / "agent" / "default", base, say, force)
    built = [base, DEFAULT_AGENT]
    python, missing = missing_requirements(cli, base)
    for track, folder in tracks_with_images():
        if only is not None and track not in only:
            continue
        wanted = track_wheels(folder)  # a track's own packages (a model framework); the build stays offline
        layered(cli, agent_image(track), folder, DEFAULT_AGENT, say, force,
                inputs=python + "\n".join(wanted) if wanted else "", fill=_wheel_filler(cli, python, wanted))
        built.append(agent_image(track))

    say(f"evaluator: python {python} in the image; from wheels: {', '.join(missing) or 'nothing'}")
    layered(cli, EVALUATOR_IMAGE, root / "evaluator", base, say, force, inputs=python + "\n".join(missing),
            fill=lambda context: (fetch_wheels(context / "deps", python, missing),
                                  drop_shadowing(cli, base, context / "deps", missing)))
    return [*built, EVALUATOR_IMAGE]
