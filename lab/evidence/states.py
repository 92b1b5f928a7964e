"""What an answer states of its gold evidence, and what it states that nothing it was given holds.

- :func:`stated_keywords`: for each keyword, whether the answer contains it (the keyword
  metrics' match: the ``case`` fold).
- :func:`states_text`: whether the answer states a span's text: at least half of its content
  words (:func:`lab.evidence.text.content_words`) occur in the answer. The funnel's heuristic for
  rows without keywords.
- :func:`unsupported_terms`: figures and capitalised names the answer states that no sent
  passage holds (the funnel's generation diagnostics).
- :func:`words_not_in_spans`: a reference answer whose own words (content words its question
  does not already hold) are mostly absent from its spans: ``lab generate`` rejects such a row,
  ``lab audit`` doubts it.

Each reads the answer once through the rules of :mod:`lab.evidence.text`.
"""

from __future__ import annotations

import re
from typing import Sequence

from lab.evidence.text import FIGURE, STOP, content_words, fold, without_citations

#: The least share of an answer's own words (those its question does not hold) that its spans
#: must hold: see :func:`words_not_in_spans`.
MIN_ANSWER_COVER = 0.5

#: A capitalised name not at the start of a sentence ("Harrowfield Aerial", "Boise").
_NAME = re.compile(r"(?<![.!?:]\s)(?<!^)\b[A-Z][\w-]*[A-Za-z0-9](?:\s+[A-Z][\w-]*[A-Za-z0-9])*")


def stated_keywords(answer: str, keywords: Sequence[str]) -> list[bool]:
    """For each keyword, whether the answer contains it (the keyword metrics' match)."""
    a = fold(answer, "case")
    return [fold(k, "case") in a for k in keywords]


def states_text(answer: str, evidence: str) -> bool:
    """Whether ``answer`` states a span's text: at least half of its content words occur in the
    answer (true for a text without any)."""
    wanted = content_words(evidence)
    if not wanted:
        return True
    return len(wanted & content_words(answer)) * 2 >= len(wanted)


def unsupported_terms(answer: str, sent_text: str, limit: int) -> list[str]:
    """Up to ``limit`` figures and capitalised names the answer states that no sent passage holds
    (a claim made without the context; passage numbers in citations are not counted)."""
    body = without_citations(answer)
    sent = fold(sent_text, "case")
    sent_digits = re.sub(r"[,\s]", "", sent)
    out: list[str] = []
    for m in FIGURE.finditer(body):
        n = m.group(0).rstrip(".,")
        if n.replace(",", "") not in sent_digits and n not in out:
            out.append(n)
    for m in _NAME.finditer(body):
        name = m.group(0)
        if fold(name, "case") not in sent and name not in out and fold(name, "case") not in STOP:
            out.append(name)
    return out[:limit]


def words_not_in_spans(spans: Sequence[str], answer: str, question: str,
                       least: float = MIN_ANSWER_COVER) -> str | None:
    """Why the answer is not entailed by its spans, without a model: under ``least`` of its own
    words (content words, folded, that the question does not already hold) are in the spans.
    An answer written from elsewhere (the model's memory, another part of its window) says what
    its span does not: "The default value for the `_auth` configuration parameter is null."
    from a span about expanding abbreviated parameter names holds 0 of its 1 own word, "null".
    On three read sets of npm questions (68 rows) the rule at one half rejected 11 bad rows, 2
    usable and 1 good (docs/own-documents.md)."""
    own = content_words(answer) - content_words(question)
    if not own:
        return None
    held = own & content_words(" ".join(spans))
    if len(held) < least * len(own):
        return f"only {len(held)} of the answer's {len(own)} own words are in its span(s)"
    return None
