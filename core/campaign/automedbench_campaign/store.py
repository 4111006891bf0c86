"""Read many stored runs fast: only the fields a leaderboard needs, straight from the JSON (no cattrs).

10 000 result.json files load in about a second; the records are columns (numpy arrays) so that the
leaderboard groups and bootstraps without Python loops over runs.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
from attrs import Factory, define
from automedbench.api import STAGES, UserError, is_error_code
from automedbench.engine import (
    MAX_RESULT_BYTES,
    RunFolder,
    check_bytes,
    check_evidence,
    find_runs,
    rerun_command,
    run_identity,
)

try:  # optional: a faster parser when installed; the standard library is the fallback
    import orjson as _orjson

    def _loads(data: bytes) -> Any:
        return _orjson.loads(data)
except ImportError:  # pragma: no cover - depends on the environment
    def _loads(data: bytes) -> Any:
        return json.loads(data)

RESULT = RunFolder.RESULT
# What marks a run folder even before its result exists (it is then not searched: the workspace is the agent's).
RUN_MARKS = RunFolder.MARKS
NUMERIC = ("overall", "agentic", "task", *STAGES, "turns", "wall_s", "tokens_in", "tokens_out", "cost_usd",
           "judge_cost_usd")
TEXT = ("run_id", "agent", "task_id", "track", "tier", "conditions", "state", "end_reason", "rating", "path")
CONDITIONS_CHARS = 12  # of the conditions digest, as a leaderboard row shows it
FINISHED = ("scored", "agent_failure")
UNVERIFIED = ": unverified: "  # in a `RunTable.rejected` line: the harness did not write it (not a copy)


def summarise(data: dict[str, Any], path: str = "") -> dict[str, Any]:
    """The leaderboard's view of one result.json (a plain dict)."""
    header, agg, runtime = data["header"], data.get("aggregate") or {}, data.get("runtime") or {}
    stages = {s["stage"]: s.get("score") for s in data.get("stages") or []}
    codes = sorted({c["code"] for c in data.get("error_codes") or [] if is_error_code(c["code"])})
    return {
        "run_id": header["run_id"], "agent": header["agent"], "task_id": header["task"], "track": header["track"],
        "tier": header["tier"], "state": data["state"],
        # the score-changing options but agent and tier, hashed (empty for a result written before they were)
        "conditions": str((header.get("hashes") or {}).get("conditions", ""))[:CONDITIONS_CHARS],
        # what scored it besides the options: task definition, harness and track versions, weights (empty before)
        "scoring": str((header.get("hashes") or {}).get("scoring", ""))[:CONDITIONS_CHARS],
        "end_reason": data.get("end_reason", ""),
        "rating": agg.get("rating", ""), "path": path, "judge": judge_label(header, data.get("judge")),
        "overall": agg.get("overall"), "agentic": agg.get("agentic"), "task": agg.get("task"),
        **{s: stages.get(s) for s in STAGES},
        "turns": runtime.get("turns", 0), "wall_s": runtime.get("wall_s", 0.0),
        "tokens_in": runtime.get("tokens_in", 0), "tokens_out": runtime.get("tokens_out", 0),
        "cost_usd": runtime.get("cost_usd", 0.0), "judge_cost_usd": runtime.get("judge_cost_usd", 0.0),
        "model_tokens": _model_tokens(runtime, data.get("judge")),
        "codes": codes, "breached": bool((data.get("isolation") or {}).get("breached")),
        "verified": (data.get("isolation") or {}).get("verified", True) is not False,
        "submitted": bool((data.get("submission") or {}).get("submitted")),
        "public_source": bool(header.get("public_source")),  # the agent could fetch the labelled source
        "command": rerun_command(header),  # the command line that makes a run like it ("" when not known)
        "attempt": attempt_of(header),
    }


def _model_tokens(runtime: dict[str, Any], verdict: Any) -> float:
    """The tokens the agent's and the judge's models spent: a run that called a model with no known price costs $0
    as a scripted one does, and only its tokens tell them apart."""
    judged = (verdict.get("tokens_in") or 0) + (verdict.get("tokens_out") or 0) if isinstance(verdict, dict) else 0
    total = (runtime.get("tokens_in") or 0) + (runtime.get("tokens_out") or 0) + judged
    return float(total) if isinstance(total, (int, float)) else 0.0


def judge_label(header: dict[str, Any], verdict: Any) -> str:
    """Which judge graded a run's S1-S3, with its model ("openai (version 1/gpt-4o)"): a board of runs graded by
    different judges (one re-graded) ranked them side by side with no word of it."""
    version = verdict.get("judge_version") if isinstance(verdict, dict) else None
    label = str(header.get("judge") or "?")[:40] + (f" (version {str(version)[:80]})" if version else "")
    return label + (", could not grade" if isinstance(verdict, dict) and verdict.get("error") else "")


def attempt_of(header: dict[str, Any]) -> tuple[str, str, int, str, int] | None:
    """(ledger, config, number, sweep id, sweep size) a run signed (`attempts`); None for a run made before attempts
    were counted, or with a malformed record (a genuine result never has one)."""
    found = header.get("attempt")
    if not isinstance(found, dict):
        return None
    ledger, config, number = found.get("ledger"), found.get("config"), found.get("number")
    sweep, size = found.get("sweep", ""), found.get("sweep_size", 0)
    if not (isinstance(ledger, str) and isinstance(config, str) and isinstance(sweep, str)):
        return None
    if not (type(number) is int and number > 0 and type(size) is int and size >= 0):
        return None
    return ledger[:64], config[:64], number, sweep[:64], size


def read_summary(run_dir: Path) -> dict[str, Any]:
    """One run's row, with `genuine` (the harness wrote it: `resultproof`) and `proof` (why not)."""
    folder = RunFolder(run_dir)
    path = folder.result
    try:
        if not folder.path.is_dir() or folder.path.is_symlink():
            raise OSError(f"{run_dir} is not a folder")
        data = folder.result_bytes()
        if data is None:
            raise OSError(f"not a regular file of at most {MAX_RESULT_BYTES} bytes")
        row = summarise(_loads(data), str(run_dir))
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        raise UserError(f"{path}: unreadable result ({type(exc).__name__}: {exc})") from None
    proof = check_bytes(data, folder.name)
    if proof.genuine:  # the run pages show the evidence: a result counts only beside what the harness signed
        proof = check_evidence(folder, data, proof)
    return {**row, "genuine": proof.genuine, "proof": proof.reason, "signed_body": proof.body,
            "identity": run_identity(row["run_id"], proof.files), "signed_at": proof.at}


@define
class RunTable:
    """Columns of run summaries: numbers as float arrays (NaN = null), text as lists."""

    columns: dict[str, Any]
    skipped: list[str]
    # results that do not count at all, whatever the options: not the harness's (`resultproof`), or a copy
    # of a run already listed; "path: why"
    rejected: list[str] = Factory(list)
    # (run id, signed attempt) of every run the folder holds, kept through `select`: a board of some of its runs
    # (a site's track or task page, `--public-sources`) counts attempts and sweeps against the whole folder; None
    # in a table not selected from another (its own rows are then the folder's)
    held: list[tuple[str, Any]] | None = None

    def __len__(self) -> int:
        return len(self.columns["run_id"])

    def __getitem__(self, name: str) -> Any:
        return self.columns[name]

    def select(self, mask: np.ndarray) -> RunTable:
        index = np.flatnonzero(mask)
        cols = {k: (v[index] if isinstance(v, np.ndarray) else [v[i] for i in index]) for k, v in self.columns.items()}
        return RunTable(cols, self.skipped, self.rejected, self.every_attempt())

    def every_attempt(self) -> list[tuple[str, Any]]:
        """(run id, signed attempt) of every run the folder holds, whatever subset this table is."""
        if self.held is not None:
            return self.held
        return list(zip(self.columns["run_id"], self.columns["attempt"], strict=True))

    @classmethod
    def from_rows(cls, rows: list[dict[str, Any]], skipped: list[str] | None = None,
                  rejected: list[str] | None = None) -> RunTable:
        cols: dict[str, Any] = {k: [r[k] for r in rows] for k in TEXT}
        for key in NUMERIC:
            cols[key] = np.array([np.nan if r[key] is None else r[key] for r in rows], dtype=float)
        cols["codes"] = [tuple(r["codes"]) for r in rows]
        cols["breached"] = np.array([r["breached"] for r in rows], dtype=bool)
        cols["scoring"] = [str(r.get("scoring", "")) for r in rows]
        cols["judge"] = [str(r.get("judge", "")) for r in rows]  # "" in a row made without one (synthetic)
        cols["model_tokens"] = np.array([r.get("model_tokens", 0.0) for r in rows], dtype=float)
        cols["verified"] = np.array([r.get("verified", True) for r in rows], dtype=bool)
        cols["submitted"] = np.array([r["submitted"] for r in rows], dtype=bool)
        cols["public_source"] = np.array([r.get("public_source", False) for r in rows], dtype=bool)
        cols["n_codes"] = np.array([len(r["codes"]) for r in rows], dtype=int)
        cols["command"] = [str(r.get("command", "")) for r in rows]
        cols["attempt"] = [r.get("attempt") for r in rows]
        return cls(cols, list(skipped or []), list(rejected or []))


def load_table(roots: Iterable[Path], *, strict: bool = False) -> RunTable:
    """Load every run under `roots`; unreadable results are listed in `skipped` (or raise when strict), and
    results the harness did not write, or copies of a run already loaded, in `rejected`: never counted."""
    rows, skipped, rejected = [], [], []
    seen: dict[str, str] = {}  # signed bytes -> the folder counted: a copy of a run (same bytes) counts once
    for run_dir in find_runs(roots):
        try:
            row = read_summary(run_dir)
        except UserError as exc:
            if strict:
                raise
            skipped.append(str(exc))
            continue
        if not row["genuine"]:
            rejected.append(f"{run_dir}{UNVERIFIED}{row['proof']}")
        elif row["signed_body"] in seen:
            rejected.append(f"{run_dir}: a copy of the run at {seen[row['signed_body']]} (counted once, there)")
        else:
            seen[row["signed_body"]] = str(run_dir)
            rows.append(row)
    rows, older = newest_versions(rows)
    return RunTable.from_rows(rows, skipped, rejected + older)


def newest_versions(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """(the rows that count, why each other one does not): of one run's signed versions (its id and signed trajectory:
    a copy kept from before it was re-graded or re-tagged) the newest signed counts, wherever it sits. The first found
    counted, so an old version put in a folder that sorts first (runs/0-kept/) showed a grade the run no longer has."""
    newest: dict[tuple[str, str], dict[str, Any]] = {}
    for row in rows:
        held = newest.get(row["identity"]) if row["identity"] is not None else None
        if row["identity"] is not None and (held is None or row["signed_at"] > held["signed_at"]):
            newest[row["identity"]] = row
    kept, why = [], []
    for row in rows:
        top = newest.get(row["identity"], row) if row["identity"] is not None else row
        if top is row:
            kept.append(row)
            continue
        older = (f"older: signed {row['signed_at'] or 'before proofs were dated'}, that one "
                 f"{top['signed_at']}; " if row["signed_at"] < top["signed_at"] else "")
        why.append(f"{row['path']}: another version of the run at {top['path']} ({older}the same trajectory, graded "
                   "or tagged again; counted once, there, the newest)")
    return kept, why
