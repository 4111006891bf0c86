"""The IU X-ray (Open-i) reports bundled in an installed torchxrayvision, read by path (never imported:
its import pulls torchvision), for metric and labeler checks. CC BY-NC-ND 4.0: read at run time only,
never copied into this repository or a staged task.

`python -m automedbench_report_gen.iu_reports` measures the rule labeler against the MeSH "major" tags."""

from __future__ import annotations

import importlib.util
import re
import sys
import tarfile
from pathlib import Path

from attrs import define, field
from automedbench.api import UserError, parse_xml, tar_member_ok

from .labeler import OBSERVATIONS, ClinicalLabeler, RuleLabeler

MAX_MEMBERS = 100_000  # the report archive holds about 4 000

# first component of a MeSH major tag -> CheXpert observation (weak gold)
MESH_TO_CHEXPERT: dict[str, str] = {
    "cardiomegaly": "Cardiomegaly", "opacity": "Lung Opacity", "infiltrate": "Lung Opacity",
    "airspace disease": "Lung Opacity", "pulmonary atelectasis": "Atelectasis", "atelectasis": "Atelectasis",
    "nodule": "Lung Lesion", "mass": "Lung Lesion", "pleural effusion": "Pleural Effusion",
    "pneumothorax": "Pneumothorax", "consolidation": "Consolidation", "fractures, bone": "Fracture",
    "pulmonary edema": "Edema", "edema": "Edema", "pneumonia": "Pneumonia", "medical device": "Support Devices",
    "catheters, indwelling": "Support Devices", "tube, inserted": "Support Devices",
    "implanted medical device": "Support Devices", "normal": "No Finding",
}


@define
class IUReport:
    uid: str
    findings: str
    impression: str
    mesh: list[str] = field(factory=list)
    images: list[str] = field(factory=list)


def bundled_archive() -> Path | None:
    spec = importlib.util.find_spec("torchxrayvision")
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / "data" / "NLMCXR_reports.tgz"
    return path if path.is_file() else None


def read_reports(archive: Path | None = None) -> list[IUReport]:
    archive = archive or bundled_archive()
    if archive is None:
        raise FileNotFoundError("torchxrayvision is not installed (pip install --no-deps torchxrayvision)")
    out = []
    with tarfile.open(archive) as tar:
        for count, member in enumerate(tar):
            if count > MAX_MEMBERS:
                raise UserError(f"{archive}: more than {MAX_MEMBERS} members; not the IU X-ray report archive")
            # links, devices, paths leaving the archive and members over 1 MiB are never read
            if tar_member_ok(member, 1 << 20) or not member.isfile() or not member.name.endswith(".xml"):
                continue
            root = parse_xml(tar.extractfile(member).read(), f"{archive}:{member.name}")  # type: ignore[union-attr]
            parts = {el.get("Label", "").upper(): " ".join((el.text or "").split()) for el in root.iter("AbstractText")}
            mesh = [el.text or "" for el in root.iter("major")]
            images = [el.get("id", "") for el in root.iter("parentImage")]
            uid = next((el.get("id", "") for el in root.iter("uId")), Path(member.name).stem)
            out.append(IUReport(uid, parts.get("FINDINGS", ""), parts.get("IMPRESSION", ""), mesh, images))
    return sorted(out, key=lambda r: int(re.sub(r"\D", "", r.uid) or 0))


def mesh_labels(tags: list[str]) -> set[str]:
    return {MESH_TO_CHEXPERT[t.split("/")[0].strip().lower()] for t in tags
            if t.split("/")[0].strip().lower() in MESH_TO_CHEXPERT}


def labeler_vs_mesh(reports: list[IUReport], labeler: ClinicalLabeler | None = None
                    ) -> dict[str, tuple[float, float, float, int]]:
    """Per observation (and "micro") precision, recall, F1 and support of a labeler (default: the rule
    labeler) on FINDINGS + IMPRESSION against the MeSH major tags."""
    labeler = labeler or RuleLabeler()
    used = [r for r in reports if r.findings or r.impression]
    predicted = labeler.label([f"{r.findings} {r.impression}" for r in used])
    gold = [mesh_labels(r.mesh) for r in used]
    names = [n for n in OBSERVATIONS if n in set(MESH_TO_CHEXPERT.values())]
    table = {}
    totals = [0, 0, 0]
    for name in names:
        k = OBSERVATIONS.index(name)
        tp = sum(1 for p, g in zip(predicted, gold, strict=True) if p[k] and name in g)
        fp = sum(1 for p, g in zip(predicted, gold, strict=True) if p[k] and name not in g)
        fn = sum(1 for p, g in zip(predicted, gold, strict=True) if not p[k] and name in g)
        table[name] = _prf(tp, fp, fn)
        totals = [totals[0] + tp, totals[1] + fp, totals[2] + fn]
    table["micro"] = _prf(*totals)
    return table


def _prf(tp: int, fp: int, fn: int) -> tuple[float, float, float, int]:
    p = tp / (tp + fp) if tp + fp else 0.0
    r = tp / (tp + fn) if tp + fn else 0.0
    return p, r, (2 * p * r / (p + r) if p + r else 0.0), tp + fn


def main(argv: list[str]) -> int:
    """`python -m automedbench_report_gen.iu_reports [--labeler rules|context]` (context: medspacy ConText)."""
    which = argv[argv.index("--labeler") + 1] if "--labeler" in argv[:-1] else "rules"
    if which not in ("rules", "context"):
        print(f"unknown labeler {which!r}: rules or context", file=sys.stderr)
        return 2
    if which == "context":
        from .context_labeler import ContextLabeler

        labeler: ClinicalLabeler = ContextLabeler()
    else:
        labeler = RuleLabeler()
    reports = read_reports()
    table = labeler_vs_mesh(reports, labeler)
    print(f"{labeler.name} labeler vs IU MeSH major tags ({len(reports)} reports, FINDINGS + IMPRESSION)")
    print(f"{'label':<28}{'P':>7}{'R':>7}{'F1':>7}{'support':>9}")
    for name, (p, r, f, n) in table.items():
        print(f"{name:<28}{p:7.3f}{r:7.3f}{f:7.3f}{n:9d}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
