"""Retrieve: LlamaIndex retrievers over the LanceDB vector store.

:class:`LabLanceDBVectorStore` is LlamaIndex's ``LanceDBVectorStore`` with a leaner query
(only the columns it needs, Arrow instead of pandas) and ``query_many``, which sends every
question of an evaluation to LanceDB in one batched search. :class:`VectorRetriever` is
LlamaIndex's ``VectorIndexRetriever`` plus ``retrieve_many``; both paths return the same nodes.

Scores are cosine similarities: vectors are unit length, LanceDB returns squared L2 distance
``d``, and ``cos = 1 - d / 2``.
"""

from __future__ import annotations

from typing import Any, Sequence

from llama_index.core.indices.vector_store.retrievers import VectorIndexRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle
from llama_index.core.vector_stores.types import VectorStoreQuery, VectorStoreQueryResult
from llama_index.core.vector_stores.utils import metadata_dict_to_node
from llama_index.vector_stores.lancedb import LanceDBVectorStore

from lab.registry import Registry

COLUMNS = ["id", "metadata", "_distance"]


class LabLanceDBVectorStore(LanceDBVectorStore):
    """LanceDB vector store with a lean single query and a batched ``query_many``."""

    def _search(self, vectors: Any, k: int) -> Any:
        return self.table.search(vectors, vector_column_name=self.vector_column_name).limit(k).select(COLUMNS)

    @staticmethod
    def _result(rows: list[dict]) -> VectorStoreQueryResult:
        nodes = [metadata_dict_to_node(r["metadata"]) for r in rows]
        return VectorStoreQueryResult(
            nodes=nodes,
            similarities=[1.0 - r["_distance"] / 2.0 for r in rows],
            ids=[r["id"] for r in rows],
        )

    def query(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        if query.filters is not None or kwargs or self.query_type != "vector":
            return super().query(query, **kwargs)
        return self.query_many([query.query_embedding], query.similarity_top_k)[0]

    def query_many(self, embeddings: Sequence[Sequence[float]], k: int) -> list[VectorStoreQueryResult]:
        """Top ``k`` for each embedding, in one LanceDB search."""
        if not embeddings:
            return []
        if len(embeddings) == 1:  # a single vector: LanceDB's plain (non-batched) search
            rows = self._search(list(embeddings[0]), k).to_arrow().to_pylist()
            return [self._result(rows)]
        table = self._search([list(e) for e in embeddings], k).to_arrow()
        grouped: list[list[dict]] = [[] for _ in embeddings]
        for row in table.to_pylist():
            grouped[row["query_index"]].append(row)
        for rows in grouped:  # within a query LanceDB returns rows by distance; keep it explicit
            rows.sort(key=lambda r: r["_distance"])
        return [self._result(rows) for rows in grouped]


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


RETRIEVERS: Registry[Any] = Registry("retriever")


@RETRIEVERS.register("vector")
def _vector(cfg: Any, index: Any, embed_model: Any) -> VectorRetriever:
    return VectorRetriever(index=index, similarity_top_k=cfg.top_k, embed_model=embed_model)


@RETRIEVERS.register("bm25")
def _bm25(cfg: Any, index: Any, embed_model: Any) -> Any:
    from lab.hybrid import BM25Retriever

    return BM25Retriever(index.vector_store.table, cfg.top_k)


@RETRIEVERS.register("hybrid")
def _hybrid(cfg: Any, index: Any, embed_model: Any) -> Any:
    from lab.hybrid import BM25Retriever, HybridRetriever

    dense = VectorRetriever(index=index, similarity_top_k=cfg.dense_k, embed_model=embed_model)
    return HybridRetriever(dense, BM25Retriever(index.vector_store.table, cfg.sparse_k), cfg)


#: Retrievers that read LanceDB's full-text index (built on first use, see lab.index.ensure_fts).
NEEDS_FTS = {"bm25", "hybrid"}


def build_retriever(cfg: Any, index: Any, embed_model: Any) -> Any:
    return RETRIEVERS.get(cfg.name, where="retriever.name")(cfg, index, embed_model)
