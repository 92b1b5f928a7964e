"""Equivalent spans ("twins"): the other places in the knowledge base that hold a golden span's text.

A golden span names one place (``source``, ``start``, ``end``), the one its author or the
generator happened to read; a knowledge base that repeats a paragraph (an option described in 14
of 26 files) holds the same evidence elsewhere, and a retrieval that finds it there is not a miss.
A twin is another occurrence of the span's text in any document, compared word by word in lower
case with any whitespace run between words, at word boundaries where the span itself starts or
ends at one (so "he founded" is no twin inside "she founded"). Its offsets are exact: the
characters of the document that match. Overlapping the span's own place is not a twin.

The run finds them at start-up, beside the reference checks; :mod:`lab.metrics.spans` scores a
passage that covers a twin as covering the span (``span_mrr``, ``span_ndcg``,
``span_recall_any``); ``lab audit`` counts them.
"""

from __future__ import annotations

from typing import Iterable, NamedTuple

from lab.evidence.holds import Span
from lab.evidence.text import Folded, fold, fold_at

#: Twins recorded per golden span (in document order, then by offset); the count says how many there are.
MAX_TWINS = 100

class Twins(NamedTuple):
    places: list[Span]  # at most MAX_TWINS
    n: int  # all of them


def _word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def occurrences(text: str, document: str, folded: Folded | None = None, lead: bool = True,
                trail: bool = True, needle: str | None = None) -> list[tuple[int, int]]:
    """``(start, end)`` of each occurrence of ``text`` in ``document``, words compared in lower case
    with any whitespace run between them, not overlapping (leftmost first). With ``lead``
    (``trail``), an occurrence that starts (ends) with a word character must not have one before
    (after) it in the document. Empty for a text without words. ``needle``: ``text``'s ``words``
    fold, when the caller has it (one span looked for in every document is folded once)."""
    needle = fold(text, "words") if needle is None else needle
    if not needle:
        return []
    f = folded if folded is not None else fold_at(document, "words")
    lead = lead and _word(needle[0])
    trail = trail and _word(needle[-1])
    out, pos = [], f.text.find(needle)
    while pos >= 0:
        start, end = f.where[pos], f.where[pos + len(needle) - 1] + 1
        if (not lead or start == 0 or not _word(document[start - 1])) and \
                (not trail or end == len(document) or not _word(document[end])):
            out.append((start, end))
            pos = f.text.find(needle, pos + len(needle))
        else:
            pos = f.text.find(needle, pos + 1)
    return out


def find_twins(span: Span, documents: dict[str, str], limit: int = MAX_TWINS,
               folded: dict[str, Folded] | None = None) -> Twins:
    """Every other place in ``documents`` ({source: text}) holding the text of ``span`` (a place
    in one of them): see the module's docstring for "same text". The first ``limit`` places, in
    source order then by offset, and how many there are. ``folded``: the documents' ``words``
    folds (:func:`lab.evidence.text.fold_at`; made here when not given; :func:`span_twins`
    makes them once for all spans)."""
    source, start, end = span
    doc = documents[source]
    text = doc[start:end]
    # anchored at a word boundary where the span's text is at one (a span that starts mid-word matches mid-word)
    first, last = start + len(text) - len(text.lstrip()), start + len(text.rstrip())
    lead = first == 0 or not _word(doc[first - 1])
    trail = last == len(doc) or not _word(doc[last])
    places: list[Span] = []
    n = 0
    needle = fold(text, "words")  # once, not once per document: a BEIR span is a whole abstract
    for src in sorted(documents):
        f = folded[src] if folded is not None else fold_at(documents[src], "words")
        for a, b in occurrences(text, documents[src], f, lead, trail, needle):
            if src == source and a < end and b > start:
                continue  # the span itself
            n += 1
            if len(places) < limit:
                places.append((src, a, b))
    return Twins(places, n)


def span_twins(spans: Iterable[Span], documents: dict[str, str], limit: int = MAX_TWINS) -> dict[Span, Twins]:
    """:func:`find_twins` of each span whose source is in ``documents`` (others are not scored),
    once per distinct span; each document folded once."""
    todo = [s for s in dict.fromkeys(spans) if s[0] in documents]
    if not todo:
        return {}
    folded = {src: fold_at(text, "words") for src, text in documents.items()}
    return {s: find_twins(s, documents, limit, folded) for s in todo}
