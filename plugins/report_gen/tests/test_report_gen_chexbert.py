"""The CheXbert code path with a tiny randomly initialised BERT built from a config (nothing downloaded):
the checkpoint format, the 14 heads, the rrg binarisation, and the clinical slots it fills."""

from __future__ import annotations

import pytest
from automedbench.api import UserError
from automedbench.testing import needs
from automedbench_report_gen.chexbert import CheXbertLabeler, build_model
from automedbench_report_gen.clinical import ClinicalScorer, make_scorer
from automedbench_report_gen.labeler import OBSERVATIONS

# torch and transformers are imported inside the tests that use them: at collection they cost seconds
needs_torch = needs("torch", "transformers")

WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "heart", "is", "enlarged", "no", "effusion", "."]
# class per head: 0 blank, 1 positive, 2 negative, 3 uncertain (No Finding: 0 blank, 1 positive)
FORCED = {"Cardiomegaly": 1, "Pleural Effusion": 3, "Edema": 2}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    import torch
    import transformers

    folder = tmp_path_factory.mktemp("bert")
    (folder / "vocab.txt").write_text("\n".join(WORDS) + "\n")
    config = transformers.BertConfig(vocab_size=len(WORDS), hidden_size=32, num_hidden_layers=2,
                                     num_attention_heads=2, intermediate_size=37, max_position_embeddings=64)
    config.save_pretrained(folder)
    torch.manual_seed(0)
    model = build_model(folder)
    with torch.no_grad():
        for name, head in zip(OBSERVATIONS, model.linear_heads, strict=True):
            head.weight.zero_()
            head.bias.zero_()
            head.bias[FORCED.get(name, 0)] = 5.0
    state = {f"module.{k}": v for k, v in model.state_dict().items()}  # as the released DataParallel checkpoint
    torch.save({"model_state_dict": state}, folder / "chexbert.pth")
    return folder


@needs_torch
def test_heads_and_rrg_binarisation(tiny):
    labeler = CheXbertLabeler(tiny / "chexbert.pth", tiny)
    classes = labeler.classes(["the heart is enlarged .", "no effusion ."])
    expected = [FORCED.get(n, 0) for n in OBSERVATIONS]
    assert classes == [expected, expected]
    binary = labeler.label(["the heart is enlarged ."])[0]
    on = {n for n, v in zip(OBSERVATIONS, binary, strict=True) if v}
    assert on == {"Cardiomegaly", "Pleural Effusion"}  # positive and uncertain -> 1; negative -> 0


@needs_torch
def test_model_labels_fill_the_chexbert_slots(tiny):
    scorer = ClinicalScorer(CheXbertLabeler(tiny / "chexbert.pth", tiny))
    scores = scorer.score(["the heart is enlarged ."], ["no effusion ."])
    assert set(scores.components) == {"entity_f1_rule", "chexbert_micro_p", "chexbert_micro_r", "chexbert_micro_f1"}
    assert scores.components["chexbert_micro_f1"] == 1.0  # constant heads: the same labels on both sides
    assert not scores.exact  # RadGraph still the rule stand-in: the Task stays "mlrg-offline"


@needs_torch
def test_options_and_bad_checkpoints(tiny, tmp_path):
    import torch

    scorer = make_scorer({"clinical_backend": "models", "chexbert_weights": str(tiny / "chexbert.pth"),
                          "bert_dir": str(tiny)})
    assert scorer.labeler.name == "chexbert"
    with pytest.raises(UserError, match="needs chexbert_weights"):
        make_scorer({"clinical_backend": "models"})
    with pytest.raises(UserError, match="rules' or 'models"):
        make_scorer({"clinical_backend": "gpt"})
    torch.save({"model_state_dict": {"module.other.weight": torch.zeros(1)}}, tmp_path / "bad.pth")
    with pytest.raises(UserError, match="not a CheXbert checkpoint"):
        CheXbertLabeler(tmp_path / "bad.pth", tiny)


def test_radgraph_adapter_refuses_cleanly_without_the_package():
    try:
        import radgraph  # noqa: F401
    except ImportError:
        from automedbench_report_gen.radgraph_adapter import RadGraphScorer

        with pytest.raises(UserError, match="radgraph package"):
            RadGraphScorer()
    else:
        pytest.skip("radgraph is installed here; the adapter would load its weights")
