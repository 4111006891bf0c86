"""The text metrics as `evaluate` modules, loaded by path offline, give the evaluator's own numbers."""

from __future__ import annotations

import pytest
from automedbench.testing import needs
from automedbench_report_gen.hf import NAMES, compute, module_path

pytestmark = needs("evaluate")

PREDS = ["FINDINGS: The heart is enlarged. No pleural effusion.\n\nIMPRESSION: Cardiomegaly.",
         "The lungs are clear. Small right pleural effusion."]
REFS = ["The heart is enlarged. Small left pleural effusion.", "The lungs are clear. No pneumothorax."]


@pytest.mark.parametrize("name", [n for n in NAMES if n != "report_meteor"])
def test_module_matches_the_direct_call(name, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_MODULES_CACHE", str(tmp_path / "modules"))
    import evaluate  # 40 s of imports (datasets, torch, transformers): only where it is used

    metric = evaluate.load(module_path(name))
    assert metric.compute(predictions=PREDS, references=REFS) == compute(name, PREDS, REFS)


def test_bleu_module_scores_the_findings_section():
    found = compute("report_bleu", ["FINDINGS: a b c d\nIMPRESSION: x y"], ["a b c d"])
    assert found["bleu_1"] == pytest.approx(1.0, abs=1e-6)


def test_unknown_module_name():
    with pytest.raises(KeyError, match="report_bleu"):
        module_path("bleu")
