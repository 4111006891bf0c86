"""Stage the phantom demo tasks: generated in code, deterministic, about a second."""

from __future__ import annotations

from pathlib import Path

from automedbench.api import StagedData, TaskSpec

from .. import io
from . import phantom


def stage_demo(task: TaskSpec, dest: Path) -> StagedData:
    if task.params.get("phantom") == "airway":
        from .airway_phantom import stage_airway_demo

        return stage_airway_demo(task, dest)
    public, private = dest / "public", dest / "private"
    tumour_free = set(task.params.get("tumour_free_cases", []))
    seed = int(task.params.get("seed", 20261202))
    ids = [f"case_{i:03d}" for i in range(task.case_count)]
    facts = {}
    aff = phantom.affine()
    multilabel = task.params.get("kind") == "multilabel"
    for index, case in enumerate(ids):
        tumour = case not in tumour_free
        if multilabel:
            ct, labels = phantom.make_label_map(index, tumour, seed)
            io.save(private / case / task.output_files[0], labels, aff)
            facts[case] = {"lesion_present": bool((labels == 2).any())}
        else:
            ct, organ, lesion = phantom.make_case(index, tumour, seed)
            io.save(private / case / "organ.nii.gz", organ, aff)
            io.save(private / case / "lesion.nii.gz", lesion, aff)
            facts[case] = {"lesion_present": bool(lesion.any())}
        io.save(public / case / task.input_files[0], ct, aff)
    io.write_case_facts(private, facts)
    return StagedData(dest, public, private, ids)
