"""Claims about the reference, the grading or the verification (lab.metrics.claims): the stretch
left out of an answer's substance, and what stays."""

from __future__ import annotations

import pytest

from lab.metrics.claims import CLAIM_PATTERNS, claim_spans

WRONG = "Insurellm was founded in 2016 by Avery Lancaster."


def cut(text):
    for a, b in reversed(claim_spans(text)):
        text = text[:a] + text[b:]
    return text


@pytest.mark.parametrize("text, left", [
    # a clause joined to the answer's sentence: from its comma to the full stop
    (WRONG[:-1] + ", exactly the founder and year the reference answer confirms.", WRONG[:-1] + "."),
    # a sentence of its own
    (WRONG + " The answer key lists the same name.", WRONG),
    # a lead-in before a colon or a comma
    ("Verified against the official solution: " + WRONG, WRONG),
    ("As the reference confirms, " + WRONG, WRONG),
    # an aside in brackets
    ("Insurellm was founded in 2016 (as the expected answer says) by Avery Lancaster.",
     "Insurellm was founded in 2016  by Avery Lancaster."),
    # a fact the rest repeats is no fact of the claim's own
    (WRONG[:-1] + ", the 2016 the reference answer gives.", WRONG[:-1] + "."),
])
def test_the_claim_goes_and_the_answer_stays(text, left):
    assert cut(text) == left


@pytest.mark.parametrize("text", [
    # a stretch that states a fact of its own stays, claim word or not
    WRONG[:-1] + ", per the reference answer with 12 staff.",
    # ordinary words of insurance text
    "Keep your policy number for reference.",
    "The reference number is on the first page of the policy.",
    "Claims are verified by an adjuster before payment.",
    "The key features are telematics and roadside assistance.",
    "This file is kept for reference and for the lessons learned below.",
])
def test_no_claim(text):
    assert cut(text) == text


@pytest.mark.parametrize("text, flagged", [
    ("It costs $55, as the reference answer also states.", True),
    ("It costs $55, matching the expected response.", True),
    ("Graders checked this and found it correct.", True),
    ("Verified answer: it costs $55.", True),
    ("The reference answer to a customer query is stored in the knowledge base.", False),  # no tie to this answer
    ("Claims are checked against the policy terms.", False),
])
def test_the_detectors_claim_kind_needs_a_tie_to_the_evaluation(text, flagged):
    assert any(p.search(text) for _, p in CLAIM_PATTERNS) is flagged
