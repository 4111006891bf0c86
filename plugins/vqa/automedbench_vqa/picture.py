"""Each question's picture for the run page: its image(s) (up to three frames), with the question, the agent's
answer and the gold answer as text beside them. The answer is the record the scoring read with the contract's
reader (size-limited JSON); the page escapes every text."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from automedbench.api import CasePicture, Panel, read_image

MAX_FRAMES = 3


def _question_text(question: dict[str, Any]) -> str:
    text = str(question.get("question", ""))
    options = question.get("options")
    if isinstance(options, dict) and options:
        text += "\n" + "\n".join(f"{k}. {v}" for k, v in list(options.items())[:8])
    return text


def _answer_text(record: dict[str, Any]) -> str:
    label, answer = record.get("predicted_label"), record.get("predicted_answer")
    parts = [f"{label}" if label else "", str(answer) if answer not in (None, "") else ""]
    shown = " — ".join(p for p in parts if p) or "(empty)"
    raw = str(record.get("raw_model_output") or "")
    return shown + (f"\n\nraw model output:\n{raw[:1500]}" if raw and raw.strip() != shown.strip() else "")


def case_picture(public_case: Path, question: dict[str, Any], record: dict[str, Any] | None,
                 gold: dict[str, Any], score: Any = None) -> CasePicture:
    panels = []
    paths = [p for p in question.get("image_paths") or [] if isinstance(p, str)]
    for index, name in enumerate(paths[:MAX_FRAMES]):
        path = public_case / name
        if ".." in Path(name).parts or Path(name).is_absolute():
            continue  # staged names are plain: anything else is not drawn
        title = "image" if len(paths) == 1 else f"frame {index + 1} of {len(paths)}"
        panels.append(Panel(title, image=read_image(path), role="input"))
    panels.append(Panel("question", text=_question_text(question), role="input"))
    panels.append(Panel("answer", text=_answer_text(record), role="output") if record is not None
                  else Panel("answer", text="(no valid answer)", role="output"))
    label, answer = gold.get("answer_label"), gold.get("answer_text")
    panels.append(Panel("gold", text=" — ".join(str(p) for p in (label, answer) if p) or "(none)",
                        role="reference"))
    caption = f"score {score:.2f}" if isinstance(score, float) else ""
    return CasePicture(panels, caption)
