"""Every report-generation stager passes the stager conformance check (`automedbench.testing.check_stager`)
on a small download in its dataset's layout: a fresh secret per staging (no split file, table or folder order
predicts which study a case is), images written again as PNG, nothing but regular files published, the
perfect baseline exactly 1.0, and hostile downloads (links, FIFOs, damaged files) refused in one line."""

from __future__ import annotations

import pytest
from automedbench.testing import assert_stager_conforms, sampled
from test_report_gen_stagers import make_chexpert_plus, make_iu_openi, make_iu_r2gen, make_mimic, make_pathcap


def _written(make, count):
    def build(src):
        make(src, count)
        return src
    return build


# (task, fixture download writer, params changed for the small fixture)
FIXTURES = [
    ("report_gen/mimic-cxr", _written(make_mimic, 12), {"sample": 9}),
    ("report_gen/pathcap-100", _written(make_pathcap, 12), {"sample": 9}),
    ("report_gen/iu-xray", _written(make_iu_r2gen, 12), {"sample": None}),
    ("report_gen/chexpert-plus", _written(make_chexpert_plus, 12), {"sample": None}),
    ("report_gen/iu-xray", _written(make_iu_openi, 12), {"sample": None}),
    ("report_gen/pathcap-500", _written(make_pathcap, 12), {"sample": 9}),
]


@pytest.mark.parametrize(("task_id", "write", "params"), sampled(FIXTURES, keep=3))
def test_stager_conformance(tmp_path, task_id, write, params):
    # 9 studies of the fixture's 12: a download with fewer usable ones is refused as short
    assert_stager_conforms(task_id, write(tmp_path / "download"), tmp_path / "work", case_count=9, params=params)
