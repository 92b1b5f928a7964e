"""The run folder's pointers (lab.eval.records.write_run): LATEST names the newest run, sample or
not; LATEST-FULL the newest run over the whole eval set, what a NAME stands for in lab gate,
track and compare."""

from __future__ import annotations

from pathlib import Path

from lab.config import load_experiment
from lab.eval.records import write_run
from lab.report.latest import choose_run
from tests.report_fixtures import _sample, results_for

FIXTURES = Path(__file__).parents[1] / "fixtures"


def _write(reports: Path, n: int, n_total: int) -> Path:
    cfg = load_experiment("small-retrieval", FIXTURES / "experiments")
    samples = [_sample(i, 1.0, 4, "A") for i in range(n)]
    results = results_for("small-retrieval", None, samples)
    results["sample"] = {"is_sample": n < n_total, "n_questions": n, "n_total": n_total, "limit": None if n == n_total
                         else n, "seed": 13}
    return write_run(results, samples, cfg, reports)


def test_a_full_run_moves_both_pointers_a_sample_only_latest(tmp_path):
    reports = tmp_path / "reports"
    base = reports / "small-retrieval"
    full = _write(reports, 3, 3)
    assert (base / "LATEST").read_text() == (base / "LATEST-FULL").read_text() == full.name + "\n"
    sample = _write(reports, 2, 3)
    assert (base / "LATEST").read_text() == sample.name + "\n"
    assert (base / "LATEST-FULL").read_text() == full.name + "\n"
    chosen = choose_run("small-retrieval", reports)
    assert chosen.folder == full and f"not its newer run {sample.name}, a sample of 2 of 3 questions" in chosen.note
