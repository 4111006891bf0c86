"""The root distribution's build backend: setuptools, with two metadata fixes pip 23.2 needs.

1. Extra names are written both ways (``report-gen`` and ``report_gen``): setuptools normalises every extra
   to the dashed form (PEP 685), but pip before 23.3 matches a requested extra against the written name
   without normalising, so ``pip install 'automedbench[report_gen]'`` silently installed the core alone.
2. In an editable install from a checkout (``pip install -e '.[detection]'``), a requirement on a
   distribution that lives in this repository (a track under ``plugins/`` or a built-in under ``core/``)
   becomes a ``file://`` reference to its folder, since none of them is on a registry; a wheel keeps plain
   names, found with ``--find-links`` on the wheelhouse ``scripts/build-wheelhouse.sh`` builds.
"""

from __future__ import annotations

import base64
import hashlib
import re
import zipfile
from pathlib import Path

from setuptools import build_meta as _setuptools
from setuptools.build_meta import (  # noqa: F401  (re-exported PEP 517 hooks)
    build_sdist,
    get_requires_for_build_editable,
    get_requires_for_build_sdist,
    get_requires_for_build_wheel,
)

_ROOT = Path(__file__).resolve().parents[2]
_EXTRA_MARKER = re.compile(r"""extra\s*==\s*(['"])([^'"]+)\1""")
_REQUIREMENT_NAME = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)")
_PROJECT_NAME = re.compile(r"""^name\s*=\s*["']([^"']+)["']""", re.MULTILINE)


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _local_distributions() -> dict[str, Path]:
    """Canonical project name -> folder, for every distribution in this repository besides the root."""
    found: dict[str, Path] = {}
    for pyproject in sorted([*_ROOT.glob("plugins/*/pyproject.toml"), *_ROOT.glob("core/*/pyproject.toml")]):
        match = _PROJECT_NAME.search(pyproject.read_text(encoding="utf-8"))
        if match:
            found[_canonical(match.group(1))] = pyproject.parent
    return found


def _fix_metadata(text: str, *, local_paths: bool) -> str:
    """METADATA with every dashed extra also under its underscored spelling (and local paths if asked).

    Idempotent: setuptools may build the editable wheel from metadata this already fixed.
    """
    local = _local_distributions() if local_paths else {}
    out: list[str] = []
    seen: set[str] = set()

    def add(line: str) -> None:
        if not line.startswith(("Provides-Extra:", "Requires-Dist:")) or line not in seen:
            out.append(line)
            seen.add(line)

    for line in text.splitlines():
        if line.startswith("Requires-Dist:") and local:
            spec = line[len("Requires-Dist:"):].strip()
            name = _REQUIREMENT_NAME.match(spec)
            folder = local.get(_canonical(name.group(1))) if name else None
            if folder is not None and "@" not in spec.split(";")[0]:
                head, _, marker = spec.partition(";")
                base = head.strip().split("[")[0].split(" ")[0]
                extras = head[len(base):].strip() if head.strip().startswith(base + "[") else ""
                line = f"Requires-Dist: {base}{extras} @ {folder.as_uri()}" + (f" ;{marker}" if marker else "")
        add(line)
        if line.startswith("Provides-Extra:"):
            name = line.split(":", 1)[1].strip()
            if "-" in name:
                add(f"Provides-Extra: {name.replace('-', '_')}")
        elif line.startswith("Requires-Dist:"):
            marker = _EXTRA_MARKER.search(line)
            if marker and "-" in marker.group(2):
                underscored = marker.group(2).replace("-", "_")
                add(line[: marker.start(2)] + underscored + line[marker.end(2):])
    return "\n".join(out) + "\n"


def _fix_metadata_dir(metadata_directory: str, dist_info: str, *, local_paths: bool) -> None:
    path = Path(metadata_directory, dist_info, "METADATA")
    path.write_text(_fix_metadata(path.read_text(encoding="utf-8"), local_paths=local_paths), encoding="utf-8")


def _fix_wheel(wheel_path: Path, *, local_paths: bool) -> None:
    """Rewrite the wheel's METADATA (and its RECORD line) in place."""
    with zipfile.ZipFile(wheel_path) as source:
        items = [(info, source.read(info)) for info in source.infolist()]
    metadata_name = next(info.filename for info, _ in items if info.filename.endswith(".dist-info/METADATA"))
    record_name = metadata_name[: -len("METADATA")] + "RECORD"
    metadata = next(data for info, data in items if info.filename == metadata_name)
    fixed = _fix_metadata(metadata.decode("utf-8"), local_paths=local_paths).encode("utf-8")
    digest = base64.urlsafe_b64encode(hashlib.sha256(fixed).digest()).rstrip(b"=").decode("ascii")
    tmp = wheel_path.with_suffix(".tmp")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as target:
        for info, data in items:
            if info.filename == metadata_name:
                data = fixed
            elif info.filename == record_name:
                lines = [
                    f"{metadata_name},sha256={digest},{len(fixed)}" if row.split(",", 1)[0] == metadata_name else row
                    for row in data.decode("utf-8").splitlines()
                ]
                data = ("\n".join(lines) + "\n").encode("utf-8")
            target.writestr(info, data)
    tmp.replace(wheel_path)


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    dist_info = _setuptools.prepare_metadata_for_build_wheel(metadata_directory, config_settings)
    _fix_metadata_dir(metadata_directory, dist_info, local_paths=False)
    return dist_info


def prepare_metadata_for_build_editable(metadata_directory, config_settings=None):
    dist_info = _setuptools.prepare_metadata_for_build_editable(metadata_directory, config_settings)
    _fix_metadata_dir(metadata_directory, dist_info, local_paths=True)
    return dist_info


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    name = _setuptools.build_wheel(wheel_directory, config_settings, metadata_directory)
    _fix_wheel(Path(wheel_directory, name), local_paths=False)
    return name


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    name = _setuptools.build_editable(wheel_directory, config_settings, metadata_directory)
    _fix_wheel(Path(wheel_directory, name), local_paths=True)
    return name
