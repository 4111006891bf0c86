"""The demo's lesion classifier run (agent code: written into the sandbox by the scripted reference).

Loads the task's pinned checkpoint offline (a transformers ViT image classifier in the read-only assets
folder), classifies each image and maps the checkpoint's `id2label` abbreviations onto the task's class
names with LABEL_MAP (a JSON file); without one, the labels are written as the model gives them.
usage: python3 classify_lesions.py MODEL_DIR DATA_DIR OUT_DIR [LABEL_MAP.json] [CASE ...]
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
BATCH = 16


def load(model_dir: str):
    """(model, processor) from the checkpoint folder, local files only."""
    from transformers import AutoImageProcessor, AutoModelForImageClassification

    model = AutoModelForImageClassification.from_pretrained(model_dir, local_files_only=True).eval()
    processor = AutoImageProcessor.from_pretrained(model_dir, local_files_only=True)
    return model, processor


def predict(model, processor, images: list) -> list[tuple[str, list[float]]]:
    """(id2label name, class probabilities) per PIL image."""
    import torch

    with torch.no_grad():
        logits = model(**processor(images=images, return_tensors="pt")).logits
    probs = logits.softmax(-1)
    return [(model.config.id2label[int(k)], p.tolist()) for k, p in zip(logits.argmax(-1), probs, strict=True)]


def read_image(path: Path):
    from PIL import Image

    with Image.open(path) as image:
        return image.convert("RGB")


def main(model_dir: str, data_dir: str, out_dir: str, cases: list[str], label_map: dict[str, str]) -> None:
    model, processor = load(model_dir)
    cases = cases or sorted(p.name for p in Path(data_dir).iterdir() if p.is_dir())
    for start in range(0, len(cases), BATCH):
        batch = cases[start:start + BATCH]
        images = [read_image(Path(data_dir) / case / "image.jpg") for case in batch]
        for case, (name, _) in zip(batch, predict(model, processor, images), strict=True):
            target = Path(out_dir) / case
            target.mkdir(parents=True, exist_ok=True)
            (target / "prediction.json").write_text(json.dumps({"label": label_map.get(name, name)}) + "\n")
    print(len(cases), "images classified")


if __name__ == "__main__":
    args = sys.argv[1:]
    mapping = json.loads(Path(args[3]).read_text()) if len(args) > 3 and args[3].endswith(".json") else {}
    main(args[0], args[1], args[2], args[4:] if mapping else args[3:], mapping)
