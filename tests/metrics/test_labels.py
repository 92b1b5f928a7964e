"""recall@k and MRR@k against labelled chunk ids: by hand, against ranx, and bad label files."""

import pytest

from lab.errors import DataError
from lab.metrics.labels import label_scores, load_labels


def test_label_scores_by_hand():
    s = label_scores(["a#1", "b#0"], ["x#0", "b#0", "y#0", "a#1"], k=10)
    assert s == {"label_recall": 1.0, "label_mrr": 0.5}
    assert label_scores(["a#1", "b#0"], ["x#0", "b#0", "y#0", "a#1"], k=3) == {"label_recall": 0.5, "label_mrr": 0.5}
    assert label_scores(["a#1"], ["x#0", "y#0"], k=10) == {"label_recall": 0.0, "label_mrr": 0.0}
    assert label_scores(["a#1"], ["a#1", "a#1"], k=10)["label_recall"] == 1.0  # duplicates count once


def test_label_scores_agree_with_ranx():
    from ranx import Qrels, Run, evaluate

    labels = {"q1": ["a", "b"], "q2": ["c"], "q3": ["d", "e", "f"]}
    runs = {"q1": ["z", "b", "a"], "q2": ["y", "x", "w", "c"], "q3": ["f", "q", "d"]}
    qrels = Qrels({q: {i: 1 for i in ids} for q, ids in labels.items()})
    run = Run({q: {i: 10.0 - r for r, i in enumerate(ids)} for q, ids in runs.items()})
    for k in (1, 3, 10):
        ours = [label_scores(labels[q], runs[q], k) for q in labels]
        expected = evaluate(qrels, run, [f"recall@{k}", f"mrr@{k}"])
        assert sum(s["label_recall"] for s in ours) / 3 == pytest.approx(expected[f"recall@{k}"])
        assert sum(s["label_mrr"] for s in ours) / 3 == pytest.approx(expected[f"mrr@{k}"])


def test_bad_label_files_name_the_line(tmp_path):
    p = tmp_path / "labels.csv"
    cases = [
        ("id,ids\nq1,a\n", "line 1: the header must be query_id,relevant_ids"),
        ("query_id,relevant_ids\nq9,a#0\n", "line 2: field 'query_id': 'q9' is not a question"),
        ("query_id,relevant_ids\nq1,a#0\nq1,b#0\n", "line 3: field 'query_id': 'q1' is labelled twice"),
        ("query_id,relevant_ids\nq1, ; \n", "line 2: field 'relevant_ids' is empty"),
        ("query_id,relevant_ids\nq1,a#0,b#0\n", "line 2: expected 2 fields, got 3"),
    ]
    for text, message in cases:
        p.write_text(text)
        with pytest.raises(DataError, match=message.replace("(", r"\(")):
            load_labels(p, ["q1", "q2"])
    p.write_text("query_id,relevant_ids\nq1,a#0;b#0\n\nq2,c#3\n")
    assert load_labels(p, ["q1", "q2"]) == {"q1": ["a#0", "b#0"], "q2": ["c#3"]}
    with pytest.raises(DataError, match="does not exist"):
        load_labels(tmp_path / "none.csv", ["q1"])
