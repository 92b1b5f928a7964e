"""The loss funnel's verdicts on hand-made records: each stage, spans and keywords, two spans with
one lost, old runs without the record, and two runs' movers with their paired tests."""

import pytest

from lab.evidence.states import states_text, unsupported_terms
from lab.metrics.funnel import (MAX_UNSUPPORTED, KEPT, RETRIEVAL, RETRIEVAL_STAGES, answer_loss, finish, lost_at_by_id,
                                movers, piece_loss, question_funnel, summarise, utilisation)
from lab.report.funnel import pair, stage_tests

ALL_SEEN = [*RETRIEVAL_STAGES, "budget", "generation", "judge"]


def test_each_piece_is_lost_at_the_first_stage_that_misses_it():
    assert piece_loss(False, None, None, None, None, True) == "kb"
    assert piece_loss(True, None, None, None, None, True) == "chunking"
    assert piece_loss(True, "c1", None, None, None, True) == "first_stage"
    assert piece_loss(True, "c1", 7, None, None, True) == "second_stage"
    assert piece_loss(True, "c1", 7, 2, None, True) == "budget"
    assert piece_loss(True, "c1", 7, 2, None, False) is None  # no context built: the final list is the last stage
    assert piece_loss(True, "c1", 7, 2, 1, True) is None


@pytest.mark.parametrize("stated, accuracy, verdict", [
    (1.0, 5, None), (1.0, 3, None), (1.0, 2, "judge"), (1.0, 1.4, "judge"),  # states it all, graded wrong
    (0.0, 4, "judge"), (0.0, 4.6, "judge"), (0.0, 3.9, "generation"), (0.0, None, "generation"),
    (0.5, 5, "generation"), (0.5, 1, "generation"), (1.0, None, None), (None, 5, None)])
def test_the_answer_side(stated, accuracy, verdict):
    assert answer_loss(stated, accuracy) == verdict


def keyword_item(kw, lost=None, sent=1):
    return {"kind": "keyword", "keyword": kw, "chunk": "c", "candidate_rank": 1, "rank": 1, "lost_at": lost,
            "sent": None if lost else sent}


def sample(qid, items, answer=None, accuracy=None, keywords=None, category="c", seen=ALL_SEEN):
    s = {"id": qid, "category": category, "keywords": keywords if keywords is not None else
         [i["keyword"] for i in items if i["kind"] == "keyword"],
         "funnel": {"lost_at": None, "seen": list(seen), "items": items},
         "context": {"text": "[1] (source: a.md)\nOdile Ferrand founded it in 2009.", "passages": [{"id": "c"}]}}
    if answer is not None:
        s["answer"] = {"status": "ok", "text": answer, "refused": False}
    if accuracy is not None:
        s["judgement"] = {"status": "ok", "accuracy": accuracy}
    s["funnel"] = finish(s["funnel"], s)
    return s


def hand_made_run():
    """A question lost at each stage, and one kept."""
    return [
        sample("kb", [keyword_item("Zorblat", "kb")], "no idea", 1),
        sample("chunking", [keyword_item("Odile Ferrand", "chunking")], "Odile Ferrand", 5),
        sample("first", [keyword_item("2009", "first_stage"), keyword_item("Odile Ferrand")], "It was 2009", 5),
        sample("second", [keyword_item("2009", "second_stage")], "2009", 5),
        sample("budget", [keyword_item("2009", "budget")], "2009", 5),
        sample("generation", [keyword_item("2009"), keyword_item("Odile Ferrand")], "Founded in 2009.", 3),
        sample("judge-wrong", [keyword_item("2009")], "In 2009.", 1),
        sample("judge-right", [keyword_item("2009")], "Some time ago.", 5),
        sample("kept", [keyword_item("2009"), keyword_item("Odile Ferrand")], "Odile Ferrand, in 2009.", 5),
    ]


def test_a_question_lost_at_each_stage_and_one_kept():
    run = hand_made_run()
    assert {s["id"]: s["funnel"]["lost_at"] for s in run} == {
        "kb": "kb", "chunking": "chunking", "first": "first_stage", "second": "second_stage", "budget": "budget",
        "generation": "generation", "judge-wrong": "judge", "judge-right": "judge", "kept": KEPT}
    assert run[5]["funnel"]["stated"] == 0.5 and [i["stated"] for i in run[5]["funnel"]["items"]] == [True, False]
    assert run[-1]["funnel"]["accuracy"] == 5 and run[-1]["funnel"]["answer_excerpt"] == "Odile Ferrand, in 2009."
    f = summarise(run)
    assert f["stages"] == ALL_SEEN and f["n"] == 9 and f["n_without_gold"] == 0
    assert f["overall"]["lost"] == {"kb": 1, "chunking": 1, "first_stage": 1, "second_stage": 1, "budget": 1,
                                    "generation": 1, "judge": 2}
    assert f["overall"]["kept"] == 1
    # answers stating every gold keyword: judge-wrong (1), kept (5), second..budget? no: lost before the answer
    # still count as stating it (2009 in "2009"): second (5), budget (5), chunking (5): graded wrong once
    assert f["judge_vs_evidence"] == {"n_states_all": 5, "states_all_graded_wrong": 1,
                                      "n_states_none": 2, "states_none_graded_right": 1}


def test_spans_are_followed_by_offsets_and_keywords_only_where_a_row_has_no_span():
    span = {"kind": "span", "source": "a.md", "start": 0, "end": 30, "text": "Odile Ferrand founded the kilns",
            "chunk": "c", "candidate_rank": 1, "rank": 1, "lost_at": None, "sent": 1}
    s = sample("s", [span], "The kilns were founded by Odile Ferrand.", 4, keywords=[])
    assert s["funnel"]["lost_at"] == KEPT and s["funnel"]["items"][0]["stated"] is True  # states_text fallback
    s = sample("s2", [dict(span)], "Nobody knows.", 2, keywords=[])
    assert s["funnel"]["lost_at"] == "generation"
    # a row with spans and keywords: the spans decide retrieval, the keywords the answer
    s = sample("s3", [dict(span)], "Founded in 2009.", 5, keywords=["2009"])
    assert s["funnel"]["lost_at"] == KEPT and s["funnel"]["stated"] == 1.0


def test_two_spans_one_lost_loses_the_question_there_and_keeps_the_other():
    a = {"kind": "span", "source": "a.md", "start": 0, "end": 10, "chunk": "c", "candidate_rank": 2, "rank": 1,
         "lost_at": None, "sent": 1}
    b = {"kind": "span", "source": "b.md", "start": 5, "end": 50, "chunk": None, "candidate_rank": None, "rank": None,
         "lost_at": "chunking"}
    s = sample("two", [a, b], "2009", 5, keywords=["2009"])
    assert s["funnel"]["lost_at"] == "chunking"
    assert [i["lost_at"] for i in s["funnel"]["items"]] == [None, "chunking"]


def test_a_retrieval_only_run_stops_at_the_final_list():
    s = sample("r", [keyword_item("2009")], seen=list(RETRIEVAL_STAGES))
    assert s["funnel"]["lost_at"] == KEPT and "stated" not in s["funnel"]
    assert summarise([s])["stages"] == list(RETRIEVAL_STAGES)


def test_old_runs_are_derived_from_their_files_and_say_what_they_cannot_see():
    old = [
        {"id": "a", "category": "c", "keywords": ["2009", "Ghent"], "keyword_ranks": {"2009": 1, "Ghent": None}},
        {"id": "b", "category": "c", "keywords": ["2009"], "keyword_ranks": {"2009": 2},
         "retrieved": [{"rank": 1, "id": "x"}, {"rank": 2, "id": "y"}],
         "context": {"text": "[1] (source: s)\nnothing here", "passages": [{"id": "x"}]},
         "answer": {"status": "ok", "text": "no", "refused": True}},
        {"id": "c", "category": "c", "keywords": ["2009"], "keyword_ranks": {"2009": 1},
         "context": {"text": "[1] (source: s)\nin 2009", "passages": [{"id": "x"}]},
         "answer": {"status": "ok", "text": "In 2009.", "refused": False},
         "judgement": {"status": "ok", "accuracy": 4.5}},
        {"id": "d", "category": "c", "keywords": [], "keyword_ranks": {}},  # no gold evidence
        {"id": "e", "category": "c", "keywords": ["x"], "references": [{"source": "a.md", "start": 0, "end": 5,
                                                                         "rank": None}]},
    ]
    verdicts = {s["id"]: (question_funnel(s) or {}).get("lost_at") for s in old}
    assert verdicts == {"a": RETRIEVAL, "b": "budget", "c": KEPT, "d": None, "e": RETRIEVAL}
    f = summarise(old)
    assert f["derived"] and f["stages"] == [RETRIEVAL, "budget", "generation", "judge"]
    assert f["n"] == 4 and f["n_without_gold"] == 1


def test_movers_and_the_paired_stage_tests_of_two_hand_made_runs():
    a = {f"q{i}": "first_stage" for i in range(12)} | {"k1": KEPT, "k2": "generation"}
    b = {f"q{i}": KEPT for i in range(10)} | {"q10": "first_stage", "q11": "budget", "k1": "judge", "k2": "generation"}
    moved = movers(a, b)
    assert set(moved) == {"first_stage", "judge"}
    assert len(moved["first_stage"]["recovered"]) == 11 and moved["first_stage"]["newly_lost"] == []
    assert moved["judge"] == {"recovered": [], "newly_lost": ["k1"]}
    tests = stage_tests(a, b, ["first_stage", "judge"])
    first, judge = tests
    assert first["n"] == 14 and first["a"] == pytest.approx(2 / 14) and first["b"] == pytest.approx(13 / 14)
    assert first["delta"] == pytest.approx(11 / 14) and first["wins"] == 11 and first["losses"] == 0
    assert first["p"] == pytest.approx(2 / 2 ** 11)  # exact permutation: 11 non-zero equal deltas, two-sided
    assert first["p_adj"] == pytest.approx(min(1.0, 2 * first["p"])) and first["verdict"] == "more get past it"
    # past the judge is cumulative: A 1 of 14 (k1), B 10 of 14; 10 wins, 1 loss (k1)
    assert judge["delta"] == pytest.approx(9 / 14) and (judge["wins"], judge["losses"]) == (10, 1)
    assert judge["p"] == pytest.approx(24 / 2 ** 11)  # sign patterns of 11 unit deltas with |sum| >= 9
    assert judge["p_adj"] == pytest.approx(24 / 2 ** 11)  # Holm: the larger p keeps its own (x1)
    assert judge["verdict"] == "more get past it"


def test_pair_compares_only_the_stages_both_runs_see():
    retrieval_only = [sample("x", [keyword_item("2009")], seen=list(RETRIEVAL_STAGES))]
    answered = [sample("x", [keyword_item("2009")], "no", 2)]
    p = pair("r", retrieval_only, "a", answered)
    assert p["movers"] == {} and p["summary"] == "r -> a: no question moved"  # generation is past r's horizon
    assert lost_at_by_id(answered) == {"x": "generation"}


def test_answer_diagnostics():
    sent = "[1] (source: a.md)\nThe Ember 90 costs 8,400 euros. Odile Ferrand founded Brightwater Kilns."
    assert unsupported_terms("The Ember 90 costs 8400 euros [1], says Marco Feltri.", sent, MAX_UNSUPPORTED) == ["Marco Feltri"]
    assert unsupported_terms("It costs 9,100 euros.", sent, MAX_UNSUPPORTED) == ["9,100"]
    assert utilisation("Odile Ferrand did.", ["Odile Ferrand", "8,400", "Ghent"], sent) == 0.5  # Ghent was not sent
    assert utilisation("x", ["Ghent"], sent) is None
    assert states_text("The kilns opened in Ghent in 2014.", "opened its Ghent workshop in 2014")
    assert not states_text("It is a kiln maker.", "opened its Ghent workshop in 2014")


def test_the_claims_judges_facts_decide_the_answer_side_instead_of_keywords():
    s = {"id": "c", "category": "c", "keywords": ["2009"],
         "funnel": {"lost_at": None, "seen": list(ALL_SEEN), "items": [keyword_item("2009")]},
         "context": {"text": "in 2009", "passages": [{"id": "c"}]},
         "answer": {"status": "ok", "text": "Founded in 2009.", "refused": False},
         "judgement": {"status": "ok", "accuracy": 2.1, "claims": [{"fact": "Founded in 2009.", "stated": 0.9},
                                                                    {"fact": "By Odile Ferrand.", "stated": 0.2}]}}
    s["funnel"] = finish(s["funnel"], s)
    f = s["funnel"]
    assert (f["stated_by"], f["stated"], f["lost_at"]) == ("claims", 0.5, "generation")  # keywords alone: kept
    assert f["claims"] == [{"fact": "Founded in 2009.", "stated": 0.9}, {"fact": "By Odile Ferrand.", "stated": 0.2}]
