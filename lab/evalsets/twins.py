"""Equivalent spans ("twins"): the other places in the knowledge base that hold a golden span's text.

A golden span names one place (``source``, ``start``, ``end``), the one its author or the
generator happened to read; a knowledge base that repeats a paragraph (an option described in 14
of 26 files) holds the same evidence elsewhere, and a retrieval that finds it there is not a miss.
A twin is another occurrence of the span's text in any document, compared with whitespace runs
as one space and case folded (``re.IGNORECASE``), at word boundaries where the span itself starts
or ends at one (so "he founded" is no twin inside "she founded"). Its offsets are exact: the
characters of the document that match. Overlapping the span's own place is not a twin.

The run finds them at start-up, beside the reference checks; :mod:`lab.metrics.spans` scores a
passage that covers a twin as covering the span (``span_mrr``, ``span_ndcg``,
``span_recall_any``); ``lab audit`` counts them.
"""

from __future__ import annotations

import re
from typing import Iterable, NamedTuple

Span = tuple[str, int, int]  # (source, start, end), end exclusive

#: Twins recorded per golden span (in document order, then by offset); the count says how many there are.
MAX_TWINS = 100


class Twins(NamedTuple):
    places: list[Span]  # at most MAX_TWINS
    n: int  # all of them


def _word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def span_pattern(text: str, before: str = "", after: str = "") -> re.Pattern | None:
    """The pattern that finds ``text`` with any whitespace run between its words, in any case;
    anchored at a word boundary at either end where ``text`` starts (ends) with a word character
    and ``before`` (``after``), the character beside it in its own document, is none. None for a
    text with no words."""
    words = text.split()
    if not words:
        return None
    lead = r"(?<!\w)" if _word(words[0][0]) and not (before and _word(before)) else ""
    trail = r"(?!\w)" if _word(words[-1][-1]) and not (after and _word(after)) else ""
    return re.compile(lead + r"\s+".join(re.escape(w) for w in words) + trail, re.IGNORECASE)


def find_twins(span: Span, documents: dict[str, str], limit: int = MAX_TWINS) -> Twins:
    """Every other place in ``documents`` ({source: text}) holding the text of ``span`` (a place
    in one of them): see the module's docstring for "same text". The first ``limit`` places, in
    source order then by offset, and how many there are."""
    source, start, end = span
    doc = documents[source]
    pattern = span_pattern(doc[start:end], doc[start - 1:start] if start else "", doc[end:end + 1])
    places: list[Span] = []
    n = 0
    if pattern is None:
        return Twins(places, n)
    for src in sorted(documents):
        for m in pattern.finditer(documents[src]):
            if src == source and m.start() < end and m.end() > start:
                continue  # the span itself
            n += 1
            if len(places) < limit:
                places.append((src, m.start(), m.end()))
    return Twins(places, n)


def span_twins(spans: Iterable[Span], documents: dict[str, str], limit: int = MAX_TWINS) -> dict[Span, Twins]:
    """:func:`find_twins` of each span whose source is in ``documents`` (others are not scored),
    once per distinct span."""
    return {s: find_twins(s, documents, limit) for s in dict.fromkeys(spans) if s[0] in documents}
