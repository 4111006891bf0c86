"""Review round 23 of the merged trust and user changes (red team 24, red team 25, UX 21).

- **A shared primary group taken for the user's own** (ownedpaths, red team 24): group write was allowed where the
  file's group is the user's primary one and `/etc/group` names no other member. A group many users have as their
  primary one (`users`, gid 100, on SUSE and many LDAP sites) names none of them in its member list, so a staging
  or runs folder its other users could write was used and signed. The group is the user's own only if no other
  account has it as its primary group either.

- **A script written in one call and run in another read as a forged log** (codetext.Authored, red team 25): every
  word of a heredoc that writes a script (`cat > seg.py <<'EOF'`) counted as typed, its code's names included, so
  the script's honest output in a later `python3 seg.py` ("model loaded: OrganUNet on cpu", a logging line
  "INFO:seg:model loaded") was no evidence: s2e 0.0, where the same code run in one call (`python3 - <<'EOF'`) scored
  1.0. Once a call has run it (a background run's log read later included), such a script's words are read as a
  call's own code is (its literals typed, its names not); a call showing it before any call ran it (`cat seg.py`)
  still finds every word typed. Left: a script run once and then shown with `cat` reads its names as computed, as
  a call's own names always were (round 25's "a heuristic").

- **A run signed before pictures were evidence read as tampered with** (resultproof, red team 24): its proof binds
  no `pictures/` file, so the pictures beside it read "pictures/index.json added since the harness signed the
  result": not genuine, off every leaderboard. A proof binding no picture now leaves the pictures out of the check;
  no reader shows them (each draws a run from `copy_verified`'s copy of the signed files).
"""

from __future__ import annotations

import grp
import json
import os
import pwd
from types import SimpleNamespace

import pytest
from automedbench import ownedpaths
from automedbench.errors import UserError
from automedbench.judge import JudgeInput
from automedbench.judges.rules import RulesJudge


def _fake_accounts(monkeypatch, me_gid: int, others_primary: int) -> None:
    """This user (uid 1000, primary group `me_gid`) and another account (uid 1001) whose primary group is
    `others_primary`; groups 1000 and 1001 are named after them, others `users`; none lists a member."""
    accounts = [SimpleNamespace(pw_name="me", pw_uid=1000, pw_gid=me_gid),
                SimpleNamespace(pw_name="bob", pw_uid=1001, pw_gid=others_primary)]
    monkeypatch.setattr(ownedpaths.os, "geteuid", lambda: 1000)
    monkeypatch.setattr(ownedpaths.os, "getegid", lambda: me_gid)
    monkeypatch.setattr(ownedpaths.pwd, "getpwuid", lambda uid: next(a for a in accounts if a.pw_uid == uid))
    monkeypatch.setattr(ownedpaths.pwd, "getpwall", lambda: accounts)
    names = {1000: "me", 1001: "bob"}
    monkeypatch.setattr(ownedpaths.grp, "getgrgid", lambda gid: SimpleNamespace(gr_name=names.get(gid, "users"),
                                                                               gr_gid=gid, gr_mem=[]))
    ownedpaths._own_group.cache_clear()


@pytest.fixture
def clean_group_cache():
    ownedpaths._own_group.cache_clear()
    yield
    ownedpaths._own_group.cache_clear()


def test_a_primary_group_other_accounts_share_is_not_the_users_own(monkeypatch, tmp_path, clean_group_cache):
    """Before: another account with the same primary group (not named in the group's member list) could write a
    group-writable staging, and it was used."""
    _fake_accounts(monkeypatch, me_gid=100, others_primary=100)
    assert not ownedpaths._own_group(100)
    _fake_accounts(monkeypatch, me_gid=1000, others_primary=1000)  # even one named after this user
    assert not ownedpaths._own_group(1000)
    _fake_accounts(monkeypatch, me_gid=100, others_primary=1001)
    staging = tmp_path / "data" / "segmentation" / "demo"
    staging.mkdir(parents=True)
    (staging / "answer.txt").write_text("1\n")
    (staging / "answer.txt").chmod(0o664)
    if os.stat(staging).st_uid != 0:  # the fake user's files need root to make; the group check above holds alone
        return
    for path in (tmp_path / "data", tmp_path / "data" / "segmentation", staging, staging / "answer.txt"):
        os.chown(path, 1000, 100)
    with pytest.raises(UserError, match="writable by its group"):
        ownedpaths.check_staging_owned(staging, tmp_path / "data")


def test_a_private_group_is_still_the_users_own(monkeypatch, clean_group_cache):
    _fake_accounts(monkeypatch, me_gid=1000, others_primary=1001)
    assert ownedpaths._own_group(1000)
    assert not ownedpaths._own_group(1001)


def test_the_real_accounts_agree_with_the_check(clean_group_cache):
    """On this machine: the user's group is its own exactly when it is named after the user and no other account
    has it as primary group or is a member."""
    gid, me = os.getegid(), pwd.getpwuid(os.geteuid()).pw_name
    shared = grp.getgrgid(gid).gr_name != me or any(a.pw_gid == gid and a.pw_name != me for a in pwd.getpwall()) or any(
        m != me for m in grp.getgrgid(gid).gr_mem)
    assert ownedpaths._own_group(gid) is not shared


# ---------------------------------------------------------------- a script written in one call, run in another

SCRIPT = """import logging
import torch
logging.basicConfig(level=logging.INFO)
log = logging.getLogger("seg")
device = "cuda" if torch.cuda.is_available() else "cpu"
class OrganUNet(torch.nn.Module):
    pass
model = OrganUNet().to(device)
print(f"model loaded: {type(model).__name__} on {device}")
log.info("model loaded on %s", device)
"""
WRITE = "cat > /workspace/seg.py <<'EOF'\n" + SCRIPT + "EOF"
INLINE = "python3 - <<'EOF'\n" + SCRIPT + "EOF"
SHOWN = ["model loaded: OrganUNet on cpu", "INFO:seg:model loaded on cpu"]


def _call(turn: int, code: str, stdout: str = "", language: str = "bash") -> dict:
    return {"type": "tool", "name": "execute_code", "turn": turn, "exit_code": 0, "language": language,
            "cases_with_outputs": 0, "code": code, "stdout": stdout}


def _s2e(reg, events: list[dict]) -> float | None:
    track, task = reg.task("segmentation/demo")
    item = track.rubric(task).item("s2e_model_loaded")
    return RulesJudge().grade(JudgeInput(task, "pro", [item], None, None, events)).items[0].value


@pytest.mark.parametrize("shown", SHOWN)
def test_a_script_written_then_run_is_read_as_the_same_code_run_at_once(reg, shown):
    """Before: 1.0 run inline, 0.0 written by one call and run by the next (its names counted as typed)."""
    assert _s2e(reg, [_call(1, INLINE, shown)]) == 1.0
    assert _s2e(reg, [_call(1, WRITE), _call(2, "python3 /workspace/seg.py", shown)]) == 1.0
    assert _s2e(reg, [_call(1, WRITE), _call(2, "cd /workspace && python seg.py 2>&1 | tail -5", shown)]) == 1.0
    # run in the background, its log read by a later call
    background = _call(2, "nohup python3 /workspace/seg.py > /workspace/run.log 2>&1 &")
    assert _s2e(reg, [_call(1, WRITE), background, _call(3, "sleep 30; cat /workspace/run.log", shown)]) == 1.0


@pytest.mark.parametrize("shown", SHOWN)
def test_a_written_script_shown_rather_than_run_is_still_typed(reg, shown):
    # `cat` shows the file: every word of it was typed, names included (also when another script ran)
    assert _s2e(reg, [_call(1, WRITE), _call(2, "cat /workspace/seg.py", shown)]) == 0.0
    assert _s2e(reg, [_call(1, WRITE), _call(2, "python3 /workspace/other.py; cat /workspace/seg.py", shown)]) == 0.0
    # run only after the call that showed it: that call's output was read before
    assert _s2e(reg, [_call(1, WRITE), _call(2, "cat /workspace/seg.py", shown),
                      _call(3, "python3 /workspace/seg.py")]) == 0.0
    # the script's own literals printed back are typed whether it is run or not
    assert _s2e(reg, [_call(1, WRITE), _call(2, "python3 /workspace/seg.py", "model loaded on cpu")]) == 0.0
    # a log written with words in the script and another file: the other file's words stay typed
    forged = _call(1, WRITE + "\ncat > /workspace/run.log <<'EOF'\nmodel loaded: OrganUNet on cpu\nEOF")
    assert _s2e(reg, [forged, _call(2, "python3 /workspace/seg.py; cat /workspace/run.log", SHOWN[0])]) == 0.0


# ---------------------------------------------------------------- a result signed before pictures were evidence


def test_a_run_signed_before_pictures_were_evidence_still_counts_without_its_pictures(data_root, tmp_path):
    """Before: a result signed by the harness before pictures were bound into its proof read 'not genuine:
    pictures/... added since the harness signed the result', as if someone had tampered with it: every such run
    left the leaderboard. It counts again; its pictures, signed by no one, are on no page."""
    from automedbench.resultproof import check_folder, evidence_digests, split, write_result
    from automedbench.runfolder import RunFolder
    from automedbench.testing import run_cli, run_task
    from test_result_proof import board

    runs = tmp_path / "runs"
    _, run_dir = run_task("toy/vowels", "reference", out=runs, data_root=data_root)
    folder = RunFolder(run_dir)
    old = {k: v for k, v in evidence_digests(folder).items() if not k.startswith("pictures/")}
    assert len(old) < len(evidence_digests(folder))  # the run drew pictures
    body = split(folder.result_bytes())[0]
    write_result(folder, json.loads(body), files=old)  # signed as the harness signed before pictures were bound
    assert check_folder(folder).genuine, check_folder(folder).reason
    data = board(runs)
    assert data["runs_used"] == 1, data["rejected"]
    index = run_dir / "pictures" / "index.json"
    planted = json.loads(index.read_text())
    planted["cases"][0]["note"] = "planted-note: reviewer confirmed"
    index.write_text(json.dumps(planted))
    site = tmp_path / "site"
    made = run_cli("leaderboard", str(runs), "--site", str(site), "--quiet", "--resamples", "100")
    assert made.exit_code == 0, made.output
    assert "planted-note" not in " ".join(p.read_text() for p in site.rglob("*.html"))
    # a result signed with its pictures still refuses an edited one
    write_result(folder, json.loads(body), files={**old, "pictures/index.json": "0" * 64})
    assert not check_folder(folder).genuine
