"""Helpers for track authors writing scripted solutions: the S1 plan step and its pipeline diagram, the steps
every track's solution ends with (verify, submit) and the flawed batches of its variants.

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


# The first line of a scripted step's Python that reads or writes NIfTI: nibabel imports pydicom at once for an
# optional DICOM extension of NIfTI headers (and pydicom imports requests), about 0.17 CPU-s of every sandboxed
# process that meets no DICOM (a scripted run makes ~7); refused, nibabel loads without it, its NIfTI the same.
NIFTI_ONLY = "import sys; sys.modules.setdefault('pydicom', None)  # NIfTI only: nibabel's DICOM extension unused\n"


# ------------------------------------------------------------------ the steps every solution ends with


def verify_and_submit(code: str, verified: str = "output", submitted: str = "outputs") -> list[ScriptStep]:
    """The two last steps of a scripted reference: `code` (Python) checks every `verified` item and fails the
    call when one is wrong (what S5's check and the error codes read), then the `submit_results` call."""
    return [ScriptStep("verify", "python", code, say=f"Verifying every {verified} before submitting."),
            ScriptStep("submit", submit=True, say=f"All {submitted} verified; submitting.")]


def flawed_batches(wrong_format: tuple[str, ...], incomplete: tuple[str, str]) -> dict[str, list[ScriptStep]]:
    """A track's `wrong-format` and `incomplete` variants (`ScriptedSolution.variants`), each a batch that replaces
    the reference's: (shell command, what the agent says). `wrong_format` may add a third item, Python lines
    run from a here-document after the command, that damage what it wrote (its format)."""
    command, say, *script = wrong_format
    if script:
        command = f"{command} && python3 - <<'EOF'\n{script[0]}EOF"
    return {"wrong-format": [ScriptStep("batch", "bash", command, say=say)],
            "incomplete": [ScriptStep("batch", "bash", incomplete[0], say=incomplete[1])]}


def solution_source(package: str, name: str = "method.py") -> str:
    """The text of a file shipped in a track's solution package (`package`, usually `__package__`): the method
    a scripted solution writes into the workspace and runs there."""
    from importlib import resources

    return resources.files(package).joinpath(name).read_text()


def verify_each_case(data_dir: str, out: str, imports: str, before: str, check: str) -> list[ScriptStep]:
    """`verify_and_submit` with the usual check: every case folder of `data_dir` (`case`; `data` and `out` the
    two folders as paths) runs `before` lines, then `check` lines that raise on a wrong output; every failure is
    collected, the count printed, and the call fails when any case failed."""
    def block(lines: str, indent: int) -> str:
        return "".join(" " * indent + line + "\n" for line in lines.splitlines())

    return verify_and_submit(
        f"\n{imports}data, out = pathlib.Path('{data_dir}'), pathlib.Path('{out}')\nbad = []\n"
        "for case in sorted(p.name for p in data.iterdir() if p.is_dir()):\n"
        + block(before, 4) + "    try:\n" + block(check, 8)
        + "    except Exception as exc:\n        bad.append((case, repr(exc)))\n"
        "print(len(list(data.iterdir())), 'cases checked; problems:', bad or 'none')\nassert not bad\n")
