"""Stagers for the four VQA sets of the full release: Kvasir-VQA, OmniMedVQA, PMC-VQA, MMMU (medical subjects).

Each reads its published layout through the API's untrusted-download layer (no-follow bounded reads,
bounded zip members, depth-limited JSON) and maps the dataset's question types onto the track's one
answer contract: a multiple-choice question (lettered options, gold letter) or an open-ended one
(closed when the gold answer is yes/no, scored strictly; else 0.5 exact match + 0.5 token F1).

- Kvasir-VQA: parquet `data/raw-*.parquet` (image, question, answer, source, img_id); every question is
  open-ended; its type comes from the question's wording (the six types of the Kvasir-VQA paper).
- OmniMedVQA: `QA_information/Open-access/<set>.json` (records with question_id, question_type,
  question, gt_answer, option_A..option_D, image_path, modality_type) and `Images/`; multiple choice.
- PMC-VQA: `test_clean.csv` (Figure_path, Question, Answer, Choice A..D, Answer_label) and the
  figures in `images/` or `images.zip`; multiple choice.
- MMMU: `<Subject>/validation-*.parquet` for the five Health & Medicine subjects (id, question, options as
  a Python list literal, answer, image_1..image_7, question_type, subfield, img_type); multiple choice
  (options lettered A, B, ... on past E; more than 26 left out), or open.
"""

from __future__ import annotations

import ast
import csv
import io
import re
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any

from automedbench.api import StagingSecret, TaskSpec, UserError, loads_json, read_download_bytes, read_download_text

from ..answers import LETTERS, OPTION_LETTERS, normalize
from .records import safe_id
from .short import draw, shard_gaps
from .stagers import MAX_IMAGE_BYTES, PARQUET_MAX_BYTES, ImageStore, Item, _gold_label, _require

CSV_MAX_BYTES = 256 << 20  # PMC-VQA's largest table (train) is ~100 MB
JSON_MAX_BYTES = 256 << 20
OPTIONS_MAX_CHARS = 20_000  # an MMMU options literal: a few hundred characters


def read_relative(root: Path, name: str, qid: str) -> bytes:
    """An image named by a record, relative to `root`: no absolute path, no `..`, no symlink, bounded."""
    rel = str(name).replace("\\", "/").strip()
    parts = PurePosixPath(rel).parts
    if not rel or rel.startswith("/") or "\0" in rel or ".." in parts:
        raise UserError(f"question {qid}: image path {rel[:80]!r} leaves the dataset folder")
    path = root.joinpath(*parts)
    if not path.exists() and not path.is_symlink():
        raise UserError(f"question {qid}: image {path} not found")
    return read_download_bytes(path, MAX_IMAGE_BYTES)


def parquet_rows(folder: Path, pattern: str, what: str, lacks: list[str], root: Path) -> list[dict[str, Any]]:
    """Every row of the shards `folder/<pattern>` in name order, each shard read no-follow and bounded; the shards
    their names count that are not there are added to `lacks` (relative to `root`)."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise UserError("reading parquet needs pyarrow: pip install 'automedbench-vqa[parquet]'") from None
    files = sorted(p for p in folder.glob(pattern) if not p.name.startswith(".")) if folder.is_dir() else []
    if not files:
        raise UserError(f"{folder}: no parquet files matching {pattern} (expected {what})")
    lacks += shard_gaps(files, root)
    rows: list[dict[str, Any]] = []
    for path in files:
        data = read_download_bytes(path, PARQUET_MAX_BYTES)
        try:
            rows += pq.read_table(pa.BufferReader(data)).to_pylist()
        except Exception as exc:  # pyarrow raises several types on a corrupt shard
            raise UserError(f"{path}: unreadable parquet ({type(exc).__name__}: {str(exc)[:100]})") from None
    return rows


def cell_image(value: Any, qid: str) -> bytes:
    """A parquet `Image` cell's embedded bytes (a path inside the cell is never opened: the download is untrusted)."""
    if isinstance(value, dict):
        value = value.get("bytes")
    if isinstance(value, (bytes, bytearray)) and value:
        if len(value) > MAX_IMAGE_BYTES:
            raise UserError(f"question {qid}: image of {len(value)} bytes (more than {MAX_IMAGE_BYTES})")
        return bytes(value)
    raise UserError(f"question {qid}: no embedded image bytes")


# ---------------------------------------------------------------- Kvasir-VQA

KVASIR_TYPES = (  # (question type, wording) in the order they are tried; the paper's six types
    ("numerical_count", re.compile(r"^\s*how many\b", re.I)),
    ("color", re.compile(r"\bcolou?r", re.I)),
    ("location", re.compile(r"^\s*where\b", re.I)),
    ("yes_no", re.compile(r"^\s*(is|are|was|were|does|do|did|has|have|can)\b", re.I)),
    ("multiple_choice", re.compile(r"\b(which|what)\b.*\b(instruments?|findings?|landmarks?|abnormalit\w*)\b", re.I)),
    ("single_choice", re.compile(r".", re.S)),
)


def kvasir_question_type(question: str) -> str:
    """The Kvasir-VQA question type from the wording alone (never from the gold answer)."""
    return next(kind for kind, pattern in KVASIR_TYPES if pattern.search(question))


def kvasir(task: TaskSpec, source: Path, secret: StagingSecret) -> Iterator[Item]:
    p = task.params
    folder = source / "data" if (source / "data").is_dir() else source
    pattern, lacks = f"{p.get('split', 'raw')}-*.parquet", []
    rows = parquet_rows(folder, pattern, "the Kvasir-VQA release's data/raw-*.parquet", lacks, source)
    for index in draw(task, len(rows), secret, f"{source} ({pattern})", lacks):
        row = rows[index]
        _require(row, ("image", "question", "answer"), f"Kvasir-VQA row {index}")
        qid = f"kvasir_{index:05d}"
        text = str(row["question"])
        question = {"dataset": "kvasir-vqa", "split": p.get("split", "raw"), "question": text, "mode": "open_ended",
                    "question_type": kvasir_question_type(text), "modality": "endoscopy",
                    "body_system": "gastrointestinal"}
        # the row's sub-collection is left out: every kvasir-instrument image shows an instrument, so it answered
        # the "any instruments?" / "which instrument?" questions
        yield qid, question, [("image", cell_image(row["image"], qid))], {"answer_text": str(row["answer"]).strip()}


# ---------------------------------------------------------------- OmniMedVQA

OMNIMED_TYPES = {  # the release's five question types
    "Disease Diagnosis": "disease_diagnosis", "Anatomy Identification": "anatomy_identification",
    "Modality Recognition": "modality_recognition", "Lesion Grading": "lesion_grading",
    "Other Biological Attributes": "other_biological_attributes",
}


def _omnimed_root(source: Path) -> Path:
    for root in (source, source / "OmniMedVQA"):
        if (root / "QA_information").is_dir():
            return root
    raise UserError(f"{source}: no QA_information/ folder; expected the OmniMedVQA release "
                    "(QA_information/Open-access/<set>.json and Images/<set>/...)")


def omnimedvqa(task: TaskSpec, source: Path, secret: StagingSecret) -> Iterator[Item]:
    p = task.params
    root = _omnimed_root(source)
    access = str(p.get("access", "Open-access"))
    folder = root / "QA_information" / access
    files = sorted(f for f in folder.glob("*.json") if not f.name.startswith(".")) if folder.is_dir() else []
    if not files:
        raise UserError(f"{folder}: no <set>.json question files (only {access} questions are staged)")
    pool: list[tuple[str, dict[str, Any]]] = []
    for path in files:
        records = loads_json(read_download_bytes(path, JSON_MAX_BYTES), str(path))
        if not isinstance(records, list):
            raise UserError(f"{path}: expected a list of question records")
        pool += [(path.stem, r) for r in records if isinstance(r, dict)]
    for index in draw(task, len(pool), secret, f"{folder} ({len(files)} <set>.json)"):
        subset, row = pool[index]
        origin = f"OmniMedVQA {subset} record {row.get('question_id', index)}"
        _require(row, ("question", "gt_answer", "image_path", "option_A", "option_B"), origin)
        options = {letter: str(row[f"option_{letter}"]) for letter in LETTERS
                   if str(row.get(f"option_{letter}", "") or "").strip()}
        qid = f"omnimedvqa_{index:05d}"
        raw_type = str(row.get("question_type", "") or "")
        if raw_type not in OMNIMED_TYPES:
            raise UserError(f"{origin}: question_type {raw_type!r} is none of {', '.join(OMNIMED_TYPES)}")
        question = {"dataset": "omnimedvqa", "split": access, "question": str(row["question"]),
                    "mode": "multiple_choice", "options": options, "question_type": OMNIMED_TYPES[raw_type]}
        # the modality and the source set ("Chest CT Scan") answer the "modality recognition" questions, and the
        # original publishes no OmniMedVQA record: both are breakdown facts for the private record only
        facts = {"modality": str(row.get("modality_type", row.get("modality", "")) or ""), "body_system": subset}
        label = _gold_label(row["gt_answer"], options, origin)
        image = read_relative(root, str(row["image_path"]), qid)
        yield qid, question, [("image", image)], {"answer_label": label, "answer_text": options[label], **facts}


# ---------------------------------------------------------------- PMC-VQA

_PMC_CHOICE = re.compile(r"^\s*\(?[A-Da-d]\s*[:.)]\s*")
PMC_COLUMNS = ("Figure_path", "Question", "Choice A", "Choice B", "Answer_label")


def read_csv(path: Path) -> list[dict[str, str]]:
    """A comma-separated table with a header, bounded in size and field length."""
    text = read_download_text(path, CSV_MAX_BYTES)
    try:
        reader = csv.DictReader(io.StringIO(text))
        rows = [{(k or "").strip(): (v or "") for k, v in row.items() if isinstance(v, str) or v is None}
                for row in reader]
    except csv.Error as exc:
        raise UserError(f"{path}: not a readable CSV table ({exc})") from None
    return rows


def pmc_question_type(question: str) -> str:
    """PMC-VQA has no type column: modality, anatomy or finding questions are told apart by their wording."""
    text = normalize(question)
    if re.search(r"\b(modality|imaging technique|type of (image|imaging|scan)|kind of (image|scan)|staining|stain)\b",
                 text):
        return "modality"
    if re.search(r"\b(where|location|located|which side|which part|organ|anatom\w*)\b", text):
        return "anatomy_location"
    return "finding"


def pmcvqa(task: TaskSpec, source: Path, secret: StagingSecret) -> Iterator[Item]:
    p = task.params
    name = str(p.get("csv", "test_clean.csv"))
    path = source / name
    if not path.exists() and not path.is_symlink():
        raise UserError(f"{source}: {name} not found (expected the PMC-VQA release: {name} + images/ or images.zip)")
    rows = read_csv(path)
    if rows:
        _require(rows[0], PMC_COLUMNS, f"{name} header")
    images = ImageStore(source, str(p.get("images", "images")))
    for index in draw(task, len(rows), secret, f"{path} (rows)"):
        row = rows[index]
        origin = f"{name} row {index + 2}"
        options = {letter: _PMC_CHOICE.sub("", row[f"Choice {letter}"]).strip() for letter in "ABCD"
                   if (row.get(f"Choice {letter}") or "").strip()}
        label = (row.get("Answer_label") or "").strip().upper()
        if label not in options:
            raise UserError(f"{origin}: Answer_label {label[:10]!r} names no choice ({', '.join(options)})")
        qid = f"pmcvqa_{index:05d}"
        text = row["Question"].strip()
        question = {"dataset": "pmc-vqa", "split": name.removesuffix(".csv"), "question": text,
                    "mode": "multiple_choice", "options": options, "question_type": pmc_question_type(text),
                    "modality": "", "body_system": ""}
        figure = str(row["Figure_path"]).strip()
        if not figure or "/" in figure or figure in (".", ".."):
            raise UserError(f"{origin}: Figure_path {figure[:80]!r} is not a file name")
        yield qid, question, [("image", images.read(figure, qid))], {"answer_label": label,
                                                                      "answer_text": options[label]}


# ---------------------------------------------------------------- MMMU (Health & Medicine)

MMMU_MEDICAL = ("Basic_Medical_Science", "Clinical_Medicine", "Diagnostics_and_Laboratory_Medicine", "Pharmacy",
                "Public_Health")
_IMAGE_COLUMN = re.compile(r"^image_(\d+)$")


def parse_options(raw: Any, origin: str) -> list[str]:
    """MMMU's options cell: a Python list literal of strings (parsed as a literal, never evaluated)."""
    if isinstance(raw, list):
        items = raw
    else:
        text = str(raw or "").strip()
        if len(text) > OPTIONS_MAX_CHARS:
            raise UserError(f"{origin}: options of {len(text)} characters")
        if not text:
            return []
        try:
            items = ast.literal_eval(text)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            raise UserError(f"{origin}: options {text[:60]!r} are not a list literal") from None
    if not isinstance(items, (list, tuple)) or not all(isinstance(i, (str, int, float)) for i in items):
        raise UserError(f"{origin}: options are not a list of strings")
    return [str(i) for i in items]


def mmmu_items(task: TaskSpec, source: Path,
               lacks: list[str] | None = None) -> tuple[list[tuple[str, dict[str, Any]]], int]:
    """(subject, row) of every eligible question in subject order, and how many MCQs had more options than the
    letters A-Z (left out); the shards their names count that are not there are added to `lacks`."""
    p = task.params
    split = str(p.get("split", "validation"))
    pool: list[tuple[str, dict[str, Any]]] = []
    too_many = 0
    for subject in p.get("subjects", MMMU_MEDICAL):
        folder = source / subject
        if not folder.is_dir():
            raise UserError(f"{source}: {subject}/ missing (expected the MMMU release: <Subject>/{split}-*.parquet "
                            f"for {', '.join(MMMU_MEDICAL)})")
        shards = parquet_rows(folder, f"{split}-*.parquet", f"MMMU's {subject}/{split}-*.parquet",
                              [] if lacks is None else lacks, source)
        for row in shards:
            _require(row, ("id", "question", "options", "answer", "image_1"), f"MMMU {subject} row")
            options = parse_options(row["options"], f"MMMU {row['id']}")
            if str(row.get("question_type", "")) != "open" and len(options) > len(OPTION_LETTERS):
                too_many += 1
                continue
            pool.append((subject, row))
    return pool, too_many


def mmmu(task: TaskSpec, source: Path, secret: StagingSecret) -> Iterator[Item]:
    p = task.params
    lacks: list[str] = []
    pool, too_many = mmmu_items(task, source, lacks)
    held = f"{p.get('split', 'validation')}-*.parquet of {len(p.get('subjects', MMMU_MEDICAL))} subjects" + (
        f", {too_many} with more options than A-Z left out" if too_many else "")
    for index in draw(task, len(pool), secret, f"{source} ({held})", lacks):
        subject, row = pool[index]
        origin = f"MMMU {row['id']}"
        qid = safe_id(row["id"])
        options = parse_options(row["options"], origin)
        frames = sorted((int(m[1]), k) for k in row if (m := _IMAGE_COLUMN.match(k)) and row[k])
        if not frames:
            raise UserError(f"{origin}: no image")
        images = [(f"image_{n}", cell_image(row[k], qid)) for n, k in frames]
        common = {"dataset": "mmmu-medical", "split": str(p.get("split", "validation")),
                  "question": str(row["question"]), "body_system": subject,
                  "subfield": str(row.get("subfield", "") or "")}
        private = {"modality": str(row.get("img_type", "") or "")}  # img_type ("['CT Scans']") names the answer
        if str(row.get("question_type", "")) == "open" or not options:  # to "which modality" questions
            question = {**common, "mode": "open_ended", "question_type": "open"}
            yield qid, question, images, {"answer_text": str(row["answer"]).strip(), **private}
            continue
        lettered = dict(zip(OPTION_LETTERS, options, strict=False))  # a sixth option is F (round 23)
        question = {**common, "mode": "multiple_choice", "options": lettered, "question_type": "multiple_choice"}
        label = _gold_label(row["answer"], lettered, origin)
        yield qid, question, images, {"answer_label": label, "answer_text": lettered[label], **private}


RELEASE_READERS = {"kvasir": kvasir, "omnimedvqa": omnimedvqa, "pmcvqa": pmcvqa, "mmmu": mmmu}
