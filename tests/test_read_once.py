"""What a one-off run reads once that it read several times (issue 38 item 2, re-measured on main): plan.png decoded
for the rules judge's s1e, its s1f and the bound on the verdict; every account and every listed state folder
enumerated for each plain call (the state-folder list compared pairwise); the track's requirements read by parsing
its whole metadata file with the e-mail parser. Each check and its answer stay as they were."""

from __future__ import annotations

import importlib.metadata as md
import pathlib

import pytest
from automedbench import harnessstate
from automedbench.runfolder import RunFolder
from automedbench.scoring import judge_input
from automedbench.verdictcaps import graded


def test_plan_png_is_decoded_once_for_the_rules_judge_and_the_bound(run_agent, reg, monkeypatch):
    """The reference's plan.png graded at standard: the rules judge's s1e and s1f and the bound's facts each decoded
    it (three decodes, two structural checks; two decodes at lite); now one, and the items keep their grade."""
    from PIL import PngImagePlugin

    _, run_dir = run_agent("reference")
    track, task = reg.task("segmentation/demo")
    decodes: list[int] = []
    real = PngImagePlugin.PngImageFile

    def counting(*args, **kwargs):
        decodes.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(PngImagePlugin, "PngImageFile", counting)
    verdict = graded(reg.create("judge", "rules"), judge_input(RunFolder(run_dir), track, task, "standard"))
    items = {i.id: i for i in verdict.items}
    assert len(decodes) == 1, f"plan.png decoded {len(decodes)} times for one grading"
    assert items["s1e_plan_png"].value == 1.0 and "plan.png present (" in items["s1e_plan_png"].rationale
    assert items["s1f_plot_pipeline"].value == 1.0, items["s1f_plot_pipeline"].rationale


def test_each_calls_code_is_tokenized_once_for_the_rules_judge_and_the_bound(run_agent, reg, monkeypatch):
    """Its literals, its effective text and the scripts it writes were each read from a fresh tokenizing, by the
    rules judge and the bound alike (21 tokenizings of 7 codes on the reference's run); now once a code."""
    import tokenize

    from automedbench import codetext

    _, run_dir = run_agent("reference")
    track, task = reg.task("segmentation/demo")
    seen: list[str] = []
    real = tokenize.generate_tokens

    def counting(readline):
        seen.append(readline.__self__.getvalue())
        return real(readline)

    kept = getattr(codetext, "_kept_tokens", None)
    if kept is not None:  # what an earlier test's grading kept
        kept.cache_clear()
    monkeypatch.setattr(tokenize, "generate_tokens", counting)
    verdict = graded(reg.create("judge", "rules"), judge_input(RunFolder(run_dir), track, task, "standard"))
    assert seen and len(seen) == len(set(seen)), f"{len(seen)} tokenizings of {len(set(seen))} codes"
    assert all(i.value == 1.0 for i in verdict.items), [(i.id, i.value, i.rationale) for i in verdict.items]


def test_a_broken_plan_png_is_still_refused_by_the_judge_and_the_bound(run_agent, reg):
    """The shared reading answers as each did: eight signature bytes earn no s1e, and a judge crediting it is
    capped with the same reason."""
    from automedbench.records import ItemVerdict, JudgeVerdict
    from automedbench.verdictcaps import bound_verdict

    _, run_dir = run_agent("reference")
    track, task = reg.task("segmentation/demo")
    inp = judge_input(RunFolder(run_dir), track, task, "standard")  # s1e and s1f graded (auto-passed at lite)
    inp.plan_png = b"\x89PNG\r\n\x1a\n"
    rules = {i.id: i for i in reg.create("judge", "rules").grade(inp).items}
    assert rules["s1e_plan_png"].value == 0.0 and "unreadable" in rules["s1e_plan_png"].rationale
    s1f = rules["s1f_plot_pipeline"]
    assert s1f.value == 0.0 and s1f.rationale.endswith("no decodable plan.png"), s1f.rationale
    credit = JudgeVerdict("x", "1", [ItemVerdict(i.id, i.stage, i.description, max(i.levels), "yes")
                                     for i in inp.rubric])
    bounded = {i.id: i for i in bound_verdict(inp, credit).items}
    assert bounded["s1e_plan_png"].value == 0.0 and "unreadable" in bounded["s1e_plan_png"].rationale


@pytest.fixture()
def state_home(tmp_path, monkeypatch):
    """A default state folder of its own (XDG_STATE_HOME) with this run's state folder under it."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("AUTOMEDBENCH_STATE", str(tmp_path / "xdg" / "automedbench"))
    monkeypatch.setattr(harnessstate, "user_homes", lambda: [str(tmp_path / "home")])
    home = harnessstate.default_state_dir()
    home.mkdir(parents=True)
    return home


def test_known_state_folders_are_listed_without_comparing_every_pair(state_home, tmp_path, monkeypatch):
    """A developer's machine lists a state folder per test run (800 here, up to MAX_KNOWN): each plain call compared
    every listed folder with every one kept (a list's `in`), 24 ms a call. The answer is unchanged: the folders
    that exist, each once, in order, never a link or a file."""
    folders = [tmp_path / "states" / f"s{n}" for n in range(harnessstate.MAX_KNOWN - 10)]
    for folder in folders[::2]:
        folder.mkdir(parents=True)
    link, plain = tmp_path / "states" / "link", tmp_path / "states" / "file"
    link.symlink_to(folders[0])
    plain.write_text("x")
    lines = [*map(str, folders), str(folders[0]), str(folders[2]) + "/", str(link), str(plain)]
    (state_home / harnessstate.KNOWN_FILE).write_text("".join(line + "\n" for line in lines))
    compared: list[int] = []
    equal = pathlib.PurePath.__eq__

    def counting(self, other):
        compared.append(1)
        return equal(self, other)

    monkeypatch.setattr(pathlib.PurePath, "__eq__", counting)
    found = harnessstate.known_state_dirs()
    monkeypatch.undo()
    assert found == [state_home, *folders[::2]]
    assert len(compared) < len(lines), f"{len(compared)} path comparisons for {len(lines)} listed folders"


def test_a_plain_call_enumerates_the_accounts_once(state_home, tmp_path, monkeypatch):
    """As root every account's home is read (`pwd.getpwall`) for the state folders and again for the credential
    folders of each plain call; now once a call, and both lists still cover what they did."""
    from automedbench.sandboxes import local

    home = tmp_path / "home"
    (home / ".docker").mkdir(parents=True)
    (home / ".local" / "state" / "automedbench").mkdir(parents=True)
    asked: list[int] = []

    def homes() -> list[str]:
        asked.append(1)
        return [str(home)]

    monkeypatch.setattr(harnessstate, "user_homes", homes)
    monkeypatch.setattr(local, "user_homes", homes)
    spec = local.plain_spec(tmp_path / "ws", 0, [tmp_path / "data"])
    assert len(asked) == 1, f"the accounts enumerated {len(asked)} times for one call"
    for hidden in (str(home / ".docker"), str(home / ".local" / "state" / "automedbench"), str(state_home)):
        assert f'"{hidden}"' in spec, (hidden, spec)


def test_track_requirements_are_read_without_parsing_the_metadata_as_mail(tmp_path, monkeypatch):
    """`md.requires` parses the whole METADATA file (a README for an editable install) with the e-mail parser, whose
    import alone is ~5 ms of a one-off run; the Requires-Dist header lines say the same."""
    from automedbench.needs import unmet_requirements

    site = tmp_path / "site"
    info = site / "amb_headers-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: amb-headers\nVersion: 0.1\n"
                                   "Requires-Dist: numpy>=1.24\nrequires-dist: amb-absent-one>=1.0\n"
                                   "Requires-Dist: amb-absent-extra; extra == \"more\"\n"
                                   "\nRequires-Dist: amb-absent-in-the-description\n")
    monkeypatch.syspath_prepend(str(site))

    def parsed(self):
        raise AssertionError("the metadata file was parsed as an e-mail message")

    monkeypatch.setattr(md.PathDistribution, "metadata", property(parsed))
    assert unmet_requirements.__wrapped__("amb-headers") == ("amb-absent-one",)
    assert unmet_requirements.__wrapped__("automedbench-segmentation") == ()
    assert unmet_requirements.__wrapped__("amb-not-installed") == ()
