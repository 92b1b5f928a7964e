"""Span precision, recall and IoU on hand-made cases."""

import pytest

from lab.metrics.spans import merge, overlap, span_scores


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
