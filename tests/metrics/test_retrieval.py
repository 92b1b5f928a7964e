import math

import pytest

from lab.metrics.aggregate import by_category, mean_table
from lab.metrics.retrieval import dcg, keyword_ndcg, keyword_rr, question_scores

A, B, C, D = "alpha beta", "gamma", "Beta delta", "epsilon"


@pytest.mark.parametrize(
    "keyword, texts, expected",
    [
        ("beta", [A, B, C], 1.0),  # first text contains it
        ("BETA", [B, C, A], 1 / 2),  # case-insensitive, first hit at rank 2
        ("delta", [A, B, C, D], 1 / 3),
        ("zeta", [A, B, C], 0.0),  # never found
        ("eps", [A, B, C, D], 1 / 4),  # substring match
        ("beta", [], 0.0),  # nothing retrieved
    ],
)
def test_keyword_rr(keyword, texts, expected):
    assert keyword_rr(keyword, texts) == pytest.approx(expected)


@pytest.mark.parametrize(
    "keyword, texts, k, expected",
    [
        ("beta", [A, B, C], 10, (1 / math.log2(2) + 1 / math.log2(4)) / (1 / math.log2(2) + 1 / math.log2(3))),
        ("beta", [B, A], 10, (1 / math.log2(3)) / (1 / math.log2(2))),  # one hit at rank 2
        ("beta", [A, C], 10, 1.0),  # all relevant first
        ("beta", [B, B, A], 2, 0.0),  # the hit lies beyond k
        ("zeta", [A, B], 10, 0.0),  # no relevant text: ideal DCG 0 -> 0
    ],
)
def test_keyword_ndcg(keyword, texts, k, expected):
    assert keyword_ndcg(keyword, texts, k) == pytest.approx(expected)


def test_dcg_by_hand():
    assert dcg([1, 0, 1], 10) == pytest.approx(1 + 1 / math.log2(4))
    assert dcg([1, 0, 1], 2) == pytest.approx(1.0)


def test_question_scores_average_over_keywords():
    s = question_scores(["beta", "delta", "zeta"], [A, B, C], k=10)
    assert s["mrr"] == pytest.approx((1 + 1 / 3 + 0) / 3)
    ndcg_beta = (1 + 1 / math.log2(4)) / (1 + 1 / math.log2(3))
    ndcg_delta = (1 / math.log2(4)) / 1
    assert s["ndcg"] == pytest.approx((ndcg_beta + ndcg_delta + 0) / 3)
    assert s["coverage"] == pytest.approx(2 / 3)
    assert s["keyword_ranks"] == {"beta": 1, "delta": 3, "zeta": None}


def test_inputs_untouched():
    texts = [C, A]
    kws = ["beta"]
    question_scores(kws, texts, 10)
    assert texts == [C, A] and kws == ["beta"]


def test_aggregation_overall_and_by_category():
    rows = [
        {"category": "x", "mrr": 1.0},
        {"category": "x", "mrr": 0.5},
        {"category": "y", "mrr": 0.0},
    ]
    assert mean_table(rows, ["mrr"]) == {"mrr": {"mean": 0.5, "n": 3}}
    cats = by_category(rows, ["mrr"], ["y", "x"])
    assert list(cats) == ["y", "x"]
    assert cats["x"] == {"n": 2, "mrr": {"mean": 0.75, "n": 2}}


def test_cross_check_with_ranx():
    """Per keyword, our reciprocal rank and nDCG equal ranx's for a query whose relevant
    documents are the retrieved texts containing the keyword. With k covering the whole list,
    the exercise's ideal DCG (retrieved relevances sorted) equals the classic one."""
    ranx = pytest.importorskip("ranx")
    texts = ["a b", "c", "b d", "e b", "f", "b"]
    run_scores = {f"d{i}": float(len(texts) - i) for i in range(len(texts))}
    for kw in ["b", "d", "e", "f"]:
        rel = {f"d{i}": 1 for i, t in enumerate(texts) if kw in t}
        qrels = ranx.Qrels({"q": rel})
        run = ranx.Run({"q": run_scores})
        assert keyword_rr(kw, texts) == pytest.approx(ranx.evaluate(qrels, run, "mrr"))
        assert keyword_ndcg(kw, texts, 6) == pytest.approx(ranx.evaluate(qrels, run, "ndcg@6"))


def test_keywords_and_texts_match_in_nfc():
    import unicodedata

    nfc, nfd = unicodedata.normalize("NFC", "Crème brûlée"), unicodedata.normalize("NFD", "Crème brûlée")
    assert nfc != nfd and len(nfd) == len(nfc) + 3  # è, û, é each decompose in two
    texts = ["the menu", f"dessert: {nfc}, 9 euros"]
    assert keyword_rr(nfd, texts) == 1 / 2  # decomposed keyword, composed text
    assert keyword_rr(nfc, [f"dessert: {nfd}"]) == 1.0  # and the other way round
    assert question_scores([nfd], texts, 10)["coverage"] == 1.0
