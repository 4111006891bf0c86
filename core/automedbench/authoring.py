"""Helpers for track authors writing scripted solutions: the S1 plan step and its pipeline diagram.

They live apart from the scripted agents so that a track needs only the public API to use them."""

from __future__ import annotations

from .track import ScriptStep


def pipeline_diagram_code(plan_dir: str, title: str, steps: list[str]) -> str:
    """Python (run in the sandbox) that draws a left-to-right box-and-arrow pipeline to plan_dir/plan.png.

    For tracks' scripted solutions, so every track's reference run draws its plan the same way."""
    return (
        "from PIL import Image, ImageDraw\n"
        f"steps = {steps!r}\n"
        "img = Image.new('RGB', (40 + 145 * len(steps), 220), 'white')\n"
        "d = ImageDraw.Draw(img)\n"
        "for i, s in enumerate(steps):\n"
        "    x = 20 + i * 145\n"
        "    d.rectangle([x, 80, x + 120, 140], outline=(20, 60, 160), fill=(210, 225, 250), width=3)\n"
        "    d.text((x + 8, 102), s, fill=(0, 0, 0))\n"
        "    if i < len(steps) - 1:\n"
        "        d.line([x + 120, 110, x + 145, 110], fill=(200, 40, 40), width=4)\n"
        f"d.text((20, 30), {title!r}, fill=(0, 0, 0))\n"
        f"img.save({plan_dir + '/plan.png'!r})\n"
        "print('wrote plan.png', img.size)\n"
    )


def plan_step(plan_dir: str, plan_md: str, title: str, steps: list[str], say: str) -> ScriptStep:
    """The S1 tool call of a scripted solution: write plan.md and draw plan.png (see pipeline_diagram_code)."""
    code = (f"import pathlib\npathlib.Path({plan_dir!r}).mkdir(parents=True, exist_ok=True)\n"
            f"pathlib.Path({plan_dir + '/plan.md'!r}).write_text({plan_md!r})\nprint('wrote plan.md')\n"
            + pipeline_diagram_code(plan_dir, title, steps))
    return ScriptStep("plan", "python", code, say=say)
