"""What a careless or hostile user tried, end to end: links out of the knowledge base, hidden
folders, dials that name folders, formulas in cells, spelling of span sources, byte-order marks,
Unicode line breaks inside JSON strings, broken files in experiments/, unknown metrics."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest

from runs import lab, latest, load

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def run(project: Path, name: str = "small-retrieval", *args: str) -> tuple[dict, list[dict]]:
    p = lab(project, "run", name, "--no-progress", *args)
    assert p.returncode == 0, p.stderr
    return load(latest(project, name))


def test_links_leaving_the_kb_and_hidden_files_are_skipped_and_listed(project, tmp_path):
    kb = project / "kb"
    outside = tmp_path / "secret.md"
    outside.write_text("The vault code is 4417-SECRET.\n")
    (kb / "company" / "host.md").symlink_to("/etc/hostname")
    (kb / "company" / "secret.md").symlink_to(outside)
    (kb / "linked-out").symlink_to(tmp_path)  # a folder outside
    (kb / "again").symlink_to(kb / "products")  # a folder inside, already loaded
    (kb / "loop.md").symlink_to(kb / "loop.md")
    (kb / "company" / "alias.md").symlink_to(kb / "company" / "about.md")  # a file inside: followed
    (kb / ".git").mkdir()
    (kb / ".git" / "HEAD.md").write_text("ref: refs/heads/main, the vault code is 4417-SECRET\n")
    (kb / "company" / ".hidden.md").write_text("Hidden note: the vault code is 4417-SECRET.\n")
    results, samples = run(project)
    skipped = results["data"]["skipped_files"]
    expect = {
        ".git": "hidden folder", "company/.hidden.md": "hidden file", "company/host.md": "outside the knowledge base",
        "company/secret.md": "outside the knowledge base", "linked-out": "outside the knowledge base",
        "again": "link to a folder of the knowledge base, loaded as products", "loop.md": "broken symbolic link or link loop"}
    for path, why in expect.items():
        assert any(s.startswith(f"{path}: ") and why in s for s in skipped), (path, skipped)
    assert results["data"]["n_documents"] == 5  # the four fixture documents and alias.md
    run_dir = latest(project, "small-retrieval")
    for f in ("samples.jsonl", "results.json", "report.html", "questions.csv"):
        assert "4417-SECRET" not in (run_dir / f).read_text(), f
    page = (run_dir / "report.html").read_text()
    assert "7 files skipped" in page and "outside the knowledge base" in page


def test_include_hidden_loads_dot_files(project):
    (project / "kb" / ".notes.md").write_text("Ember 90 notes: kiln rated to 1300 degrees.\n")
    (project / "experiments" / "hidden.yaml").write_text(
        "schema_version: 1\nextends: small-retrieval\nloader:\n  include_hidden: true\n")
    results, _ = run(project, "hidden")
    assert results["data"]["n_documents"] == 5 and results["data"]["skipped_files"] == []


def test_a_byte_order_mark_is_dropped_so_spans_keep_their_offsets(project):
    about = project / "kb" / "company" / "about.md"
    about.write_bytes(b"\xef\xbb\xbf" + about.read_bytes())
    results, samples = run(project)
    with_spans = [s for s in samples if s.get("references")]
    assert with_spans and all(s["metrics"]["span_recall"] is not None for s in with_spans)
    assert results["metrics"]["overall"]["span_recall"]["n"] == len(with_spans)


def test_a_decomposed_keyword_finds_a_composed_document(project):
    """A keyword typed with combining accents (NFD) is found in a document written with composed
    characters (NFC): the question's MRR is the same as with the keyword typed in NFC."""
    import unicodedata

    dish = "Crème brûlée"
    (project / "kb" / "products" / "menu.md").write_text(
        "# Canteen\n\nThe canteen serves " + unicodedata.normalize("NFC", dish) + " on Fridays.\n")
    row = {"id": "nfc", "question": "Which dessert does the canteen serve on Fridays?",
           "reference_answer": dish, "category": "direct_fact"}
    scores = {}
    for form in ("NFC", "NFD"):
        (project / "eval.jsonl").write_text(json.dumps({**row, "keywords": [unicodedata.normalize(form, dish)]}) + "\n")
        _, samples = run(project)
        scores[form] = samples[0]["metrics"]["mrr"]
    assert scores["NFD"] == scores["NFC"] > 0


def test_span_sources_spelled_otherwise_are_the_same_document(project):
    rows = [json.loads(line) for line in (project / "eval.jsonl").read_text().splitlines() if line]
    plain = run(project)[1]
    for row in rows:
        for i, ref in enumerate(row.get("references") or []):
            ref["source"] = ("./" if i % 2 else "") + ref["source"].replace("/", "\\")
    (project / "eval.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    respelled = run(project)[1]
    assert any(s.get("references") for s in plain)
    assert [(s["id"], s["metrics"]) for s in respelled] == [(s["id"], s["metrics"]) for s in plain]


def test_unicode_line_breaks_inside_json_strings_are_valid(project):
    rows = [json.loads(line) for line in (project / "eval.jsonl").read_text().splitlines() if line]
    rows[0]["reference_answer"] += "\u2028(see also)\u0085 end"
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    (project / "eval.jsonl").write_text(text + '{"broken": \n')
    p = lab(project, "run", "small-retrieval", "--no-progress")
    assert p.returncode == 2 and f"eval.jsonl line {len(rows) + 1}: invalid JSON" in p.stderr, p.stderr
    (project / "eval.jsonl").write_text(text)
    _, samples = run(project)
    assert samples[0]["reference_answer"].endswith("\u2028(see also)\u0085 end")


def test_a_sweep_dial_cannot_write_outside_the_reports_folder(project):
    p = lab(project, "sweep", "small-retrieval", "--set", "description=a/../../../escaped,b/c", "--no-progress")
    assert p.returncode == 0, p.stderr
    assert not (project.parent / "escaped").exists() and not list(project.parent.glob("*escaped*"))
    folders = [d for d in (project / "reports").rglob("*") if d.is_dir()]
    assert all(d.resolve().is_relative_to((project / "reports").resolve()) for d in folders)
    runs = [d for d in (project / "reports").rglob("small-retrieval[*") if d.is_dir()]
    # two points on the dev questions, the best and the base on the held-out ones, the base on dev
    assert len(runs) == 5 and all("/" not in d.name and ".." not in d.name for d in runs)
    assert all((d / "LATEST").is_file() for d in runs)


def test_spreadsheet_formulas_in_cells_are_neutralised_and_parquet_is_exact(project):
    rows = [json.loads(line) for line in (project / "eval.jsonl").read_text().splitlines() if line]
    evil = ['=HYPERLINK("http://x.invalid","click")', "+1+1", "-2+3", "@SUM(A1)"]
    for row, q in zip(rows, evil):
        row["question"] = q
    (project / "eval.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    run(project)
    run_dir = latest(project, "small-retrieval")
    with open(run_dir / "questions.csv", newline="") as fh:
        questions = [r["question"] for r in csv.DictReader(fh)]
    assert questions[:4] == ["'" + q for q in evil]
    assert list(pd.read_parquet(run_dir / "questions.parquet")["question"][:4]) == evil
    numbers = pd.read_csv(run_dir / "questions.csv")["mrr"]
    assert numbers.dtype.kind == "f"  # numbers stay numbers


def test_lab_list_lists_every_valid_experiment_and_marks_broken_ones(project):
    ex = project / "experiments"
    (ex / "z-invalid.yaml").write_text("retriever: [unclosed\n")
    (ex / "z-latin1.yaml").write_bytes("description: caf\xe9\n".encode("latin-1"))
    (ex / "z-list.yaml").write_text("- a\n- b\n")
    (ex / "z-deep.yaml").write_text("x: " + "[" * 5000 + "]" * 5000 + "\n")
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(9))
    (ex / "z-bomb.yaml").write_text(bomb + "description: *j\n")
    t0 = time.perf_counter()
    p = lab(project, "list")
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    assert time.perf_counter() - t0 < 60
    lines = {line.split()[0]: line for line in p.stdout.splitlines()}
    assert "small-retrieval" in lines and "BROKEN" not in lines["small-retrieval"]
    for name, says in {"z-invalid": "invalid YAML", "z-latin1": "not UTF-8", "z-list": "must be a mapping",
                       "z-deep": "nested more than", "z-bomb": "aliases"}.items():
        assert "BROKEN" in lines[name] and says in lines[name], lines[name]


@pytest.mark.parametrize("verb", ["sweep", "optimize"])
def test_an_unknown_metric_is_refused_before_any_work(project, verb):
    extra = ["--set", "retriever.top_k=2,3"] if verb == "sweep" else ["--trials", "1"]
    p = lab(project, verb, "small-retrieval", "--metric", "mrrr", *extra)
    assert p.returncode == 2 and "unknown metric 'mrrr'" in p.stderr and "did you mean 'mrr'" in p.stderr
    assert "Traceback" not in p.stderr and not (project / "reports").exists()


def test_a_top_k_over_the_index_size_warns(project):
    (project / "experiments" / "wide.yaml").write_text(
        "schema_version: 1\nextends: small-retrieval\nretriever:\n  top_k: 5000\n")
    p = lab(project, "run", "wide", "--no-progress")
    assert p.returncode == 0, p.stderr
    assert "retriever.top_k is 5000 but the index has" in p.stderr


def test_dotenv_and_local_state_are_git_ignored():
    for path in (".env", "reports/x/results.json", ".venv/bin/python"):
        out = subprocess.run(["git", "check-ignore", "-q", path], cwd=ROOT)
        assert out.returncode == 0, path


def test_makefile_quotes_paths_with_spaces(tmp_path):
    kb = tmp_path / "my docs"
    out = subprocess.run(["make", "-n", "experiment", f"KB={kb}", f"EVAL={tmp_path / 'my evals.jsonl'}",
                          "NAME=turn13"], cwd=ROOT, capture_output=True, text=True,
                         env={**os.environ, "MAKEFLAGS": ""})
    line = next(x for x in out.stdout.splitlines() if " run 'turn13'" in x)  # every value quoted, the name too
    assert f"--kb '{kb}'" in line and f"--eval '{tmp_path / 'my evals.jsonl'}'" in line
