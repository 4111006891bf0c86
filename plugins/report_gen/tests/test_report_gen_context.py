"""The optional medspacy ConText labeler: same interface and precedence as the rule labeler. medspacy
cannot share the harness's environment (it needs numpy < 2), so this runs only where it is installed."""

from __future__ import annotations

import pytest
from automedbench_report_gen.labeler import OBSERVATIONS

pytest.importorskip("medspacy")


def test_context_reads_negation_and_uncertainty():
    from automedbench_report_gen.context_labeler import ContextLabeler

    labeler = ContextLabeler()
    rows = labeler.label(["No pleural effusion or pneumothorax. Possible cardiomegaly.",
                          "There is a small left pleural effusion. The heart is not enlarged.",
                          "The lungs are clear."])
    at = {name: k for k, name in enumerate(OBSERVATIONS)}
    assert rows[0][at["Pleural Effusion"]] == 0 and rows[0][at["Pneumothorax"]] == 0
    assert rows[0][at["Cardiomegaly"]] == 1 and rows[0][at["No Finding"]] == 0  # uncertain counts as 1
    assert rows[1][at["Pleural Effusion"]] == 1 and rows[1][at["Cardiomegaly"]] == 0
    assert rows[2] == [0] * (len(OBSERVATIONS) - 1) + [1]
