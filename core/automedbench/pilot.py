"""The S3 pilot, checked: a one-case output counts as a pilot only if it passes the track's contract.

Before, any file (one byte) under `outputs/<case>/` made the call "a pilot on one case". Now the runner
copies that case's outputs out of the workspace right after the call (the same `freeze` as the
submission: regular files only, size-capped) and, after the agent phase, runs the track's checker on
the copy in the isolated evaluator (`check_only`: no scoring, no references). The judges read the
verdicts from `pilot_checks.json` in the run folder, which the agent cannot reach.
"""

from __future__ import annotations

import errno
import shutil
from pathlib import Path
from typing import Any

from .freeze import disk_full, freeze
from .runfolder import RunFolder
from .serialize import write_json
from .trace import is_batch, is_pilot
from .track import StagedData

MAX_PILOTS = 3  # candidate pilots checked per run (an agent may fix a bad pilot and try again)
MAX_PILOT_FILE_BYTES = 256 << 20
MAX_PILOT_BYTES = 512 << 20  # the pilots' copies together: what the run's disk reservation holds for them


class PilotTracker:
    """Notes each pilot (`trace.is_pilot`: one case's outputs written by a successful call) before the batch."""

    def __init__(self, outputs: Path, store: Path, case_ids: list[str], disk_reserve: int | None = None) -> None:
        self.outputs, self.store, self.case_ids = outputs, store, set(case_ids)
        # None: the freeze's own margin (the agent may have filled the disk); a number: the copy's space is
        # reserved, so a full disk is another process's doing and raises ENOSPC (an infrastructure failure)
        self.disk_reserve = disk_reserve
        self.copied = 0  # bytes the pilots' copies took so far (MAX_PILOT_BYTES in all)
        self.candidates: list[dict[str, Any]] = []
        self.batch_seen = False

    def note(self, event: dict[str, Any]) -> None:
        if self.batch_seen or event.get("name") != "execute_code" or event.get("session"):
            return
        if is_batch(event):
            self.batch_seen = True
            return
        changed = [c for c in event.get("changed_cases", []) if c in self.case_ids]
        if not is_pilot(event) or len(changed) != 1 or len(self.candidates) >= MAX_PILOTS:
            return
        case, index = changed[0], len(self.candidates) + 1
        folder = self.store / str(index)
        reserve = {} if self.disk_reserve is None else {"disk_reserve": self.disk_reserve}
        manifest = freeze(self.outputs / case, folder / RunFolder.SUBMISSION / case, submitted=False,
                          max_file_bytes=MAX_PILOT_FILE_BYTES, max_total_bytes=max(0, MAX_PILOT_BYTES - self.copied),
                          **reserve)
        self.copied += sum(e.size for e in manifest.files if not e.rejected)
        if self.disk_reserve is not None and disk_full(manifest):
            raise OSError(errno.ENOSPC, "the disk filled while a pilot's outputs were copied")
        write_json(folder / "manifest.json", _prefixed(manifest, case))
        self.candidates.append({"turn": event.get("turn"), "call_id": event.get("call_id"), "case": case,
                                "folder": str(folder)})

    def check_contracts(self, task_id: str, staged: StagedData, backend: str) -> list[dict[str, Any]]:
        """Contract verdicts of the candidates in order, stopping at the first valid one."""
        from .evaluator import run_isolated

        results = []
        for candidate in self.candidates:
            folder = Path(candidate["folder"])
            case = candidate["case"]
            one = StagedData(staged.root, staged.public, staged.private, [case])
            try:
                evaluation = run_isolated(task_id, one, folder / RunFolder.SUBMISSION, folder / "manifest.json",
                                          folder / RunFolder.EVALUATION, timeout_s=600, backend=backend,
                                          check_only=True)
                verdict = evaluation.cases[0]
                valid, reasons = bool(verdict.valid), list(verdict.reasons)[:5]
            except Exception as exc:  # whatever the agent wrote may break the checker: not a pilot, not a fault
                valid, reasons = False, [f"contract check failed: {type(exc).__name__}: {str(exc)[:200]}"]
            results.append({"turn": candidate["turn"], "call_id": candidate["call_id"], "case": case,
                            "valid": valid, "reasons": [str(r)[:300] for r in reasons]})
            if valid:
                break
        for candidate in self.candidates:  # the verdicts are what is kept
            shutil.rmtree(Path(candidate["folder"]) / RunFolder.SUBMISSION, ignore_errors=True)
        return results


def _prefixed(manifest, case: str):
    """The freeze manifest of one case folder, with paths relative to the submission root."""
    for entry in manifest.files:
        entry.path = f"{case}/{entry.path}"
    return manifest
