"""Keyword retrieval metrics, exactly as the InsureLLM exercise defines them.

Relevance is binary and per keyword: a retrieved chunk is relevant to a keyword when it holds it
(:func:`lab.evidence.holds.holds`: its text contains the keyword, case-insensitively, both in
Unicode NFC, so "Crème" written with a combining accent matches "Crème" written with one
character). Each metric is computed per keyword and then averaged over the question's keywords.
All functions are pure: no I/O, inputs untouched.
"""

from __future__ import annotations

import math
from typing import Sequence

from lab.evidence.holds import Evidence, Passage, first_holding, holds


def keyword_rank(keyword: str, texts: Sequence[str]) -> int | None:
    """1-based rank of the first text containing ``keyword``; None when no text does."""
    return first_holding([Passage(t) for t in texts], Evidence.keyword(keyword))


def keyword_rr(keyword: str, texts: Sequence[str]) -> float:
    """Reciprocal rank of the first text containing ``keyword``; 0.0 when none does.

    Every retrieved text counts (no cut-off): the list is whatever the pipeline returned.
    """
    rank = keyword_rank(keyword, texts)
    return 0.0 if rank is None else 1.0 / rank


def dcg(relevances: Sequence[float], k: int) -> float:
    """sum over the first ``k`` positions i (0-based) of rel_i / log2(i + 2)."""
    return sum(rel / math.log2(i + 2) for i, rel in enumerate(relevances[:k]))


def keyword_ndcg(keyword: str, texts: Sequence[str], k: int) -> float:
    """nDCG@k for one keyword with binary relevance.

    The ideal ranking is the same retrieved relevances sorted in descending order (not the
    relevances of the whole corpus), so a list whose relevant texts all come first scores 1.0.
    When no text in the top ``k`` is relevant, the ideal DCG is 0 and the score is 0.0.
    """
    return _ndcg([Passage(t) for t in texts[:k]], Evidence.keyword(keyword), k)


def _ndcg(passages: Sequence[Passage], evidence: Evidence, k: int) -> float:
    rels = [1.0 if holds(p, evidence) else 0.0 for p in passages[:k]]
    ideal = dcg(sorted(rels, reverse=True), k)
    return dcg(rels, k) / ideal if ideal > 0 else 0.0


#: The metrics computed from a question's keywords (n/a for a row that has none).
KEYWORD_METRICS = ("mrr", "ndcg", "coverage")


def question_scores(keywords: Sequence[str], texts: Sequence[str], k: int) -> dict:
    """MRR, nDCG@k and coverage of one question, each averaged over its keywords.

    - ``mrr``: mean over keywords of :func:`keyword_rr`;
    - ``ndcg``: mean over keywords of :func:`keyword_ndcg` at ``k``;
    - ``coverage``: share of keywords found in any retrieved text (0..1; reports show percent).
    A question without keywords scores 0.0 on all three (the evaluator reports such rows as n/a).
    """
    if not keywords:
        return {"mrr": 0.0, "ndcg": 0.0, "coverage": 0.0, "keyword_ranks": {}}
    passages = [Passage(t) for t in texts]  # each text folded once for all keywords
    ranks = {kw: first_holding(passages, Evidence.keyword(kw)) for kw in keywords}
    mrr = sum(0.0 if r is None else 1.0 / r for r in ranks.values()) / len(keywords)
    ndcg = sum(_ndcg(passages, Evidence.keyword(kw), k) for kw in keywords) / len(keywords)
    coverage = sum(r is not None for r in ranks.values()) / len(keywords)
    return {"mrr": mrr, "ndcg": ndcg, "coverage": coverage, "keyword_ranks": ranks}
