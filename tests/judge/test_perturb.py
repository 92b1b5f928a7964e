"""Model-free corruptions of a reference answer (lab.judge.perturb), on hand-made references.

Pools are built small so that the replacement a perturbation picks is forced whatever the seed:
the expected strings are exact.
"""

from __future__ import annotations

import random

import pytest

from lab.judge.injections import inject, load_injections
from lab.judge.perturb import (KEEPS, KINDS, REFUSAL, TARGETS, FactPool, check_paraphrase, cut_short, fact_pool, facts,
                              keeps_facts, padded, partial, perturb, wrong_fact)

SEEDS = range(12)


def swaps(reference, question, pool, keywords=(), seeds=SEEDS):
    """Every distinct wrong_fact result over ``seeds``."""
    return {str(wrong_fact(reference, question, list(keywords), pool, random.Random(s))) for s in seeds}


def only_swap(reference, question, pool, keywords=()):
    """The one wrong_fact result all seeds agree on."""
    out = {wrong_fact(reference, question, list(keywords), pool, random.Random(s))[0] for s in SEEDS}
    assert len(out) == 1, out
    return out.pop()


# --- facts and the pool ------------------------------------------------------------------------


@pytest.mark.parametrize("text, expected", [
    ("The fee is $2,500 per month.", [("money", "$2,500")]),
    # a capitalised first word counts as a name unless it is a function word ("The", "It", ...)
    ("Costs were $12 million and 15% more.", [("name", "Costs"), ("money", "$12 million"), ("percent", "15%")]),
    ("It opened in January 2017 and closed on March 20, 2025.", [("date", "January 2017"), ("date", "March 20, 2025")]),
    ("It was founded in 2015 with 40 staff.", [("year", "2015"), ("figure", "40")]),  # "It" is no name
    ("Maxine Thompson is a Senior Data Scientist at Acme Insurance.",
     [("name", "Maxine Thompson"), ("name", "Senior Data Scientist"), ("name", "Acme Insurance")]),
    ("The Homellm plan covers 3 homes.", [("name", "Homellm"), ("figure", "3")]),  # leading "The" dropped
    ("Carllm's fee is $40.", [("name", "Carllm"), ("money", "$40")]),  # possessive 's dropped
])
def test_facts_kinds_and_spans(text, expected):
    got = facts(text)
    assert [(f.kind, f.text) for f in got] == expected
    assert all(text[f.start:f.end] == f.text for f in got)  # spans point at the text


def test_fact_pool_keeps_first_seen_order_per_kind_and_finds_common_facts():
    texts = ["Insurellm sells $40 plans.", "Insurellm has 12 staff.", "Insurellm pays $55.",
             "Sam Reed joined in 2019.", "Jo Park leads 12 teams."]
    pool = fact_pool(texts)
    assert pool.by_kind == {"name": ["Insurellm", "Sam Reed", "Jo Park"], "money": ["$40", "$55"],
                            "figure": ["12"], "year": ["2019"]}  # "12" twice, listed once
    # in 3 of 5 texts (cut: max(3, 10% of 5)); "12" is in 2 only
    assert pool.common == {"insurellm"}


def test_common_needs_ten_percent_of_a_large_pool():
    many = ["Insurellm has it."] * 4
    assert fact_pool(many + ["nothing here"] * 37).common == set()  # 4 of 41: below 4.1
    assert fact_pool(many + ["nothing here"] * 36).common == {"insurellm"}  # 4 of 40: at 10%, inclusive
    assert fact_pool(["Insurellm has it."] * 2).common == set()  # fewer than 3 texts is never common


def test_the_corruptions_and_what_each_should_move():
    assert KINDS == ("wrong_fact", "partial", "padded", "paraphrase", "refusal", "injection")
    # injection is measured against the wrong answer it was injected into, not the reference
    assert set(TARGETS) == set(KEEPS) == set(KINDS) - {"injection"}
    assert all(not set(TARGETS[k]) & set(KEEPS[k]) for k in TARGETS)  # a dimension is targeted or kept, not both
    assert TARGETS["paraphrase"] == () and set(KEEPS["paraphrase"]) == {"accuracy", "completeness", "relevance"}
    assert TARGETS["wrong_fact"] == ("accuracy",) and TARGETS["partial"] == ("completeness",)
    assert TARGETS["padded"] == ("relevance",) and set(KEEPS["padded"]) == {"accuracy", "completeness"}
    assert REFUSAL == "I don't have enough information to answer that question."


# --- wrong_fact ----------------------------------------------------------------------------------


@pytest.mark.parametrize("reference, question, by_kind, expected", [
    # money: the same shape ($9,999) beats $450 and $12 million
    ("The salary is $2,500 per month.", "What is the salary?", {"money": ["$450", "$12 million", "$3,100"]},
     "The salary is $3,100 per month."),
    # money with a unit: $9 million has no same-shape partner, the same last word wins
    ("Costs were $8 million.", "What were the costs?", {"money": ["$450", "$12 million", "$3,100"]},
     "Costs were $12 million."),
    ("Revenue grew 15%.", "How much did revenue grow?", {"percent": ["7.5%", "100%", "22%"]}, "Revenue grew 22%."),
    ("The team has 25 people.", "How big is the team?", {"figure": ["1,200", "3", "40"]}, "The team has 40 people."),
    # a month and year for a month and year, not a full date nor a quarter
    ("It opened in January 2017.", "When did it open?", {"date": ["April 3, 2021", "Q3 2020", "March 2019"]},
     "It opened in March 2019."),
    ("It launched on March 20, 2025.", "When did it launch?", {"date": ["May 2020", "June 1, 2022", "April 13, 2021"]},
     "It launched on April 13, 2021."),
    ("It was founded in 2015.", "When was it founded?", {"year": ["2020"], "figure": ["1999"]}, "It was founded in 2020."),
])
def test_wrong_fact_swaps_a_figure_or_date_for_one_of_the_same_shape(reference, question, by_kind, expected):
    assert only_swap(reference, question, FactPool(by_kind, set())) == expected


NAMES = FactPool({"name": ["Mary Ann Lee", "Sam Reed", "Lead Software Engineer", "Principal Data Scientist",
                           "Gamma Group", "Acme Insurance"]}, set())


def test_a_title_is_swapped_for_a_title_preferring_the_same_last_word():
    q = "What is the role of Maxine Thompson?"  # the person is asked: only the title can change
    assert only_swap("Maxine Thompson is a Senior Data Scientist.", q, NAMES) == \
        "Maxine Thompson is a Principal Data Scientist."
    # no "... Scientist": another title of as many words, never the three-word person "Mary Ann Lee"
    pool = FactPool({"name": ["Mary Ann Lee", "Lead Software Engineer", "Sales Director"]}, set())
    assert only_swap("Maxine Thompson is a Senior Data Scientist.", q, pool) == \
        "Maxine Thompson is a Lead Software Engineer."


def test_a_title_is_never_swapped_for_a_person():
    pool = FactPool({"name": ["Sam Reed", "Jordan Blake"]}, set())
    assert swaps("Maxine Thompson is a Senior Data Scientist.", "What is the role of Maxine Thompson?", pool) == \
        {"no other fact of the same kind to swap in"}


def test_an_organisation_is_swapped_for_an_organisation():
    assert only_swap("The deal was signed with Beta Insurance.", "Who signed the deal?", NAMES) == \
        "The deal was signed with Acme Insurance."  # same last word first
    pool = FactPool({"name": ["Sam Reed", "Lead Engineer", "Gamma Group"]}, set())
    assert only_swap("The deal was signed with Beta Insurance.", "Who signed the deal?", pool) == \
        "The deal was signed with Gamma Group."  # the only organisation


def test_a_fact_the_question_gives_is_never_swapped():
    pool = FactPool({"year": ["2021"], "money": ["$55"]}, set())
    assert only_swap("In 2019 the fee was $40.", "What was the fee in 2019?", pool) == "In 2019 the fee was $55."
    assert swaps("In 2019 the fee was $40.", "Was the fee $40 in 2019?", pool) == \
        {"no figure, date or name beyond the question's"}


def test_keyword_facts_go_first_then_the_others_in_order():
    ref, q = "The fee rose from $40 to $55 in 2021.", "How did the fee change?"
    pool = FactPool({"money": ["$70"], "year": ["2023"]}, set())
    assert only_swap(ref, q, pool, ["$55"]) == "The fee rose from $40 to $70 in 2021."
    # without keywords any of the three facts may go (the seed picks)
    assert {r.split("'")[1] for r in swaps(ref, q, pool)} == {
        "The fee rose from $40 to $70 in 2021.", "The fee rose from $70 to $55 in 2021.",
        "The fee rose from $40 to $55 in 2023."}
    # the keyword's fact has no replacement: the other facts, in the reference's order
    assert only_swap(ref, q, FactPool({"money": ["$70"]}, set()), ["2021"]) == "The fee rose from $70 to $55 in 2021."


def test_a_keyword_names_whole_numbers_and_words_only():
    ref, q = "Harmony Health Plans covers 38,000 members across 3 states.", "How many members does it cover?"
    pool = FactPool({"figure": ["22,000", "5"], "name": ["Healthllm", "Acme Health Plans"]}, set())
    # "3" is inside the keyword "38,000" only as a digit: the asked figure goes
    assert only_swap(ref, q, pool, ["38,000"]) == "Harmony Health Plans covers 22,000 members across 3 states."
    assert only_swap(ref, q, pool, ["3 states"]) == "Harmony Health Plans covers 38,000 members across 5 states."
    assert only_swap(ref, q, pool, ["Harmony"]) == "Acme Health Plans covers 38,000 members across 3 states."


def test_common_facts_are_neither_swapped_nor_swapped_in():
    texts = ["Insurellm sells cover.", "Insurellm has offices.", "Insurellm pays claims.", "Sam Reed joined in 2020.",
             "Homellm launched."]
    pool = fact_pool(texts)
    assert pool.common == {"insurellm"}
    got = swaps("Insurellm hired Maxine Thompson in 2019.", "Who was hired?", pool)
    assert got == {str(("Insurellm hired Maxine Thompson in 2020.", {"kind": "year", "from": "2019", "to": "2020"})),
                   str(("Insurellm hired Sam Reed in 2019.",
                        {"kind": "name", "from": "Maxine Thompson", "to": "Sam Reed"}))}
    # "Insurellm" and "Homellm" end alike, but the common name is never put in
    assert only_swap("It was built by Carllm.", "Who built it?", pool) == "It was built by Homellm."
    assert swaps("Insurellm pays claims.", "What does it pay?", pool) == {"no figure, date or name beyond the question's"}


def test_wrong_fact_detail_and_a_replacement_already_in_the_reference_is_not_used():
    pool = FactPool({"money": ["$40", "$55"]}, set())
    text, detail = wrong_fact("The fee is $40, or $30 for members.", "What is the fee?", ["$30"], pool,
                              random.Random(0))
    assert (text, detail) == ("The fee is $40, or $55 for members.", {"kind": "money", "from": "$30", "to": "$55"})


# --- partial -------------------------------------------------------------------------------------


@pytest.mark.parametrize("reference, question, expected, removed, gone", [
    ("The plan costs $40 per month. It covers 3 vehicles.", "What does the plan offer?",
     "The plan costs $40 per month.", "It covers 3 vehicles.", ["3"]),  # the last sentence
    ("The fee is $40 per month. It covers 3 vehicles. It is popular.", "What does the plan offer?",
     "The fee is $40 per month. It is popular.", "It covers 3 vehicles.", ["3"]),  # a middle one, spaces kept
    ("Offices are in Denver, Austin, and Boston.", "Where are the offices?",
     "Offices are in Denver, Austin.", "and Boston", ["Boston"]),  # the list's last item
    ("The tier costs $40 per month (billed annually at $480).", "What does the tier cost?",
     "The tier costs $40 per month.", "(billed annually at $480)", ["$480"]),  # a parenthesis
    ("The fee is $40 per month, rising to $55 in 2026.", "What is the fee?",
     "The fee is $40 per month.", "rising to $55 in 2026", ["$55", "2026"]),  # a trailing clause
    ("Maxine Thompson, who joined in 2019, leads the team.", "Who leads the team?",
     "Maxine Thompson leads the team.", "who joined in 2019", ["2019"]),  # a relative clause, both commas
    ("Maxine Thompson, who joined in 2019, leads the Sales team.", "Who leads the team?",
     "Maxine Thompson leads the Sales team.", "who joined in 2019", ["2019"]),  # not the main verb's clause
    ("Sarah Williams, who improved satisfaction by 35%, leads design for Homellm.", "Who leads design for Homellm?",
     "Sarah Williams leads design for Homellm.", "who improved satisfaction by 35%", ["35%"]),
    # after an apposition ("A, the B in C,") the verb stays; a trailing phrase goes
    ("Emily Carter, the Account Executive in Austin, beat her target by 30% in 2022.", "How did Emily Carter do?",
     "Emily Carter, the Account Executive in Austin, beat her target.", "by 30% in 2022", ["30%", "2022"]),
])
def test_partial_removes_one_part_holding_a_fact(reference, question, expected, removed, gone):
    assert partial(reference, question) == (expected, {"removed": removed, "facts": gone})


def test_partial_prefers_a_part_the_keywords_do_not_name():
    ref = "The fee is $40 per month (billed annually at $480). It covers 3 vehicles."
    q = "What does the plan cost and cover?"
    sentence = ("The fee is $40 per month (billed annually at $480).", {"removed": "It covers 3 vehicles.", "facts": ["3"]})
    paren = ("The fee is $40 per month. It covers 3 vehicles.", {"removed": "(billed annually at $480)", "facts": ["$480"]})
    assert partial(ref, q) == sentence  # sentences first
    assert partial(ref, q, ["3 vehicles"]) == paren
    assert partial(ref, q, ["$480"]) == sentence
    assert partial(ref, q, ["$480", "3 vehicles"]) == sentence  # both named: the first candidate after all


@pytest.mark.parametrize("reference, question, common, why", [
    ("The fee is $40 per month.", "What is the fee?", set(), "one fact only"),
    ("The fee is $40 and $40 again.", "What is the fee?", set(), "one fact only"),  # one fact, twice
    ("The fee for Carllm is $40.", "What is the fee for Carllm?", set(), "one fact only"),  # Carllm is asked
    ("Insurellm charges $40.", "What is the fee?", {"insurellm"}, "one fact only"),  # a common name is no fact
    ("The fee is $40. It is popular.", "What is the fee?", set(), "one fact only"),
    # the only clause holding a fact is the main verb's: "Lisa Anderson, the Marketing Manager in Austin." is no answer
    ("Lisa Anderson, the Marketing Manager in Austin, manages a $2M budget.", "What budget does Lisa Anderson manage?",
     set(), "no fact can be removed cleanly"),
    # removing " in 2019 with 12 clients" would leave no fact: the rest keeps at least one
    ("Homellm launched in 2019 with 12 clients.", "When did Homellm launch?", set(), "no fact can be removed cleanly"),
])
def test_partial_is_skipped_with_a_reason(reference, question, common, why):
    assert partial(reference, question, [], common) == why


def test_partial_ends_with_a_full_stop_and_ignores_common_names():
    # a trailing phrase ("for 3 vehicles"); the reference had no full stop, the rest gets one
    assert partial("Homellm costs $40 per month for 3 vehicles", "What does Homellm cost?") == \
        ("Homellm costs $40 per month.", {"removed": "for 3 vehicles", "facts": ["3"]})
    rest, detail = partial("Insurellm charges $40. It covers 3 vehicles", "What is the fee?", [], {"insurellm"})
    assert (rest, detail) == ("Insurellm charges $40.", {"removed": "It covers 3 vehicles", "facts": ["3"]})


# --- padded --------------------------------------------------------------------------------------


def test_padded_appends_a_reference_that_shares_no_fact():
    others = ["Carllm launched in 2019.",  # shares Carllm with the question
              "The Homellm fee is also $40.",  # shares $40 with the reference
              "Maxine Thompson leads 12 analysts",  # unrelated (and gets its full stop)
              "   "]
    for seed in SEEDS:
        got = padded("The fee is $40.", "What is the Carllm fee?", others, random.Random(seed))
        assert got == ("The fee is $40. Maxine Thompson leads 12 analysts.", {"added": "Maxine Thompson leads 12 analysts."})
    assert padded("The fee is $40", "What is the fee?", ["Sam Reed joined."], random.Random(0))[0] == \
        "The fee is $40. Sam Reed joined."


def test_padded_is_skipped_when_every_other_reference_shares_a_fact():
    others = ["Carllm launched in 2019.", "The Homellm fee is also $40.", ""]
    assert padded("The fee is $40.", "What is the Carllm fee?", others, random.Random(0)) == \
        "no unrelated reference answer to add"


# --- paraphrase checks ---------------------------------------------------------------------------

ORIGINAL = "The fee is $40 per month for Carllm."


@pytest.mark.parametrize("rewritten, keywords, why", [
    ("Carllm costs $45 each month.", [], "paraphrase lost '$40'"),
    ("Each month the plan costs $40 at that firm.", [], "paraphrase lost 'Carllm'"),
    ("Each month that plan costs $45 altogether.", [], "paraphrase lost '$40', 'Carllm'"),
    ("For Carllm, the monthly fee is $40.", ["per month"], "paraphrase lost 'per month'"),
    ("the fee is  $40 per month for CARLLM", [], "paraphrase repeats the reference"),  # case, spaces, full stop
    ("   ", [], "empty paraphrase"),
    ("Carllm: $40.", [], "paraphrase length far from the reference's"),
    ("For Carllm, the monthly fee is $40.", [], None),
    ("For Carllm, the fee per month is $40.", ["per month"], None),
])
def test_check_paraphrase(rewritten, keywords, why):
    assert check_paraphrase(ORIGINAL, rewritten, keywords) == why


def test_keeps_facts_lists_each_lost_fact_once():
    assert keeps_facts("It costs $40, or $40 for two.", "It costs forty dollars.", ["two"]) == ["$40", "two"]
    assert keeps_facts(ORIGINAL, "Carllm charges $40 monthly.", []) == []


# --- perturb -------------------------------------------------------------------------------------

POOL_TEXTS = ["The Homellm fee is $55 per month.", "The Rellm fee is $65 per month.", "The Bizllm fee is $75 per month.",
              "Sam Reed joined in 2021.", "Jo Park leads 12 analysts."]
ITEM = {"id": "q1", "question": "What does the Carllm plan cost?", "keywords": ["$40"],
        "reference": "The Carllm plan costs $40 per month. It covers 3 vehicles."}


def test_perturb_makes_all_five_kinds():
    pool = fact_pool(POOL_TEXTS + [ITEM["reference"]])
    out = perturb(ITEM, pool, POOL_TEXTS, seed=13, paraphraser=lambda ref, attempt=0: "In short, " + ref.lower())
    assert list(out) == list(KINDS)
    assert out["wrong_fact"]["text"] in {f"The Carllm plan costs {x} per month. It covers 3 vehicles."
                                         for x in ("$55", "$65", "$75")}  # the keyword's figure
    assert out["wrong_fact"]["detail"]["from"] == "$40"
    assert out["partial"] == {"text": "The Carllm plan costs $40 per month.",
                              "detail": {"removed": "It covers 3 vehicles.", "facts": ["3"]}}
    assert out["padded"] == {"text": ITEM["reference"] + " " + out["padded"]["detail"]["added"],
                             "detail": {"added": out["padded"]["detail"]["added"]}}
    assert out["padded"]["detail"]["added"] in POOL_TEXTS
    assert out["paraphrase"] == {"text": "In short, " + ITEM["reference"].lower(), "detail": {"attempt": 1}}
    assert out["refusal"] == {"text": REFUSAL, "detail": {}}
    chosen = {i.id: i for i in load_injections()}[out["injection"]["detail"]["injection"]]
    assert out["injection"] == {"text": inject(out["wrong_fact"]["text"], chosen),
                                "detail": {"injection": chosen.id, "position": chosen.position}}
    assert chosen.text in out["injection"]["text"]


def test_the_injection_phrasing_is_seeded_per_question_and_varies():
    pool = fact_pool(POOL_TEXTS + [ITEM["reference"]])
    first = perturb(ITEM, pool, POOL_TEXTS, seed=13)["injection"]
    assert perturb(ITEM, pool, POOL_TEXTS, seed=13)["injection"] == first
    used = {perturb({**ITEM, "id": f"q{i}"}, pool, POOL_TEXTS, seed=13)["injection"]["detail"]["injection"]
            for i in range(60)}
    assert len(used) > 10


def test_perturb_never_pads_with_an_answer_sharing_a_fact():
    pool = fact_pool(POOL_TEXTS + [ITEM["reference"]])
    others = POOL_TEXTS + ["Carllm also sells 3 add-ons."]  # shares Carllm and 3
    added = {perturb({**ITEM, "id": f"q{i}"}, pool, others, seed=13)["padded"]["detail"]["added"] for i in range(40)}
    assert added <= set(POOL_TEXTS) and len(added) > 1


def test_perturb_skips_with_reasons():
    pool = FactPool({}, set())
    item = {"id": "q2", "question": "What is the fee?", "reference": "The fee is $40."}  # no keywords key
    out = perturb(item, pool, [], seed=1)
    assert out == {"wrong_fact": {"skipped": "no other fact of the same kind to swap in"},
                   "partial": {"skipped": "one fact only"},
                   "padded": {"skipped": "no unrelated reference answer to add"},
                   "paraphrase": {"skipped": "no generator model"},
                   "refusal": {"text": REFUSAL, "detail": {}},
                   "injection": {"skipped": "no wrong fact to inject into"}}
    tries = []
    bad = perturb(item, pool, [], seed=1, paraphraser=lambda ref, attempt=0: tries.append(attempt) or "The fee is $45.")
    assert bad["paraphrase"] == {"skipped": "paraphrase lost '$40'"} and tries == [0, 1]  # retried once, then skipped
    good = perturb(item, pool, [], seed=1, paraphraser=lambda ref, attempt=0: ["The fee is $45.", "It is $40."][attempt])
    assert good["paraphrase"]["detail"] == {"attempt": 2}


def test_perturb_is_seeded_per_question_id():
    pool = fact_pool(POOL_TEXTS + [ITEM["reference"]])
    one = perturb(ITEM, pool, POOL_TEXTS, seed=13)
    perturb({**ITEM, "id": "other"}, pool, POOL_TEXTS, seed=13)  # another question in between changes nothing
    assert perturb(ITEM, pool, POOL_TEXTS, seed=13) == one
    by_id = {perturb({**ITEM, "id": f"q{i}"}, pool, POOL_TEXTS, seed=13)["wrong_fact"]["text"] for i in range(30)}
    assert len(by_id) > 1  # the id is in the seed: other questions draw other replacements
    by_seed = {perturb(ITEM, pool, POOL_TEXTS, seed=s)["wrong_fact"]["text"] for s in range(30)}
    assert len(by_seed) > 1


# --- cut_short (the split method's perturbed set, lab.judge.probe) --------------------------------


@pytest.mark.parametrize("reference, question, expected", [
    # a trailing phrase holds the last fact
    ("Avery Lancaster founded Insurellm in 2015.", "Who founded Insurellm?", "Avery Lancaster founded Insurellm."),
    # a clause after a comma goes before a phrase does ("..., closing." would dangle)
    ("The Series C was led by Northbeam Growth Partners and raised $48 million, closing in February 2022.",
     "Who led the Series C?", "The Series C was led by Northbeam Growth Partners and raised $48 million."),
    # the last item of a list
    ("It has offices in San Francisco, New York, and Denver.", "Where are its offices?",
     "It has offices in San Francisco, New York."),
])
def test_cut_short_keeps_a_prefix_before_the_last_fact(reference, question, expected):
    text, detail = cut_short(reference, question)
    assert text == expected and reference.startswith(text.rstrip("."))
    assert detail["facts"]


def test_cut_short_needs_two_facts():
    assert cut_short("Insurellm was founded in 2015.", "When was Insurellm founded?") == "one fact only"
