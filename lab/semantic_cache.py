"""A semantic query cache: a question whose embedding lies within a cosine threshold of a
question asked before (same index, same retriever, same embedding) reuses that question's
retrieval instead of searching again.

It is a serving feature measured like any other: each question records whether it was served
from the cache, by which earlier question and at what similarity, and the run counts hits. A
threshold too low serves paraphrases *and* different questions the same chunks, which the
retrieval metrics then show. Entries live in ``$LAB_CACHE/semantic.sqlite``.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from lab.store import SqliteStore


class SemanticQueryCache(SqliteStore):
    schema = "entries (key TEXT PRIMARY KEY, scope TEXT NOT NULL, question TEXT NOT NULL, vec BLOB NOT NULL, " \
             "hits TEXT NOT NULL)"

    def __init__(self, path: Path, scope: str, threshold: float):
        super().__init__(path)
        self.scope = scope
        self.threshold = threshold
        rows = self._conn().execute("SELECT question, vec, hits FROM entries WHERE scope = ?", (scope,)).fetchall()
        self._questions = [r[0] for r in rows]
        self._hits = [json.loads(r[2]) for r in rows]
        self._matrix = np.stack([np.frombuffer(r[1], dtype=np.float32) for r in rows]) if rows else None

    def lookup(self, vec: np.ndarray) -> dict | None:
        """The closest earlier question at or above the threshold: {question, similarity, nodes}."""
        if self._matrix is None:
            return None
        sims = self._matrix @ np.asarray(vec, dtype=np.float32)
        best = int(np.argmax(sims))
        if float(sims[best]) < self.threshold:
            return None
        return {"question": self._questions[best], "similarity": float(sims[best]), "nodes": self._hits[best]}

    def put_many(self, items: Sequence[tuple[str, np.ndarray, list]]) -> None:
        """Store (question, embedding, [[node id, score], ...]) entries."""
        rows = [(hashlib.sha256(f"{self.scope}\x00{q}".encode()).hexdigest(), self.scope, q,
                 np.asarray(v, dtype=np.float32).tobytes(), json.dumps(hits)) for q, v, hits in items]
        conn = self._conn()
        with conn:
            conn.executemany("INSERT OR REPLACE INTO entries (key, scope, question, vec, hits) VALUES (?, ?, ?, ?, ?)",
                             rows)


def scope_key(index_key: str, retriever_cfg: Any, embed_fingerprint: str, query_prefix: str) -> str:
    body = {"index": index_key, "retriever": retriever_cfg.model_dump(mode="json"), "embedding": embed_fingerprint,
            "query_prefix": query_prefix}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:20]


def nodes_by_ids(table: Any, hits: list) -> list:
    """Rebuild NodeWithScore objects from [[id, score], ...] through the LanceDB table."""
    from llama_index.core.schema import NodeWithScore
    from llama_index.core.vector_stores.utils import metadata_dict_to_node

    if not hits:
        return []
    ids = [h[0] for h in hits]
    quoted = ", ".join("'" + i.replace("'", "''") + "'" for i in ids)
    rows = table.search().where(f"id IN ({quoted})").select(["id", "metadata"]).limit(len(ids)).to_arrow().to_pylist()
    by_id = {r["id"]: metadata_dict_to_node(r["metadata"]) for r in rows}
    return [NodeWithScore(node=by_id[i], score=s) for i, s in hits if i in by_id]
