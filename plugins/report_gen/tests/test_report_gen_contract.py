"""The report.txt checker (the original's rules), section handling and the MLRG preprocessing."""

from __future__ import annotations

from automedbench_report_gen import contract
from automedbench_report_gen.text import has_impression_only, mlrg_preprocess, scored_text, sections
from automedbench_report_gen.track import ReportTrack

GOOD = "FINDINGS: The heart size is normal. The lungs are clear.\n\nIMPRESSION: Normal chest.\n"


def reasons(data: bytes) -> list[str]:
    return contract.check_report_bytes(data)


def test_valid_report_passes():
    assert reasons(GOOD.encode()) == []


def test_each_rule_has_its_reason():
    assert "fewer than 40" in reasons(b"FINDINGS: Normal heart. Clear.")[0]
    assert "empty" in reasons(b"   \n")[0]
    assert any("more than 8000" in r for r in reasons(b"Normal heart. " * 700))
    assert any("letters, fewer than 20" in r for r in reasons(b"FINDINGS: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 ...."))
    assert "not UTF-8" in reasons(b"FINDINGS: caf\xe9 " + b"x" * 50)[0]
    bullet = ("FINDINGS:\n\u2022 The heart size is normal. The lungs are clear.").encode()
    assert "U+2022" in reasons(bullet)[0]


def test_size_is_checked_before_reading(tmp_path):
    path = tmp_path / "report.txt"
    path.write_bytes(b"a" * (contract.MAX_BYTES + 1))
    present, why = contract.check_report_file(path)
    assert present and "byte limit" in why[0]
    assert contract.check_report_file(tmp_path / "none.txt") == (False, ["report.txt: missing"])


def test_findings_section_is_scored_when_present():
    assert scored_text(GOOD) == "The heart size is normal. The lungs are clear."
    assert scored_text("The heart is normal. No effusion.") == "The heart is normal. No effusion."
    assert set(sections(GOOD)) == {"FINDINGS", "IMPRESSION"}
    assert has_impression_only("IMPRESSION: No acute process. Heart normal.")
    assert not has_impression_only(GOOD)


def test_mlrg_preprocessing_detaches_full_stops_and_keeps_case():
    # the original collapses runs of spaces only: a newline or tab stays (its ROUGE-L splits on spaces)
    assert mlrg_preprocess("Heart  normal.\nNo effusion.") == "Heart normal .\nNo effusion ."
    # and strips nothing: runs of spaces at either end become one space (round 21)
    assert mlrg_preprocess("  Heart\tnormal.  ") == " Heart\tnormal . "


def test_findings_aliases_are_the_originals():
    for header in ("FINDINGS", "FINDING", "REFERENCE FINDINGS", "CHEST, TWO VIEWS", "Findings", "finding"):
        report = f"{header}: Heart size normal. Lungs clear.\nIMPRESSION: Normal chest."
        assert scored_text(report) == "Heart size normal. Lungs clear.", header
        assert not has_impression_only(report), header
    # the original's rule: the first non-empty findings-alias section in the report's order, whichever alias
    assert scored_text("CHEST, TWO VIEWS: PA and lateral.\nFINDINGS: No effusion.") == "PA and lateral."
    assert scored_text("FINDINGS:\nFINDING: No effusion.\nFINDINGS: Clear.") == "No effusion."  # empty skipped
    # a bare CHEST is no alias of the original's: such a report is scored whole
    assert scored_text("CHEST: PA view.\nIMPRESSION: Clear.") == "CHEST: PA view.\nIMPRESSION: Clear."
    assert scored_text("HISTORY: cough.\nIMPRESSION: Clear.") == "HISTORY: cough.\nIMPRESSION: Clear."
    # header characters as the original's: brackets end the findings section, an ampersand makes no header
    assert scored_text("FINDINGS: No effusion.\nIMPRESSION (PA): Clear.") == "No effusion."
    assert scored_text("FINDINGS: No effusion.\nHEART & LUNGS: Clear.") == "No effusion.\nHEART & LUNGS: Clear."


def test_each_task_states_its_own_minimum():
    tasks = {t.id: t for t in ReportTrack().tasks()}
    cxr, pathcap = tasks["report_gen/mimic-cxr"], tasks["report_gen/pathcap-100"]
    assert contract.minimums(cxr) == (40, 20)
    assert contract.minimums(pathcap) == (3, 3)
    caption = b"H&E, lymph node with metastasis."  # a real-length PathCap caption, under 40 characters
    assert contract.check_report_bytes(caption, *contract.minimums(pathcap)) == []
    assert "fewer than 40" in contract.check_report_bytes(caption, *contract.minimums(cxr))[0]
