"""Training questions, negatives, the leakage guard and the dev split's rows and weight pick,
checked by hand on tiny passages."""

from __future__ import annotations

from lab.evalsets.leakage import overlaps
from lab.evidence.holds import Passage
from lab.evidence.text import fold
from lab.tune.dev import dev_rows, pick_fusion
from lab.tune.pairs import (TrainQuestion, candidate_sentences, fingerprint, in_view, mine_negatives, pseudo_queries,
                            span_questions)

KILN = Passage(id="a", source="products/ember.md", text="# Ember 90 kiln\n\nThe Ember 90 costs 8,400 euros. It fires at 1,300 degrees "
                                         "in under six hours.\n\n| model | price |\n|---|---|\n| Ember | 8,400 |")
GHENT = Passage(id="b", source="company/ghent.md", text="The Ghent workshop opened in 2014 with four potters. Odile Ferrand "
                                         "runs it with her brother.")
# b's second sentence again in another document: boilerplate, no single answer
COPY = Passage(id="c", source="company/about.md", text="Odile Ferrand runs it with her brother. Brightwater ships kilns to "
                                        "nine countries.")


def test_candidate_sentences_keeps_headings_and_sentences_drops_tables():
    assert candidate_sentences(KILN.text) == [
        "Ember 90 kiln",
        "The Ember 90 costs 8,400 euros.",
        "It fires at 1,300 degrees in under six hours.",
    ]
    # under five words: not a query; a one-word heading: not a query
    assert candidate_sentences("# Prices\n\nIt is cheap.") == []


def test_pseudo_queries_name_their_document_one_per_passage_a_round():
    qs = pseudo_queries([KILN, GHENT, COPY], 7, seed=0)
    # a sentence that does not name its document gets the document's title first; the line the
    # two company pages share is a query of each, under each one's title
    assert sorted(q.text for q in qs) == [
        "Ember 90 kiln",
        "The Ember 90 costs 8,400 euros.",
        "The Ghent workshop opened in 2014 with four potters.",
        "about: Brightwater ships kilns to nine countries.",
        "about: Odile Ferrand runs it with her brother.",
        "ember: It fires at 1,300 degrees in under six hours.",
        "ghent: Odile Ferrand runs it with her brother.",
    ]
    for q in qs:
        (pid,) = q.positives
        passage = {"a": KILN, "b": GHENT, "c": COPY}[pid]
        assert q.kind == "pseudo" and q.positive_text is None and q.source == passage.source
        assert q.span in fold(passage.text) and q.span == fold(q.text.split(": ", 1)[-1])
    # a round takes one sentence from each passage before any passage gives another
    assert sorted(q.positives[0] for q in qs[:3]) == ["a", "b", "c"]
    # seeded: the same seed, the same questions in the same order
    assert [q.text for q in pseudo_queries([KILN, GHENT, COPY], 7, seed=0)] == [q.text for q in qs]
    assert [q.text for q in pseudo_queries([KILN, GHENT, COPY], 7, seed=3)] != [q.text for q in qs]


def test_pseudo_queries_by_inverse_cloze_lose_their_sentence_from_the_positive():
    qs = pseudo_queries([KILN, GHENT, COPY], 7, seed=0, cloze=1.0)
    assert [q.text for q in qs] == [q.text for q in pseudo_queries([KILN, GHENT, COPY], 7, seed=0)]
    for q in qs:
        sentence = q.text.split(": ", 1)[-1] if q.text.startswith(("about: ", "ghent: ", "ember: ")) else q.text
        assert q.positive_text is not None and sentence not in q.positive_text


def test_a_line_two_documents_share_under_one_title_is_no_query():
    twin = Passage(id="d", source="company/ghent.md", text="Odile Ferrand runs it with her brother. Closed on Mondays and Sundays.")
    other = Passage(id="e", source="archive/ghent.md", text="Odile Ferrand runs it with her brother. Kilns fire on Thursdays and Fridays.")
    qs = pseudo_queries([twin, other], 10, seed=0)
    assert sorted(q.text for q in qs) == ["ghent: Closed on Mondays and Sundays.", "ghent: Kilns fire on Thursdays and Fridays."]


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


def test_a_positive_whose_sentence_lies_past_the_models_tokens_is_left_out():
    """Words stand for tokens here. The pair is [CLS] query [SEP] passage [SEP]: a query of 3 words
    at max length 12 leaves 6 for the passage."""
    folded = {"a": fold("one two three four five six seven eight"), "b": fold("the sentence is here. more words"),
              "c": fold("x y z")}

    def words(text):
        return len(text.split())

    def q(positives, span="the sentence is here.", cloze=None):
        return TrainQuestion("what is here", positives, fold(span), "pseudo:a", "pseudo", cloze)

    # in b the span ends at word 4 (<= 6): seen; in a it is not held whole: kept, unjudged
    assert in_view(q(("a", "b")), folded, words, 12).positives == ("a", "b")
    late = {"d": fold("w1 w2 w3 the sentence is here."), **folded}  # ends at word 7 > 6
    both = q(("d", "b"))
    assert in_view(both, late, words, 12).positives == ("b",)
    assert both.positives == ("d", "b")  # a copy is cut, not the question given
    assert in_view(q(("d",)), late, words, 12) is None
    assert in_view(q(("d",)), late, words, 13).positives == ("d",)  # one token more: it fits
    assert in_view(q(("d",), cloze="w1 w2 w3"), late, words, 12).positives == ("d",)  # an inverse cloze: as it is
    # document-level gold (the span is the whole passage, 8 words > 6): relevant as a whole, kept
    whole = q(("a",), span="one two three four five six seven eight")
    assert in_view(whole, folded, words, 12).positives == ("a",)
    assert in_view(q(("d",), span="w1 w2 w3 the sentence is here."), late, words, 12).positives == ("d",)


def test_mine_negatives_alternates_lists_and_skips_chunks_holding_the_span():
    passages = {p.id: p for p in [KILN, GHENT, COPY]} | {"d": Passage(id="d", source="x.md", text="Kilns need a vent."),
                                                          "e": Passage(id="e", source="y.md", text="Glazes and clays.")}
    folded = {k: fold(p.text) for k, p in passages.items()}
    q = TrainQuestion("Who runs the Ghent workshop?", ("b",), fold("Odile Ferrand runs it with her brother."),
                      "eval.jsonl:1", "generated")
    # dense: b (positive), c (holds the span: not wrong), d; BM25: e, a, d (again), zz (not a passage)
    assert mine_negatives(q, ["b", "c", "d"], ["e", "a", "d", "zz"], passages, folded, cap=5) == ["e", "a", "d"]
    assert mine_negatives(q, ["b", "c", "d"], ["e", "a", "d"], passages, folded, cap=2) == ["e", "a"]
    # a pseudo-query names its document: the same line in another document is a negative, in its own
    # document (an overlapping chunk) it is not
    twin = Passage(id="f", source="company/ghent.md", text="Odile Ferrand runs it with her brother. Closed on Mondays.")
    passages["f"], folded["f"] = twin, fold(twin.text)
    p = TrainQuestion("ghent: Odile Ferrand runs it with her brother.", ("b",),
                      fold("Odile Ferrand runs it with her brother."), "pseudo:b", "pseudo", source=GHENT.source)
    assert mine_negatives(p, ["b", "c", "f", "d"], [], passages, folded, cap=5) == ["c", "d"]


def test_overlaps_same_question_near_duplicate_and_same_span():
    train = [
        {"text": "Who runs the Ghent workshop?", "span": "", "origin": "gen.jsonl:4"},
        {"text": "How much does the Ember 90 kiln cost in euros?", "span": "", "origin": "gen.jsonl:9"},
        {"text": "The Ember 90 costs 8,400 euros.", "span": fold("The Ember 90 costs 8,400 euros."),
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
    assert fingerprint([q], [KILN, Passage(id="b", source=GHENT.source, text=GHENT.text + " Closed Mondays.")]) != base


def test_every_training_question_sharing_a_held_out_span_is_found_one_by_one():
    # two training questions share one eval row's span: overlaps() names the row once, so the
    # holdout filter asks for each training question alone (lab.tune.data.prepare)
    span = fold("The Ember 90 costs 8,400 euros.")
    train = [{"text": "ember: The Ember 90 costs 8,400 euros.", "span": span, "origin": "pseudo:a"},
             {"text": "Ember 90 price list for 2024 models", "span": span, "origin": "pseudo:c"}]
    held = [(7, "How much is the Ember 90?", ["The Ember 90 costs 8,400 euros."])]
    assert len(overlaps(train, held)) == 1
    assert [t["origin"] for t in train if overlaps([t], held)] == ["pseudo:a", "pseudo:c"]


def test_the_weight_picked_is_the_best_and_the_smaller_of_a_tie():
    fusion = {"0.25": 0.4167, "0.5": 0.4167, "1": 0.75, "2": 0.75}
    assert pick_fusion(0.4167, fusion) == 1.0  # the smaller of the two best
    assert pick_fusion(0.75, fusion) is None  # the model alone does as well


def test_dev_questions_become_eval_rows_with_located_spans():
    docs = {"ghent.md": "# Ghent\n\nOdile  Ferrand runs it with her \u201cbrother\u201d.\n", "b.md": "Other."}
    pseudo = TrainQuestion("Ghent: Odile Ferrand runs it with her \"brother\".", ("c1",),
                           fold("Odile Ferrand runs it with her \"brother\"."), "pseudo:c1", "pseudo", source="ghent.md")
    generated = TrainQuestion("What is other?", ("c2",), fold("Other."), "x.jsonl:3", "generated",
                              places=(("b.md", 0, 6),))
    lost = TrainQuestion("Gone?", ("c3",), fold("Not in any document."), "pseudo:c3", "pseudo", source="ghent.md")
    rows, missing = dev_rows([pseudo, generated, lost], docs)  # no category given: "dev"
    assert missing == 1
    assert rows[0]["references"] == [{"source": "ghent.md", "content": "Odile  Ferrand runs it with her \u201cbrother\u201d.",
                                      "start_index": 9, "end_index": 51}]  # 9 + 42 characters
    assert rows[0]["reference_answer"] == rows[0]["references"][0]["content"]
    assert rows[1]["references"] == [{"source": "b.md", "content": "Other.", "start_index": 0, "end_index": 6}]
    assert [r["id"] for r in rows] == ["dev-0001", "dev-0002"] and {r["category"] for r in rows} == {"dev"}


def test_a_first_stage_line_says_when_the_first_stage_alone_does_better():
    from lab.tune.dev import first_stage_text

    stage = {"retriever": "hybrid", "top_k": 20, "n": 98, "left_out": 2, "mrr_first_stage": 0.9567,
             "mrr_after": 0.7946, "fusion": {"0.25": 0.886, "0.5": 0.9148, "1": 0.9426, "2": 0.9475},
             "first_stage_weight": 2.0}
    assert first_stage_text("h", stage) == (
        "h's first stage (hybrid top 20; 98 dev questions, 2 left out: span in no document): first stage 0.9567, "
        "tuned alone 0.7946, fused w 0.25: 0.8860, w 0.5: 0.9148, w 1: 0.9426, w 2: 0.9475; best w 2; the first "
        "stage alone does better still")
    stage.update(mrr_first_stage=0.8642, left_out=0)
    assert first_stage_text("h", stage).endswith("98 dev questions): first stage 0.8642, tuned alone 0.7946, fused "
                                                 "w 0.25: 0.8860, w 0.5: 0.9148, w 1: 0.9426, w 2: 0.9475; best w 2")
