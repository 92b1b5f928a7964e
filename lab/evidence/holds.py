"""Whether a passage holds a piece of gold evidence: the one rule behind the keyword and span
metrics, the loss funnel and ``lab tune``'s dev split.

A piece of :class:`Evidence` is one of three kinds, each held as it has always been held:

- a golden **span**: a place ``(source, start, end)`` in a document and its twins (the same
  text elsewhere, :mod:`lab.evalsets.twins`). A passage holds it when its pieces (where its text
  lies in the knowledge base; a merged passage has several) cover at least :data:`HOLD` of the
  characters of one of those places by offsets, so a span cut by a chunk boundary is held by the
  passage with its larger part;
- a **keyword**: a passage holds it when its text contains the keyword in the ``case`` fold
  (NFC, lower case: the InsureLLM exercise's substring rule);
- a **quote**: a text with no known place (a pseudo-query's sentence, a span whose document is
  not loaded): a passage holds it when its ``tolerant`` fold contains the quote's. ``lab tune``
  picks the positives it trains on with it; every figure it reports is a run's, by span.

A passage whose offsets are unknown holds no span (its pieces are empty).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Iterable, Literal, Sequence

from lab.evidence.text import fold

Span = tuple[str, int, int]  # (source, start, end), end exclusive

#: A passage holds a golden span when it covers at least this share of the span's characters at
#: one of its places.
HOLD = 0.5


def merge(intervals: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted, non-overlapping intervals covering the same characters (touching ones joined)."""
    out: list[list[int]] = []
    for start, end in sorted(i for i in intervals if i[1] > i[0]):
        if out and start <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return [(s, e) for s, e in out]


def covered(intervals: Sequence[tuple[int, int]]) -> int:
    """Characters in a merged interval list."""
    return sum(e - s for s, e in intervals)


def overlap(a: Sequence[tuple[int, int]], b: Sequence[tuple[int, int]]) -> int:
    """Characters in both of two merged interval lists."""
    i = j = total = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        total += max(0, hi - lo)
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def place_share(pieces: Sequence[Span], place: Span) -> float:
    """The share of ``place``'s characters that ``pieces`` cover (same source; overlaps once)."""
    source, start, end = place
    mine = merge((s, e) for src, s, e in pieces if src == source)
    return overlap(mine, [(start, end)]) / (end - start) if end > start else 0.0


@dataclass(frozen=True)
class Passage:
    """A passage as evidence is looked for in it: its text, and where that text lies in the
    knowledge base (``pieces``; empty where the offsets are unknown); a chunk of an index also
    has its ``id`` and its document (``source``)."""

    text: str = ""
    pieces: tuple[Span, ...] = ()
    id: str = ""
    source: str = ""

    @cached_property
    def case(self) -> str:
        return fold(self.text, "case")

    @cached_property
    def tolerant(self) -> str:
        return fold(self.text, "tolerant")


@dataclass(frozen=True)
class Evidence:
    """One piece of gold evidence: a golden span with its places (its own first, then its
    twins), a keyword, or a quote (a text with no known place). Build it with :meth:`span`,
    :meth:`keyword` or :meth:`quote`."""

    kind: Literal["span", "keyword", "quote"]
    places: tuple[Span, ...] = ()
    text: str = ""
    folded: str = field(default="", repr=False)

    @classmethod
    def span(cls, place: Span, twins: Iterable[Span] = ()) -> "Evidence":
        return cls("span", (tuple(place), *(tuple(t) for t in twins)))

    @classmethod
    def keyword(cls, keyword: str) -> "Evidence":
        return cls("keyword", text=keyword, folded=fold(keyword, "case"))

    @classmethod
    def quote(cls, text: str) -> "Evidence":
        return cls("quote", text=text, folded=fold(text, "tolerant"))


def share(pieces: Sequence[Span], evidence: Evidence) -> float:
    """The largest share of one of a span's places that ``pieces`` cover (0 for no place)."""
    return max((place_share(pieces, p) for p in evidence.places), default=0.0)


def holds(passage: Passage, evidence: Evidence) -> bool:
    """Whether ``passage`` holds ``evidence``: see the module's docstring for each kind."""
    if evidence.kind == "span":
        return share(passage.pieces, evidence) >= HOLD
    if evidence.kind == "keyword":
        return evidence.folded in passage.case
    return bool(evidence.folded) and evidence.folded in passage.tolerant


def first_holding(passages: Sequence[Passage], evidence: Evidence) -> int | None:
    """The 1-based rank of the first of ``passages`` holding ``evidence`` (None: none does)."""
    return next((i for i, p in enumerate(passages, start=1) if holds(p, evidence)), None)
