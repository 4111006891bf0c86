"""Conformance: no file a sandbox can read gives away this track's demo references (the same bytes, the same
report text, or an image closer to a reference than the case's own input), whatever the staging's seed; and
the generator's code, readable in the sandbox, no longer says which study holds which findings."""

from __future__ import annotations

from automedbench.testing import reference_leaks, run_steps, warm_evaluator_installed

DEMO = "report_gen/demo"
# Both runs below are scored by one evaluator kept warm where the campaign built-in offers it: one METEOR JVM for
# the two runs' four evaluations (pilot and final) instead of one each (the verdicts are the cold path's).
WARM = warm_evaluator_installed()


def test_no_sandbox_readable_file_reveals_a_reference(amb_data_root):
    assert reference_leaks(DEMO, amb_data_root) == []


# The attack: the generator is public code (in the repository, and in site-packages on a regular install):
# take CASES in case-id order and write each study's reference wording, the seed's wording choices guessed.
# Before the secret order of the studies this scored 1.0.
def code_attack() -> str:
    from automedbench_report_gen.data.demo import CASES, case_id, reference_choices
    from automedbench_report_gen.data.wording import REFERENCE, report

    reports = {case_id(i): report(f, REFERENCE, reference_choices(20261203, i)) for i, f in enumerate(CASES)}
    return ("import os, pathlib\nws = pathlib.Path(os.environ['WORKSPACE_DIR'])\n"
            f"for cid, text in {reports!r}.items():\n"
            "    (ws / 'outputs' / cid).mkdir(parents=True, exist_ok=True)\n"
            "    (ws / 'outputs' / cid / 'report.txt').write_text(text)\n")


def test_reports_read_off_the_generator_code_score_like_a_guess(amb_data_root, amb_run, tmp_path):
    attack, _ = run_steps(DEMO, [("python", code_attack())], out=tmp_path, data_root=amb_data_root,
                          warm_evaluator=WARM)
    reference, _ = amb_run(DEMO, "reference")  # warm where installed, as WARM: test_report_gen_runs.py's run key
    assert attack.state == "scored" and attack.task.components.get("valid_cases", 12) == 12
    # measured: the attack 0.56 (rating C), the scripted reference, which reads the pixels, 0.83
    assert attack.task.partial < reference.task.partial - 0.1
    assert attack.task.partial < 0.8
