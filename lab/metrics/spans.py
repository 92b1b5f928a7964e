"""Span-level retrieval metrics against golden excerpts (character spans of source documents).

Relevance is defined on text, not on chunk ids or keywords, so chunkers are compared fairly:
for one question, R is the set of characters the retrieved chunks cover and G the set the
reference spans cover, each per source document, overlaps counted once.

- precision = |R ∩ G| / |R|  (how much of what was retrieved is evidence)
- recall    = |R ∩ G| / |G|  (how much of the evidence was retrieved)
- IoU       = |R ∩ G| / (|R| + |G \\ R|) = |R ∩ G| / |R ∪ G|

A retrieved chunk whose offsets are unknown counts its length in |R| and overlaps nothing.
"""

from __future__ import annotations

from typing import Iterable, Sequence

Span = tuple[str, int, int]  # (source, start, end), end exclusive


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


def _by_source(spans: Iterable[Span]) -> dict[str, list[tuple[int, int]]]:
    groups: dict[str, list[tuple[int, int]]] = {}
    for source, start, end in spans:
        groups.setdefault(source, []).append((start, end))
    return {s: merge(v) for s, v in groups.items()}


def span_scores(retrieved: Sequence[tuple[str, int | None, int | None, int]], references: Sequence[Span]) -> dict:
    """Precision, recall and IoU of one question's retrieved chunks ``(source, start, end,
    length)`` against its reference spans; the character counts beside them."""
    known = [(src, s, e) for src, s, e, _ in retrieved if s is not None and e is not None]
    unknown = sum(n for _, s, e, n in retrieved if s is None or e is None)
    r, g = _by_source(known), _by_source(references)
    r_chars = sum(covered(v) for v in r.values()) + unknown
    g_chars = sum(covered(v) for v in g.values())
    hit = sum(overlap(r[src], g[src]) for src in r if src in g)
    union = r_chars + g_chars - hit
    return {
        "span_precision": hit / r_chars if r_chars else 0.0,
        "span_recall": hit / g_chars if g_chars else 0.0,
        "span_iou": hit / union if union else 0.0,
        "span_chars": {"retrieved": r_chars, "reference": g_chars, "relevant": hit},
    }
