"""Stage the phantom demo task: generated in code, deterministic, about a second."""

from __future__ import annotations

from pathlib import Path

from automedbench.records import TaskSpec
from automedbench.track import StagedData

from . import io, phantom


def stage_demo(task: TaskSpec, dest: Path) -> StagedData:
    public, private = dest / "public", dest / "private"
    tumour_free = set(task.params.get("tumour_free_cases", []))
    seed = int(task.params.get("seed", 20261202))
    ids = [f"case_{i:03d}" for i in range(task.case_count)]
    facts = {}
    aff = phantom.affine()
    for index, case in enumerate(ids):
        ct, organ, lesion = phantom.make_case(index, case not in tumour_free, seed)
        io.save(public / case / "ct.nii.gz", ct, aff)
        io.save(private / case / "organ.nii.gz", organ, aff)
        io.save(private / case / "lesion.nii.gz", lesion, aff)
        facts[case] = {"lesion_present": bool(lesion.any())}
    io.write_case_facts(private, facts)
    return StagedData(dest, public, private, ids)
