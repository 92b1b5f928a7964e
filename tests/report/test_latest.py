"""Which run a NAME stands for (lab.report.latest) in lab gate, lab track and lab compare: its
latest full run, never silently a --limit sample; a sample only when there is no full run, and
then said so. Hand-made runs (tests/report_fixtures.py): base (15 questions) and better."""

from __future__ import annotations

import json
import types
from pathlib import Path

import pytest

from lab.cli import main
from lab.report import tracking as tr
from lab.report.latest import choose_run
from tests.report_fixtures import ACC_B, MRR_B, write_pair, write_run

FULL_ID, SAMPLE_ID = "20261122-110000", "20261125-090000"


def sample_of(reports: Path, name: str, run_id: str, n: int, mrr: list = MRR_B, acc: list = ACC_B) -> Path:
    """A --limit n run of ``name``: its first n questions, recorded as a sample of 15."""
    folder = write_run(reports, name, run_id, mrr[:n], acc[:n], "S")
    results = json.loads((folder / "results.json").read_text())
    results["sample"] = {"is_sample": True, "n_questions": n, "n_total": 15, "limit": n, "seed": 13}
    (folder / "results.json").write_text(json.dumps(results))
    return folder


@pytest.fixture
def reports(tmp_path) -> Path:
    write_pair(tmp_path / "reports")  # base 20261122-100000, better 20261122-110000: full runs
    (tmp_path / "experiments").mkdir()
    return tmp_path / "reports"


def test_a_name_whose_newest_run_is_full_is_that_run_without_a_note(reports):
    chosen = choose_run("better", reports)
    assert chosen.folder == reports / "better" / FULL_ID and chosen.note is None


def test_a_newer_sample_does_not_stand_for_the_name(reports):
    sample = sample_of(reports, "better", SAMPLE_ID, 4)
    assert (reports / "better" / "LATEST").read_text().strip() == SAMPLE_ID  # LATEST keeps its meaning
    chosen = choose_run("better", reports)
    assert chosen.folder == reports / "better" / FULL_ID  # no LATEST-FULL (an older folder): found by reading
    assert chosen.note == (f"better: using its latest full run {FULL_ID} (15 questions), not its newer run "
                           f"{SAMPLE_ID}, a sample of 4 of 15 questions (--limit 4, seed 13)")
    assert choose_run(str(sample), reports).folder == sample  # a folder named as such is that folder
    assert choose_run(str(reports / "better" / "LATEST"), reports).folder == sample  # and so is LATEST


def test_the_latest_full_pointer_is_followed(reports):
    older = write_run(reports, "better", "20261121-100000", MRR_B, ACC_B, "O")
    sample_of(reports, "better", SAMPLE_ID, 4)
    (reports / "better" / "LATEST-FULL").write_text(older.name + "\n")  # the pointer wins over a scan
    assert choose_run("better", reports).folder == older


def test_only_samples_stand_for_the_name_with_a_note_saying_so(reports):
    sample_of(reports, "fresh", "20261125-080000", 3)
    newest = sample_of(reports, "fresh", SAMPLE_ID, 4)
    chosen = choose_run("fresh", reports)
    assert chosen.folder == newest
    assert chosen.note == (f"fresh: using its latest run {SAMPLE_ID}, a sample of 4 of 15 questions (--limit 4, "
                           "seed 13): fresh has no full run (lab run fresh without --limit makes one)")


def gate(reports: Path, *args: str) -> int:
    return main(["gate", *args, "--reports", str(reports), "--experiments", str(reports.parent / "experiments")])


def test_gate_uses_the_full_run_and_says_so_first(reports, capsys):
    sample_of(reports, "better", SAMPLE_ID, 1)  # the one-question sample that made gate say "only 1 question"
    assert gate(reports, "base", "better", "--metric", "mrr=0.02") == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"note: better: using its latest full run {FULL_ID} (15 questions)")
    assert out[1].startswith("gate: better against base, 15 shared questions")


def test_gate_names_the_sample_when_too_few_questions_are_shared(reports, capsys):
    sample_of(reports, "fresh", SAMPLE_ID, 1)
    assert gate(reports, "base", "fresh", "--metric", "mrr=0.02") == 2
    captured = capsys.readouterr()
    assert captured.out.startswith("note: fresh: using its latest run 20261125-090000, a sample of 1 of 15")
    assert ("error: mrr: only 1 question(s) have a value in both runs, because the runs asked different questions: "
            f"base (20261122-100000) asked all 15 questions and fresh ({SAMPLE_ID}) is a sample of 1 of 15 "
            "questions (--limit 1, seed 13); a paired test needs 2") in captured.err
    assert "run fresh without --limit (lab run fresh)" in captured.err


def test_gate_warns_first_when_the_question_sets_differ(reports, capsys):
    sample_of(reports, "fresh", SAMPLE_ID, 8)
    assert gate(reports, "base", "fresh", "--metric", "mrr=0.02") in (0, 1)
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("note: fresh: using its latest run")
    assert out[1].startswith("gate: fresh against base, 8 shared questions (7 only in the baseline)")
    assert out[2].startswith("warning: different questions (sample size or seed): base 15 of 15, fresh 8 of 15")
    assert out[3].startswith(("PASS mrr", "FAIL mrr"))


def test_compare_prints_which_run_and_the_different_questions_warning_before_the_table(reports, capsys):
    sample_of(reports, "fresh", SAMPLE_ID, 4)
    sample_of(reports, "better", SAMPLE_ID, 4)
    assert main(["compare", "base", "better", "fresh", "--reports", str(reports), "--no-html"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"note: better: using its latest full run {FULL_ID} (15 questions), not its newer run")
    assert out[1].startswith(f"note: fresh: using its latest run {SAMPLE_ID}, a sample of 4 of 15 questions")
    assert out[2] == "warning: different questions (sample size or seed): base 15 of 15, better 15 of 15, fresh 4 of 15"
    assert out[3].startswith("metric ")  # then the table


def test_track_logs_the_full_run_and_says_which(reports, capsys, monkeypatch):
    sample_of(reports, "better", SAMPLE_ID, 4)
    logged = []

    def log_run(folder, uri, experiment):
        logged.append(folder)
        return types.SimpleNamespace(url=None, uri=uri, experiment="better", skipped=False, mlflow_run_id="r1")

    monkeypatch.setattr(tr, "import_mlflow", lambda: None)
    monkeypatch.setattr(tr, "log_run", log_run)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:///unused.db")
    assert main(["track", "better", "--reports", str(reports), "--experiments",
                 str(reports.parent / "experiments")]) == 0
    assert logged == [reports / "better" / FULL_ID]
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"note: better: using its latest full run {FULL_ID}")
    assert out[1].startswith(f"mlflow: logged better/{FULL_ID} to ")
