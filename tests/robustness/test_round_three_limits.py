"""Imports are bounded: a field, a JSONL line and a file over the limits of lab.evalsets.bounds
stop `lab import` with exit code 2, naming the file, line, field and the limit, and nothing is
written (a 1 GB ragas user_input used to be read, held three times over and written back out)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab.cli import main
from lab.evalsets import bounds

HINT = ("  fix: an eval set holds questions, answers and passages: look for a file pasted into a field or a quote "
        "never closed, or split the file\n")


def sample(question: str = "Who founded Brightwater Kilns?", **extra) -> dict:
    return {"user_input": question, "reference": "Odile Ferrand.", "keywords": ["Odile"], **extra}


def write(path: Path, *rows: dict) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_a_user_input_over_the_real_field_limit_is_refused(cli, tmp_path):
    src = write(tmp_path / "set.jsonl", sample(), sample("x" * (bounds.MAX_FIELD + 1)))
    out = tmp_path / "out.jsonl"
    assert cli("import", "ragas", src, "--out", out) == (
        2, "", f"error: {src} line 2: field 'user_input': 10,000,001 characters, over the limit of 10,000,000 "
               f"of a field\n{HINT}")
    assert not out.exists()


def test_the_limits_hold_for_every_text_field_a_line_and_a_file(cli, tmp_path, monkeypatch):
    monkeypatch.setattr(bounds, "MAX_FIELD", 100)
    monkeypatch.setattr(bounds, "MAX_LINE", 400)
    monkeypatch.setattr(bounds, "MAX_FILE_BYTES", 2000)
    out = tmp_path / "out.jsonl"
    long_line = sample(note="n" * 400)
    cases = [
        (sample(reference="y" * 101), "line 1: field 'reference': 101 characters, over the limit of 100 of a field"),
        (sample(reference_contexts=["ok", "z" * 101]),
         "line 1: field 'reference_contexts': 101 characters, over the limit of 100 of a field"),
        (long_line, f"line 1: {len(json.dumps(long_line))} characters, over the limit of 400 of a line"),
    ]
    for i, (row, says) in enumerate(cases):
        src = write(tmp_path / f"set{i}.jsonl", row)
        assert cli("import", "ragas", src, "--out", out) == (2, "", f"error: {src} {says}\n{HINT}")
    big = write(tmp_path / "big.jsonl", *[sample()] * 40)
    size = big.stat().st_size
    assert cli("import", "ragas", big, "--out", out) == (
        2, "", f"error: {big}: {size:,} bytes, over the limit of 2,000 bytes of a file the lab imports\n{HINT}")
    assert not out.exists()


def test_a_set_within_the_limits_still_imports(cli, tmp_path, monkeypatch):
    monkeypatch.setattr(bounds, "MAX_FIELD", 100)
    src = write(tmp_path / "set.jsonl", sample("q" * 100))
    out = tmp_path / "out.jsonl"
    code, _, err = cli("import", "ragas", src, "--out", out)
    assert code == 0, err
    assert json.loads(out.read_text().splitlines()[0])["question"] == "q" * 100
