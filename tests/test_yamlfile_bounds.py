"""The YAML reader's bounds: an oversized, non-regular or folder path is one line, never read whole or waited on."""

from __future__ import annotations

import os

import pytest
from automedbench.api import UserError, read_yaml
from automedbench.taskfile import load_task_files
from automedbench.yamlfile import MAX_YAML_BYTES


def test_a_yaml_file_over_the_bound_is_refused_unread(tmp_path):
    big = tmp_path / "prices.yaml"
    big.write_bytes(b"a: " + b"x" * MAX_YAML_BYTES + b"\n")
    with pytest.raises(UserError, match=r"price file .*prices\.yaml: larger than 4 MB; not read"):
        read_yaml(big, "price file")
    small = tmp_path / "ok.yaml"
    small.write_text("a: 1\n")
    assert read_yaml(small, "price file") == {"a": 1}


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path):
    fifo = tmp_path / "model.yaml"
    os.mkfifo(fifo)
    with pytest.raises(UserError, match="not a regular file"):
        read_yaml(fifo, "model config")


def test_a_folder_named_like_a_task_file_hides_only_itself(tmp_path):
    (tmp_path / "a.yaml").mkdir()
    (tmp_path / "b.yaml").write_text("- not a mapping\n")
    specs, problems = load_task_files(tmp_path)
    assert specs == []
    assert len(problems) == 2
    assert "a.yaml: a folder, not a file" in problems[0]
