"""Judging methods beyond judge-v1's one JSON call: scores from next-token probabilities.

``judge.method`` picks one (None is ``rubric``, the judge-v1 call in :mod:`lab.judge.rubric`):

- ``rubric-expected`` (G-Eval): judge-v1's prompt and reply, but each score is the expected
  value of the score token, sum(s * P(s)) over 1..5 renormalised, read where the reply reaches
  it (the argmax digit is written before the next dimension is read). One prompt, three short
  forward passes: ties and coarseness break for free.
- ``per-dimension``: one prompt per dimension with its own rubric (``judge-accuracy-v1``,
  ``judge-completeness-v1``, ``judge-relevance-v1``), each scored by the expected first reply
  digit. The prompts share their head up to the answer, so the three calls evaluate it once.
- ``claims``: the reference answer split into atomic facts once per question (``claims-split-v1``,
  cached); for each fact P(the answer states it) (``claim-stated-v1``); P(the answer
  contradicts the reference) (``judge-contradicts-v1``). completeness = 1 + 4 * mean P(stated);
  accuracy = 1 + 4 * (1 - P(contradicts)) * max P(stated) (an answer that states none of the
  facts, a refusal, is not accurate); relevance as in ``per-dimension``.

Local (llama.cpp, ChatML) models only: a remote backend is refused at start-up.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Callable, Mapping

from lab.config.schema import JUDGE_METHODS
from lab.evidence.facts import compare
from lab.judge import split
from lab.metrics.injection import anchored, neutralise
from lab.judge.rubric import DIMENSIONS, JUDGE_FIELDS, JudgeItem, JudgePlan, Scores, data_values, judge_one
from lab.models.llm import LabLLM, LLMCallError
from lab.prompts import Prompt, load_prompt
from lab.registry import Registry

DIGITS = ["1", "2", "3", "4", "5"]
MAX_CLAIMS = 6
_FIELDS = JUDGE_FIELDS


def expected_score(logprobs: Mapping[str, float]) -> tuple[float, float]:
    """(expected score over 1..5 renormalised on the five digits, the digits' share of all
    probability). ``{"1": log p1, ..., "5": log p5}``."""
    m = max(logprobs[d] for d in DIGITS)
    w = [math.exp(logprobs[d] - m) for d in DIGITS]
    total = sum(w)
    return sum((i + 1) * x for i, x in enumerate(w)) / total, math.exp(m) * total


def yes_share(logprobs: Mapping[str, float]) -> float:
    """P(yes) / (P(yes) + P(no))."""
    a, b = logprobs["yes"], logprobs["no"]
    return 1.0 / (1.0 + math.exp(b - a))


@dataclass(frozen=True)
class MethodPrompts:
    rubric: Prompt
    dims: dict[str, Prompt]
    split: Prompt | None = None
    stated: Prompt | None = None
    contradicts: Prompt | None = None

    def versions(self) -> dict[str, str]:
        ps = [self.rubric, *self.dims.values(), self.split, self.stated, self.contradicts]
        return {p.version: p.sha256 for p in ps if p is not None}


def load_method_prompts(method: str, rubric: Prompt, where: str = "judge.method") -> MethodPrompts:
    """The prompts ``method`` uses, loaded and checked against the placeholders they are filled
    with (an unknown method fails with the registered names)."""
    return METHODS.get(method, where).prompts(rubric, where)


def _dims(names: tuple[str, ...], where: str) -> dict[str, Prompt]:
    return {d: load_prompt(f"judge-{d}-v1", _FIELDS, where=where) for d in names}


_SPLIT_SCHEMA = {"type": "object", "properties": {"facts": {"type": "array", "items": {"type": "string"},
                                                           "maxItems": MAX_CLAIMS}},
                 "required": ["facts"], "additionalProperties": False}


def split_claims(llm: LabLLM, prompt: Prompt, question: str, reference: str) -> list[str]:
    """The reference's atomic facts (one model call per question, cached); its sentences when
    the reply holds none."""
    try:
        out = llm.chat(prompt.messages(question=neutralise(question.strip()), reference=neutralise(reference.strip())), prompt.version,
                       schema=_SPLIT_SCHEMA, max_tokens=256)
        facts = [f.strip() for f in json.loads(out.text).get("facts", []) if isinstance(f, str) and f.strip()]
    except (LLMCallError, ValueError, AttributeError):
        facts = []
    return facts[:MAX_CLAIMS] or [s for s in re.split(r"(?<=[.!?])\s+", reference.strip()) if s][:MAX_CLAIMS]


def _record(scores: dict, feedback: str, extra: dict) -> dict:
    return {"status": "ok", **scores, "feedback": feedback, "attempts": 1, "cached": False,
            "prompt_tokens": 0, "completion_tokens": 0, **extra}


def judge_expected(llm: LabLLM, method: str, prompts: MethodPrompts, question: str, reference: str,
                   answer: str, claims: list[str] | None = None) -> dict:
    """One judgement by a probability-weighted ``method``: a record shaped like judge-v1's, the
    scores floats in [1, 5], with ``mass`` (the score tokens' share of probability, per
    dimension) and, for ``claims``, each fact's P(stated) and P(contradicts)."""
    values = data_values(question, reference, answer)
    calls0 = llm.usage.calls
    try:
        if method == "rubric-expected":
            messages = prompts.rubric.messages(**values)
            prefix, scores, mass = "{", {}, {}
            for i, d in enumerate(DIMENSIONS):
                prefix += f'"{d}": '
                lp = llm.choice_logprobs(messages, prompts.rubric.version + "+expected", prefix, DIGITS)
                scores[d], mass[d] = expected_score(lp)
                prefix += max(DIGITS, key=lp.__getitem__) + (", " if i < 2 else "")
            rec = _record(scores, "expected scores of judge-v1's score tokens", {"mass": mass})
        elif method == "per-dimension":
            scores, mass = {}, {}
            for d in DIMENSIONS:
                p = prompts.dims[d]
                scores[d], mass[d] = expected_score(llm.choice_logprobs(p.messages(**values), p.version, "", DIGITS))
            rec = _record(scores, "expected first-digit scores, one rubric per dimension", {"mass": mass})
        elif method == "claims":
            assert prompts.stated is not None and prompts.contradicts is not None
            facts = claims or [reference.strip()]
            stated = [yes_share(llm.choice_logprobs(prompts.stated.messages(**values, fact=neutralise(f)), prompts.stated.version,
                                                    "", ["yes", "no"])) for f in facts]
            contra = yes_share(llm.choice_logprobs(prompts.contradicts.messages(**values), prompts.contradicts.version,
                                                   "", ["yes", "no"]))
            p = prompts.dims["relevance"]
            relevance, mass = expected_score(llm.choice_logprobs(p.messages(**values), p.version, "", DIGITS))
            scores = {"accuracy": 1 + 4 * (1 - contra) * max(stated), "completeness": 1 + 4 * sum(stated) / len(stated),
                      "relevance": relevance}
            rec = _record(scores, f"states {sum(s >= 0.5 for s in stated)} of {len(facts)} facts; "
                          f"P(contradicts) {contra:.2f}", {"claims": [{"fact": f, "stated": s} for f, s in zip(facts, stated)],
                                                           "contradicts": contra, "mass": {"relevance": mass}})
        else:
            raise ValueError(f"not a probability-weighted method: {method}")
    except LLMCallError as exc:
        return {"status": "failed", "error": exc.message, "raw": "", "attempts": 1, "cached": False,
                **{d: None for d in DIMENSIONS}, "feedback": None, "prompt_tokens": 0, "completion_tokens": 0}
    rec["cached"] = llm.usage.calls == calls0
    return rec


def judge_split(llm: LabLLM, prompts: MethodPrompts, item: JudgeItem, answer: str) -> dict:
    """One judgement by the ``split`` method (:mod:`lab.judge.split`): the rules' findings
    (``facts``), the model's expected digits for what they leave open (``model``, ``mass``), and
    the scores combined from both."""
    question, reference = item["question"], item["reference"]
    p = split.plan(compare(answer, reference, question, item.get("context") or ""), reference, question)
    values = data_values(question, reference, answer)
    calls0 = llm.usage.calls
    model, mass = {}, {}
    try:
        for d in p.asks:
            prompt = prompts.dims[d]
            model[d], mass[d] = expected_score(llm.choice_logprobs(prompt.messages(**values), prompt.version, "", DIGITS))
    except LLMCallError as exc:
        return {"status": "failed", "error": exc.message, "raw": "", "attempts": 1, "cached": False,
                **{d: None for d in DIMENSIONS}, "feedback": None, "prompt_tokens": 0, "completion_tokens": 0}
    rec = _record(split.scores(p, model), split.feedback(p), {"facts": p.check.as_dict(), "model": model, "mass": mass})
    rec["cached"] = llm.usage.calls == calls0
    return rec


# ---------------------------------------------------------------------------------------------
# The registry: one entry per judging method (docs: "How to add a component", a judge method)


@dataclass(frozen=True)
class JudgeMethod:
    """A judging method: the prompts it needs (loaded once, at start-up) and how it grades one
    answer. ``grade(grader, item, answer, scores_only)`` returns a judgement record shaped like
    judge-v1's (``status``, the three dimensions, ``feedback``, ``attempts``, ``cached``, tokens)."""

    prompts: Callable[[Prompt, str], MethodPrompts]
    grade: Callable[["Grader", JudgeItem, str, bool], dict]


METHODS: Registry[JudgeMethod] = Registry("judge method")


def _rubric(g: "Grader", item: JudgeItem, answer: str, scores_only: bool) -> dict:
    return judge_one(g.llm, g.plan.prompt, item["question"], item["reference"], answer, g.plan.cfg.max_attempts,
                     scores_only=scores_only)


def _expected(g: "Grader", item: JudgeItem, answer: str, scores_only: bool) -> dict:
    return judge_expected(g.llm, g.method, g.prompts, item["question"], item["reference"], answer)


def _claims(g: "Grader", item: JudgeItem, answer: str, scores_only: bool) -> dict:
    if item["id"] not in g.claims:  # split once per question (cached by the call cache too)
        assert g.prompts.split is not None
        g.claims[item["id"]] = split_claims(g.llm, g.prompts.split, item["question"], item["reference"])
    return judge_expected(g.llm, "claims", g.prompts, item["question"], item["reference"], answer, g.claims[item["id"]])


METHODS.register("rubric")(JudgeMethod(lambda rubric, where: MethodPrompts(rubric, {}), _rubric))
METHODS.register("rubric-expected")(JudgeMethod(lambda rubric, where: MethodPrompts(rubric, {}), _expected))
METHODS.register("per-dimension")(JudgeMethod(lambda rubric, where: MethodPrompts(rubric, _dims(DIMENSIONS, where)),
                                              _expected))
METHODS.register("claims")(JudgeMethod(
    lambda rubric, where: MethodPrompts(rubric, _dims(("relevance",), where),
                                        load_prompt("claims-split-v1", {"question", "reference"}, where=where),
                                        load_prompt("claim-stated-v1", _FIELDS | {"fact"}, where=where),
                                        load_prompt("judge-contradicts-v1", _FIELDS, where=where)),
    _claims))
METHODS.register("split")(JudgeMethod(
    lambda rubric, where: MethodPrompts(rubric, {"accuracy": load_prompt("judge-accuracy-v2", _FIELDS, where=where),
                                                 **_dims(("completeness", "relevance"), where)}),
    lambda g, item, answer, scores_only: judge_split(g.llm, g.prompts, item, answer)))
assert set(METHODS.names()) == set(JUDGE_METHODS), "every name the config accepts has a method, and no other"


@dataclass
class Grader:
    """The run's judge, built once: ``grader(item, answer, scores_only=False) -> record`` grades
    ``answer`` to the item's question by ``method`` (None: the plan's own, or ``rubric``), with
    the method's prompts loaded once. :meth:`scores` is the three scores alone (None when the
    judgement failed), what the checks and repeats compare."""

    llm: LabLLM
    plan: JudgePlan
    method: str = ""
    prompts: MethodPrompts = field(init=False)
    claims: dict[str, list[str]] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        self.method = self.method or self.plan.cfg.method or "rubric"
        self._impl = METHODS.get(self.method, "judge.method")
        self.prompts = self._impl.prompts(self.plan.prompt, "judge.method")

    def __call__(self, item: JudgeItem, answer: str, scores_only: bool = False) -> dict:
        rec = self._impl.grade(self, item, answer, scores_only)
        if not self.plan.cfg.is_anchored or rec.get("status") != "ok":
            return rec
        core, dropped = anchored(answer, item["question"], item["reference"])
        if not dropped:
            return rec
        other = self._impl.grade(self, item, core, True)  # the answer's substance alone
        if other.get("status") != "ok":
            return rec
        lowered = {d: min(rec[d], other[d]) for d in DIMENSIONS}
        return {**rec, **lowered, "anchored": {"dropped": dropped, "whole": {d: rec[d] for d in DIMENSIONS},
                                               "substance": {d: other[d] for d in DIMENSIONS}}}

    def scores(self, item: JudgeItem, answer: str) -> Scores | None:
        rec = self(item, answer, scores_only=True)
        return {d: rec[d] for d in DIMENSIONS} if rec["status"] == "ok" else None

    @property
    def version(self) -> str:
        """The prompt version recorded with each judgement: judge-v1's, or ``METHOD:v1+v2...``."""
        if self.method == "rubric":
            return self.plan.prompt.version
        return f"{self.method}:" + "+".join(self.prompts.versions())


def grader(llm: LabLLM, plan: JudgePlan, method: str | None = None) -> Grader:
    """The run's :class:`Grader` (``method`` None: the plan's own)."""
    return Grader(llm, plan, method or "")
