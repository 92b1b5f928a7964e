"""Document-level retrieval metrics against graded qrels (document id -> grade), with trec_eval's
definitions: what BEIR, MTEB and pyserini publish.

A query's qrels grade some documents of the knowledge base (``{"4983": 1, "5836": 2}``); a
document not in them has grade 0. A grade is a gain: nDCG uses it as it is (linear gain, as
``trec_eval -m ndcg_cut`` does, not ``2^grade - 1``); a document is *relevant* when its grade is
1 or more (trec_eval's default relevance level) and a grade below 0 counts as 0.

**Max-passage.** The pipeline ranks passages (chunks); a document ranks where its best passage
ranks, and its later passages are dropped before scoring (:func:`documents_ranked`), the
convention of BEIR and MTEB for chunked documents. So a document cut in three chunks that all
come back fills one rank, not three, and ``k`` counts documents.

Every metric is averaged over queries by the run, each query weighing the same; a query whose
qrels grade no document above 0 scores 0.0 on all four (trec_eval's ``-c``). All functions are
pure: no I/O, inputs untouched.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

#: The catalogue's qrels metrics, as BEIR tables publish them: name -> (function name, k); k None
#: for MAP, which reads the whole retrieved list (trec_eval's ``map``).
QRELS_METRICS: dict[str, tuple[str, int | None]] = {
    "qrels_ndcg10": ("ndcg", 10), "qrels_recall100": ("recall", 100), "qrels_mrr10": ("mrr", 10),
    "qrels_map": ("map", None)}


def documents_ranked(sources: Sequence[str]) -> list[str]:
    """Each document once, at the rank of its first (best) passage: ``[a, b, a, c] -> [a, b, c]``."""
    return list(dict.fromkeys(sources))


def _gain(grade: float) -> float:
    return grade if grade > 0 else 0.0


def ndcg_at(ranked: Sequence[str], qrels: Mapping[str, float], k: int) -> float:
    """nDCG@k = DCG@k / IDCG@k, with DCG@k = sum over ranks i = 1..k of gain_i / log2(i + 1), gain
    the document's grade (0 when ungraded). IDCG@k is the DCG of the ideal ranking of **all**
    graded documents (grades sorted descending, top ``k``), not of the retrieved ones: a relevant
    document that was never retrieved lowers the score. 0.0 when no document is graded above 0."""
    dcg = sum(_gain(qrels.get(doc, 0)) / math.log2(i + 2) for i, doc in enumerate(ranked[:k]))
    ideal = sorted((_gain(g) for g in qrels.values()), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def _relevant(qrels: Mapping[str, float]) -> set[str]:
    return {doc for doc, grade in qrels.items() if grade >= 1}


def recall_at(ranked: Sequence[str], qrels: Mapping[str, float], k: int) -> float:
    """Recall@k = |relevant documents in the top k| / |relevant documents| (grade >= 1; every one
    the qrels name, retrieved or not). 0.0 when none is relevant."""
    relevant = _relevant(qrels)
    return len(relevant.intersection(ranked[:k])) / len(relevant) if relevant else 0.0


def mrr_at(ranked: Sequence[str], qrels: Mapping[str, float], k: int) -> float:
    """Reciprocal rank of the first relevant document (grade >= 1) in the top k, 0.0 when none is
    there (trec_eval's ``recip_rank`` over the list cut at k)."""
    relevant = _relevant(qrels)
    return next((1.0 / rank for rank, doc in enumerate(ranked[:k], start=1) if doc in relevant), 0.0)


def average_precision(ranked: Sequence[str], qrels: Mapping[str, float]) -> float:
    """AP = (sum over the ranks r of relevant retrieved documents of precision@r) / |relevant
    documents|, over the whole retrieved list (trec_eval's ``map`` per query; MAP is its mean). A
    relevant document never retrieved adds 0 to the sum and 1 to the denominator. 0.0 when none
    is relevant."""
    relevant = _relevant(qrels)
    if not relevant:
        return 0.0
    hits, total = 0, 0.0
    for rank, doc in enumerate(ranked, start=1):
        if doc in relevant:
            hits += 1
            total += hits / rank
    return total / len(relevant)


_FUNCTIONS = {"ndcg": ndcg_at, "recall": recall_at, "mrr": mrr_at}


def qrels_scores(sources: Sequence[str], qrels: Mapping[str, float]) -> dict[str, float]:
    """The catalogue's qrels metrics of one query (:data:`QRELS_METRICS`): ``sources`` are the
    documents of the retrieved passages in rank order (a document may repeat: max-passage keeps
    its first), ``qrels`` the query's grades by document, named as ``sources`` names them."""
    ranked = documents_ranked(sources)
    return {name: (average_precision(ranked, qrels) if k is None else _FUNCTIONS[fn](ranked, qrels, k))
            for name, (fn, k) in QRELS_METRICS.items()}
