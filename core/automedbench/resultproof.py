"""Proof that the harness wrote a result: only such a result counts on a leaderboard.

A `result.json` is plain JSON that anyone able to write the folder could imitate (an agent on a backend
without filesystem isolation wrote a second result beside its run, rated A, and it was counted). So every
result the harness writes ends with a `proof` object over the exact bytes before it:

    {... the result ...,
      "proof": {"alg": ..., "at": when it was signed (UTC), "body": sha256 of the result's bytes,
                "files": {evidence file: sha256}, "folder": the run folder's name,
                "key": the signer's ed25519 public key, "mac": ..., "sig": ...}
    }

`sig` is an ed25519 signature (the `cryptography` package) so that a team can publish its public key
(`automedbench verify --show-key`) and others can check its results; `mac` is an HMAC-SHA256 over the same
message, which this machine's readers check in microseconds (a leaderboard reads 10 000 results). Both keys
are derived from the harness key in the state folder that no sandbox sees (`harnessstate`). `files` binds
the evidence that `rejudge` and `codes` re-read (trajectory, verdict, evaluation, plan artefacts, tool
output) and the case pictures the run page shows, and `folder` binds the run folder's name, so a genuine
result copied to another folder, or beside edited evidence, is not genuine there. A result without a
proof (written before results were signed, or by anyone but the harness), with a changed byte, or signed
by a key this harness does not trust is listed with the reason and never counted. `at` orders the signed versions
of one run (re-graded, re-tagged): a reader counts the newest, never the one a copier put first (a proof made before
`at` was signed has none, and is older than any that has one).
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import os
import stat
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from attrs import Factory, define

from .fsutil import FILE_FLAGS, atomic_write_bytes, encode_text, open_dir, open_path, walk_fd
from .harnessstate import derived_key, state_dir
from .pictures import PICTURES_DIR
from .runfolder import RunFolder
from .serialize import dumps, json_text

ALG = "ed25519+hmac-sha256"
DOMAIN = b"automedbench-result-v1\0"
MAC_PURPOSE = "automedbench result mac v1"
SEED_PURPOSE = "automedbench result signing seed v1"
MARK = b',\n  "proof": '
TAIL = b"\n}\n"
MAX_PROOF_BYTES = 1 << 20
TRUSTED_KEYS = "trusted_keys"  # in the state folder: public keys (hex, one a line) of other harnesses to trust
# What readers re-read to recompute a score or a code: bound into the proof by digest
EVIDENCE_FILES = (RunFolder.TRAJECTORY, RunFolder.BRIEF, RunFolder.JUDGE, RunFolder.EVALUATION, RunFolder.GRADES,
                  RunFolder.MANIFEST, RunFolder.CHECKS)
# the case pictures too: the run page shows them (and their captions) as the evaluator's; unbound, anyone able to
# write the folder put another case's picture and a note of their own on a genuine run's page
EVIDENCE_DIRS = (RunFolder.ARTEFACTS, RunFolder.TOOL_OUTPUT, PICTURES_DIR)
MAX_EVIDENCE_FILES = 10_000
# A run's evidence files together, as a reader checks them: the harness writes far less (the agent phase's trajectory
# stops at 128 MiB, side files at 64 MiB, plan artefacts at 64 MiB, pictures at 8 MiB). Hashed whole, a sparse file
# of a terabyte put beside a genuine result held every leaderboard that read the folder for as long as it took.
MAX_EVIDENCE_BYTES = 1 << 30
TOO_LARGE = (f"its evidence files hold more than {MAX_EVIDENCE_BYTES >> 20} MiB together, more than the harness "
             "ever writes for a run (not read further)")
NO_PROOF = ("no proof that this harness wrote it (a result written before results were signed, or by anyone "
            "else); run it again to count it")


class EvidenceTooLarge(Exception):
    """A run folder's evidence files are over the bytes a reader checks (`MAX_EVIDENCE_BYTES`)."""


@define
class ProofCheck:
    """A result's proof as checked: `genuine` or why not, the signer's public key (hex), the sha256 of the
    signed bytes (the same for a result and its copies, whatever folder they sit in) and the evidence digests
    the harness signed (`files`, of a genuine result; its run's identity: `run_identity`)."""

    genuine: bool
    reason: str = ""
    key: str = ""
    body: str = ""
    files: dict[str, str] = Factory(dict)
    at: str = ""  # when the harness signed it (UTC, `signed_at`); "" for a proof made before that was signed


def run_identity(run_id: str, files: Mapping[str, object]) -> tuple[str, str] | None:
    """One run whichever folder or version holds it (a copy, one re-graded or re-tagged since): its id and the
    digest of the trajectory the harness signed (`files`). None without a signed trajectory: nothing then ties two
    results to one execution, so each counts as its own (a copy of the same bytes is caught by `body`)."""
    execution = files.get(RunFolder.TRAJECTORY)
    return (str(run_id), execution) if isinstance(execution, str) and execution else None


# ------------------------------------------------------------------ keys


@functools.lru_cache(maxsize=8)
def _mac_key(folder: str) -> bytes | None:
    return derived_key(MAC_PURPOSE, Path(folder), create=False)


def _signer(folder: Path) -> Any:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    seed = derived_key(SEED_PURPOSE, folder)
    assert seed is not None
    return Ed25519PrivateKey.from_private_bytes(seed)


def _raw_public(private: Any) -> str:
    # public_bytes_raw (cryptography >= 40): the serialization module it spares imports the SSH key code (~10 ms)
    return private.public_key().public_bytes_raw().hex()


def public_key(folder: Path | None = None) -> str:
    """This harness's public key (hex): publish it so that others can check its results."""
    return _raw_public(_signer(folder or state_dir()))


@functools.lru_cache(maxsize=8)
def _own_public(folder: str) -> str | None:
    if derived_key(SEED_PURPOSE, Path(folder), create=False) is None:
        return None
    return public_key(Path(folder))


def trusted_keys(extra: Iterable[str] = (), folder: Path | None = None) -> set[str]:
    """Public keys (hex) whose signatures count: this harness's own, the state folder's `trusted_keys`
    file (one hex key a line, `#` comments), and `extra`."""
    folder = folder or state_dir()
    keys = {k.strip().lower() for k in extra if k.strip()}
    own = _own_public(str(folder))
    if own:
        keys.add(own)
    try:
        text = (folder / TRUSTED_KEYS).read_text(errors="replace")[:1 << 20]
    except OSError:
        text = ""
    for line in text.splitlines():
        word = line.split("#", 1)[0].strip().lower()
        if word:
            keys.add(word)
    return keys


# ------------------------------------------------------------------ writing


def write_result(folder: RunFolder | Path, result: Any, files: dict[str, str] | None = None) -> str | None:
    """Write `result` (a Result record, or its plain JSON as a dict) as the folder's result.json, atomically,
    with its proof; None, or why it went unsigned. `files`: the evidence digests to sign (a command re-signing
    a run signs those it verified, `copy_verified`), else the folder's as they are now.

    A record is never lost to a signing problem (a damaged key, an unwritable state folder): the result is
    then written without a proof, reads as not genuine, and the reason is returned for the caller to say."""
    folder = folder if isinstance(folder, RunFolder) else RunFolder(folder)
    body = encode_text(json_text(result, indent=2, allow_nan=False) if isinstance(result, dict) else dumps(result))
    try:
        data = signed_bytes(body, folder, files=files)
        why = None
    except Exception as exc:
        data, why = body + b"\n", f"result not signed: {type(exc).__name__}: {exc}"[:400]
    atomic_write_bytes(folder.result, data)
    return why


def signed_bytes(body: bytes, folder: RunFolder, state: Path | None = None,
                 files: dict[str, str] | None = None) -> bytes:
    """`body` (a JSON object as written by `dumps`, ending in a newline and a brace) with its proof."""
    if not body.endswith(b"\n}"):
        raise ValueError("a result body must be an indented JSON object")
    state = state or state_dir()
    signer = _signer(state)
    mac_key = derived_key(MAC_PURPOSE, state)
    assert mac_key is not None
    files = evidence_digests(folder) if files is None else dict(sorted(files.items()))
    claim = {"alg": ALG, "at": signed_at(), "body": hashlib.sha256(body).hexdigest(), "files": files,
             "folder": folder.name, "key": _raw_public(signer)}
    message = _message(claim)
    sig = signer.sign(message).hex()
    proof = {**claim, "mac": _mac(mac_key, message, sig), "sig": sig}
    return body[:-2] + MARK + _proof_text(proof) + TAIL


def signed_at(now: float | None = None) -> str:
    """The proof's `at`: UTC to the microsecond, fixed width, so that text order is time order."""
    now = time.time() if now is None else now
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1e6):06d}Z"


def _mac(key: bytes, message: bytes, sig: str) -> str:
    """The local check: over the message and the signature, so a changed signature fails here too."""
    return hmac.new(key, message + b"\0" + sig.encode(), hashlib.sha256).hexdigest()


def _message(claim: dict[str, Any]) -> bytes:
    return DOMAIN + json.dumps(claim, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def _proof_text(proof: dict[str, Any]) -> bytes:
    return json.dumps(proof, sort_keys=True, ensure_ascii=True).encode()


def evidence_digests(folder: RunFolder, budget: int | None = None) -> dict[str, str]:
    """sha256 of every evidence file of the run folder (regular files only, reached without following links); with
    a `budget`, EvidenceTooLarge once the files together are over it (by their sizes, before any is read)."""
    out: dict[str, str] = {}
    left = [budget]
    root = open_dir(folder.path)
    if root is None:
        return out
    try:
        for name in EVIDENCE_FILES:
            digest = _digest_at(root, name, left)
            if digest is not None:
                out[name] = digest
        for sub in EVIDENCE_DIRS:
            fd = open_dir(folder.path / sub)
            if fd is None:
                continue
            try:
                for rel, dir_fd, leaf, info in walk_fd(fd, max_entries=MAX_EVIDENCE_FILES):
                    if dir_fd >= 0 and info is not None and stat.S_ISREG(info.st_mode):
                        digest = _digest_at(dir_fd, leaf, left)
                        if digest is not None:
                            out[f"{sub}/{rel}"] = digest
            finally:
                os.close(fd)
    finally:
        os.close(root)
    return out


def _digest_at(dir_fd: int, name: str, left: list[int | None]) -> str | None:
    """sha256 of a regular file, charged to the budget `left[0]` (None: no budget) by its size and by what is read
    (a file that grows while it is hashed is stopped there too)."""
    try:
        fd = os.open(name, FILE_FLAGS, dir_fd=dir_fd)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None
        _charge(left, info.st_size)
        digest, read = hashlib.sha256(), 0
        while chunk := os.read(fd, 1 << 20):
            read += len(chunk)
            if read > info.st_size:
                _charge(left, len(chunk))
            digest.update(chunk)
        return digest.hexdigest()
    finally:
        os.close(fd)


def _charge(left: list[int | None], size: int) -> None:
    if left[0] is None:
        return
    left[0] -= size
    if left[0] < 0:
        raise EvidenceTooLarge(TOO_LARGE)


# ------------------------------------------------------------------ checking


def split(data: bytes) -> tuple[bytes, dict[str, Any]] | str:
    """(the signed body, the proof) of a result file's bytes, or why it has no well-formed proof."""
    at = data.rfind(MARK)
    if at < 0 or not data.endswith(TAIL):
        return NO_PROOF
    text = data[at + len(MARK):-len(TAIL)]
    if len(text) > MAX_PROOF_BYTES:
        return "its proof is too large"
    try:
        proof = json.loads(text)
    except ValueError:
        return "its proof is not valid JSON"
    if not isinstance(proof, dict) or _proof_text(proof) != text:
        return "its proof is not in the form the harness writes"
    return data[:at] + b"\n}", proof


def check_bytes(data: bytes, folder_name: str, *, extra_keys: Iterable[str] = (),
                state: Path | None = None) -> ProofCheck:
    """Whether the bytes of a result.json are what this harness (or one it trusts) wrote for a folder of
    this name. The evidence files are not read: `check_folder` does that."""
    parts = split(data)
    if isinstance(parts, str):
        return ProofCheck(False, parts)
    body, proof = parts
    claim = {k: v for k, v in proof.items() if k not in ("mac", "sig")}
    if claim.get("alg") != ALG or not all(isinstance(claim.get(k), str) for k in ("body", "folder", "key")) \
            or not isinstance(claim.get("files"), dict) or not isinstance(claim.get("at", ""), str):
        return ProofCheck(False, "its proof is not in the form the harness writes")
    key = claim["key"]
    if not _signed(_message(claim), proof, key, extra_keys, state or state_dir()):
        return ProofCheck(False, f"its proof does not verify (forged, or signed by a key this harness does not "
                                 f"trust: {key[:16]}...; trust it with `automedbench verify --key`)", key)
    if not hmac.compare_digest(hashlib.sha256(body).hexdigest(), claim["body"]):
        return ProofCheck(False, "the result was changed after the harness signed it", key)
    if claim["folder"] != folder_name:
        return ProofCheck(False, f"the harness signed it for the run folder {claim['folder'][:120]!r}, not "
                                 f"{folder_name[:120]!r} (a copied or renamed result)", key, claim["body"])
    return ProofCheck(True, "", key, claim["body"], dict(claim["files"]), claim.get("at", "")[:40])


def _signed(message: bytes, proof: dict[str, Any], key: str, extra_keys: Iterable[str], state: Path) -> bool:
    mac_key = _mac_key(str(state))
    mac, sig = proof.get("mac"), proof.get("sig")
    if not isinstance(sig, str):
        return False
    if mac_key is not None and isinstance(mac, str) and hmac.compare_digest(_mac(mac_key, message, sig), mac):
        return True
    if key.lower() not in trusted_keys(extra_keys, state):
        return False
    try:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

        Ed25519PublicKey.from_public_bytes(bytes.fromhex(key)).verify(bytes.fromhex(sig), message)
    except (ValueError, InvalidSignature):
        return False
    return True


def check_folder(folder: RunFolder | Path, *, evidence: bool = True, extra_keys: Iterable[str] = (),
                 state: Path | None = None) -> ProofCheck:
    """A run folder's result.json checked (`check_bytes`), and with `evidence` every evidence file against
    the digest the harness signed: what `verify`, `rejudge` and `codes` need before they trust a run."""
    folder = folder if isinstance(folder, RunFolder) else RunFolder(folder)
    data = folder.result_bytes()
    if data is None:
        return ProofCheck(False, "no readable result.json (missing, not a regular file, or too large)")
    found = check_bytes(data, folder.name, extra_keys=extra_keys, state=state)
    if not found.genuine or not evidence:
        return found
    return check_evidence(folder, data, found)


def load_checked(folder: RunFolder) -> tuple[Any, ProofCheck]:
    """(the folder's Result, its check), both from one read of result.json: a result read apart from the bytes
    checked could be another (swapped in between) shown as genuine."""
    from .records import Result
    from .serialize import decode_record

    data = folder.result_bytes()
    if data is None:
        return folder.load_result(), ProofCheck(False, "no readable result.json")  # load_result says why
    result = decode_record(data, Result, folder.result)
    found = check_bytes(data, folder.name)
    return result, (check_evidence(folder, data, found) if found.genuine else found)


def check_evidence(folder: RunFolder, data: bytes, found: ProofCheck) -> ProofCheck:
    """`found` (a genuine `check_bytes` of `data`) unless an evidence file of `folder` differs from the digest
    the harness signed: a genuine result beside edited evidence (a trajectory rewritten to show other work) is
    not genuine there, for every reader (the leaderboard counted it while `verify` refused it)."""
    signed = found.files
    try:
        now = _comparable(signed, evidence_digests(folder, MAX_EVIDENCE_BYTES))
    except EvidenceTooLarge:
        return ProofCheck(False, TOO_LARGE, found.key)
    for name in sorted(set(signed) | set(now)):
        if signed.get(name) != now.get(name):
            what = "missing" if name not in now else "added" if name not in signed else "changed"
            return ProofCheck(False, f"{name[:200]} {what} since the harness signed the result", found.key)
    return found


def _comparable(signed: dict[str, str], now: dict[str, str]) -> dict[str, str]:
    """The folder's evidence digests `now` to compare with those `signed`: without its pictures when none was signed
    (before pictures were evidence, or drawn with none). Those are no one's, shown by no reader (each draws a run from
    `copy_verified`'s copy, which holds only signed files); refusing them refused every run signed before pictures
    were bound, as if tampered with."""
    pictures = PICTURES_DIR + "/"
    if any(name.startswith(pictures) for name in signed):
        return now
    return {name: digest for name, digest in now.items() if not name.startswith(pictures)}


def check_or_reason(folder: RunFolder | Path, **options: Any) -> str | None:
    """None for a genuine run, else the one-line reason (for commands that refuse what is not genuine)."""
    found = check_folder(folder, **options)
    return None if found.genuine else found.reason


# ------------------------------------------------------------------ re-signing


def copy_verified(folder: RunFolder, into: Path) -> tuple[RunFolder, dict[str, str]] | str:
    """(a copy in `into` of a genuine run's result.json and evidence, the evidence digests the harness signed),
    or why the run is not genuine. Each file is read once, no-follow, hashed as it is copied and checked against
    its signed digest, so the copy is exactly what was signed.

    For the commands that re-sign a run (rejudge, codes): they read the copy and sign the digests it was checked
    against. Checking the folder and then reading it again let whoever can write it swap a file in between (a
    run's evaluation or trajectory replaced by another's while the judge graded), graded and signed as the
    harness's own."""
    data = folder.result_bytes()
    if data is None:
        return "no readable result.json (missing, not a regular file, or too large)"
    found = check_bytes(data, folder.name)
    if not found.genuine:
        return found.reason
    signed = found.files
    copy = RunFolder(into / folder.name)
    copy.path.mkdir(mode=0o700)
    left: list[int | None] = [MAX_EVIDENCE_BYTES]
    try:
        for name in sorted(signed):
            parts = name.split("/")
            if any(p in ("", ".", "..") for p in parts) or name.startswith("/"):
                return f"its proof names an evidence file outside the folder: {name[:200]!r}"
            got = _copy_regular(folder, name, copy.path.joinpath(*parts), left)
            if got != signed[name]:
                return f"{name[:200]} {'missing' if got is None else 'changed'} since the harness signed the result"
        now = evidence_digests(folder, MAX_EVIDENCE_BYTES)
    except EvidenceTooLarge:
        return TOO_LARGE
    added = sorted(set(_comparable(signed, now)) - set(signed))  # unsigned pictures are left
    if added:
        return f"{added[0][:200]} added since the harness signed the result"
    atomic_write_bytes(copy.result, data)
    return copy, dict(signed)


def _copy_regular(folder: RunFolder, name: str, dest: Path, left: list[int | None]) -> str | None:
    """Copy the regular file `name` of `folder` (reached without following links) to `dest`; its sha256, or None
    when it is absent or not a regular file. Charged to the budget `left` as `_digest_at` is (EvidenceTooLarge)."""
    parent, _, leaf = name.rpartition("/")
    dir_fd = open_path(folder.path, parent)
    if dir_fd is None:
        return None
    try:
        fd = os.open(leaf, FILE_FLAGS, dir_fd=dir_fd)
    except OSError:
        return None
    finally:
        os.close(dir_fd)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None
        _charge(left, info.st_size)
        dest.parent.mkdir(parents=True, exist_ok=True)
        digest, read = hashlib.sha256(), 0
        with open(dest, "xb") as out:
            while chunk := os.read(fd, 1 << 20):
                read += len(chunk)
                if read > info.st_size:
                    _charge(left, len(chunk))
                digest.update(chunk)
                out.write(chunk)
        return digest.hexdigest()
    finally:
        os.close(fd)


def write_verified(folder: RunFolder, name: str, text: str, files: dict[str, str]) -> None:
    """Write an evidence file a re-signing command made (rejudge's verdict) and put its digest, from the bytes
    written, into `files`: what is signed is what the command wrote, whatever the folder holds by then."""
    data = encode_text(text)
    atomic_write_bytes(folder.path / name, data)
    files[name] = hashlib.sha256(data).hexdigest()
