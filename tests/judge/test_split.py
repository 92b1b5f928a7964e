"""The split judging method: accuracy and completeness measured apart (lab.judge.split's
arithmetic, lab.judge.methods.judge_split's calls), on a scripted model whose digits are known."""

from __future__ import annotations

import json
import math

import pytest

from lab.config import LLMConfig
from lab.evidence.facts import compare
from lab.judge import split
from lab.judge.methods import grader
from lab.judge.rubric import JUDGE_FIELDS, JudgePlan
from lab.config.schema import JudgeConfig
from lab.models.backends import Completion
from lab.models.llm import LabLLM
from lab.models.resolve import LLMPlan
from lab.prompts import load_prompt

QUESTION = "When was Insurellm founded, and by whom?"
REFERENCE = "Avery Lancaster founded Insurellm in 2015."
LONG_REF = "Avery Lancaster founded Insurellm in 2015 as a marketplace connecting consumers with insurers."


def plan(answer, reference=REFERENCE):
    return split.plan(compare(answer, reference, QUESTION), reference, QUESTION)


@pytest.mark.parametrize("answer, reference, asks, model, expected", [
    # the facts decide completeness alone (nothing else in the reference): 2 of 2 stated
    (REFERENCE, REFERENCE, ("accuracy", "relevance"), {"accuracy": 4.2, "relevance": 4.0}, (4.2, 5.0, 4.0)),
    # cut short: 1 of 2 stated; the model's accuracy stands (nothing wrong)
    ("Avery Lancaster founded Insurellm.", REFERENCE, ("accuracy", "relevance"), {"accuracy": 4.0, "relevance": 4.5},
     (4.0, 1 + 4 * 1 / 2, 4.5)),
    # one wrong fact of two: accuracy capped at 1 + 2 * 1 / 2 = 2
    ("Avery Lancaster founded Insurellm in 2017.", REFERENCE, ("accuracy", "relevance"),
     {"accuracy": 3.6, "relevance": 4.0}, (2.0, 3.0, 4.0)),
    # both wrong: capped at 1, so the model is not asked about accuracy
    ("Richard Thompson founded Insurellm in 2017.", REFERENCE, ("relevance",), {"relevance": 4.0}, (1.0, 1.0, 4.0)),
    # a refusal: 1 and 1 by rule; only relevance asked
    ("I don't have enough information to answer that question.", REFERENCE, ("relevance",), {"relevance": 2.0},
     (1.0, 1.0, 2.0)),
    # the reference says more than its facts: the model's completeness (m = 3: c = 0.5) is one more unit
    ("Avery Lancaster founded Insurellm in 2015.", LONG_REF, ("accuracy", "completeness", "relevance"),
     {"accuracy": 4.0, "completeness": 3.0, "relevance": 4.0}, (4.0, 1 + 4 * (2 + 0.5) / 3, 4.0)),
])
def test_scores_by_hand(answer, reference, asks, model, expected):
    p = plan(answer, reference)
    assert p.asks == asks
    got = split.scores(p, model)
    assert (got["accuracy"], got["completeness"], got["relevance"]) == pytest.approx(expected)


def test_rest_words_are_what_the_facts_and_question_leave():
    assert split.rest_words(REFERENCE, QUESTION) == set()  # "founded" is the question's
    assert split.rest_words(LONG_REF, QUESTION) == {"marketplace", "connecting", "consumers", "insurers"}


def digits(*p):
    return {str(i + 1): math.log(x) for i, x in enumerate(p)}


#: The expected digit of each rubric the scripted model is asked: accuracy 4.0, completeness 2.0, relevance 5.0.
P = {"ACCURACY": (0, 0, 0.1, 0.8, 0.1), "COMPLETENESS": (0.1, 0.8, 0.1, 0, 0), "RELEVANCE": (0, 0, 0, 0, 1)}


class Scripted:
    def __init__(self):
        self.asked = []

    def choice_logprobs(self, messages, prefix, choices):
        user = messages[-1]["content"]
        dim = next(d for d in P if f"Rate the {d}" in user)
        self.asked.append(dim.lower())
        return Completion(json.dumps(digits(*[max(x, 1e-12) for x in P[dim]])), 100, 0, 0.01, "logprobs")


def test_the_split_grader_asks_the_model_only_what_the_rules_leave_open():
    backend = Scripted()
    llm_plan = LLMPlan(LLMConfig(max_tokens=160), "judge", "m.gguf", "m:1")
    g = grader(LabLLM(llm_plan, None, backend),
               JudgePlan(JudgeConfig(method="split"), llm_plan, load_prompt("judge-v1", JUDGE_FIELDS)))
    assert g.version.startswith("split:judge-v1+judge-accuracy-v2+judge-completeness-v1+judge-relevance-v1")
    item = {"id": "q1", "question": QUESTION, "reference": LONG_REF}
    rec = g(item, "Avery Lancaster founded Insurellm.")  # cut short: 1 of 2 facts, the rest asked of the model
    assert backend.asked == ["accuracy", "completeness", "relevance"]
    assert rec["accuracy"] == pytest.approx(4.0) and rec["relevance"] == pytest.approx(5.0)
    assert rec["completeness"] == pytest.approx(1 + 4 * (1 + (2.0 - 1) / 4) / 3)
    assert rec["facts"]["reference"] == [{"kind": "name", "text": "Avery Lancaster", "stated": True},
                                         {"kind": "year", "text": "2015", "stated": False}]
    assert rec["feedback"] == "states 1 of 2 reference facts"
    backend.asked.clear()
    wrong = g(item, "Richard Thompson founded Insurellm in 2017.")
    assert wrong["accuracy"] == 1.0 and "accuracy" not in backend.asked
    assert wrong["feedback"] == "states 0 of 2 reference facts; conflicts: 'Richard Thompson' for 'Avery Lancaster', '2017' for '2015'"
