"""The demo is staged from a fresh secret seed each time: the reference method must keep its A on every draw.

Seeds found by a scan where a coin per sentence worded most reference sentences the second way; the
reference method (which writes one wording) then scored 0.772-0.789, below the offline A (0.80), so the
reference run drew B on some stagings only. Now each sentence kind takes each wording in half its studies.
"""

from __future__ import annotations

import attrs
import numpy as np
import pytest
from automedbench.testing import load_solution_script
from automedbench_report_gen.metric import ReportEvaluation
from automedbench_report_gen.track import ReportTrack

WORDING_SEEDS = [2401702782830836754, 4839348958553516037, 6324746501489442838]


@pytest.mark.parametrize("seed", WORDING_SEEDS + [int(s) for s in np.random.default_rng(11).integers(0, 2**62, 2)])
def test_reference_method_rates_a_on_every_draw(seed, tmp_path):
    track = ReportTrack()
    demo = next(t for t in track.tasks() if t.id == "report_gen/demo")
    task = attrs.evolve(demo, params={**demo.params, "seed": seed})
    staged = track.stage(task, tmp_path / "data", None)
    load_solution_script("automedbench_report_gen", "method").main([str(staged.public), str(tmp_path / "out")])
    scoring = ReportEvaluation(task, staged)
    scores = [scoring.score_case(case, tmp_path / "out" / case) for case in staged.case_ids]
    metric = scoring.aggregate(scores, staged.case_ids)
    assert metric.components["label_micro_f1_rule"] >= 0.95, seed
    assert metric.strict >= track.rating_thresholds(task, metric).good, (seed, metric.strict)


@pytest.mark.parametrize("seed", [0, 20261203, *WORDING_SEEDS])
def test_each_sentence_kind_takes_each_wording_in_half_its_studies(seed):
    from automedbench_report_gen.data.demo import CASES, cohort_choices
    from automedbench_report_gen.data.wording import sentence_keys

    seconds: dict[str, list[int]] = {}
    for findings, row in zip(CASES, cohort_choices(seed), strict=True):
        keys = [key for key, _ in sentence_keys(findings)]
        assert len(row) == len(keys)
        for key, flag in zip(keys, row, strict=True):
            seconds.setdefault(key, []).append(flag)
    for key, flags in seconds.items():
        assert len(flags) // 2 <= sum(flags) <= (len(flags) + 1) // 2, (key, flags)
    assert cohort_choices(seed) != cohort_choices(seed + 1)  # the seed still decides which study reads how
