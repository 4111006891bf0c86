"""A task page's picture on the site: one case of the task's best-scoring run, as the evaluator drew it (input,
output and reference, or the texts of a text task), so the page shows what the task looks like, or says why not.

A task's page gave scores, a chart and commands and no image of the task; its pictures were one run page away,
and only for a reader who knew to open one. The case is read from the run's verified private copy (the one its
page is rendered from), never from the folder as it is now.
"""

from __future__ import annotations

from attrs import define
from automedbench.engine import RunFolder

from .store import RunTable
from .viewer.gallery import PICTURE_NAME, case_body, picture_index, pictures_legend
from .viewer.page import esc, num


@define
class Sample:
    """One case of a run, ready for a page: its figure body (image data inline) and what the image shows."""

    case: str
    body: str
    legend: str


def sample_of(folder: RunFolder) -> Sample | None:
    """The run's first case with a drawn image (else its first with texts), or None when it kept no picture."""
    entries = sorted(picture_index(folder).items(),
                     key=lambda item: not PICTURE_NAME.fullmatch(str(item[1].get("file") or "")))
    for case, entry in entries:
        body = case_body(folder, entry, case)
        if body:
            return Sample(case, body, pictures_legend({case: entry}))
    return None


def _overall(table: RunTable, row: int) -> float:
    value = table["overall"][row]
    return float(value) if value == value else -1.0


@define
class BestSamples:
    """Per task, the sample of its best-scoring run seen so far (one image held per task, not one per run)."""

    best: dict[str, tuple[float, int, Sample]]

    def offer(self, table: RunTable, row: int, folder: RunFolder) -> None:
        """Keep `row`'s sample if it scores above the task's best so far (read only then)."""
        task, score = str(table["task_id"][row]), _overall(table, row)
        held = self.best.get(task)
        if held is not None and held[0] >= score:
            return
        sample = sample_of(folder)
        if sample is not None:
            self.best[task] = (score, row, sample)

    def section(self, table: RunTable, task_id: str, pages: dict[int, str], pictures: bool) -> str:
        """The task page's "What it looks like": the best run's case with its run linked, or why there is none."""
        head = '<h2 id="picture">What it looks like</h2>'
        if not pictures:
            return (head + '<p class="note">No picture: this site was built with --no-pictures (case pictures are '
                    "drawn from the data); build it without that option to show one case of the best run here.</p>")
        held = self.best.get(task_id)
        if held is None:
            return (head + '<p class="note">No picture: none of these runs kept one (a run made with --no-pictures, '
                    "or before pictures were drawn, has none); a run made without that option shows each case's "
                    "input, output and reference on its page.</p>")
        score, row, sample = held
        run_id = esc(table["run_id"][row], 120)
        run = f'<a href="../{pages[row]}#pictures">{run_id}</a>' if row in pages else run_id
        overall = num(score if score >= 0 else None)
        who = f'{esc(table["agent"][row], 200)}, {esc(table["tier"][row])}, Overall {overall}'
        return (f'{head}<figure class="case" style="max-width:840px;margin:0 0 12px"><figcaption>Case '
                f"{esc(sample.case, 200)} of run {run} ({who}), the best-scoring run of this task here. "
                f"{esc(sample.legend, 4000)} Every case of every run is on the run's page.</figcaption>"
                f"{sample.body}</figure>")
