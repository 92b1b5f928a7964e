"""The ``split`` judging method's arithmetic: accuracy and completeness measured apart, the
figures, dates and names decided by rule and the model asked only about the rest.

Accuracy asks only "is what the answer states true, by the reference (and the context it was
given)?"; completeness asks only "how much of the reference does it state?". The rules
(:func:`lab.evidence.facts.compare`) read the reference's open facts (figures, dates, names its
question does not give) and the answer's:

- **completeness** = 1 + 4 * (facts stated + c) / (facts + 1), where c = (m - 1) / 4 is the
  model's completeness (``judge-completeness-v1``, the expected digit m) standing for the rest of
  the reference, its words beyond its facts and its question; without such words the facts alone
  decide (1 + 4 * share stated), and without facts the model alone (m);
- **accuracy** = the model's accuracy (``judge-accuracy-v2``: a rubric that says a correct answer
  that leaves things out is still accurate), capped at 1 + 2 * right / (right + conflicts) when
  the answer states a figure, date or name where the reference has another of the same kind that
  the answer does not state (a conflict; right = the reference facts it does state): one wrong
  fact of one scores 1, of two at most 2;
- a **refusal** (it declines and states none of the reference's facts) scores 1 on both, by rule;
- **relevance** is the model's (``judge-relevance-v1``).

The model is not asked what the rules decide: no accuracy call when a conflict caps it at 1, no
completeness call when the facts decide alone, neither for a refusal.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping

from lab.evidence.facts import FactCheck, facts
from lab.evidence.text import content_words


@dataclass(frozen=True)
class Plan:
    """Which model scores a judgement needs, from the rules' :class:`FactCheck`: ``accuracy``
    unless the rules decide it, ``completeness`` when the reference says more than its facts."""

    check: FactCheck
    rest: bool

    @property
    def cap(self) -> float | None:
        """The accuracy a conflict allows (None: no conflict)."""
        if not self.check.conflicts:
            return None
        right = sum(self.check.stated)
        return 1 + 2 * right / (right + len(self.check.conflicts))

    @property
    def asks(self) -> tuple[str, ...]:
        """The dimensions the model is asked about, in the order asked."""
        if self.check.refusal:
            return ("relevance",)
        need = []
        if self.cap is None or self.cap > 1:
            need.append("accuracy")
        if self.rest or not self.check.reference:
            need.append("completeness")
        return (*need, "relevance")


def rest_words(reference: str, question: str) -> set[str]:
    """The reference's content words beyond its facts and its question's words: what only the
    model can say whether an answer states."""
    text = reference
    for f in sorted(facts(reference), key=lambda f: -f.start):
        text = text[:f.start] + " " + text[f.end:]
    asked = content_words(question)
    return {w for w in content_words(text) if w not in asked and not re.fullmatch(r"\d[\d.,]*", w)}


#: Fewer reference words than this beyond its facts and its question, and the facts decide alone.
REST_WORDS = 3


def plan(check: FactCheck, reference: str, question: str) -> Plan:
    return Plan(check, len(rest_words(reference, question)) >= REST_WORDS)


def scores(p: Plan, model: Mapping[str, float]) -> dict[str, float]:
    """The three scores from the rules' plan and the model's expected digits (``model`` holds
    those of :attr:`Plan.asks`)."""
    c = p.check
    if c.refusal:
        return {"accuracy": 1.0, "completeness": 1.0, "relevance": model["relevance"]}
    accuracy = model.get("accuracy", 1.0)
    if p.cap is not None:
        accuracy = min(accuracy, p.cap)
    if not c.reference:
        completeness = model["completeness"]
    else:
        units, got = len(c.reference), float(sum(c.stated))
        if p.rest:
            units, got = units + 1, got + (model["completeness"] - 1) / 4
        completeness = 1 + 4 * got / units
    return {"accuracy": accuracy, "completeness": completeness, "relevance": model["relevance"]}


def feedback(p: Plan) -> str:
    """The rules' findings in one sentence."""
    c = p.check
    if c.refusal:
        return "a refusal: states none of the reference's facts"
    parts = [f"states {sum(c.stated)} of {len(c.reference)} reference facts" if c.reference else "no reference facts"]
    if c.conflicts:
        parts.append("conflicts: " + ", ".join(f"{a.text!r} for {r.text!r}" for a, r in c.conflicts[:3]))
    return "; ".join(parts)

