"""The VQA rubric through the rules judge: smoke, answer checks and calibration decide the S3 ladder."""

from __future__ import annotations

import pytest
from automedbench.testing import grade_by_rules


def tool(turn, code, cases):
    return {"type": "tool", "name": "execute_code", "turn": turn, "code": code, "stdout": "", "exit_code": 0,
            "cases_with_outputs": cases}


def s3(checks: list[str]) -> float:
    events = [tool(1, "python3 vqa_method.py /data/public outputs q01", 1)]
    events += [tool(2 + i, f"import json\nrec = json.load(open('outputs/q01/answer.json'))\n{c}", 1)
               for i, c in enumerate(checks)]
    events.append(tool(2 + len(checks), "python3 vqa_method.py /data/public outputs", 24))
    return grade_by_rules("vqa/demo", "lite", events).items["s3_validate"].value


@pytest.mark.parametrize(("checks", "expected"), [
    ([], 0.2),                                                        # smoke without checks
    (["print(rec['raw_model_output'])"], 0.5),                        # raw output checked only
    (["print(rec['raw_model_output'], rec['predicted_label'])"], 0.5),  # no calibration yet
    (["print(rec['raw_model_output'], rec['predicted_label'])",
      "ids = open('/data/public/calibration_ids.txt').read().split()  # check answer.json per id"], 1.0),
])
def test_s3_ladder_for_vqa(checks, expected):
    assert s3(checks) == expected
