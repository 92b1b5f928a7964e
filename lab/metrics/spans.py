"""Span-level retrieval metrics against golden excerpts (character spans of source documents).

Relevance is defined on text, not on chunk ids or keywords, so chunkers are compared fairly:
for one question, R is the set of characters the retrieved chunks cover and G the set the
reference spans cover, each per source document, overlaps counted once.

- precision = |R ∩ G| / |R|  (how much of what was retrieved is evidence)
- recall    = |R ∩ G| / |G|  (how much of the evidence was retrieved)
- IoU       = |R ∩ G| / (|R| + |G \\ R|) = |R ∩ G| / |R ∪ G|

A retrieved chunk whose offsets are unknown counts its length in |R| and overlaps nothing. These
three read each span's own place only (their meaning is unchanged since they were introduced).

The rank metrics (:func:`span_rank_scores`: ``span_mrr``, ``span_ndcg``, ``span_recall_any``)
score the passages in rank order against each golden span and its twins, the same text elsewhere
in the knowledge base, so a passage repeated across documents is no false miss.
"""

from __future__ import annotations

import math
from typing import Iterable, Sequence

from lab.evidence.holds import Evidence, Passage, Span, covered, first_holding, merge, overlap, place_share


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


# ---------------------------------------------------------------------------------------------
# Rank metrics from golden spans, twins counted

def span_rank_scores(passages: Sequence[Sequence[Span]], golden: Sequence[Sequence[Span]], k: int) -> dict:
    """Rank metrics of one question's sent passages, in rank order, against its golden spans.

    ``passages``: each passage's pieces ``(source, start, end)`` (a merged passage has several;
    pieces with unknown offsets are left out by the caller and cover nothing). ``golden``: for
    each golden span, its places: the span itself first, then its twins (the same text elsewhere,
    :mod:`lab.evalsets.twins`); covering any place is covering the span.

    For a golden span g and the top i passages, c_i(g) is the largest share of one place of g
    that those passages cover together (c_0 = 0). Passage i *holds* g by the evidence rule
    (:func:`lab.evidence.holds.holds`: it covers at least half of one place of g by itself).

    - ``span_mrr``: mean over golden spans of 1 / the rank of the first passage holding it (0
      when none does); every passage counts (no cut-off), as keyword MRR.
    - ``span_ndcg``: mean over golden spans of sum_{i=1..k} (c_i - c_{i-1}) / log2(i + 1):
      graded relevance, each passage gaining the share of the span it adds. The ideal DCG is 1
      (one passage at rank 1 covering the span whole), so nDCG is DCG; it is at most c_k, and a
      span covered only by passages past k scores 0.
    - ``span_recall_any``: sum over golden spans of |g| * c_n(g) / sum of |g| (n: every
      passage; |g| the span's own length): span recall where a twin counts as the span; equal to
      ``span_recall`` when no span has twins and no two golden spans overlap.
    - ``span_ranks``: per golden span, the rank of the first passage holding it (None: none),
      and ``span_twin``: whether that passage holds a twin rather than the span's own place.

    A question without golden spans has no value: the caller leaves these out (n/a).
    """
    ranks: list[int | None] = []
    via_twin: list[bool] = []
    rr = ndcg = recall_hit = recall_all = 0.0
    held = [Passage(pieces=tuple(pieces)) for pieces in passages]
    for places in golden:
        rank, twin = first_holding(held, Evidence.span(places[0], places[1:])), False
        if rank is not None:
            shares = [place_share(passages[rank - 1], x) for x in places]
            twin = shares.index(max(shares)) > 0
        ranks.append(rank)
        via_twin.append(twin)
        rr += 0.0 if rank is None else 1.0 / rank
        prev = 0.0
        cum: list[Span] = []
        for i, pieces in enumerate(passages, start=1):
            cum += pieces
            now = max(place_share(cum, x) for x in places)
            if i <= k:
                ndcg += (now - prev) / math.log2(i + 1)
            prev = now
        size = places[0][2] - places[0][1]
        recall_hit += size * prev
        recall_all += size
    n = len(golden)
    return {"span_mrr": rr / n if n else 0.0, "span_ndcg": ndcg / n if n else 0.0,
            "span_recall_any": recall_hit / recall_all if recall_all else 0.0,
            "span_ranks": ranks, "span_twin": via_twin}
