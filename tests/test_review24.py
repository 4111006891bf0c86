"""Review round 24 of the changes merged up to a7b3534, each finding proved by a test here.

- **The rules judge's typed-word check grew with calls x scripts x runs** (codetext.Authored, review 23): every
  word of an output that a written script's code holds was looked up in every script holding it and each script's
  name in every interpreter argument run so far, per occurrence. An honest 400-call trajectory (write a script,
  run it, 16 kB of output each) took 7.1 CPU-s to read, 1000 calls 83 CPU-s; now a lookup is a bisection.
- **A staging linked from outside its data root was used unchecked** (ownedpaths, red team 24 and a7b3534): with the
  task folder a link into a folder others can write, neither that folder, the ones above it, nor the real staging's
  own folder were checked (a data root "data" took "data2/..." as inside it by a string prefix).
- **A run signed before pictures were evidence** (resultproof, review 23): genuine on the leaderboard, but
  `copy_verified` still refused it, so `codes` left it out, rejudge refused it and its run page was not drawn.
- **A script written then run, in other words** (codetext): `python -u seg.py`, a script written with `tee` or to a
  quoted path: its names stayed typed, an honest log line no evidence (s2e 0.0 -> 1.0).
- **A demo staged with --from DIR** (staging): recorded DIR as its source and no generator, so the first run
  staged it again as stale.

The vqa finding (a question listing its options in another form) is in plugins/vqa/tests/test_vqa_review24.py.
"""

from __future__ import annotations

import time

import pytest
from automedbench.errors import UserError
from automedbench.judges.rules import Evidence

NAMES = ("model", "device", "tensor", "shape", "volume", "spacing", "organ", "mask", "liver", "kidney",
         "spleen", "pancreas", "network", "weights", "predict", "dice", "loader", "batch", "epoch", "loss")
SCRIPT = "import torch\n" + "\n".join(f"{n} = compute_{n}({NAMES[(i + 1) % len(NAMES)]})\nprint({n})"
                                      for i, n in enumerate(NAMES))


def _call(turn: int, code: str, stdout: str = "") -> dict:
    return {"type": "tool", "name": "execute_code", "turn": turn, "exit_code": 0, "language": "bash",
            "cases_with_outputs": 0, "code": code, "stdout": stdout}


def _write_then_run(steps: int, output_chars: int) -> list[dict]:
    """An honest loop: each step writes a script with a heredoc, the next call runs it and prints its values."""
    line = " ".join(NAMES) + "\n"
    events = []
    for i in range(steps):
        events.append(_call(2 * i + 1, f"cat > /workspace/step{i}.py <<'EOF'\n{SCRIPT}\nEOF"))
        events.append(_call(2 * i + 2, f"python3 /workspace/step{i}.py", line * (output_chars // len(line))))
    return events


def test_a_long_trajectory_of_written_then_run_scripts_is_read_in_linear_time():
    """Before: 400 calls 7.1 CPU-s (100: 0.24, 200: 1.2), 1000 calls 83 CPU-s."""
    events = _write_then_run(200, 16_000)
    start = time.process_time()
    evidence = Evidence(events)
    kept = [evidence.output(c) for c in evidence.calls]
    spent = time.process_time() - start
    # every run's printed names are its script's computation: none of them typed, all kept as evidence
    assert all(k == "" for k in kept[0::2]) and all(len(k) > 15_000 for k in kept[1::2])
    assert spent < 2.0, f"{spent:.2f} CPU-s for 400 calls"  # 0.4 here; 7.3 before


# ---------------------------------------------------------------- a staging outside its data root


def test_a_staging_linked_from_outside_its_data_root_is_checked_up_to_the_filesystem_root(reg, tmp_path):
    """Before: a task folder that is a link into a folder others can write (outside the data root) was used: no folder
    above the real staging was checked, so another user could swap it while a run was scored against it, nor the
    real staging's own folder (only the link's). Both are checked now: the folders above a staging outside the data
    root up to /, as a runs folder's are (inside it, up to the data root as before)."""
    from automedbench import staging
    from automedbench.testing import stage_task

    root = tmp_path / "data"
    staged = stage_task("toy/vowels", root)
    _, task = reg.task("toy/vowels")
    dest = staging.task_dir(root, task)
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # not sticky: anyone may rename what is in it
    dest.rename(shared / "vowels")
    dest.symlink_to(shared / "vowels", target_is_directory=True)
    with pytest.raises(UserError, match=f"{shared} is writable by others"):
        staging.load(task, root)
    shared.chmod(0o755)
    (shared / "vowels").chmod(0o777)  # the linked staging's own folder: anyone could rename private/ away
    with pytest.raises(UserError, match=f"{shared / 'vowels'} is writable by others"):
        staging.load(task, root)
    (shared / "vowels").chmod(0o755)
    assert staging.load(task, root).case_ids == staged.case_ids
    # a data root whose name is a prefix of the real staging's folder ("data" and "data2") is still outside it
    sibling = tmp_path / "data2"
    sibling.mkdir()
    (shared / "vowels").rename(sibling / "vowels")
    dest.unlink()
    dest.symlink_to(sibling / "vowels", target_is_directory=True)
    tmp_path.chmod(0o777)
    try:
        with pytest.raises(UserError, match=f"{tmp_path} is writable by others"):
            staging.load(task, root)
    finally:
        tmp_path.chmod(0o755)


# ---------------------------------------------------------------- a run signed before pictures were evidence


def test_a_run_signed_before_pictures_were_evidence_is_copied_verified_without_them(data_root, tmp_path):
    """Review 23 made such a run genuine again (check_evidence leaves unsigned pictures out), but `copy_verified`,
    which every re-signing command and the run page read, still refused it ('pictures/index.json added since the
    harness signed the result'): `codes` left it out, rejudge refused it and the site drew no page for a run it
    ranks. Now the copy holds exactly the signed files: no picture."""
    import json

    from automedbench.resultproof import check_folder, copy_verified, evidence_digests, split, write_result
    from automedbench.runfolder import RunFolder
    from automedbench.testing import run_cli, run_task

    runs = tmp_path / "runs"
    _, run_dir = run_task("toy/vowels", "reference", out=runs, data_root=data_root)
    folder = RunFolder(run_dir)
    old = {k: v for k, v in evidence_digests(folder).items() if not k.startswith("pictures/")}
    assert len(old) < len(evidence_digests(folder))  # the run drew pictures
    write_result(folder, json.loads(split(folder.result_bytes())[0]), files=old)
    assert check_folder(folder).genuine, check_folder(folder).reason
    (tmp_path / "private").mkdir()
    copied = copy_verified(folder, tmp_path / "private")
    assert not isinstance(copied, str), copied
    assert copied[1] == old and not (copied[0].path / "pictures").exists()
    tagged = run_cli("codes", str(run_dir))
    assert tagged.exit_code == 0 and "left out" not in tagged.output, tagged.output
    assert check_folder(folder).genuine, check_folder(folder).reason  # re-signed by codes, still genuine
    # pictures added to a run signed with pictures are still refused
    write_result(folder, json.loads(split(folder.result_bytes())[0]), files={**old, "pictures/index.json": "0" * 64})
    (tmp_path / "private2").mkdir()
    assert "pictures/index.json changed" in copy_verified(folder, tmp_path / "private2")


# ---------------------------------------------------------------- a script written then run, in other words


@pytest.mark.parametrize(("write", "run"), [
    ("cat > /workspace/seg.py <<'EOF'", "python -u /workspace/seg.py"),
    ("cat > /workspace/seg.py <<'EOF'", "cd /workspace && python3 -B seg.py 2>&1 | tail -5"),
    ("tee /workspace/seg.py > /dev/null <<'EOF'", "python3 /workspace/seg.py"),
    ("cat <<'EOF' | tee /workspace/seg.py", "python3 /workspace/seg.py"),
    ("cat > \"/workspace/seg.py\" <<'EOF'", "python3 /workspace/seg.py"),
])
def test_a_script_written_then_run_in_other_words_is_read_as_run(reg, write, run):
    """Review 23 read a heredoc script run by a later call as code run (its names computed) only when written with
    `> file.py` unquoted and run as `python file.py`: an interpreter flag (`python -u`), a script written with `tee`
    or to a quoted path left every name typed, and an honest log line no evidence (s2e 0.0 -> 1.0)."""
    from test_review23 import SCRIPT, SHOWN, _call, _s2e

    written = _call(1, f"{write}\n{SCRIPT}EOF")
    for shown in SHOWN:
        assert _s2e(reg, [written, _call(2, run, shown)]) == 1.0
        assert _s2e(reg, [written, _call(2, "cat /workspace/seg.py", shown)]) == 0.0  # shown, not run: typed


# ---------------------------------------------------------------- a demo staged with --from


def test_a_demo_staged_with_a_folder_given_is_the_generators_staging(reg, tmp_path):
    """`automedbench stage toy/vowels --from DIR` (a demo ignores DIR) wrote a stamp naming DIR as its source and no
    generator digest: the first run took it for a stale demo and staged it again, new secret and case ids. The
    folder is ignored now: the staging is the generator's, used as staged."""
    from automedbench import staging
    from automedbench.testing import run_cli

    root, folder = tmp_path / "data", tmp_path / "download"
    folder.mkdir()
    made = run_cli("stage", "toy/vowels", "--from", str(folder), "--data-root", str(root))
    assert made.exit_code == 0, made.output
    track, task = reg.task("toy/vowels")
    stamp = staging.task_dir(root, task) / staging.STAMP
    before = stamp.read_bytes()
    assert not staging.stale_demo(stamp, track)
    staging.ensure(track, task, root)
    assert stamp.read_bytes() == before  # not staged again
