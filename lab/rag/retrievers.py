"""Retrievers: the first stage, over the LanceDB table of an index (:mod:`lab.rag.index`).

- ``vector``: :class:`VectorRetriever`, LlamaIndex's ``VectorIndexRetriever`` plus
  ``retrieve_many``, which sends every question of an evaluation to LanceDB in one batched
  search; both paths return the same nodes. Scores are cosine similarities: vectors are unit
  length, LanceDB returns squared L2 distance ``d``, and ``cos = 1 - d / 2``.
- ``bm25``: :class:`BM25Retriever`, LanceDB's native full-text search (an inverted index stored
  in the table's folder, built offline in well under a second for our corpora; tokenizer:
  lower-case, English stemming, stop words removed). It needs no extra package and no second
  copy of the chunks, and the dense and sparse sides score exactly the same rows.
- ``hybrid``: :class:`HybridRetriever`, a dense and a sparse list fused per question:

  - ``weighted``: each side's scores min-max normalised to [0, 1] over its own list, then
    ``final = alpha * dense + (1 - alpha) * sparse``; a chunk missing from one list gets 0 there.
  - ``rrf``: reciprocal rank fusion, ``final = sum over lists of 1 / (rrf_k + rank)``.

Each is registered in :data:`RETRIEVERS` under its config ``name``.
"""

from __future__ import annotations

import math
import unicodedata
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.indices.vector_store.retrievers import VectorIndexRetriever
from llama_index.core.schema import BaseNode, NodeWithScore, QueryBundle
from llama_index.core.vector_stores.utils import metadata_dict_to_node

from lab.config import BM25Retriever as BM25RetrieverConfig
from lab.config import HybridRetriever as HybridRetrieverConfig
from lab.config import RetrieverConfig
from lab.config import VectorRetriever as VectorRetrieverConfig
from lab.rag.store import damaged_index, read_whole
from lab.registry import Registry


def hide_from_models(node: BaseNode, key: str) -> None:
    """Keep a metadata entry the lab records (scores) out of the text models read and embed."""
    for hidden in (node.excluded_llm_metadata_keys, node.excluded_embed_metadata_keys):
        if key not in hidden:
            hidden.append(key)


class VectorRetriever(VectorIndexRetriever):
    """LlamaIndex's vector retriever with a batched ``retrieve_many`` for evaluation."""

    def retrieve_many(self, bundles: Sequence[QueryBundle]) -> list[list[NodeWithScore]]:
        store = self._vector_store
        if not hasattr(store, "query_many") or any(b.embedding is None for b in bundles):
            return [self.retrieve(b) for b in bundles]
        results = store.query_many([b.embedding for b in bundles], self._similarity_top_k)
        return [
            [NodeWithScore(node=n, score=s) for n, s in zip(r.nodes, r.similarities)] for r in results
        ]


def minmax(scores: Sequence[float]) -> list[float]:
    """Scale to [0, 1]; a list of equal scores maps to 1.0 each (all equally good)."""
    if not scores:
        return []
    lo, hi = min(scores), max(scores)
    if hi == lo:
        return [1.0] * len(scores)
    return [(s - lo) / (hi - lo) for s in scores]


def weighted_fusion(dense: Sequence[tuple[str, float]], sparse: Sequence[tuple[str, float]],
                    alpha: float) -> list[tuple[str, float, float, float]]:
    """(id, fused, dense_norm, sparse_norm), best first.

    Min-max puts each list's weakest hit at 0, level with chunks the list did not return; such
    ties go to the chunk that the lists weighted by alpha returned (so alpha 0 orders exactly
    as BM25 and alpha 1 exactly as the dense side), then by id.
    """
    d = dict(zip([i for i, _ in dense], minmax([s for _, s in dense])))
    s = dict(zip([i for i, _ in sparse], minmax([x for _, x in sparse])))
    ids = list(dict.fromkeys([i for i, _ in dense] + [i for i, _ in sparse]))
    fused = [(i, alpha * d.get(i, 0.0) + (1 - alpha) * s.get(i, 0.0), d.get(i, 0.0), s.get(i, 0.0)) for i in ids]

    def key(t: tuple) -> tuple:
        present = alpha * (t[0] in d) + (1 - alpha) * (t[0] in s)
        return (-t[1], -present, t[0])

    return sorted(fused, key=key)


def zscores(values: Sequence[float]) -> np.ndarray:
    """(x - mean) / sd over one question's candidates; a constant list z-scores to 0 each."""
    x = np.asarray(values, dtype=np.float64)
    sd = x.std() if len(x) else 0.0
    return (x - x.mean()) / sd if sd > 0 else np.zeros_like(x)


def z_fusion(scores: Sequence[float], first: Sequence[float], weight: float) -> list[float]:
    """``z(scores) + weight * z(first)``: a second stage's scores fused with the first stage's, each
    z-scored over the question's candidates, rounded so that float noise cannot reorder true ties."""
    return [round(float(v), 12) for v in zscores(scores) + weight * zscores(first)]


def rrf_fusion(lists: Sequence[Sequence[str]], rrf_k: int = 60) -> list[tuple[str, float]]:
    """(id, sum of 1 / (rrf_k + rank)) over the ranked lists, best first (ranks from 1)."""
    score: dict[str, float] = {}
    for ranked in lists:
        for rank, i in enumerate(ranked, start=1):
            score[i] = score.get(i, 0.0) + 1.0 / (rrf_k + rank)
    return sorted(score.items(), key=lambda t: (-t[1], t[0]))


class BM25Retriever(BaseRetriever):
    """BM25 over the chunks' text through LanceDB's full-text index."""

    def __init__(self, table: Any, top_k: int, **kwargs: Any) -> None:
        self._table = table
        self._top_k = top_k
        super().__init__(**kwargs)

    def search(self, query: str, k: int) -> list[NodeWithScore]:
        """The top ``k`` by BM25; where LanceDB fails, or gives a score that is not finite or a
        node that cannot be read, the run stops with :func:`lab.rag.store.damaged_index`'s error
        if the table reads as damaged (else LanceDB's own error stands)."""
        q = _fts_query(query)
        if not q:
            return []
        try:
            rows = (self._table.search(q, query_type="fts").limit(k).select(["id", "metadata", "_score"])
                    .to_arrow().to_pylist())
        except Exception as exc:
            if (problem := read_whole(self._table, None)) is None:
                raise
            raise self._damaged(problem) from exc
        for r in rows:
            if r["_score"] is None or not math.isfinite(r["_score"]):
                raise self._damaged(f"a BM25 search gave chunk {r['id']} the score {r['_score']}")
        try:
            return [NodeWithScore(node=metadata_dict_to_node(r["metadata"]), score=float(r["_score"])) for r in rows]
        except Exception as exc:
            raise self._damaged(f"a chunk's metadata cannot be read ({type(exc).__name__}: {exc})") from None

    def _damaged(self, why: str) -> Exception:
        return damaged_index(Path(self._table.uri).parents[1], why)  # <index>/lancedb/chunks.lance

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self.search(query_bundle.query_str, self._top_k)

    def retrieve_many(self, bundles: Sequence[QueryBundle]) -> list[list[NodeWithScore]]:
        return [self._retrieve(b) for b in bundles]


def _fts_query(text: str) -> str:
    """The question as plain terms in NFC: the query parser would read ``?``, ``:`` or quotes as
    syntax, and a combining accent would split a word."""
    text = unicodedata.normalize("NFC", text)
    return " ".join("".join(ch if ch.isalnum() else " " for ch in text).split())


class HybridRetriever(BaseRetriever):
    """Dense top ``dense_k`` and BM25 top ``sparse_k``, fused (weighted or RRF), top ``top_k`` kept.

    Each returned node carries ``dense_score`` and ``sparse_score`` (normalised, for weighted
    fusion; ranks' reciprocal contributions for RRF) in ``node.metadata["lab_scores"]``.
    ``pools[question]``: every node either list returned, in fused order, before the ``top_k`` cut
    (what the fusion chose from; the loss funnel's first stage).
    """

    def __init__(self, dense: Any, sparse: BM25Retriever, cfg: HybridRetrieverConfig, **kwargs: Any) -> None:
        self._dense, self._sparse, self._cfg = dense, sparse, cfg
        self.pools: dict[str, list[NodeWithScore]] = {}
        super().__init__(**kwargs)

    def _fuse(self, dense: list[NodeWithScore], sparse: list[NodeWithScore],
              pool: list[NodeWithScore] | None = None) -> list[NodeWithScore]:
        nodes = {n.node.node_id: n.node for n in sparse}
        nodes.update({n.node.node_id: n.node for n in dense})
        cfg = self._cfg
        if cfg.fusion == "rrf":
            fused = rrf_fusion([[n.node.node_id for n in dense], [n.node.node_id for n in sparse]], cfg.rrf_k)
            rows = [(i, s, None, None) for i, s in fused]
        else:
            rows = weighted_fusion([(n.node.node_id, n.score) for n in dense],
                                   [(n.node.node_id, n.score) for n in sparse], cfg.alpha)
        dense_rank = {n.node.node_id: r for r, n in enumerate(dense, start=1)}
        sparse_rank = {n.node.node_id: r for r, n in enumerate(sparse, start=1)}
        if pool is not None:
            pool.extend(NodeWithScore(node=nodes[i], score=float(score)) for i, score, _, _ in rows)
        out = []
        for i, score, d, s in rows[: cfg.top_k]:
            node = nodes[i]
            node.metadata["lab_scores"] = {"dense": d, "sparse": s, "dense_rank": dense_rank.get(i),
                                           "sparse_rank": sparse_rank.get(i)}
            hide_from_models(node, "lab_scores")
            out.append(NodeWithScore(node=node, score=float(score)))
        return out

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self.retrieve_many([query_bundle])[0]

    def retrieve_many(self, bundles: Sequence[QueryBundle]) -> list[list[NodeWithScore]]:
        dense = self._dense.retrieve_many(bundles)
        sparse = [self._sparse.search(b.query_str, self._cfg.sparse_k) for b in bundles]
        out = []
        for b, d, s in zip(bundles, dense, sparse):
            pool: list[NodeWithScore] = []
            out.append(self._fuse(d, s, pool))
            self.pools[b.query_str] = pool
        return out


RETRIEVERS: Registry[Any] = Registry("retriever")


@RETRIEVERS.register("vector")
def _vector(cfg: VectorRetrieverConfig, index: Any, embed_model: Any) -> VectorRetriever:
    return VectorRetriever(index=index, similarity_top_k=cfg.top_k, embed_model=embed_model)


@RETRIEVERS.register("bm25")
def _bm25(cfg: BM25RetrieverConfig, index: Any, embed_model: Any) -> BM25Retriever:
    return BM25Retriever(index.vector_store.table, cfg.top_k)


@RETRIEVERS.register("hybrid")
def _hybrid(cfg: HybridRetrieverConfig, index: Any, embed_model: Any) -> HybridRetriever:
    dense = VectorRetriever(index=index, similarity_top_k=cfg.dense_k, embed_model=embed_model)
    return HybridRetriever(dense, BM25Retriever(index.vector_store.table, cfg.sparse_k), cfg)


#: Retrievers that read LanceDB's full-text index (built on first use, see lab.rag.index.ensure_fts).
NEEDS_FTS = {"bm25", "hybrid"}


def build_retriever(cfg: RetrieverConfig, index: Any, embed_model: Any) -> BaseRetriever:
    return RETRIEVERS.get(cfg.name, where="retriever.name")(cfg, index, embed_model)
