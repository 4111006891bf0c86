"""The model-graded scoring step's prompt, for tracks' tests: the step itself comes with automedbench-models."""

from __future__ import annotations

from typing import Any


def render_grade_request(request: Any) -> tuple[str, str]:
    """(system, prompt) exactly as the grading step sends them: agent text fenced, the reply format last."""
    from automedbench_models.grading import render

    return render(request)
