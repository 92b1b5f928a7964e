"""A semantic query cache: a question whose embedding lies within a cosine threshold of a
question asked before (same index, same retriever, same embedding) reuses that question's
retrieval instead of searching again.

It is a serving feature measured like any other: each question records whether it was served
from the cache, by which earlier question and at what similarity, and the run counts hits. A
threshold too low serves paraphrases *and* different questions the same chunks, which the
retrieval metrics then show. Entries live in ``$LAB_CACHE/semantic.sqlite``
(:class:`lab.caches.SemanticQueryCache`).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle
from llama_index.core.vector_stores.utils import metadata_dict_to_node

from lab.caches import SemanticQueryCache
from lab.config import CachesConfig, QueryConfig, RetrieverConfig


def scope_key(index_key: str, retriever_cfg: RetrieverConfig, embed_fingerprint: str, query_prefix: str) -> str:
    body = {"index": index_key, "retriever": retriever_cfg.model_dump(mode="json"), "embedding": embed_fingerprint,
            "query_prefix": query_prefix}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:20]


def pipeline_scope(index_key: str, ann_query: dict | None, query: QueryConfig | None) -> str:
    """What a cached retrieval is valid for beyond the index: the ANN search's settings and the
    query section (rewritten questions retrieve otherwise: their own scope, others keep theirs)."""
    scope = index_key if ann_query is None else f"{index_key}:{json.dumps(ann_query, sort_keys=True)}"
    if query is not None:
        scope += f":query={json.dumps(query.model_dump(mode='json'), sort_keys=True)}"
    return scope


class SemanticCachedRetriever(BaseRetriever):
    """``retriever`` behind the semantic cache, one question at a time (``lab ask``, the query
    engine): a question close enough to one asked before gets that question's nodes back; any
    other is retrieved and stored. The evaluator batches the same lookups itself."""

    def __init__(self, retriever: BaseRetriever, cache: SemanticQueryCache, embed_model: Any, table: Any):
        self._base, self._cache, self._embed, self._table = retriever, cache, embed_model, table
        self.last: dict | None = None  # the last question's {hit, of?, similarity?}
        super().__init__()

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        q = query_bundle.query_str
        vec = self._embed.encode([q], self._embed.query_prefix)[0]
        hit = self._cache.lookup(vec)
        if hit is not None:
            self.last = {"hit": True, "of": hit["question"], "similarity": round(hit["similarity"], 4)}
            return nodes_by_ids(self._table, hit["nodes"])
        nodes = self._base.retrieve(query_bundle)
        self._cache.put_many([(q, vec, [[n.node.node_id, None if n.score is None else float(n.score)]
                                        for n in nodes])])
        self.last = {"hit": False}
        return nodes


def open_semantic_cache(caches: CachesConfig | None, cache_root: Path, index_key: str,
                        retriever_cfg: RetrieverConfig, embed_fingerprint: str, query_prefix: str
                        ) -> SemanticQueryCache | None:
    """The cache of this (index, retriever, embedding), or None when the config has none."""
    if caches is None or caches.semantic_threshold is None:
        return None
    scope = scope_key(index_key, retriever_cfg, embed_fingerprint, query_prefix)
    return SemanticQueryCache(cache_root / "semantic.sqlite", scope, caches.semantic_threshold)


def nodes_by_ids(table: Any, hits: list) -> list[NodeWithScore]:
    """Rebuild NodeWithScore objects from [[id, score], ...] through the LanceDB table."""
    if not hits:
        return []
    ids = [h[0] for h in hits]
    quoted = ", ".join("'" + i.replace("'", "''") + "'" for i in ids)
    rows = table.search().where(f"id IN ({quoted})").select(["id", "metadata"]).limit(len(ids)).to_arrow().to_pylist()
    by_id = {r["id"]: metadata_dict_to_node(r["metadata"]) for r in rows}
    return [NodeWithScore(node=by_id[i], score=s) for i, s in hits if i in by_id]
