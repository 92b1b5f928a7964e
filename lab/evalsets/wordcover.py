"""Whether a reference answer says what its golden spans say, without a model: the share of the
answer's own words (content words its question does not already hold) that the spans hold.
``lab generate`` rejects, and ``lab audit`` doubts, an answer under :data:`MIN_ANSWER_COVER`."""

from __future__ import annotations

import re
from typing import Sequence

from lab.metrics.text import folded_text

#: The least share of an answer's own words (those its question does not hold) that its spans
#: must hold: see :func:`words_not_in_spans`.
MIN_ANSWER_COVER = 0.5
_COVER_STOP = frozenset("a an and are as at be by can do does for from how if in is it its no not of on only or "
                        "than that the then this to used use was were what when where which who will with you "
                        "your".split())


def _cover_words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9_]+(?:[.,'-][a-z0-9_]+)*", folded_text(text))} - _COVER_STOP


def words_not_in_spans(spans: Sequence[str], answer: str, question: str,
                       least: float = MIN_ANSWER_COVER) -> str | None:
    """Why the answer is not entailed by its spans, without a model: under ``least`` of its own
    words (content words, folded, that the question does not already hold) are in the spans.
    An answer written from elsewhere (the model's memory, another part of its window) says what
    its span does not: "The default value for the `_auth` configuration parameter is null."
    from a span about expanding abbreviated parameter names holds 0 of its 1 own word, "null".
    On three read sets of npm questions (68 rows) the rule at one half rejected 11 bad rows, 2
    usable and 1 good (docs/own-documents.md)."""
    own = _cover_words(answer) - _cover_words(question)
    if not own:
        return None
    held = own & _cover_words(" ".join(spans))
    if len(held) < least * len(own):
        return f"only {len(held)} of the answer's {len(own)} own words are in its span(s)"
    return None
