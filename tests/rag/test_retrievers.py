"""BM25 and hybrid retrieval: fusion arithmetic by hand, then real runs on the fixture project."""

import json

import pytest

from lab.rag.retrievers import _fts_query, minmax, rrf_fusion, weighted_fusion
from runs import lab, latest, load

DENSE = [("a", 0.9), ("b", 0.5), ("c", 0.1)]  # normalised: a 1, b 0.5, c 0
SPARSE = [("b", 10.0), ("d", 4.0), ("a", 2.0)]  # normalised: b 1, d 0.25, a 0


def test_minmax():
    assert minmax([2, 4, 6]) == [0.0, 0.5, 1.0]
    assert minmax([3, 3]) == [1.0, 1.0]
    assert minmax([]) == []


@pytest.mark.parametrize("alpha, order, scores", [
    (0.5, ["b", "a", "d", "c"], [0.75, 0.5, 0.125, 0.0]),
    (1.0, ["a", "b", "c", "d"], [1.0, 0.5, 0.0, 0.0]),  # c (dense's weakest) before d (not dense)
    (0.0, ["b", "d", "a", "c"], [1.0, 0.25, 0.0, 0.0]),  # a (BM25's weakest) before c (not BM25)
])
def test_weighted_fusion_by_hand(alpha, order, scores):
    fused = weighted_fusion(DENSE, SPARSE, alpha)
    assert [f[0] for f in fused] == order
    got = {f[0]: f[1] for f in fused}
    assert [got[i] for i in order] == pytest.approx(scores)


def test_weighted_fusion_ties_go_to_the_weighted_list():
    # dense returned z only, BM25 returned y only: at alpha 1 z leads, at alpha 0 y leads
    assert [f[0] for f in weighted_fusion([("z", 0.3), ("x", 0.3)], [("y", 5.0), ("x", 5.0)], 1.0)][:2] == ["x", "z"]
    assert [f[0] for f in weighted_fusion([("z", 0.3)], [("y", 5.0)], 1.0)] == ["z", "y"]
    assert [f[0] for f in weighted_fusion([("z", 0.3)], [("y", 5.0)], 0.0)] == ["y", "z"]


def test_weighted_fusion_quarter_alpha_order():
    # alpha 0.25: b 0.25*0.5 + 0.75*1 = 0.875; a 0.25*1 = 0.25; d 0.75*0.25 = 0.1875; c 0
    fused = weighted_fusion(DENSE, SPARSE, 0.25)
    assert [f[0] for f in fused] == ["b", "a", "d", "c"]
    assert [f[1] for f in fused] == pytest.approx([0.875, 0.25, 0.1875, 0.0])


def test_rrf_by_hand():
    fused = dict(rrf_fusion([["a", "b", "c"], ["b", "d", "a"]], rrf_k=60))
    assert fused["a"] == pytest.approx(1 / 61 + 1 / 63)
    assert fused["b"] == pytest.approx(1 / 62 + 1 / 61)
    assert fused["c"] == pytest.approx(1 / 63) and fused["d"] == pytest.approx(1 / 62)
    assert [i for i, _ in rrf_fusion([["a", "b", "c"], ["b", "d", "a"]])] == ["b", "a", "d", "c"]


def test_fts_query_drops_query_syntax():
    assert _fts_query('How much does the "Ember 90" cost?') == "How much does the Ember 90 cost"
    assert _fts_query("?!") == ""


@pytest.mark.slow
def test_bm25_run_builds_the_full_text_index_once(project):
    p = lab(project, "run", "small-bm25", "--no-progress")
    assert p.returncode == 0, p.stderr
    assert "built the full-text (BM25) index" in p.stderr
    results, samples = load(latest(project, "small-bm25"))
    f2 = next(s for s in samples if s["id"] == "f2")  # "How much does the Ember 90 cost?"
    assert f2["retrieved"][0]["source"] == "products/ember90.md" and f2["keyword_ranks"] == {"8,400": 1}
    assert all(c["score"] > 0 for s in samples for c in s["retrieved"])
    manifest = json.loads((__import__("pathlib").Path(results["index"]["path"]) / "manifest.json").read_text())
    assert manifest["fts"]["stem"] is True
    p = lab(project, "run", "small-hybrid", "--no-progress")  # same index: FTS reused, nothing embedded
    assert p.returncode == 0, p.stderr
    assert "built the full-text" not in p.stderr
    hybrid, hsamples = load(latest(project, "small-hybrid"))
    assert hybrid["index"]["key"] == results["index"]["key"] and hybrid["counters"]["embeddings_computed"] == 0
    assert all(len(s["retrieved"]) == 3 for s in hsamples)


@pytest.mark.slow
def test_sweep_over_alpha_reuses_the_index_and_matches_the_pure_retrievers(project):
    for name in ("small-retrieval", "small-bm25"):
        assert lab(project, "run", name, "--no-progress").returncode == 0
    p = lab(project, "sweep", "small-hybrid", "--set", "retriever.alpha=0,0.5,1", "--no-progress", "--no-holdout")
    assert p.returncode == 0, p.stderr
    folder = project / "reports" / "_sweep" / "small-hybrid-retriever.alpha"
    summary = json.loads((folder / "sweep.json").read_text())
    assert summary["holdout"] is False and "optimistic" in summary["optimistic"] and "note: best point" in p.stdout
    assert [r["label"] for r in summary["points"]] == ["alpha=0", "alpha=0.5", "alpha=1"]
    assert all(r["index_reused"] and r["texts_embedded"] == 0 for r in summary["points"])
    mrr = [r["metrics"]["mrr"] for r in summary["points"]]
    assert summary["best"] == mrr.index(max(mrr)) and "<- best mrr" in p.stdout
    dense, _ = load(latest(project, "small-retrieval"))
    sparse, _ = load(latest(project, "small-bm25"))
    # alpha 1 orders by the dense side alone, alpha 0 by BM25 alone (top 3 of 6 each)
    assert mrr[2] == pytest.approx(dense["metrics"]["overall"]["mrr"]["mean"])
    assert mrr[0] == pytest.approx(sparse["metrics"]["overall"]["mrr"]["mean"])
    assert (folder / "sweep.csv").read_text().splitlines()[0].startswith("retriever.alpha,mrr,ndcg,coverage")
    assert "<svg" in (folder / "sweep.html").read_text()
    held = lab(project, "sweep", "small-hybrid", "--set", "retriever.alpha=0,0.5,1", "--no-progress")  # held out
    assert held.returncode == 0, held.stderr
    s = json.loads((folder / "sweep.json").read_text())
    assert (s["holdout"], s["n_dev"], s["n_held_out"]) == (True, 3, 3)
    h, chosen = s["held_out"], s["points"][s["best"]]
    best_run, _ = load(project / h["best_run"])  # run paths are as given: under reports/
    assert h["best"]["mrr"] == pytest.approx(best_run["metrics"]["overall"]["mrr"]["mean"])
    assert best_run["config"]["retriever"]["alpha"] == chosen["point"]["retriever.alpha"]
    assert h["dev"]["base"] == s["points"][1]["metrics"]["mrr"]  # the grid's alpha 0.5 is the base
    assert h["optimism"] == pytest.approx(chosen["metrics"]["mrr"] - h["best"]["mrr"]) and h["paired"]["n"] == 3
    assert "held-out" in held.stdout and "optimism" in held.stdout
    bad = lab(project, "sweep", "small-hybrid", "--set", "retriever.alpha=0,2")
    assert bad.returncode == 2 and "sweep point alpha=2" in bad.stderr and "less than or equal to 1" in bad.stderr


def test_fts_query_is_nfc():
    import unicodedata

    assert _fts_query(unicodedata.normalize("NFD", "Crème brûlée?")) == unicodedata.normalize("NFC", "Crème brûlée")
