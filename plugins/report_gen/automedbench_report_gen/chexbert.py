"""The real CheXbert labeler from local weights, through `transformers` (evaluation option
`clinical_backend=models`). Nothing is downloaded: the BERT config and vocabulary come from `bert_dir`
(a local bert-base-uncased folder), the trained weights from `chexbert.pth`.

CheXbert (Smit et al., EMNLP 2020) is BERT with 14 linear heads on the [CLS] state: 13 observations with
4 classes (0 blank, 1 positive, 2 negative, 3 uncertain) and No Finding with 2 (0 blank, 1 positive).
Its released checkpoint holds `model_state_dict` with DataParallel's `module.` prefix. The "rrg"
binarisation then maps {positive, uncertain} to 1."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .labeler import OBSERVATIONS

POSITIVE, UNCERTAIN = 1, 3
MAX_TOKENS = 512


def build_model(bert_dir: Path) -> Any:
    """CheXbert's architecture around a BERT built from a local config (weights loaded separately)."""
    import torch
    from transformers import BertConfig, BertModel

    class CheXbert(torch.nn.Module):
        def __init__(self, config: Any) -> None:
            super().__init__()
            self.bert = BertModel(config, add_pooling_layer=True)
            self.dropout = torch.nn.Dropout(0.1)
            width = config.hidden_size
            heads = [torch.nn.Linear(width, 4) for _ in range(len(OBSERVATIONS) - 1)] + [torch.nn.Linear(width, 2)]
            self.linear_heads = torch.nn.ModuleList(heads)

        def forward(self, input_ids: Any, attention_mask: Any) -> list[Any]:
            cls = self.bert(input_ids, attention_mask=attention_mask)[0][:, 0, :]
            cls = self.dropout(cls)
            return [head(cls) for head in self.linear_heads]

    return CheXbert(BertConfig.from_pretrained(str(bert_dir), local_files_only=True))


def load_state(path: Path) -> dict[str, Any]:
    import torch

    checkpoint = torch.load(str(path), map_location="cpu", weights_only=True)
    state = checkpoint.get("model_state_dict", checkpoint) if isinstance(checkpoint, dict) else checkpoint
    return {k.removeprefix("module."): v for k, v in state.items()}


class CheXbertLabeler:
    """14 binary CheXpert labels per report from the CheXbert model (CPU, batches of 16)."""

    name = "chexbert"

    def __init__(self, weights: Path, bert_dir: Path, batch_size: int = 16) -> None:
        from transformers import BertTokenizer

        self.tokenizer = BertTokenizer.from_pretrained(str(bert_dir), local_files_only=True)
        self.model = build_model(bert_dir)
        missing, unexpected = self.model.load_state_dict(load_state(weights), strict=False)
        wanted = [k for k in missing if not k.endswith("position_ids")]
        if wanted or unexpected:
            from automedbench.api import UserError

            raise UserError(f"{weights}: not a CheXbert checkpoint for this BERT (missing {wanted[:3]}, "
                            f"unexpected {unexpected[:3]})")
        self.model.eval()
        self.batch_size = batch_size

    def classes(self, texts: list[str]) -> list[list[int]]:
        """Raw class per observation (0 blank, 1 positive, 2 negative, 3 uncertain) for each report."""
        import torch

        out: list[list[int]] = []
        for start in range(0, len(texts), self.batch_size):
            batch = [" ".join(t.split()) for t in texts[start:start + self.batch_size]]
            encoded = self.tokenizer(batch, padding=True, truncation=True, max_length=MAX_TOKENS, return_tensors="pt")
            with torch.no_grad():
                logits = self.model(encoded["input_ids"], encoded["attention_mask"])
            picks = torch.stack([head.argmax(dim=1) for head in logits], dim=1)
            out.extend(picks.tolist())
        return out

    def label(self, texts: list[str]) -> list[list[int]]:
        return [[1 if c in (POSITIVE, UNCERTAIN) else 0 for c in row] for row in self.classes(texts)]
