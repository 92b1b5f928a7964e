"""The figures, dates and names an answer states of its reference, and those it states instead
(lab.evidence.facts): hand-made answers, each finding written out."""

from __future__ import annotations

import pytest

from lab.evidence.facts import Fact, compare, joined_facts, numbers, open_facts, refuses, states_fact

QUESTION = "How many active contracts does Insurellm manage?"
REFERENCE = "Insurellm manages 32 active contracts spanning all eight product lines, worth $2.5 million."


@pytest.mark.parametrize("text, values", [
    ("$2,500 a month", [2500.0]),
    ("$1.2 million, or 1,200,000 dollars", [1_200_000.0, 1_200_000.0]),
    ("12M and 3k", [12e6, 3e3]),
    ("See [2] and [1, 3]: 40 staff.", [40.0]),  # citations are no figures
    ("1. First item\n2. Second item", []),  # nor are list markers
])
def test_numbers_by_value(text, values):
    assert numbers(text) == pytest.approx(values)


@pytest.mark.parametrize("text, fact, stated", [
    ("It has 2500 customers.", Fact("money", "$2,500", 0, 6), True),  # by value, however written
    ("It costs $2,050.", Fact("money", "$2,500", 0, 6), False),
    ("In March of 2020 it opened.", Fact("date", "March 2020", 0, 10), True),  # each word of the date
    ("In May 2020 it opened.", Fact("date", "March 2020", 0, 10), False),
    ("Lancaster, Avery founded it.", Fact("name", "Avery Lancaster", 0, 15), True),  # every word, any order
    ("Healthllm covers it.", Fact("name", "Health", 0, 6), False),  # a word, not a piece of one
    ("It operates in the US.", Fact("name", "US", 0, 2), True),  # a name of function words only is itself
    ("Maxine won the IIOTY award.", Fact("name", "Insurellm Innovator of the Year (IIOTY)", 0, 39), True),
])
def test_states_fact(text, fact, stated):
    assert states_fact(text, fact) is stated


def test_names_joined_across_of_the_and_their_short_form():
    text = "Maxine Thompson won the Insurellm Innovator of the Year (IIOTY) award."
    assert [f.text for f in joined_facts(text)] == ["Maxine Thompson", "Insurellm Innovator of the Year (IIOTY)"]


def test_open_facts_leave_out_what_the_question_gives():
    # "Insurellm" is in the question; "eight", a word, is no figure
    assert [f.text for f in open_facts(REFERENCE, QUESTION)] == ["32", "$2.5 million"]


@pytest.mark.parametrize("answer, stated, conflicts, extra", [
    # the reference itself: every fact stated, nothing else
    (REFERENCE, [True, True], [], []),
    # cut short: the first fact only, nothing wrong
    ("Insurellm manages 32 active contracts.", [True, False], [], []),
    # a wrong figure where the reference has another: a conflict with the figure it stands in for
    ("Insurellm manages 40 active contracts.", [False, False], [("40", "32")], []),
    # the reference plus a true fact of another kind nothing conflicts with: extra, not wrong
    (REFERENCE + " Its CEO is Avery Lancaster.", [True, True], [], ["CEO", "Avery Lancaster"]),
    # an opener is no name; a citation no figure
    ("Currently, Insurellm manages 32 active contracts [3].", [True, False], [], []),
])
def test_compare(answer, stated, conflicts, extra):
    c = compare(answer, REFERENCE, QUESTION)
    assert [f.text for f in c.reference] == ["32", "$2.5 million"]
    assert list(c.stated) == stated
    assert [(a.text, r.text) for a, r in c.conflicts] == conflicts
    assert [f.text for f in c.extra] == extra
    assert c.refusal is False


def test_a_fact_the_context_holds_is_no_conflict():
    answer = "Insurellm manages 40 active contracts."
    assert compare(answer, REFERENCE, QUESTION).conflicts
    held = compare(answer, REFERENCE, QUESTION, context="[1] (source: a.md)\nIn 2024 it managed 40 active contracts.")
    assert not held.conflicts and [f.text for f in held.held][-1] == "40"


def test_a_refusal_states_none_of_the_reference():
    c = compare("I don't have enough information to answer that question.", REFERENCE, QUESTION)
    assert c.refusal and c.stated_share == 0.0
    # declining part of it while stating a fact is no refusal
    assert not compare("It manages 32 contracts; I cannot tell their value.", REFERENCE, QUESTION).refusal


@pytest.mark.parametrize("text, says", [
    ("I don't have enough information to answer that.", True),
    ("The context does not provide any information about it.", True),
    ("The price is not mentioned in the provided context.", True),
    ("I cannot answer this question.", True),
    ("Insurellm does not charge extra for that.", False),
    ("Customers cannot cancel within 30 days.", False),
])
def test_refuses(text, says):
    assert refuses(text) is says
