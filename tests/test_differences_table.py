"""The README's track-by-track difference table is tied to the code (issue 22): every backticked value in a
track's row is what the track declares, for every task of the track."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from automedbench.plugins import registry

README = Path(__file__).resolve().parents[1] / "README.md"
HEADING = "#### Track by track: Task metric, S3, S5 evidence, Lite items, rating bands"
COLUMNS = ["track", "Task metric", "S3", "S5 positive evidence", "Lite items", "bands (A / B)", "departures, and why"]
REG = registry()
TRACKS = sorted({t.split("/", 1)[0] for t in REG.tasks()} - {"toy"})


def table() -> dict[str, dict[str, str]]:
    text = README.read_text()
    assert text.count(HEADING) == 1
    lines = text.split(HEADING, 1)[1].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| track |"))
    header = [c.strip() for c in lines[start].strip("|").split("|")]
    assert header == COLUMNS
    rows = {}
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        rows[cells[0]] = dict(zip(COLUMNS, cells, strict=True))
    return rows


def ticks(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def tasks_of(track: str) -> list:
    return [REG.task(t)[1] for t in sorted(REG.tasks()) if t.startswith(track + "/")]


def test_the_table_has_one_row_per_track():
    assert sorted(table()) == TRACKS


@pytest.mark.parametrize("track_name", TRACKS)
def test_row_matches_the_tracks_declared_rules(track_name):
    row = table()[track_name]
    track = REG.track(track_name)
    evidence = {track.positive_evidence(task) for task in tasks_of(track_name)}
    assert set(ticks(row["S5 positive evidence"])) == evidence  # every task's wording, and no other
    for task in tasks_of(track_name):
        rubric = track.rubric(task)
        assert f"`{rubric.stage_rule('S3').text}`" in row["S3"], task.id
        credited = sorted(i.id for i in rubric.items if i.at_tier("lite") == "auto-pass")
        assert not [i.id for i in rubric.items if i.at_tier("lite") == "excluded"], "Lite items are credited"
        assert row["Lite items"].startswith("credited:")
        assert ticks(row["Lite items"]) == [", ".join(credited)], task.id
        assert any(name in task.metric for name in ticks(row["Task metric"])), (task.id, task.metric)


@pytest.mark.parametrize("track_name", TRACKS)
def test_row_states_every_tasks_bands(track_name):
    row = table()[track_name]["bands (A / B)"]
    track = REG.track(track_name)
    for task in tasks_of(track_name):
        bands = track.rating_thresholds(task, None)
        if ticks(row)[0] == "measured":  # baseline-derived: A best + 0.02, B best - 0.02, floor best - 0.05
            assert bands.floor is not None, task.id
            assert round(bands.good - bands.okay, 4) == 0.04 or bands.good == 1.0, task.id
            assert round(bands.okay - bands.floor, 4) == 0.03, task.id
            continue
        assert f"`{bands.good:g} / {bands.okay:g}`" in row, task.id
        offline = task.params.get("offline_rating")
        if offline:
            assert f"mlrg-offline `{offline['good']:g} / {offline['okay']:g}`" in row, task.id
