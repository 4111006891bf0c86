"""Public-knowledge attackers against a staged real classification task (issue 35): programs that read only
what an agent can (the task file, the package source, the staged public folder) and the download's public
listing (its class folders and file names, as anyone can fetch them), never an image's pixels.

On main the case order came from the task file's seed over a class-sorted list: "case i has the label of the
i-th item" gave accuracy 1.0 (rating A) to pure-noise images. Now every attacker stays at chance (1/4)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import attrs
import classification_layouts as layouts
import pytest
from automedbench.testing import evaluate_outputs, load_task, run_task, stage_from_folder

TASK = "classification/brain-tumour-mri"
FOLDERS = ["glioma", "meningioma", "notumor", "pituitary"]


def public_listing(download: Path) -> list[tuple[str, str]]:
    """(source id, label) of every test image, from the download's folder and file names alone."""
    return sorted((f"{p.parent.name}/{p.name}", p.parent.name) for p in (download / "Testing").rglob("*.jpg"))


def old_stager_labels(listing: list[tuple[str, str]], count: int, seed: int = 42) -> list[str]:
    """What main's stager did, replayed from public knowledge: a balanced draw with the task file's seed, the
    draw sorted by source id and shuffled with seed + 1; case i (in id order) had the i-th label."""
    rng = random.Random(seed)
    chosen = []
    for label in FOLDERS:
        pool = sorted(item for item in listing if item[1] == label)
        chosen += rng.sample(pool, count // len(FOLDERS))
    order = sorted(chosen)
    random.Random(seed + 1).shuffle(order)
    return [label for _, label in order]


ATTACKS = {
    "the old stager's seed and sort order": lambda listing, n: old_stager_labels(listing, n),
    "case i is the i-th item of the class-sorted listing": lambda listing, n: [
        FOLDERS[min(i * len(FOLDERS) // n, len(FOLDERS) - 1)] for i in range(n)],
    "case i is the i-th item of the file listing": lambda listing, n: [label for _, label in listing[:n]],
}


def write(cases: list[str], labels: list[str], dest: Path) -> Path:
    for case, label in zip(cases, labels, strict=True):
        (dest / case).mkdir(parents=True, exist_ok=True)
        (dest / case / "prediction.json").write_text(json.dumps({"label": label}) + "\n")
    return dest


@pytest.fixture(scope="module")
def staged(tmp_path_factory):
    work = tmp_path_factory.mktemp("public-knowledge")
    download = layouts.brain_tumour(work / "download", per_class=25)
    track, task = load_task(TASK)
    stage_from_folder(track, attrs.evolve(task, case_count=100), work / "root", download)
    return work, download


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_public_knowledge_attackers_stay_at_chance(staged, attack):
    work, download = staged
    cases = sorted(p.name for p in (work / "root" / TASK / "public").iterdir() if p.is_dir())
    labels = ATTACKS[attack](public_listing(download), len(cases))
    result = evaluate_outputs(TASK, submission=write(cases, labels, work / attack.replace(" ", "-")),
                              data_root=work / "root", work=work / f"eval-{attack.replace(' ', '-')}")
    assert result.task.partial < 0.45, (attack, result.task.partial)  # chance is 0.25; okay starts at 0.50
    assert result.aggregate.rating not in ("A", "B")


@pytest.mark.slow  # one run through the real runner (sandbox, freeze, isolated evaluator, judge)
def test_an_agent_answering_from_public_knowledge_through_the_runner_stays_at_chance(staged, tmp_path):
    """An agent that never opens an image: it lists /data/public and writes the old stager's labels in case
    order (the listing is embedded: an agent with network access can fetch it)."""
    from automedbench.testing import StepsAgent, register_agent

    work, download = staged
    labels = old_stager_labels(public_listing(download), 100)
    code = (f"import json, os\nlabels = {labels!r}\nroot = os.environ.get('DATA_DIR', '/data/public')\n"
            "cases = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))\n"
            "for case, label in zip(cases, labels):\n"
            "    os.makedirs(f'outputs/{case}', exist_ok=True)\n"
            "    json.dump({'label': label}, open(f'outputs/{case}/prediction.json', 'w'))\n"
            "print(len(cases), 'cases answered without opening an image')\n")
    register_agent(StepsAgent)
    result, _ = run_task(TASK, StepsAgent.name, out=tmp_path, data_root=work / "root",
                         agent_options={"steps": [["python", code]]},
                         workspace_quota_mb=256)  # a real task asks 32 GB by default; this agent writes a few KB
    assert result.state == "scored" and result.task.components["completeness"] == 1.0  # every case answered
    assert result.task.partial < 0.45 and result.aggregate.rating not in ("A", "B"), result.task.partial
