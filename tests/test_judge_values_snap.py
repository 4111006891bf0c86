"""A judge's value read on the item's scale as the original reads it (`llm_judge._build_verdict`): a binary item
passes from 0.5 up (`1 if v >= 0.5 else 0`), a ladder takes the nearest level and the lower one on a tie
(`min((0.0, 0.5, 1.0), key=distance)`). Ours took the nearest level for both, so a binary 0.5 failed."""

from __future__ import annotations

import pytest
from automedbench import scoring
from automedbench.records import ItemVerdict, JudgeVerdict
from automedbench.rubric import default_rubric, resolve


@pytest.mark.parametrize(("said", "expected"), [(0.5, 1.0), (0.49, 0.0), (0.51, 1.0), (0.0, 0.0), (7.0, 1.0),
                                                 (-1.0, 0.0), (float("nan"), 0.0)])
def test_a_binary_item_passes_from_one_half(said, expected):
    rubric = default_rubric()
    verdict = JudgeVerdict("x", "1", [ItemVerdict(i.id, i.stage, "", said if i.id == "s1a_plan_md" else 1.0, "")
                                      for i in rubric.items])
    s1 = scoring.judged_stages(resolve(rubric, "standard", []), verdict, "standard")[0]
    assert {i.id: i.value for i in s1.items}["s1a_plan_md"] == expected


@pytest.mark.parametrize(("said", "expected"), [(0.25, 0.0), (0.75, 0.5), (0.76, 1.0), (0.5, 0.5), (0.24, 0.0)])
def test_a_ladder_takes_the_nearest_level_and_the_lower_on_a_tie(said, expected):
    assert scoring.snap(said, [1.0, 0.5, 0.0]) == expected
