"""The scripted reference agent's "model": answers the demo questions from the pixels.

Written into the agent's workspace and run there (agent code, never imported by the evaluator).
`generate(question, images)` plays the role of a VLM forward pass and returns a sentence;
`postprocess(raw, question)` turns it into the answer record's fields.
Usage: `python vqa_method.py DATA_DIR OUT_DIR [QID ...] [--ids-file FILE] [--limit N]`.
"""

import json
import re
import sys
import time
from collections import deque
from pathlib import Path

import numpy as np
from PIL import Image

MODEL_NAME = "pixel-rules-v1"
THRESHOLD = 170
WORDS = {0: "zero", 1: "one", 2: "two", 3: "three", 4: "four", 5: "five"}


def components(mask):
    """4-connected components as lists of (y, x); pure Python, fine for 128 x 128 images."""
    seen = np.zeros(mask.shape, dtype=bool)
    found = []
    for y, x in zip(*np.nonzero(mask), strict=True):
        if seen[y, x]:
            continue
        queue, pixels = deque([(y, x)]), []
        seen[y, x] = True
        while queue:
            cy, cx = queue.popleft()
            pixels.append((cy, cx))
            for ny, nx in ((cy + 1, cx), (cy - 1, cx), (cy, cx + 1), (cy, cx - 1)):
                if 0 <= ny < mask.shape[0] and 0 <= nx < mask.shape[1] and mask[ny, nx] and not seen[ny, nx]:
                    seen[ny, nx] = True
                    queue.append((ny, nx))
        if len(pixels) >= 12:
            found.append(pixels)
    return found


def shape_of(pixels):
    ys, xs = zip(*pixels, strict=True)
    box = (max(ys) - min(ys) + 1) * (max(xs) - min(xs) + 1)
    fill = len(pixels) / box
    return "square" if fill > 0.9 else "circle" if fill > 0.65 else "triangle"


def generate(question, images):
    """A sentence answering the question, from thresholded bright blobs."""
    arrays = [np.asarray(Image.open(p).convert("L")) for p in images]
    blobs = [components(a > THRESHOLD) for a in arrays]
    text = question["question"].lower()
    found = blobs[0]
    if "which frame" in text:
        sizes = [sum(len(c) for c in b) for b in blobs]
        return f"The lesion is largest in frame {int(np.argmax(sizes)) + 1}."
    if "how many" in text:
        return f"I can see {WORDS.get(len(found), str(len(found)))} bright lesion(s)."
    if "which side" in text:
        xs = [x for c in found for _, x in c]
        side = "left" if xs and np.mean(xs) < arrays[0].shape[1] / 2 else "right"
        return f"The lesions are on the {side} side of the image."
    if "shape" in text:
        shapes = [shape_of(c) for c in found]
        return f"The lesions look like a {max(set(shapes), key=shapes.count) if shapes else 'none'}."
    return "Yes, there is a bright lesion." if found else "No, there is no lesion."


def postprocess(raw, question):
    """(predicted_label, predicted_answer) from the raw sentence."""
    options = question.get("options") or {}
    if question.get("mode") == "multiple_choice":
        lowered = raw.lower()
        for letter, option in options.items():
            if re.search(r"\b" + re.escape(option.lower()) + r"\b", lowered):
                return letter, option
        return "", ""
    lowered = raw.lower().strip()
    if lowered.startswith("yes"):
        return "", "yes"
    if lowered.startswith("no,"):
        return "", "no"
    found = re.search(r"see (\w+) bright", lowered)
    if found:
        return "", found.group(1)
    found = re.search(r"on the (left|right)", lowered)
    return "", found.group(1) if found else lowered.rstrip(".")


def answer(data_dir, out_dir, qid):
    folder = Path(data_dir) / qid
    question = json.loads((folder / "question.json").read_text())
    started = time.monotonic()
    raw = generate(question, [folder / p for p in question["image_paths"]])
    label, text = postprocess(raw, question)
    record = {"question_id": qid, "predicted_label": label, "predicted_answer": text, "raw_model_output": raw,
              "model_name": MODEL_NAME, "runtime_s": round(time.monotonic() - started, 4)}
    target = Path(out_dir) / qid
    target.mkdir(parents=True, exist_ok=True)
    tmp = target / ".answer.json.tmp"
    tmp.write_text(json.dumps(record, indent=2))
    tmp.replace(target / "answer.json")
    return record


def main(argv):
    data, out, *rest = argv
    ids, limit = [], None
    while rest:
        item = rest.pop(0)
        if item == "--ids-file":
            ids += Path(rest.pop(0)).read_text().split()
        elif item == "--limit":
            limit = int(rest.pop(0))
        else:
            ids.append(item)
    if not ids:
        ids = sorted(p.name for p in Path(data).iterdir() if (p / "question.json").is_file())
    ids = ids[:limit] if limit else ids
    for i, qid in enumerate(ids, 1):
        record = answer(data, out, qid)
        print(f"[{i}/{len(ids)}] {qid}: {record['predicted_label'] or record['predicted_answer']!r}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
