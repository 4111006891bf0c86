"""Train the demo's shipped lesion classifier: a tiny transformers ViT whose `id2label` holds the HAM10000
checkpoint abbreviations (mel, nv, ...), so the Lite brief's remapping trap is real on the demo.

Maintainer tool, not agent code: it regenerates `assets/demo-lesion-vit/` (config.json, model.safetensors,
preprocessor_config.json, README.md) from the demo generator alone, on fixed training seeds that no staging
uses (stagings draw a fresh secret seed), with fixed torch seeds and one thread, so a rerun on the same
platform gives the same weights. Needs torch (the CPU build) and transformers:

    python -m automedbench_classification.solution.train_model [--out DIR] [--per-class N] [--epochs E]
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
from pathlib import Path

import numpy as np
from PIL import Image

from ..data.demo import ABBREVIATIONS, make_lesion
from ..data.staged import jpeg_bytes

ASSETS = Path(__file__).resolve().parent.parent / "assets" / "demo-lesion-vit"
# Training images come from these generator seeds only; a staging's secret seed is drawn at random.
TRAIN_SEED = 9_000_001
IMAGE_SIZE = 64
MODEL_CARD = """# demo-lesion-vit

A tiny ViT image classifier (transformers `ViTForImageClassification`, {params} parameters) for the generated
`classification/demo` images only. Its labels are the HAM10000 checkpoint abbreviations
(`config.json` `id2label`: {id2label}); map them onto the task's canonical class names before writing.

- Input: RGB, resized to {size}x{size} (bilinear), rescaled by 1/255, normalised with mean = std = 0.5
  (`preprocessor_config.json`, `ViTImageProcessor`).
- Trained by `automedbench_classification.solution.train_model` on {count} generated images ({per_class} per
  class, generator seed {seed}), {epochs} epochs, AdamW, torch seed 0, one thread. Weights: `model.safetensors`
  (sha256 {digest}).
- Not a medical model: it has only ever seen the demo's synthetic lesions.
"""


def training_images(per_class: int, seed: int = TRAIN_SEED) -> tuple[list[Image.Image], list[int]]:
    """Balanced generated lesions, JPEG round-tripped as staging writes them, with their class indices."""
    images, labels = [], []
    for index in range(per_class * len(ABBREVIATIONS)):
        label = index % len(ABBREVIATIONS)
        pixels = make_lesion(seed, index, ABBREVIATIONS[label], 160)
        images.append(Image.open(io.BytesIO(jpeg_bytes(pixels, 92))).convert("RGB"))
        labels.append(label)
    return images, labels


def build(out: Path, per_class: int = 120, epochs: int = 30, seed: int = TRAIN_SEED) -> dict[str, float]:
    """Train and save the model into `out`; returns the final training loss and accuracy."""
    import torch
    from transformers import ViTConfig, ViTForImageClassification, ViTImageProcessor

    torch.manual_seed(0)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    id2label = dict(enumerate(ABBREVIATIONS))
    config = ViTConfig(image_size=IMAGE_SIZE, patch_size=8, num_channels=3, hidden_size=48, num_hidden_layers=2,
                       num_attention_heads=3, intermediate_size=96, hidden_dropout_prob=0.0,
                       attention_probs_dropout_prob=0.0, num_labels=len(id2label), id2label=id2label,
                       label2id={v: k for k, v in id2label.items()})
    processor = ViTImageProcessor(do_resize=True, size={"height": IMAGE_SIZE, "width": IMAGE_SIZE}, resample=2,
                                  do_rescale=True, rescale_factor=1 / 255, do_normalize=True,
                                  image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5])
    model = ViTForImageClassification(config)
    images, labels = training_images(per_class, seed)
    pixels = torch.tensor(np.asarray(processor(images=images, return_tensors="np")["pixel_values"]))
    target = torch.tensor(labels)
    optimiser = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    steps = epochs * ((len(labels) + 31) // 32)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimiser, max_lr=3e-3, total_steps=steps)
    order = torch.Generator().manual_seed(0)
    model.train()
    for _epoch in range(epochs):
        for batch in torch.randperm(len(labels), generator=order).split(32):
            x = pixels[batch]
            flip = torch.rand(len(batch), generator=order) < 0.5  # lesions have no handedness
            x = torch.where(flip[:, None, None, None], x.flip(-1), x)
            loss = model(pixel_values=x, labels=target[batch]).loss
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            schedule.step()
    model.eval()
    with torch.no_grad():
        logits = model(pixel_values=pixels).logits
    accuracy = float((logits.argmax(-1) == target).float().mean())
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    processor.save_pretrained(out)
    digest = hashlib.sha256((out / "model.safetensors").read_bytes()).hexdigest()
    (out / "README.md").write_text(MODEL_CARD.format(
        params=sum(p.numel() for p in model.parameters()), id2label=json.dumps(id2label), size=IMAGE_SIZE,
        count=len(labels), per_class=per_class, seed=seed, epochs=epochs, digest=digest))
    for path in out.iterdir():  # package data every sandbox user reads (docker runs the agent as uid 10001)
        path.chmod(0o644)
    return {"train_loss": float(loss.detach()), "train_accuracy": accuracy}


def measure(model_dir: Path, seeds: list[int], counts: dict[str, int]) -> list[float]:
    """Balanced accuracy of the saved model on demo stagings drawn with each seed (the demo's class mix)."""
    import torch
    from transformers import ViTForImageClassification, ViTImageProcessor

    from ..data.demo import class_plan

    model = ViTForImageClassification.from_pretrained(model_dir).eval()
    processor = ViTImageProcessor.from_pretrained(model_dir)
    scores = []
    for seed in seeds:
        plan = class_plan(counts, seed)
        images = [Image.open(io.BytesIO(jpeg_bytes(make_lesion(seed, i, abbr, 160), 92))).convert("RGB")
                  for i, abbr in enumerate(plan)]
        with torch.no_grad():
            logits = model(**processor(images=images, return_tensors="pt")).logits
        predicted = [model.config.id2label[int(k)] for k in logits.argmax(-1)]
        recalls = [np.mean([p == c for p, t in zip(predicted, plan, strict=True) if t == c]) for c in set(plan)]
        scores.append(float(np.mean(recalls)))
    return scores


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ASSETS)
    parser.add_argument("--per-class", type=int, default=120)
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--measure", type=int, default=0, metavar="N",
                        help="instead of training, the balanced accuracy of --out on N fresh random demo stagings")
    args = parser.parse_args()
    if args.measure:
        import secrets

        from ..track import ClassificationTrack

        task = next(t for t in ClassificationTrack().tasks() if t.id == "classification/demo")
        scores = measure(args.out, [secrets.randbits(32) for _ in range(args.measure)], dict(task.params["counts"]))
        print(json.dumps({"stagings": len(scores), "worst": min(scores), "mean": float(np.mean(scores))}))
        return
    print(json.dumps(build(args.out, args.per_class, args.epochs)))


if __name__ == "__main__":
    main()
