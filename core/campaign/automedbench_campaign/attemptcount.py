"""How many of the attempts made are in the folder a leaderboard reads: choosing runs made visible.

Every run signs which attempt of its configuration it was on the machine that made it, and a sweep's run the
sweep's id and planned size (`automedbench.attempts`). A folder holding attempt 7 of a cell but not 1 to 6, or
three runs of a nine-run sweep, holds runs someone chose: each row says "3 of 7 runs made" and is marked. How
many were made is the highest number in the folder, or this machine's ledger when the runs are its own (then an
attempt made after the last one copied is counted too). A run made before attempts were counted has no number and
is said as such.
"""

from __future__ import annotations

from collections.abc import Iterable

from attrs import define
from automedbench.engine import made_here

from .store import RunTable


@define
class Attempts:
    """One leaderboard row's runs against the attempts made of their configurations."""

    present: int = 0  # numbered runs of the row's configurations in the folder (each configuration's, any state)
    made: int = 0  # attempts of those configurations known to have been made
    unnumbered: int = 0  # the row's runs made before attempts were counted
    sweeps: int = 0  # sweeps the row's runs belong to
    partial_sweeps: int = 0  # of those, sweeps only some of whose planned runs are in the folder

    @property
    def chosen(self) -> bool:
        """Attempts made but not in the folder, or a sweep partly present: runs someone chose among."""
        return self.made > self.present or self.partial_sweeps > 0

    def text(self) -> str:
        """"3 of 7 runs made", with what is missing or old said after it; "" for a row of old runs only."""
        parts = [f"{self.present} of {self.made} runs made"] if self.made else []
        if self.partial_sweeps:
            parts.append(f"{self.partial_sweeps} of {self.sweeps} sweep(s) partly present")
        if self.unnumbered:
            parts.append(f"{self.unnumbered} run(s) made before attempts were counted")
        return "; ".join(parts)

    def short(self, mark: bool = True) -> str:
        """A table's "Runs made" cell: "3 of 7 CHOSEN", "3 of 3", "old" for runs made before attempts were
        counted; `mark=False` leaves the mark to the caller (the site's cell marks it in its own markup)."""
        if not self.made:
            return "old" if self.unnumbered else ""
        old = f" +{self.unnumbered} old" if self.unnumbered else ""
        return f"{self.present} of {self.made}{old}" + (" CHOSEN" if mark and self.chosen else "")


@define
class AttemptIndex:
    """Per configuration (ledger, config) the numbers present and the attempts made, per sweep the runs present
    and planned, over every run the folder holds (not only those a row counts: a failed attempt is still made)."""

    numbers: dict[tuple[str, str], set[int]]
    made: dict[tuple[str, str], int]
    sweep_runs: dict[str, set[str]]
    sweep_size: dict[str, int]

    @classmethod
    def of(cls, table: RunTable) -> AttemptIndex:
        ledger_id, counted = made_here()
        numbers: dict[tuple[str, str], set[int]] = {}
        sweep_runs: dict[str, set[str]] = {}
        sweep_size: dict[str, int] = {}
        for run_id, attempt in table.every_attempt():  # a subset's board (a task page) against the whole folder
            if attempt is None:
                continue
            ledger, config, number, sweep, size = attempt
            numbers.setdefault((ledger, config), set()).add(number)
            if sweep:
                sweep_runs.setdefault(sweep, set()).add(run_id)
                sweep_size[sweep] = max(sweep_size.get(sweep, 0), size)
        made = {key: max(max(found), counted.get(key[1], 0) if key[0] == ledger_id else 0)
                for key, found in numbers.items()}
        return cls(numbers, made, sweep_runs, sweep_size)

    def row(self, attempts: Iterable[tuple[str, str, int, str, int] | None]) -> Attempts:
        """The attempts of one row, given its runs' signed attempts."""
        configs: set[tuple[str, str]] = set()
        sweeps: set[str] = set()
        unnumbered = 0
        for attempt in attempts:
            if attempt is None:
                unnumbered += 1
                continue
            configs.add((attempt[0], attempt[1]))
            if attempt[3]:
                sweeps.add(attempt[3])
        partial = sum(len(self.sweep_runs[s]) < self.sweep_size[s] for s in sweeps)
        return Attempts(sum(len(self.numbers[c]) for c in configs), sum(self.made[c] for c in configs), unnumbered,
                        len(sweeps), partial)
