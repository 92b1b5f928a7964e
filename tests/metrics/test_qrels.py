"""Document-level metrics against graded qrels: hand arithmetic, max-passage, and a cross-check
against ranx (trec_eval's definitions) on random runs."""

import math
import random

import pytest

from lab.metrics.qrels import (QRELS_METRICS, average_precision, documents_ranked, mrr_at, ndcg_at, qrels_scores,
                               recall_at)

L2, L3, L4 = math.log2(2), math.log2(3), math.log2(4)


@pytest.mark.parametrize("ranked, qrels, k, expected", [
    # the one relevant document first: perfect
    (["a", "b"], {"a": 1}, 10, 1.0),
    # graded gains, linear: a (2) at rank 2, b (1) at rank 1; ideal a then b
    (["b", "a"], {"a": 2, "b": 1}, 10, (1 / L2 + 2 / L3) / (2 / L2 + 1 / L3)),
    # the ideal ranking holds every judged document, retrieved or not: c (1) was never retrieved
    (["a", "x"], {"a": 1, "c": 1}, 10, (1 / L2) / (1 / L2 + 1 / L3)),
    # cut at k = 1: only rank 1 counts, on both sides
    (["x", "a"], {"a": 1, "b": 1}, 1, 0.0),
    (["a", "x"], {"a": 1, "b": 1}, 1, 1.0),
    # a grade of 0 (judged not relevant) and a negative one add no gain
    (["z", "a"], {"a": 1, "z": 0, "n": -1}, 10, (1 / L3) / (1 / L2)),
    # nothing graded above 0: 0.0, whatever is retrieved
    (["a"], {"a": 0}, 10, 0.0),
])
def test_ndcg_by_hand(ranked, qrels, k, expected):
    assert ndcg_at(ranked, qrels, k) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("fn, ranked, qrels, k, expected", [
    (recall_at, ["a", "x", "b"], {"a": 1, "b": 2, "c": 1}, 10, 2 / 3),  # c never retrieved
    (recall_at, ["a", "x", "b"], {"a": 1, "b": 2, "c": 1}, 2, 1 / 3),  # b is past k
    (recall_at, ["a"], {"a": 0}, 10, 0.0),  # no relevant document
    (mrr_at, ["x", "y", "b"], {"b": 1}, 10, 1 / 3),
    (mrr_at, ["x", "y", "b"], {"b": 1}, 2, 0.0),  # the first relevant one is past k
    (mrr_at, ["z", "b"], {"z": 0, "b": 3}, 10, 1 / 2),  # grade 0: judged, not relevant
])
def test_recall_and_mrr_by_hand(fn, ranked, qrels, k, expected):
    assert fn(ranked, qrels, k) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("ranked, qrels, expected", [
    (["a", "x", "b"], {"a": 1, "b": 1}, (1 / 1 + 2 / 3) / 2),
    (["x", "a"], {"a": 1, "c": 1}, (1 / 2) / 2),  # c never retrieved: counts in the denominator
    (["x"], {"a": 1}, 0.0),
    (["a"], {}, 0.0),
])
def test_average_precision_by_hand(ranked, qrels, expected):
    assert average_precision(ranked, qrels) == pytest.approx(expected, abs=1e-12)


def test_max_passage_ranks_a_document_at_its_best_passage():
    # passages of a, a, b, a, c: documents a (rank 1), b (rank 2), c (rank 3)
    sources = ["a.txt", "a.txt", "b.txt", "a.txt", "c.txt"]
    assert documents_ranked(sources) == ["a.txt", "b.txt", "c.txt"]
    scores = qrels_scores(sources, {"b.txt": 1, "c.txt": 1})
    assert scores["qrels_mrr10"] == 1 / 2  # b's passage is third, b the second document
    assert scores["qrels_ndcg10"] == pytest.approx((1 / L3 + 1 / L4) / (1 / L2 + 1 / L3))
    assert scores["qrels_recall100"] == 1.0
    assert scores["qrels_map"] == pytest.approx((1 / 2 + 2 / 3) / 2)
    assert list(scores) == list(QRELS_METRICS)


def _random_case(rng: random.Random, n_docs: int) -> tuple[dict, dict]:
    docs = [f"d{i}" for i in range(n_docs)]
    judged = rng.sample(docs, rng.randint(1, 12))
    qrels = {d: rng.choice([0, 1, 1, 2, 3]) for d in judged}
    if not any(g > 0 for g in qrels.values()):
        qrels[judged[0]] = 1
    retrieved = rng.sample(docs, rng.randint(1, 120))
    # distinct scores, descending with rank: no ties for the libraries to break
    return qrels, {d: 1000.0 - r + rng.random() * 0.5 for r, d in enumerate(retrieved)}


def test_cross_check_with_ranx_on_random_runs():
    """Each metric, per query and as a mean over 200 random queries, equals ranx's (which follows
    trec_eval) to 1e-9: graded qrels (0-3), judged documents never retrieved, runs of 1-120."""
    ranx = pytest.importorskip("ranx")
    rng = random.Random(46)
    qrels, run = {}, {}
    for q in range(200):
        qrels[f"q{q}"], run[f"q{q}"] = _random_case(rng, 300)
    names = {"qrels_ndcg10": "ndcg@10", "qrels_recall100": "recall@100", "qrels_mrr10": "mrr@10", "qrels_map": "map"}
    their_qrels = ranx.Qrels(qrels)
    order = list(their_qrels.keys())  # ranx's per-query values come in its own (sorted) order of query ids
    expected = ranx.evaluate(their_qrels, ranx.Run(run), list(names.values()), return_mean=False)
    ours = {q: qrels_scores(sorted(run[q], key=run[q].get, reverse=True), qrels[q]) for q in qrels}
    for name, theirs in names.items():
        per_query = [ours[q][name] for q in order]
        assert max(abs(a - b) for a, b in zip(per_query, expected[theirs])) < 1e-9, name
        assert abs(sum(per_query) / len(per_query) - float(expected[theirs].mean())) < 1e-9, name
    # other cut-offs, one per function, on the same runs
    for k in (1, 5, 20):
        theirs = ranx.evaluate(ranx.Qrels(qrels), ranx.Run(run), [f"ndcg@{k}", f"recall@{k}", f"mrr@{k}"],
                               return_mean=False)
        for fn, metric in ((ndcg_at, "ndcg"), (recall_at, "recall"), (mrr_at, "mrr")):
            mine = [fn(sorted(run[q], key=run[q].get, reverse=True), qrels[q], k) for q in order]
            assert max(abs(a - b) for a, b in zip(mine, theirs[f"{metric}@{k}"])) < 1e-9, (metric, k)


def test_the_catalogue_lists_each_qrels_metric_once():
    from lab.metrics import catalog

    assert catalog.names(group="qrels") == tuple(QRELS_METRICS)
    assert all(catalog.higher_is_better(n) and catalog.fmt(n, 0.67891) == "0.6789" for n in QRELS_METRICS)
