"""Stage the phantom demo tasks: generated in code, deterministic, about a second."""

from __future__ import annotations

import random
from pathlib import Path

from automedbench.api import StagedData, TaskSpec, staging_area

from .. import io
from . import phantom


def stage_demo(task: TaskSpec, dest: Path) -> StagedData:
    if task.params.get("phantom") == "airway":
        from .airway_phantom import stage_airway_demo

        return stage_airway_demo(task, dest)
    seed = int(task.params.get("seed", 20261202))
    ids = [f"case_{i:03d}" for i in range(task.case_count)]
    tumour_free = tumour_free_cases(ids, int(task.params.get("tumour_free_count", 0)), seed)
    facts = {}
    aff = phantom.affine()
    multilabel = task.params.get("kind") == "multilabel"
    with staging_area(dest) as area:
        for index, case in enumerate(ids):
            tumour = case not in tumour_free
            if multilabel:
                ct, labels = phantom.make_label_map(index, tumour, seed)
                io.save(area.private / case / task.output_files[0], labels, aff)
                facts[case] = {"lesion_present": bool((labels == 2).any())}
            else:
                ct, organ, lesion = phantom.make_case(index, tumour, seed)
                io.save(area.private / case / "organ.nii.gz", organ, aff)
                io.save(area.private / case / "lesion.nii.gz", lesion, aff)
                facts[case] = {"lesion_present": bool(lesion.any())}
            io.save(area.public / case / task.input_files[0], ct, aff)
        io.write_case_facts(area.private, facts)
        return area.commit(ids)


def tumour_free_cases(ids: list[str], count: int, seed: int) -> set[str]:
    """Which cases have no tumour: drawn from the staging's seed (a secret for a staged demo), since the case
    ids are fixed and the task file (readable in the sandbox) may say only how many."""
    return set(random.Random(f"tumour-free:{seed}").sample(ids, min(max(count, 0), len(ids))))
