"""Training questions, negatives and the leakage guard, checked by hand on tiny passages."""

from __future__ import annotations

from lab.evalsets.leakage import overlaps
from lab.tune.pairs import (Passage, TrainQuestion, candidate_sentences, fingerprint, mine_negatives,
                            pseudo_queries, span_questions)
from lab.metrics.text import folded_text

KILN = Passage("a", "products/ember.md", "# Ember 90 kiln\n\nThe Ember 90 costs 8,400 euros. It fires at 1,300 degrees "
                                         "in under six hours.\n\n| model | price |\n|---|---|\n| Ember | 8,400 |")
GHENT = Passage("b", "company/ghent.md", "The Ghent workshop opened in 2014 with four potters. Odile Ferrand "
                                         "runs it with her brother.")
# b's second sentence again in another document: boilerplate, no single answer
COPY = Passage("c", "company/about.md", "Odile Ferrand runs it with her brother. Brightwater ships kilns to "
                                        "nine countries.")


def test_candidate_sentences_keeps_headings_and_sentences_drops_tables():
    assert candidate_sentences(KILN.text) == [
        "Ember 90 kiln",
        "The Ember 90 costs 8,400 euros.",
        "It fires at 1,300 degrees in under six hours.",
    ]
    # under five words: not a query; a one-word heading: not a query
    assert candidate_sentences("# Prices\n\nIt is cheap.") == []


def test_pseudo_queries_one_per_passage_a_round_positive_without_the_query():
    qs = pseudo_queries([KILN, GHENT, COPY], 4, seed=0)
    assert len(qs) == 4
    for q in qs:
        (pid,) = q.positives
        passage = {"a": KILN, "b": GHENT, "c": COPY}[pid]
        assert q.text in passage.text and q.text not in q.positive_text  # the inverse cloze
        assert q.kind == "pseudo" and q.span == folded_text(q.text)
    # the sentence two documents share is never a query
    assert all(q.text != "Odile Ferrand runs it with her brother." for q in qs)
    # a round takes one sentence from each passage before any passage gives another: a has three
    # usable sentences, b and c one each (their other is the shared one)
    assert sorted(q.positives[0] for q in qs) == ["a", "a", "b", "c"]
    # seeded: the same seed the same questions, another seed another order
    assert [q.text for q in pseudo_queries([KILN, GHENT, COPY], 4, seed=0)] == [q.text for q in qs]


def test_pseudo_queries_stop_when_the_chunks_run_out():
    qs = pseudo_queries([GHENT], 10, seed=1)  # alone, GHENT's second sentence is its own
    assert sorted(q.text for q in qs) == ["Odile Ferrand runs it with her brother.",
                                          "The Ghent workshop opened in 2014 with four potters."]
    assert pseudo_queries([], 5, 0) == [] and pseudo_queries([KILN], 0, 0) == []


def test_span_questions_every_passage_holding_the_span_is_a_positive():
    rows = [
        ("eval.jsonl:1", {"question": "Who runs the Ghent workshop?", "references": [
            {"content": "Odile  Ferrand runs it with her brother."}]}),  # whitespace differs: folded, it matches
        ("eval.jsonl:2", {"question": "Who founded it?", "references": None}),
        ("eval.jsonl:3", {"question": "What is the capital?", "references": [{"content": "Paris is the capital."}]}),
    ]
    qs, skipped = span_questions(rows, [KILN, GHENT, COPY])
    assert len(qs) == 1
    assert qs[0].positives == ("b", "c") and qs[0].origin == "eval.jsonl:1" and qs[0].kind == "generated"
    assert skipped == {"no golden span": 1, "span in no chunk": 1}


def test_mine_negatives_alternates_lists_and_skips_chunks_holding_the_span():
    passages = {p.id: p for p in [KILN, GHENT, COPY]} | {"d": Passage("d", "x.md", "Kilns need a vent."),
                                                          "e": Passage("e", "y.md", "Glazes and clays.")}
    folded = {k: folded_text(p.text) for k, p in passages.items()}
    q = TrainQuestion("Who runs the Ghent workshop?", ("b",), folded_text("Odile Ferrand runs it with her brother."),
                      "eval.jsonl:1", "generated")
    # dense: b (positive), c (holds the span: not wrong), d; BM25: e, a, d (again), zz (not a passage)
    assert mine_negatives(q, ["b", "c", "d"], ["e", "a", "d", "zz"], passages, folded, cap=5) == ["e", "a", "d"]
    assert mine_negatives(q, ["b", "c", "d"], ["e", "a", "d"], passages, folded, cap=2) == ["e", "a"]


def test_overlaps_same_question_near_duplicate_and_same_span():
    train = [
        {"text": "Who runs the Ghent workshop?", "span": "", "origin": "gen.jsonl:4"},
        {"text": "How much does the Ember 90 kiln cost in euros?", "span": "", "origin": "gen.jsonl:9"},
        {"text": "The Ember 90 costs 8,400 euros.", "span": folded_text("The Ember 90 costs 8,400 euros."),
         "origin": "pseudo:a"},
    ]
    eval_rows = [
        (1, "who runs the  Ghent workshop?", []),  # same question, folded
        (2, "How much does the Ember 90 kiln cost, in euros?", []),  # same words: Jaccard 1.0
        (3, "What does the kiln cost?", ["The Ember 90 costs 8,400 euros. It fires at"]),  # holds the span
        (4, "When did the Ghent workshop open?", ["opened in 2014"]),  # 4 words of 7 shared; span too short
    ]
    found = overlaps(train, eval_rows)
    assert [(o.eval_line, o.why, o.train_origin) for o in found] == [
        (1, "same question", "gen.jsonl:4"),
        (2, "near-duplicate (Jaccard 1.00)", "gen.jsonl:9"),
        (3, "same golden span", "pseudo:a"),
    ]


def test_fingerprint_changes_with_a_negative_or_a_passage_text():
    q = TrainQuestion("Who runs it?", ("b",), "", "x", "generated", negatives=["a"])
    base = fingerprint([q], [KILN, GHENT])
    assert base == fingerprint([q], [KILN, GHENT, COPY])  # c is named by no question
    q2 = TrainQuestion("Who runs it?", ("b",), "", "x", "generated", negatives=["c"])
    assert fingerprint([q2], [KILN, GHENT, COPY]) != base
    assert fingerprint([q], [KILN, Passage("b", GHENT.source, GHENT.text + " Closed Mondays.")]) != base
