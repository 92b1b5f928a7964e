"""Span precision, recall and IoU, and the span rank metrics, on hand-made cases."""

import math

import pytest

from lab.evidence.holds import merge, overlap, place_share
from lab.metrics.spans import span_rank_scores, span_scores


def test_merge_joins_overlapping_and_touching_intervals():
    assert merge([(5, 10), (0, 3), (8, 12), (12, 15), (20, 20)]) == [(0, 3), (5, 15)]
    assert overlap([(0, 10), (20, 30)], [(5, 25)]) == 5 + 5


def test_overlapping_chunks_count_their_shared_characters_once():
    # chunks 0-100 and 80-180 of a.md cover 180 chars; the reference is 90-110 (20 chars)
    s = span_scores([("a.md", 0, 100, 100), ("a.md", 80, 180, 100)], [("a.md", 90, 110)])
    assert s["span_chars"] == {"retrieved": 180, "reference": 20, "relevant": 20}
    assert s["span_precision"] == pytest.approx(20 / 180)
    assert s["span_recall"] == 1.0
    assert s["span_iou"] == pytest.approx(20 / 180)


def test_a_span_across_two_chunks():
    # the reference 150-250 straddles chunks 100-200 and 200-300; only the first is retrieved
    half = span_scores([("a.md", 100, 200, 100)], [("a.md", 150, 250)])
    assert (half["span_precision"], half["span_recall"]) == (0.5, 0.5)
    assert half["span_iou"] == pytest.approx(50 / 150)
    both = span_scores([("a.md", 100, 200, 100), ("a.md", 200, 300, 100)], [("a.md", 150, 250)])
    assert (both["span_precision"], both["span_recall"], both["span_iou"]) == (0.5, 1.0, 0.5)


def test_no_overlap_and_other_documents():
    s = span_scores([("a.md", 0, 50, 50), ("b.md", 100, 150, 50)], [("b.md", 0, 40), ("c.md", 0, 10)])
    assert s["span_chars"] == {"retrieved": 100, "reference": 50, "relevant": 0}
    assert (s["span_precision"], s["span_recall"], s["span_iou"]) == (0.0, 0.0, 0.0)


def test_same_offsets_in_another_document_do_not_count():
    s = span_scores([("a.md", 0, 100, 100)], [("b.md", 0, 100)])
    assert s["span_chars"]["relevant"] == 0


def test_chunks_without_offsets_count_as_retrieved_text_only():
    s = span_scores([("a.md", None, None, 60), ("a.md", 0, 40, 40)], [("a.md", 0, 20)])
    assert s["span_chars"] == {"retrieved": 100, "reference": 20, "relevant": 20}
    assert s["span_precision"] == pytest.approx(0.2) and s["span_iou"] == pytest.approx(0.2)


def test_two_references_one_overlapping_the_other():
    s = span_scores([("a.md", 0, 30, 30)], [("a.md", 10, 40), ("a.md", 20, 50)])
    # G = 10-50 (40 chars), R = 0-30, R ∩ G = 10-30 (20), R ∪ G = 0-50 (50)
    assert s["span_chars"] == {"retrieved": 30, "reference": 40, "relevant": 20}
    assert (s["span_precision"], s["span_recall"], s["span_iou"]) == (pytest.approx(2 / 3), 0.5, 0.4)


# ---------------------------------------------------------------------------------------------
# Rank metrics from golden spans (span_rank_scores); log2(2) = 1, log2(3) = 1.585, log2(4) = 2

L3 = math.log2(3)
G = ("a.md", 100, 200)  # a golden span of 100 chars
TWIN = ("b.md", 0, 100)  # the same text in b.md


@pytest.mark.parametrize("passages, golden, k, mrr, ndcg, recall, ranks", [
    # the whole span in the passage at rank 1: everything 1
    ([[("a.md", 50, 250)]], [[G]], 10, 1.0, 1.0, 1.0, [1]),
    # first passage elsewhere, the span whole at rank 2: RR 1/2, DCG 1/log2(3)
    ([[("c.md", 0, 100)], [("a.md", 100, 200)]], [[G]], 10, 0.5, 1 / L3, 1.0, [2]),
    # cut by a chunk boundary 60/40: rank 1 holds 60% (>= HOLD) and rank 2 adds 40%:
    # RR 1, DCG 0.6 + 0.4 / log2(3)
    ([[("a.md", 0, 160)], [("a.md", 160, 300)]], [[G]], 10, 1.0, 0.6 + 0.4 / L3, 1.0, [1]),
    # cut 40/60: rank 1 covers 40% (< HOLD), rank 2 holds 60%: RR 1/2, DCG 0.4 + 0.6 / log2(3)
    ([[("a.md", 0, 140)], [("a.md", 140, 300)]], [[G]], 10, 0.5, 0.4 + 0.6 / L3, 1.0, [2]),
    # the same, k = 1: the second passage's 60% is past k; recall counts every passage
    ([[("a.md", 0, 140)], [("a.md", 140, 300)]], [[G]], 1, 0.5, 0.4, 1.0, [2]),
    # a passage covering 30% only: held by none, nDCG 0.3, recall 0.3
    ([[("a.md", 170, 400)]], [[G]], 10, 0.0, 0.3, 0.3, [None]),
    # a merged passage: pieces 100-130 and 150-200 of a.md cover 80 of 100 chars: held
    ([[("a.md", 100, 130), ("a.md", 150, 200)]], [[G]], 10, 1.0, 0.8, 0.8, [1]),
    # two spans (100 and 50 chars); rank 1 holds the first, rank 3 the second whole:
    # MRR (1 + 1/3) / 2; nDCG (1 + 1/log2(4)) / 2; recall (100 + 50) / 150
    ([[("a.md", 100, 200)], [("x.md", 0, 9)], [("c.md", 0, 50)]], [[G], [("c.md", 0, 50)]], 10,
     (1 + 1 / 3) / 2, (1 + 1 / 2) / 2, 1.0, [1, 3]),
    # nothing retrieved
    ([], [[G]], 10, 0.0, 0.0, 0.0, [None]),
])
def test_span_rank_metrics_by_hand(passages, golden, k, mrr, ndcg, recall, ranks):
    s = span_rank_scores(passages, golden, k)
    assert s["span_mrr"] == pytest.approx(mrr)
    assert s["span_ndcg"] == pytest.approx(ndcg)
    assert s["span_recall_any"] == pytest.approx(recall)
    assert s["span_ranks"] == ranks


@pytest.mark.parametrize("passages, mrr, ndcg, recall, twin", [
    # only the twin in b.md is retrieved, at rank 2: RR 1/2 where the span alone gives 0
    ([[("c.md", 0, 50)], [("b.md", 0, 100)]], 0.5, 1 / L3, 1.0, [True]),
    # twin at rank 1 and the span itself at rank 2: held at rank 1 by the twin; the span adds
    # nothing (c stays 1), so nDCG 1
    ([[("b.md", 0, 100)], [("a.md", 100, 200)]], 1.0, 1.0, 1.0, [True]),
    # half the twin at rank 1, the span's own place whole at rank 2: c_1 = 0.5, c_2 = 1;
    # rank 1 holds (50% of the twin): MRR 1, nDCG 0.5 + 0.5 / log2(3); held via the twin
    ([[("b.md", 50, 100)], [("a.md", 100, 200)]], 1.0, 0.5 + 0.5 / L3, 1.0, [True]),
    # halves of two places do not add up: 40% of the span and 40% of the twin is c = 0.4
    ([[("a.md", 100, 140), ("b.md", 60, 100)]], 0.0, 0.4, 0.4, [False]),
])
def test_a_twin_counts_as_the_span(passages, mrr, ndcg, recall, twin):
    s = span_rank_scores(passages, [[G, TWIN]], 10)
    assert (s["span_mrr"], s["span_ndcg"], s["span_recall_any"]) == (
        pytest.approx(mrr), pytest.approx(ndcg), pytest.approx(recall))
    assert s["span_twin"] == twin


def test_span_recall_any_is_span_recall_without_twins():
    passages = [[("a.md", 0, 150)], [("a.md", 400, 420)]]
    refs = [G, ("a.md", 410, 430)]
    old = span_scores([(src, a, b, b - a) for p in passages for src, a, b in p], refs)
    new = span_rank_scores(passages, [[r] for r in refs], 10)
    assert new["span_recall_any"] == pytest.approx(old["span_recall"]) == pytest.approx((50 + 10) / 120)


def test_place_share_merges_pieces_of_its_source_only():
    assert place_share([("a.md", 100, 150), ("a.md", 140, 180), ("b.md", 100, 200)], G) == pytest.approx(0.8)
    assert place_share([], G) == 0.0
