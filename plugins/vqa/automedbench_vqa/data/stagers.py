"""Stagers for the published layouts of the five VQA datasets, read from the user's download folder.

- PathVQA, VQA-RAD: Hugging Face parquet shards `data/<split>-*.parquet`, columns image {bytes, path},
  question, answer.
- SLAKE: `test.json` (records with qid, img_name, question, answer, q_lang, answer_type, location,
  modality, content_type) and the images under `imgs/` or inside `imgs.zip`; English questions only.
- MedFrameQA: parquet shards, columns question_id, question, options (list), answer (letter or option
  text), image (list of frames) or image_1..image_5, plus system / organ / modality.
- MedXpertQA MM: `MM/dev.jsonl` and `MM/test.jsonl` (id, question, options {A..E}, label, images,
  medical_task, body_system, question_type) and the images under `images/` or inside `images.zip`.
- Kvasir-VQA, OmniMedVQA, PMC-VQA, MMMU (medical): `release_sets.py`.

Which questions are sampled, their published ids and the order of a multiple-choice question's options
(`option_order.deal_options`) come from the staging's secret (`area.secret`): the
dataset's question id or row goes to `private/<qid>/answer.json` only, and every image is decoded and
written again as PNG (the same pixels, none of the source's bytes or metadata). A download holding fewer questions
than the task stages is refused in one line before anything is written (`short.draw`).
"""

from __future__ import annotations

import re
import zipfile
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from automedbench.api import (
    StagedData,
    StagingSecret,
    TaskSpec,
    UserError,
    inside,
    loads_json,
    open_zip,
    read_download_bytes,
    read_zip_member,
    staging_area,
)

from ..answers import OPTION_LETTERS, question_form
from .option_order import deal_options
from .records import finish, reencoded, safe_id, write_question
from .short import draw, shard_gaps

Item = tuple[str, dict[str, Any], list[tuple[str, bytes]], dict[str, str]]


MAX_IMAGE_BYTES = 64 << 20  # one question's image: larger is no image of these datasets
PARQUET_MAX_BYTES = 4 << 30  # one shard; the datasets' images ship embedded in shards of ~0.5 GB

class ImageStore:
    """Images by relative name from a folder `root/<folder>/` or, failing that, `root/<folder>.zip`."""

    def __init__(self, root: Path, folder: str) -> None:
        self.root, self.folder = root, folder
        self.directory = root / folder
        self.zip: zipfile.ZipFile | None = None
        self.members: dict[str, str] = {}
        archive = root / f"{folder}.zip"
        if not self.directory.is_dir() and archive.is_file():
            self.zip = open_zip(archive, MAX_IMAGE_BYTES)  # names, links, declared sizes and ratios checked
            files = [n for n in self.zip.namelist() if not n.endswith("/")]
            basenames = Counter(n.rsplit("/", 1)[-1] for n in files)
            for name in files:
                self.members[name] = name
                self.members[name.split(f"{folder}/", 1)[-1]] = name
                base = name.rsplit("/", 1)[-1]
                if basenames[base] == 1:  # a bare file name only when it is unambiguous (SLAKE: all source.jpg)
                    self.members.setdefault(base, name)
        elif not self.directory.is_dir():
            raise UserError(f"{root}: neither {folder}/ nor {folder}.zip found (images missing)")

    def read(self, name: str, qid: str) -> bytes:
        if self.zip is not None:
            member = self.members.get(name)
            if member is None and "/" not in name:
                member = self.members.get(name.rsplit("/", 1)[-1])
            if member is None:
                raise UserError(f"question {qid}: image {name} not in {self.folder}.zip")
            return read_zip_member(self.zip, member, MAX_IMAGE_BYTES)
        path = inside(self.directory, name, f"question {qid}")
        if not path.is_file():
            raise UserError(f"question {qid}: image {path} not found")
        return read_download_bytes(path, MAX_IMAGE_BYTES)


def _parquet_rows(source: Path, pattern: str, lacks: list[str]) -> list[dict[str, Any]]:
    """Every row of the shards under `source` matching `pattern`; the shards their names count that are not there
    are added to `lacks`."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise UserError("reading parquet needs pyarrow: pip install 'automedbench-vqa[parquet]'") from None
    files = sorted(p for p in source.rglob(pattern) if p.is_file() or p.is_symlink())
    if not files:
        raise UserError(f"{source}: no parquet files matching {pattern} (expected the dataset's data/ folder)")
    lacks += shard_gaps(files, source)
    rows: list[dict[str, Any]] = []
    for path in files:
        data = read_download_bytes(path, PARQUET_MAX_BYTES)  # no link, bounded: pyarrow never opens the path
        try:
            rows += pq.read_table(pa.BufferReader(data)).to_pylist()
        except Exception as exc:
            raise UserError(f"{path}: unreadable parquet ({type(exc).__name__}: {str(exc)[:100]})") from None
    return rows


def _image_bytes(value: Any, source: Path, qid: str) -> bytes:
    """A datasets `Image` cell: {'bytes': ..., 'path': ...}, raw bytes, or a path relative to the source."""
    if isinstance(value, dict):
        if value.get("bytes"):
            return bytes(value["bytes"])
        value = value.get("path")
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    if isinstance(value, str) and value:
        path = inside(source, value, f"question {qid}")  # no absolute path, no "..", no symlink
        if path.is_file():
            return read_download_bytes(path, MAX_IMAGE_BYTES)
        raise UserError(f"question {qid}: image {value} not found under {source}")
    raise UserError(f"question {qid}: no image data")


def _require(row: dict[str, Any], keys: tuple[str, ...], origin: str) -> None:
    missing = [k for k in keys if k not in row]
    if missing:
        raise UserError(f"{origin}: missing column(s) {', '.join(missing)} — not the published layout")


def parquet_vqa(task: TaskSpec, source: Path, secret: StagingSecret) -> Iterator[Item]:
    p = task.params
    lacks: list[str] = []
    rows = _parquet_rows(source, f"{p.get('split', 'test')}-*.parquet", lacks)
    prefix = p["prefix"]
    for index in draw(task, len(rows), secret, f"{source} ({p.get('split', 'test')}-*.parquet)", lacks):
        row = rows[index]
        _require(row, ("image", "question", "answer"), f"{prefix} row {index}")
        qid = f"{prefix}_{index:05d}"
        answer = str(row["answer"]).strip()
        # question_type from the wording only: one derived from the gold would reveal the yes/no answers
        question = {"dataset": prefix, "split": p.get("split", "test"), "question": str(row["question"]),
                    "mode": "open_ended", "question_type": question_form(row["question"])}
        yield qid, question, [("image", _image_bytes(row["image"], source, qid))], {"answer_text": answer}


def slake(task: TaskSpec, source: Path, secret: StagingSecret) -> Iterator[Item]:
    p = task.params
    split = p.get("split", "test")
    path = source / f"{split}.json"
    if not path.is_file():
        raise UserError(f"{source}: {split}.json not found (expected the SLAKE release: {split}.json + imgs/)")
    try:
        records = loads_json(read_download_bytes(path).decode("utf-8"), str(path))
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: not valid UTF-8 JSON ({exc})") from None
    if not isinstance(records, list):
        raise UserError(f"{path}: expected a list of question records")
    english = [r for r in records if isinstance(r, dict) and r.get("q_lang", "en") == "en"]
    images = ImageStore(source, "imgs")
    for index in draw(task, len(english), secret, f"{path} (English questions)"):
        row = english[index]
        _require(row, ("qid", "img_name", "question", "answer"), f"{path.name} record {index}")
        qid = f"slake_{safe_id(row['qid'])}"
        # answer_type (CLOSED/OPEN) annotates the gold answer: it stays out of the public record
        question = {"dataset": "slake", "split": split, "question": str(row["question"]), "mode": "open_ended",
                    "question_type": question_form(row["question"]),
                    "content_type": str(row.get("content_type", "")),
                    "body_system": str(row.get("location", "")), "modality": str(row.get("modality", ""))}
        yield qid, question, [("image", images.read(str(row["img_name"]), qid))], {"answer_text": str(row["answer"])}


_OPTION_PREFIX = re.compile(r"^\s*\(?([A-Ea-e])[).:]\s+")


def _unprefixed(text: str, letter: str) -> str:
    """An option's text without a leading "B. " (any A-E, as before) or, past E, its own letter ("F. ")."""
    if letter in "ABCDE":
        return _OPTION_PREFIX.sub("", text)
    return re.sub(rf"^\s*\(?[{letter}{letter.lower()}][).:]\s+", "", text)


def _options(raw: Any, origin: str) -> dict[str, str]:
    if isinstance(raw, str):
        try:
            raw = loads_json(raw, origin)
        except UserError:
            raise UserError(f"{origin}: options are not a list or mapping") from None
    # every option is staged, lettered on past E when the list is longer (the original's MedFrameQA stager does
    # the same); before round 23 a list was cut to A-E, so a sixth option was dropped and a gold "F" failed staging
    if isinstance(raw, dict):
        options = {str(k).strip().upper(): str(v) for k, v in raw.items()}
    elif isinstance(raw, (list, tuple)):
        if len(raw) > len(OPTION_LETTERS):
            raise UserError(f"{origin}: {len(raw)} options, more than the letters A-Z")
        options = {letter: _unprefixed(str(v), letter) for letter, v in zip(OPTION_LETTERS, raw, strict=False)}
    else:
        raise UserError(f"{origin}: options are not a list or mapping")
    if not options or set(options) - set(OPTION_LETTERS):
        raise UserError(f"{origin}: options must be lettered A–Z, got {sorted(options)[:30]}")
    return options


def _gold_label(answer: Any, options: dict[str, str], origin: str) -> str:
    text = str(answer).strip()
    if text.upper() in options:
        return text.upper()
    found = _OPTION_PREFIX.match(text + " ")
    if found and found.group(1).upper() in options:
        return found.group(1).upper()
    for letter, option in options.items():
        if option.strip().casefold() == text.casefold():
            return letter
    raise UserError(f"{origin}: answer {text[:40]!r} is neither an option letter nor an option's text")


def medframeqa(task: TaskSpec, source: Path, secret: StagingSecret) -> Iterator[Item]:
    p = task.params
    lacks: list[str] = []
    rows = _parquet_rows(source, "*.parquet", lacks)
    for index in draw(task, len(rows), secret, f"{source} (*.parquet)", lacks):
        row = rows[index]
        origin = f"medframeqa row {index}"
        _require(row, ("question", "options", "answer"), origin)
        qid = safe_id(row.get("question_id") or f"medframeqa_{index:05d}")
        frames = row.get("image") or row.get("images")
        if not isinstance(frames, list):
            frames = [row[k] for k in sorted(row, key=_frame_order) if re.fullmatch(r"image_\d+", k) and row[k]]
        if not frames:
            raise UserError(f"{origin}: no frames (columns image/images or image_1..image_5)")
        options = _options(row["options"], origin)
        question = {"dataset": "medframeqa", "split": p.get("split", "test"), "question": str(row["question"]),
                    "mode": "multiple_choice", "options": options, "question_type": "multi_frame",
                    "body_system": str(row.get("system", "") or ""), "organ": str(row.get("organ", "") or ""),
                    "modality": str(row.get("modality", "") or "")}
        images = [(f"frame_{i + 1}", _image_bytes(f, source, qid)) for i, f in enumerate(frames[:5])]
        label = _gold_label(row["answer"], options, origin)
        yield qid, question, images, {"answer_label": label, "answer_text": options[label]}


def _frame_order(key: str) -> tuple[int, str]:
    digits = re.findall(r"\d+", key)
    return (int(digits[-1]) if digits else 0, key)


def medxpertqa(task: TaskSpec, source: Path, secret: StagingSecret) -> Iterator[Item]:
    p = task.params
    base = source / "MM" if (source / "MM").is_dir() else source
    rows: list[tuple[str, dict[str, Any]]] = []
    for split in str(p.get("split", "dev,test")).split(","):
        path = base / f"{split.strip()}.jsonl"
        if not path.is_file():
            raise UserError(f"{source}: MM/{split.strip()}.jsonl not found (expected the MedXpertQA release)")
        for number, line in enumerate(read_download_bytes(path).splitlines(), 1):
            if not line.strip():
                continue
            try:
                rows.append((split.strip(), loads_json(line.decode("utf-8"), f"{path}:{number}")))
            except UnicodeDecodeError as exc:
                raise UserError(f"{path}:{number}: not a valid UTF-8 JSON line ({exc})") from None
    images = ImageStore(source, "images")
    held = " + ".join(f"MM/{split.strip()}.jsonl" for split in str(p.get("split", "dev,test")).split(","))
    for index in draw(task, len(rows), secret, f"{source} ({held})"):
        split, row = rows[index]
        origin = f"MedXpertQA {split} record {row.get('id', index)}"
        _require(row, ("id", "question", "options", "label", "images"), origin)
        qid = safe_id(row["id"])
        options = _options(row["options"], origin)
        names = row["images"] if isinstance(row["images"], list) else [row["images"]]
        question = {"dataset": "medxpertqa-mm", "split": split, "question": str(row["question"]),
                    "mode": "multiple_choice", "options": options,
                    "question_type": str(row.get("question_type", "") or ""),
                    "medical_task": str(row.get("medical_task", "") or ""),
                    "body_system": str(row.get("body_system", "") or ""), "modality": ""}
        frames = [(f"image_{i + 1}", images.read(str(name), qid)) for i, name in enumerate(names)]
        label = _gold_label(row["label"], options, origin)
        yield qid, question, frames, {"answer_label": label, "answer_text": options[label]}


READERS: dict[str, Callable[[TaskSpec, Path, StagingSecret], Iterator[Item]]] = {
    "parquet_vqa": parquet_vqa, "slake": slake, "medframeqa": medframeqa, "medxpertqa": medxpertqa,
}


def readers() -> dict[str, Callable[[TaskSpec, Path, StagingSecret], Iterator[Item]]]:
    """Every reader by source_kind: these five and the full release's four further sets (Kvasir-VQA,
    OmniMedVQA, PMC-VQA, MMMU medical), which live in their own module."""
    from .release_sets import RELEASE_READERS

    return {**READERS, **RELEASE_READERS}


def stage_dataset(task: TaskSpec, dest: Path, source: Path) -> StagedData:
    kind = task.params.get("source_kind", "")
    known = readers()
    if kind not in known:
        raise UserError(f"task {task.id}: unknown source_kind {kind!r}")
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    qids: list[str] = []
    seen: set[str] = set()
    with staging_area(dest) as area:
        # the published id is drawn from the staging's secret: the dataset's own id (and with it the row, the
        # record, the answer) goes to the private side only, and the ids' sorted order is no source order
        published = area.secret.id_stream(safe_id(task.params.get("prefix", "q")))
        console = Console(stderr=True)
        columns = (SpinnerColumn(), TextColumn("{task.description}"), TextColumn("{task.completed} questions"),
                   TimeElapsedColumn())
        with Progress(*columns, console=console, transient=True, disable=not console.is_terminal) as bar:
            job = bar.add_task(f"staging {task.id}", total=None)
            for source_id, question, images, gold in known[kind](task, source, area.secret):
                if source_id in seen:
                    raise UserError(f"{task.id}: duplicate question id {source_id}")
                seen.add(source_id)
                qid = next(published)
                # the options in a secret order, the gold letter following (option_order.py)
                question, gold = deal_options(question, gold, area.secret.rng(f"options\0{source_id}"))
                write_question(area.root, qid, question, reencoded(images, qid), {**gold, "source_id": source_id})
                qids.append(qid)
                bar.advance(job)
        return finish(area, qids, task.params)
