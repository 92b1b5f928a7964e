"""lab.runfiles: the one reader of run folders, and its errors on damaged files."""

from __future__ import annotations

import json

import pytest

from lab.errors import DataError
from lab.runfiles import load_run, overall_means, read_results, read_samples, values

RESULTS = {"name": "x", "metrics": {"k": 5, "overall": {"mrr": {"mean": 0.75, "n": 2}}, "by_category": {}}}
SAMPLES = [{"id": "q1", "category": "a", "metrics": {"mrr": 1.0, "ok": True}},
           {"id": "q2", "category": "b", "metrics": {"mrr": 0.5}},
           {"id": "q3", "category": "b", "metrics": {"mrr": None}}]


def _run(tmp_path, results=RESULTS, samples=SAMPLES):
    (tmp_path / "results.json").write_text(json.dumps(results))
    if samples is not None:
        (tmp_path / "samples.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples) + "\n")
    return tmp_path


def test_reads_results_and_samples(tmp_path):
    results, samples = load_run(_run(tmp_path))
    assert results == RESULTS
    assert [s["id"] for s in samples] == ["q1", "q2", "q3"]  # file order; the blank last line skipped
    assert overall_means(results) == {"mrr": 0.75}
    assert values(samples, "mrr") == [1.0, 0.5]  # None is not a value
    assert values(samples, "mrr", "b") == [0.5]
    assert values(samples, "ok") == []  # booleans are not values


def test_a_run_without_samples_reads_as_results_alone(tmp_path):
    results, samples = load_run(_run(tmp_path, samples=None))
    assert results["name"] == "x" and samples == []


def test_a_truncated_samples_file_names_the_file_and_line(tmp_path):
    run = _run(tmp_path)
    text = (run / "samples.jsonl").read_text()
    (run / "samples.jsonl").write_text(text[: text.index("q2") + 5])  # cut inside line 2
    with pytest.raises(DataError) as exc:
        read_samples(run)
    assert f"{run / 'samples.jsonl'} line 2: not valid JSON" in exc.value.message
    assert "rerun the experiment" in exc.value.hint


def test_a_broken_results_file_names_the_file_and_line(tmp_path):
    run = _run(tmp_path)
    (run / "results.json").write_text('{\n  "name": "x",\n  "metrics": {\n')
    with pytest.raises(DataError, match=r"results\.json line 4: not valid JSON"):
        read_results(run)
    (run / "results.json").write_text("[1, 2]")
    with pytest.raises(DataError, match="not a run's results"):
        read_results(run)
    (run / "results.json").unlink()
    with pytest.raises(DataError, match="results.json: no such file"):
        read_results(run)


def test_deeply_nested_json_is_a_clear_error_not_a_recursion_error(tmp_path):
    run = _run(tmp_path)
    (run / "samples.jsonl").write_text("[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(DataError, match="line 1: nested too deeply"):
        read_samples(run)
