"""A BEIR folder end to end: `lab import beir` keeps ids and graded qrels, a run scores them with
the document-level metrics (max-passage, hand-checked from the run's own ranking), and compare,
gate and the run page take them like any metric of the catalogue."""

import json
import math
from pathlib import Path

import pytest

from lab.metrics import catalog
from runs import lab, latest, load, page_text

pytestmark = pytest.mark.slow

DOCS = {
    "kilns": ("Kilns", "A kiln fires clay at high temperature. " * 8 + "Electric kilns heat with coils. " * 6),
    "glaze": ("Glaze", "Glaze is a thin layer of glass fused to pottery. " * 8 + "Glazes melt in the kiln. " * 5),
    "ghent": ("Ghent", "Ghent is a city in Belgium with a medieval centre. " * 8),
    "wheel": ("", "A potter's wheel turns while the potter shapes wet clay by hand. " * 7),
}
QUERIES = {"q1": "How does a kiln fire clay?", "q2": "What is a glaze made of?", "q3": "Where is Ghent?"}
QRELS = "query-id\tcorpus-id\tscore\nq1\tkilns\t2\nq1\twheel\t1\nq1\tglaze\t0\nq2\tglaze\t1\nq3\tghent\t1\n"


def _beir(root: Path) -> Path:
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text("".join(json.dumps({"_id": i, "title": t, "text": x}) + "\n"
                                               for i, (t, x) in DOCS.items()))
    (root / "queries.jsonl").write_text("".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in QUERIES.items()))
    (root / "qrels" / "test.tsv").write_text(QRELS)
    return root


def _by_hand(sources: list[str], grades: dict[str, int]) -> dict[str, float]:
    """trec_eval's definitions written out again, on the run's own retrieved sources."""
    ranked = list(dict.fromkeys(sources))  # max-passage: a document at its first passage's rank
    gains = [grades.get(d, 0) for d in ranked]
    ideal = sorted(grades.values(), reverse=True)
    dcg = sum(g / math.log2(i + 2) for i, g in enumerate(gains[:10]))
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal[:10]))
    relevant = {d for d, g in grades.items() if g >= 1}
    hits = [i for i, d in enumerate(ranked, start=1) if d in relevant]
    return {"qrels_ndcg10": dcg / idcg, "qrels_recall100": len(hits) / len(relevant),
            "qrels_mrr10": 1 / hits[0] if hits and hits[0] <= 10 else 0.0,
            "qrels_map": sum((n + 1) / r for n, r in enumerate(hits)) / len(relevant)}


def test_a_beir_import_runs_scores_compares_and_gates_on_graded_qrels(tmp_path):
    project = tmp_path / "project"
    (project / "experiments").mkdir(parents=True)
    p = lab(project, "import", "beir", str(_beir(tmp_path / "beir")), "--kb-out", "kb", "--out", "set.jsonl",
            "--category", "direct_fact")
    assert p.returncode == 0, p.stderr
    rows = [json.loads(line) for line in (project / "set.jsonl").read_text().splitlines()]
    assert [r["qrels"] for r in rows] == [{"kilns": 2, "wheel": 1, "glaze": 0}, {"glaze": 1}, {"ghent": 1}]
    base = ("schema_version: 1\ndata:\n  knowledge_base: kb\n  eval_set: set.jsonl\n"
            "chunker:\n  name: recursive_character\n  chunk_size: 120\n  chunk_overlap: 0\n"
            "generation: null\njudge: null\n")
    (project / "experiments" / "dense.yaml").write_text(base + "retriever:\n  name: vector\n  top_k: 12\n")
    (project / "experiments" / "sparse.yaml").write_text(base + "retriever:\n  name: bm25\n  top_k: 12\n")
    for name in ("dense", "sparse"):
        p = lab(project, "run", name, "--no-progress")
        assert p.returncode == 0, p.stderr
    results, samples = load(latest(project, "dense"))
    for s, row in zip(samples, rows):
        sources = [c["source"] for c in s["retrieved"]]
        assert len(sources) > len(set(sources))  # several passages of one document: max-passage matters
        grades = {f"{d}.txt": g for d, g in row["qrels"].items()}
        expected = _by_hand(sources, grades)
        assert {m: s["metrics"][m] for m in expected} == {m: expected[m] for m in expected}
    overall = results["metrics"]["overall"]
    for name in catalog.names(group="qrels"):
        assert overall[name]["n"] == 3
        assert math.isclose(overall[name]["mean"], sum(s["metrics"][name] for s in samples) / 3)
    page = page_text(latest(project, "dense") / "report.html")
    assert "nDCG@10 (qrels)" in page and "MRR@10 (qrels)" in page
    p = lab(project, "compare", "dense", "sparse", "--no-html")
    assert p.returncode == 0, p.stderr
    assert "nDCG@10 (qrels)" in p.stdout and "Recall@100 (qrels)" in p.stdout and "MAP (qrels)" in p.stdout
    p = lab(project, "gate", "dense", "dense", "--metric", "qrels_ndcg10=0.05")
    assert p.returncode in (0, 1), p.stderr  # a verdict, not an error: the gate knows the metric
    assert "qrels_ndcg10" in p.stdout or "nDCG@10 (qrels)" in p.stdout
