"""lab/api.py, the lab from Python: runs, loads and comparisons as pandas DataFrames. The hand-made
runs of tests/report_fixtures.py give values worked out by hand; docs/python-api.md's example is
run, block by block, in a copy of the fixture project with the real packaged models."""

from __future__ import annotations

import logging
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from lab import api
from lab.errors import ConfigError, LabError
from lab.report.compare import load_runs, paired_view
from tests.report_fixtures import ACC_B, CATEGORIES, MRR_A, MRR_B, write_pair, write_run

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def reports(tmp_path) -> Path:
    write_pair(tmp_path / "reports")  # base (A) and better (B), 15 questions each
    return tmp_path / "reports"


def test_a_loaded_run_is_its_folder_and_its_tables(reports):
    run = api.load("base", reports=reports)
    assert run.folder == reports / "base" / "20261122-100000" and run.note is None and not run.is_sample
    questions = run.questions()
    assert list(questions["id"]) == [f"q{i:02d}" for i in range(1, 16)]
    assert list(questions["mrr"]) == MRR_A and list(questions["category"]) == CATEGORIES
    assert run.overall().loc["mrr", "mean"] == pytest.approx(np.mean(MRR_A))
    by_category = run.by_category()
    assert by_category.loc["direct_fact", "n"] == 12 and by_category.loc["temporal", "n"] == 3
    assert by_category.loc["temporal", "mrr"] == pytest.approx(np.mean(MRR_A[12:]))  # (1 + 0.5 + 0) / 3


def test_paired_statistics_are_lab_compares(reports):
    comparison = api.compare("base", "better", reports=reports)
    paired = comparison.paired()
    mrr = paired[paired["metric"] == "mrr"].iloc[0]
    assert (mrr["a"], mrr["b"], mrr["n"]) == ("base", "better", 15) and pd.isna(mrr["category"])
    assert mrr["delta"] == pytest.approx(np.mean(MRR_B) - np.mean(MRR_A))  # 0.8333 - 0.5833
    pairs, method = paired_view(load_runs(["base", "better"], reports))
    expected = next(r["overall"] for r in pairs[0]["rows"] if r["metric"] == "mrr")
    assert (mrr["ci_low"], mrr["ci_high"]) == tuple(expected["ci"])
    assert (mrr["p"], mrr["p_adjusted"], mrr["verdict"]) == (expected["p_permutation"], expected["p_adjusted"],
                                                            expected["verdict"])
    assert comparison.method() == method["text"] and comparison.warnings == []
    by_category = comparison.paired(categories=True)
    rows = by_category[by_category["metric"] == "mrr"]
    assert list(rows["category"].fillna("overall")) == ["overall", "direct_fact", "temporal"]
    assert comparison.overall().loc["mrr", "better"] == pytest.approx(np.mean(MRR_B))


def test_a_sample_never_silently_stands_for_the_name(reports, caplog):
    folder = write_run(reports, "better", "20261125-090000", MRR_B[:4], ACC_B[:4], "S")
    results = folder / "results.json"
    results.write_text(results.read_text().replace('"is_sample": false, "n_questions": 4, "n_total": 4, '
                                                   '"limit": null',
                                                   '"is_sample": true, "n_questions": 4, "n_total": 15, "limit": 4'))
    with caplog.at_level(logging.WARNING, logger="lab.api"):
        run = api.load("better", reports=reports)
    assert run.folder.name == "20261122-110000" and "a sample of 4 of 15 questions" in run.note
    assert run.note in caplog.text
    mixed = api.compare("base", folder, reports=reports)
    assert mixed.warnings[0] == "different questions (sample size or seed): base 15 of 15, better 4 of 15"
    assert mixed.paired().set_index("metric").loc["mrr", "n"] == 4


def test_bad_calls_say_what_to_do(reports):
    with pytest.raises(ConfigError, match="compare needs two runs or more, got 1"):
        api.compare("base", reports=reports)
    with pytest.raises(ConfigError, match="limit=0: give a whole number of 1 or more"):
        api.run("small", experiments=ROOT / "tests" / "fixtures" / "experiments", limit=0)
    with pytest.raises(LabError, match="'nothing' is neither a run folder nor an experiment"):
        api.load("nothing", reports=reports)


def code_blocks(page: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), re.S)


@pytest.mark.slow
def test_the_python_api_page_runs(tmp_path, monkeypatch, capsys):
    """docs/python-api.md, every block in order in one namespace, as a notebook runs its cells;
    the blocks' own asserts check the values, and these the names they leave."""
    project = tmp_path / "project"
    shutil.copytree(ROOT / "tests" / "fixtures", project)
    monkeypatch.chdir(project)
    monkeypatch.setenv("LAB_CACHE", str(project / "cache"))
    blocks = code_blocks(ROOT / "docs" / "python-api.md")
    assert len(blocks) == 5
    cells: dict = {}
    for i, block in enumerate(blocks):
        exec(compile(block, f"docs/python-api.md block {i + 1}", "exec"), cells)
    assert cells["vector"].folder.parent == project / "reports" / "small-retrieval"
    assert cells["latest"].folder == cells["bm25"].folder != cells["sample"].folder
    out = capsys.readouterr().out
    assert "reports/small-retrieval/" in out and "different questions (sample size or seed)" in out
