"""The perturbed set that says whether a judge measures accuracy apart from completeness
(lab.judge.probe): what is built, and each pair's share by hand."""

from __future__ import annotations

import pytest

from lab.judge.probe import KINDS, PAIRS, build, measure, table

ITEMS = [
    {"id": "q1", "category": "a", "question": "Who founded Insurellm?",
     "reference": "Avery Lancaster founded Insurellm in 2015.", "keywords": ["Avery Lancaster"]},
    {"id": "q2", "category": "a", "question": "How many staff does Carllm have?",
     "reference": "Carllm has 40 staff.", "keywords": ["40"]},
    {"id": "q3", "category": "b", "question": "Where is Homellm based?",
     "reference": "Homellm is based in Boston, with 12 engineers.", "keywords": ["Boston"]},
    {"id": "q4", "category": "b", "question": "Who leads Rellm?", "reference": "Jo Park leads Rellm.", "keywords": []},
]


def test_build_puts_the_questions_that_can_be_cut_short_first():
    rows = build(ITEMS, 3, 7)
    ids = list(dict.fromkeys(r["id"] for r in rows))
    assert set(ids[:2]) == {"q1", "q3"} and len(ids) == 3  # the two with two facts, then one other
    kinds = {(r["id"], r["kind"]) for r in rows}
    assert ("q1", "cut_short") in kinds and ("q3", "cut_short") in kinds
    assert not any(r["kind"] == "cut_short" for r in rows if r["id"] not in ("q1", "q3"))
    assert next(r["text"] for r in rows if r["kind"] == "refusal") == "I don't have enough information to answer that question."
    assert build(ITEMS, 3, 7) == rows  # seeded


def s(a, c, r):
    return {"accuracy": a, "completeness": c, "relevance": r}


def test_measure_by_hand():
    scores = {
        ("q1", "reference"): s(4.5, 5, 5), ("q1", "wrong_fact"): s(2, 5, 5), ("q1", "cut_short"): s(4, 3, 5),
        ("q2", "reference"): s(4, 5, 5), ("q2", "wrong_fact"): s(3.5, 5, 5), ("q2", "cut_short"): s(2.9, 4, 5),
        ("q3", "reference"): s(5, 5, 5), ("q3", "wrong_fact"): None, ("q3", "cut_short"): s(5, 5, 5),
    }
    rows = [{"id": i, "kind": k} for i, k in scores]
    out = measure(rows, lambda r: scores[(r["id"], r["kind"])])
    p = out["pairs"]
    # within one point: q1 0.5, q2 1.1 (no), q3 0
    assert (p["cut short keeps accuracy (within one point)"]["hits"], p["cut short keeps accuracy (within one point)"]["n"]) == (2, 3)
    # above the wrong answer: q1 4 > 2, q2 2.9 < 3.5; q3's wrong judgement failed
    assert p["cut short above wrong fact on accuracy"] == {"share": 0.5, "n": 2, "hits": 1, "goal": 0.9, "met": False}
    # completeness lower: q1, q2; q3 equal
    assert p["cut short lowers completeness"]["share"] == pytest.approx(2 / 3)
    assert p["wrong fact lowers accuracy"]["share"] == 1.0 and out["n_failed"] == 1
    assert out["means"]["cut_short"] == pytest.approx({"accuracy": (4 + 2.9 + 5) / 3, "completeness": 4.0,
                                                       "relevance": 5.0, "n": 3})
    assert "| cut short above wrong fact on accuracy | 90% | 1 of 2 (50%) |" in table({"m": out})
    assert table({"m": out}).count("\n| ") == len(PAIRS) + len(KINDS)  # a row per pair, a row of means per kind
