"""Kvasir-VQA, OmniMedVQA, PMC-VQA and MMMU (medical) stagers on small files written in each published layout:
question-type mapping, gold letters, hostile downloads, and validate-task on a full-size copy of each layout."""

from __future__ import annotations

import io
import json
import zipfile

import attrs
import pytest
from automedbench.api import UserError
from automedbench.testing import check_track, load_task, sampled, stage_from_folder
from PIL import Image

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")


def png(value: int, size=(16, 12)) -> bytes:
    buffer = io.BytesIO()
    Image.new("L", size, value % 256).save(buffer, format="PNG")
    return buffer.getvalue()


def task(name: str, case_count: int = 1, **params):
    """The task for a small fixture: `case_count` (1 unless given) is the least it must hold without a sample (a
    short download's refusal is tested in tests/test_polish_round7.py)."""
    track, spec = load_task(f"vqa/{name}")
    return track, attrs.evolve(spec, case_count=case_count, params={**spec.params, **params})


def questions(staged):
    return {q: json.loads((staged.public / q / "question.json").read_text()) for q in staged.case_ids}


def gold(staged, qid):
    return json.loads((staged.private / qid / "answer.json").read_text())


def by_source(staged) -> dict[str, str]:
    """The dataset's question id -> the published one (drawn from the staging's secret)."""
    return {gold(staged, q)["source_id"]: q for q in staged.case_ids}


def dealt(options: dict[str, str], texts: list[str]) -> bool:
    """`options` hold `texts` on the letters A.. of their count, in whatever order the staging's secret dealt."""
    return list(options) == list("ABCDE"[:len(texts)]) and sorted(options.values()) == sorted(texts)


def same_pixels(path, data: bytes) -> bool:
    """The published image shows the source's pixels (it is written again, never copied byte for byte)."""
    with Image.open(path) as published, Image.open(io.BytesIO(data)) as source:
        return path.read_bytes() != data and list(published.getdata()) == list(source.getdata())


def write_parquet(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)


# ---------------------------------------------------------------- Kvasir-VQA

KVASIR_QUESTIONS = [  # (question, answer, expected type)
    ("How many polyps are in the image?", "1", "numerical_count"),
    ("What color is the abnormality? ", "Pink; Red", "color"),
    ("Where in the image is the abnormality?", "Center; Lower-left", "location"),
    ("Is there a green/black box artefact?", "No", "yes_no"),
    ("Are there any instruments in the image?", "Yes", "yes_no"),
    ("What type of procedure is the image taken from?", "Colonoscopy", "single_choice"),
    ("Which instrument is present?", "Biopsy forceps", "multiple_choice"),
    ("What is the size of the polyp?", "5-10mm", "single_choice"),
]


# every other round of the questions takes these answers: as in the real set, one wording has several answers
# (a copy where the wording fixes the answer is answerable blind: the question-prior baseline would be perfect)
KVASIR_OTHER_ANSWERS = ["2", "White", "Upper-right", "Yes", "No", "Gastroscopy", "Snare", "<5mm"]


def write_kvasir(src, n):
    k = len(KVASIR_QUESTIONS)
    rows = [{"image": {"bytes": png(i), "path": f"cl{i}.jpg"}, "source": "hyper-kvasir",
             "question": KVASIR_QUESTIONS[i % k][0],
             "answer": KVASIR_QUESTIONS[i % k][1] if (i // k) % 2 == 0 else KVASIR_OTHER_ANSWERS[i % k],
             "img_id": f"cl{i}"} for i in range(n)]
    write_parquet(src / "data" / "raw-00000-of-00001.parquet", rows)


def test_kvasir_question_types_are_mapped_from_the_wording():
    from automedbench_vqa.data.release_sets import kvasir_question_type

    for text, _, expected in KVASIR_QUESTIONS:
        assert kvasir_question_type(text) == expected, text
    assert kvasir_question_type("Have all polyps been removed?") == "yes_no"


def test_kvasir_stages_open_questions_with_embedded_images(tmp_path):
    write_kvasir(tmp_path / "src", 8)
    track, spec = task("kvasir-vqa", sample=None)
    staged = stage_from_folder(track, spec, tmp_path / "data", tmp_path / "src")
    found, src = questions(staged), by_source(staged)
    assert sorted(src) == [f"kvasir_{i:05d}" for i in range(8)] and not set(src) & set(found)
    q = found[src["kvasir_00001"]]
    assert q["mode"] == "open_ended" and q["question_type"] == "color" and q["image_paths"] == ["image.png"]
    assert "source" not in q and gold(staged, src["kvasir_00001"])["body_system"] == "gastrointestinal"
    assert "answer" not in json.dumps(q).lower().replace("answer.json", "")
    assert gold(staged, src["kvasir_00001"])["answer_text"] == "Pink; Red"
    assert same_pixels(staged.public / src["kvasir_00003"] / "image.png", png(3))


def test_kvasir_path_only_image_cell_is_never_opened(tmp_path):
    (tmp_path / "secret.png").write_bytes(png(9))
    rows = [{"image": {"bytes": None, "path": str(tmp_path / "secret.png")}, "question": "How many?",
             "answer": "1"}]
    write_parquet(tmp_path / "src" / "data" / "raw-00000-of-00001.parquet", rows)
    track, spec = task("kvasir-vqa", sample=None)
    with pytest.raises(UserError, match=r"question kvasir_00000: no embedded image bytes"):
        stage_from_folder(track, spec, tmp_path / "data", tmp_path / "src")


def test_kvasir_symlinked_shard_is_refused(tmp_path):
    write_kvasir(tmp_path / "elsewhere", 2)
    (tmp_path / "elsewhere" / "data" / "raw-00000-of-00001.parquet").rename(tmp_path / "shard.parquet")
    (tmp_path / "src" / "data").mkdir(parents=True)
    (tmp_path / "src" / "data" / "raw-00000-of-00001.parquet").symlink_to(
        tmp_path / "shard.parquet")
    track, spec = task("kvasir-vqa", sample=None)
    with pytest.raises(UserError, match=r"raw-00000-of-00001.parquet: (cannot be read as a regular file|a symlink)"):
        stage_from_folder(track, spec, tmp_path / "data", tmp_path / "src")
    with pytest.raises(UserError, match=r"no parquet files matching raw-\*.parquet \(expected the Kvasir-VQA"):
        stage_from_folder(track, spec, tmp_path / "data", tmp_path / "elsewhere")  # data/ holds no raw-* shard


# ---------------------------------------------------------------- OmniMedVQA

OMNI_TYPES = ["Disease Diagnosis", "Anatomy Identification", "Modality Recognition", "Lesion Grading",
              "Other Biological Attributes"]


def write_omnimed(src, per_set, sets=("ACRIMA", "Chest CT Scan")):
    root = src / "OmniMedVQA"
    for s, name in enumerate(sets):
        records = []
        for i in range(per_set):
            image = f"Images/{name}/img_{i}.png"
            (root / image).parent.mkdir(parents=True, exist_ok=True)
            (root / image).write_bytes(png(10 * s + i))
            options = {"option_A": "glaucoma", "option_B": "normal"}
            if i % 2:
                options |= {"option_C": "cataract", "option_D": "diabetic retinopathy"}
            records.append({"dataset": name, "question_id": f"{name}_{i:04d}",
                            "question_type": OMNI_TYPES[(s + i) % 5], "question": f"What is shown ({i})?",
                            "gt_answer": "normal" if i % 3 else "glaucoma", "image_path": image,
                            "modality_type": "Fundus Photography", **options})
        folder = root / "QA_information" / "Open-access"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{name}.json").write_text(json.dumps(records))
    restricted = root / "QA_information" / "Restricted-access"
    restricted.mkdir(parents=True, exist_ok=True)
    (restricted / "Secret.json").write_text("not even JSON")  # never read


def test_omnimedvqa_maps_types_options_and_gold_letters(tmp_path):
    write_omnimed(tmp_path / "src", 4)
    track, spec = task("omnimedvqa", sample=None)
    staged = stage_from_folder(track, spec, tmp_path / "data", tmp_path / "src")
    found, src = questions(staged), by_source(staged)
    assert len(found) == 8
    first, second = found[src["omnimedvqa_00000"]], found[src["omnimedvqa_00001"]]
    # the options are dealt in a secret order (option_order.py): the same texts on the letters A.. of their count
    assert first["mode"] == "multiple_choice" and dealt(first["options"], ["glaucoma", "normal"])
    assert dealt(second["options"], ["glaucoma", "normal", "cataract", "diabetic retinopathy"])
    assert first["question_type"] == "disease_diagnosis" and second["question_type"] == "anatomy_identification"
    assert {q["question_type"] for q in found.values()} == {
        "disease_diagnosis", "anatomy_identification", "modality_recognition", "lesion_grading",
        "other_biological_attributes"}
    assert first["options"][gold(staged, src["omnimedvqa_00000"])["answer_label"]] == "glaucoma"
    assert second["options"][gold(staged, src["omnimedvqa_00001"])["answer_label"]] == "normal"
    assert "body_system" not in found[src["omnimedvqa_00004"]] and "modality" not in first  # they name answers
    assert gold(staged, src["omnimedvqa_00004"])["body_system"] == "Chest CT Scan"
    assert gold(staged, src["omnimedvqa_00000"])["modality"] == "Fundus Photography"


def test_omnimedvqa_hostile_image_paths(tmp_path):
    write_omnimed(tmp_path / "src", 1, sets=("ACRIMA",))
    path = tmp_path / "src" / "OmniMedVQA" / "QA_information" / "Open-access" / "ACRIMA.json"
    track, spec = task("omnimedvqa", sample=None)
    for bad, message in (("../../secret.png", "leaves the dataset folder"), ("/etc/passwd", "leaves the dataset"),
                         ("Images/ACRIMA/missing.png", "not found")):
        records = json.loads(path.read_text())
        records[0]["image_path"] = bad
        path.write_text(json.dumps(records))
        with pytest.raises(UserError, match=message):
            stage_from_folder(track, spec, tmp_path / "data", tmp_path / "src")
    link = tmp_path / "src" / "OmniMedVQA" / "Images" / "ACRIMA" / "link.png"
    (tmp_path / "secret.png").write_bytes(png(1))
    link.symlink_to(tmp_path / "secret.png")
    records[0]["image_path"] = "Images/ACRIMA/link.png"
    path.write_text(json.dumps(records))
    with pytest.raises(UserError, match=r"link.png: (cannot be read as a regular file|a symlink)"):
        stage_from_folder(track, spec, tmp_path / "data", tmp_path / "src")
    records[0]["image_path"], records[0]["question_type"] = "Images/ACRIMA/img_0.png", "Colour Naming"
    path.write_text(json.dumps(records))
    with pytest.raises(UserError, match=r"question_type 'Colour Naming' is none of Disease Diagnosis"):
        stage_from_folder(track, spec, tmp_path / "data", tmp_path / "src")
    path.write_text("[" * 200 + "]" * 200)
    with pytest.raises(UserError, match=r"nested deeper than"):
        stage_from_folder(track, spec, tmp_path / "data", tmp_path / "src")
    with pytest.raises(UserError, match=r"no QA_information/ folder"):
        stage_from_folder(track, spec, tmp_path / "data", tmp_path)


# ---------------------------------------------------------------- PMC-VQA

PMC_HEADER = "Figure_path,Question,Answer,Choice A,Choice B,Choice C,Choice D,Answer_label\n"


def write_pmc(src, n, packed=True):
    src.mkdir(parents=True, exist_ok=True)
    lines = [PMC_HEADER]
    questions_ = ["What imaging modality was used?", "Where is the lesion located?", "What does the arrow show?"]
    for i in range(n):
        label = "ABCD"[i % 4]
        lines.append(f'PMC{i}_F1.jpg,{questions_[i % 3]},opt{label},A:optA ,B:optB ,C:optC ,D:optD ,{label}\n')
    (src / "test_clean.csv").write_text("".join(lines))
    if packed:
        with zipfile.ZipFile(src / "images.zip", "w") as archive:
            for i in range(n):
                archive.writestr(f"figures/PMC{i}_F1.jpg", png(i))
    else:
        for i in range(n):
            (src / "images").mkdir(exist_ok=True)
            (src / "images" / f"PMC{i}_F1.jpg").write_bytes(png(i))


@pytest.mark.parametrize("packed", [True, False])
def test_pmcvqa_choices_labels_and_types(tmp_path, packed):
    write_pmc(tmp_path / "src", 6, packed)
    track, spec = task("pmc-vqa", sample=None)
    staged = stage_from_folder(track, spec, tmp_path / "data", tmp_path / "src")
    found, src = questions(staged), by_source(staged)
    q = found[src["pmcvqa_00001"]]
    assert dealt(q["options"], ["optA", "optB", "optC", "optD"]) and q["mode"] == "multiple_choice"
    assert [found[src[f"pmcvqa_{i:05d}"]]["question_type"] for i in range(3)] == [
        "modality", "anatomy_location", "finding"]
    answer = gold(staged, src["pmcvqa_00001"])
    assert answer["answer_text"] == "optB" == q["options"][answer["answer_label"]]
    assert same_pixels(staged.public / src["pmcvqa_00002"] / "image.png", png(2))


def test_pmcvqa_bad_rows_get_one_line(tmp_path):
    write_pmc(tmp_path / "src", 2)
    track, spec = task("pmc-vqa", sample=None)
    csv_path = tmp_path / "src" / "test_clean.csv"
    csv_path.write_text(PMC_HEADER + "PMC0_F1.jpg,Q?,x,A:a,B:b,,,E\n")
    with pytest.raises(UserError, match=r"test_clean.csv row 2: Answer_label 'E' names no choice \(A, B\)"):
        stage_from_folder(track, spec, tmp_path / "data", tmp_path / "src")
    csv_path.write_text(PMC_HEADER + "../PMC0_F1.jpg,Q?,x,A:a,B:b,,,A\n")
    with pytest.raises(UserError, match=r"Figure_path '../PMC0_F1.jpg' is not a file name"):
        stage_from_folder(track, spec, tmp_path / "data", tmp_path / "src")
    csv_path.write_text("Image,Q\nx,y\n")
    with pytest.raises(UserError, match=r"test_clean.csv header: missing column\(s\) Figure_path, Question"):
        stage_from_folder(track, spec, tmp_path / "data", tmp_path / "src")
    with pytest.raises(UserError, match=r"test_clean.csv not found"):
        stage_from_folder(track, spec, tmp_path / "data", tmp_path)


def test_pmcvqa_hostile_zip_is_refused(tmp_path):
    write_pmc(tmp_path / "src", 1)
    with zipfile.ZipFile(tmp_path / "src" / "images.zip", "w") as archive:
        archive.writestr("../PMC0_F1.jpg", png(0))
    track, spec = task("pmc-vqa", sample=None)
    with pytest.raises(UserError, match=r"leaves the archive"):
        stage_from_folder(track, spec, tmp_path / "data", tmp_path / "src")


# ---------------------------------------------------------------- MMMU (Health & Medicine)

SUBJECTS = ["Basic_Medical_Science", "Clinical_Medicine", "Diagnostics_and_Laboratory_Medicine", "Pharmacy",
            "Public_Health"]


def mmmu_row(subject, i):
    # one wording per question (as in MMMU): a wording shared across subjects with one answer is answerable blind
    row = {"id": f"validation_{subject}_{i + 1}", "question": f"<image 1> Which finding ({subject}, {i})?",
           "options": str([f"option {k}" for k in range(4)]), "explanation": "", "answer": "ABCD"[i % 4],
           "img_type": "['Body Scans: MRI, CT scans, and X-rays']", "topic_difficulty": "Medium",
           "question_type": "multiple-choice", "subfield": "Radiology"}
    for k in range(1, 8):
        row[f"image_{k}"] = None
    row["image_1"] = {"bytes": png(i), "path": None}
    if i % 5 == 1:  # a second image
        row["image_2"] = {"bytes": png(100 + i), "path": None}
    if i % 7 == 3:  # an open question
        row |= {"question_type": "open", "options": "[]", "answer": "24 mmHg"}
    if i % 11 == 4:  # seven options: lettered A-G (round 23)
        row["options"] = str([f"o{k}" for k in range(7)])
    if i % 11 == 5:  # more options than the letters A-Z
        row |= {"options": str([f"o{k}" for k in range(27)]), "answer": "B"}
    return row


def write_mmmu(src, per_subject):
    for subject in SUBJECTS:
        write_parquet(src / subject / "validation-00000-of-00001.parquet",
                      [mmmu_row(subject, i) for i in range(per_subject)])
        write_parquet(src / subject / "dev-00000-of-00001.parquet", [mmmu_row(subject, 99)])


def test_mmmu_mcq_open_and_too_many_options(tmp_path):
    from automedbench_vqa.data.release_sets import mmmu_items

    write_mmmu(tmp_path / "src", 6)
    track, spec = task("mmmu-medical", sample=None)
    pool, too_many = mmmu_items(spec, tmp_path / "src")
    assert len(pool) == 25 and too_many == 5  # i == 5 in each subject
    staged = stage_from_folder(track, spec, tmp_path / "data", tmp_path / "src")
    found, src = questions(staged), by_source(staged)
    mcq = found[src["validation_Clinical_Medicine_1"]]
    assert mcq["mode"] == "multiple_choice" and dealt(mcq["options"], [f"option {k}" for k in range(4)])
    assert mcq["body_system"] == "Clinical_Medicine" and mcq["question_type"] == "multiple_choice"
    two = found[src["validation_Pharmacy_2"]]
    assert two["image_paths"] == ["image_1.png", "image_2.png"]
    assert same_pixels(staged.public / src["validation_Pharmacy_2"] / "image_2.png", png(101))
    open_q = found[src["validation_Public_Health_4"]]
    assert open_q["mode"] == "open_ended" and "options" not in open_q and open_q["question_type"] == "open"
    assert gold(staged, src["validation_Public_Health_4"])["answer_text"] == "24 mmHg"
    assert not any("modality" in q for q in found.values())  # img_type names "which modality" answers
    assert gold(staged, src["validation_Public_Health_4"])["modality"].startswith("['Body Scans")
    answer = gold(staged, src["validation_Public_Health_3"])
    assert found[src["validation_Public_Health_3"]]["options"][answer["answer_label"]] == "option 2"  # gold C
    assert "validation_Pharmacy_6" not in src  # 27 options
    seven = found[src["validation_Pharmacy_5"]]  # seven options, all staged, dealt in the secret order (round 24)
    assert list(seven["options"]) == list("ABCDEFG")
    assert sorted(seven["options"].values()) == [f"o{k}" for k in range(7)]
    seven_gold = gold(staged, src["validation_Pharmacy_5"])
    assert seven["options"][seven_gold["answer_label"]] == seven_gold["answer_text"]


def test_mmmu_options_are_parsed_never_evaluated(tmp_path):
    from automedbench_vqa.data.release_sets import parse_options

    assert parse_options("['a', \"b's\"]", "x") == ["a", "b's"]
    for bad in ("__import__('os').system('true')", "[1, [2]]", "{'a': 1}"):
        with pytest.raises(UserError, match=r"options"):
            parse_options(bad, "x")
    with pytest.raises(UserError, match=r"options of 30000 characters"):
        parse_options("[" + " " * 29_998 + "]", "x")


def test_mmmu_missing_subject_folder(tmp_path):
    write_mmmu(tmp_path / "src", 2)
    (tmp_path / "src" / "Pharmacy" / "validation-00000-of-00001.parquet").unlink()
    track, spec = task("mmmu-medical", sample=None)
    with pytest.raises(UserError, match=r"Pharmacy: no parquet files matching validation-\*.parquet"):
        stage_from_folder(track, spec, tmp_path / "data", tmp_path / "src")
    with pytest.raises(UserError, match=r"Basic_Medical_Science/ missing"):
        stage_from_folder(track, spec, tmp_path / "data", tmp_path)


# ---------------------------------------------------------------- validate-task on a full-size copy of each layout


@pytest.mark.slow  # each stages 120-560 questions and evaluates the baselines (about two minutes under load)
@pytest.mark.parametrize(("name", "write"), sampled([
    ("mmmu-medical", lambda src: write_mmmu(src, 30)),
    ("kvasir-vqa", lambda src: write_kvasir(src, 560)),
    ("omnimedvqa", lambda src: write_omnimed(src, 260)),
    ("pmc-vqa", lambda src: write_pmc(src, 540)),
]))
def test_validate_task_passes(tmp_path, name, write):
    write(tmp_path / "download")
    track, spec = load_task(f"vqa/{name}")
    staged = stage_from_folder(track, spec, tmp_path / "root", tmp_path / "download")
    assert len(staged.case_ids) == spec.case_count
    ok, report = check_track(spec.id, tmp_path / "root")
    assert ok, report
    assert f"{spec.case_count} staged, {spec.case_count} declared" in report


@pytest.mark.parametrize("name", ["kvasir-vqa", "omnimedvqa", "pmc-vqa", "mmmu-medical"])
def test_briefs_render_for_every_tier(name):
    from automedbench.testing import load_task, render_task_brief

    _, spec = load_task(f"vqa/{name}")
    for tier in spec.tiers:
        text = render_task_brief(spec.id, tier, case_ids=["q1", "q2"])
        assert "answer.json" in text and spec.title.split(" (")[0][:20] in text and "{{" not in text
