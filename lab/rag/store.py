"""The LanceDB table of an index, once built: the store that searches it and the checks that tell
a damaged table from a healthy one.

- :class:`LabLanceDBVectorStore`: LlamaIndex's LanceDB store with a batched search; every
  distance it returns is checked (finite, and possible between unit vectors), so a damaged
  table stops the run instead of scoring it.
- :func:`table_damage`: what is wrong with a table, cheaply (its row count against the manifest's
  and a sample of rows), or thoroughly (every row) where LanceDB has failed on it.
- :func:`damaged_index`: the error for a table found damaged while in use, the folder moved aside
  so that the next run builds it again.
- :func:`locked`: the file lock an index is built, checked and moved aside under.
"""

from __future__ import annotations

import fcntl
import logging
import math
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np
from llama_index.core.vector_stores.types import VectorStoreQuery, VectorStoreQueryResult
from llama_index.core.vector_stores.utils import metadata_dict_to_node
from llama_index.vector_stores.lancedb import LanceDBVectorStore
from pydantic import PrivateAttr

from lab.caches import cache_fault, set_aside
from lab.errors import CacheError
from lab.rag import ann as ann_index

log = logging.getLogger(__name__)

_COLUMNS = ["id", "metadata", "_distance"]
#: Rows read from a reused table to check it (spread evenly over it; all of a smaller table).
SAMPLE_ROWS = 64
#: How far a stored vector's squared length, or a distance, may be off (float32 rounding is ~1e-6).
TOLERANCE = 1e-3


class LabLanceDBVectorStore(LanceDBVectorStore):
    """LlamaIndex's ``LanceDBVectorStore`` with a leaner query (only the columns it needs, Arrow
    instead of pandas) and ``query_many``: every question of an evaluation in one batched search.
    Over an ANN index, searches use the config's ``nprobes``/``refine_factor``/``ef`` (``ann_query``)."""

    _ann_query: dict | None = PrivateAttr(default=None)
    _rows: int | None = PrivateAttr(default=None)  # as the manifest says
    _folder_id: tuple | None = PrivateAttr(default=None)  # the index folder opened (device, inode)

    @property
    def ann_query(self) -> dict | None:
        return self._ann_query

    def _search(self, vectors: Any, k: int) -> Any:
        query = self.table.search(vectors, vector_column_name=self.vector_column_name).limit(k).select(_COLUMNS)
        return query if self._ann_query is None else ann_index.apply(query, self._ann_query)

    def _rows_of(self, vectors: Any, k: int) -> list[dict]:
        """The search's rows; where LanceDB fails, the whole table is read: if it is damaged, the
        run stops with :func:`damaged_index`'s error, else LanceDB's own error stands."""
        try:
            return self._search(vectors, k).to_arrow().to_pylist()
        except Exception as exc:
            problem = read_whole(self.table, self._rows)
            if problem is None:
                raise
            raise damaged_index(Path(self.uri).parent, problem, self._folder_id) from exc

    def _result(self, rows: list[dict], query_norm: float) -> VectorStoreQueryResult:
        """Nodes and cosine scores; a distance that is not finite, or outside what vectors of unit
        length can be from the query, ``((|q| - 1)^2, (|q| + 1)^2)`` (exact search only), stops
        the run: a stored vector is damaged, and scores must not reach the metrics."""
        lo, hi = (query_norm - 1.0) ** 2 - TOLERANCE, (query_norm + 1.0) ** 2 + TOLERANCE
        exact = self._ann_query is None
        for r in rows:
            d = r["_distance"]
            if d is None or not math.isfinite(d) or (exact and not lo <= d <= hi):
                raise damaged_index(Path(self.uri).parent, f"a search gave chunk {r['id']} the distance {d}",
                                    self._folder_id)
        try:
            nodes = [metadata_dict_to_node(r["metadata"]) for r in rows]
        except Exception as exc:
            raise damaged_index(Path(self.uri).parent, f"a chunk's metadata cannot be read ({first_line(exc)})",
                                self._folder_id) from None
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
        norms = [float(np.linalg.norm(np.asarray(e, dtype=np.float64))) for e in embeddings]
        if not all(math.isfinite(n) for n in norms):
            raise ValueError("a query embedding is not finite")
        if len(embeddings) == 1:  # a single vector: LanceDB's plain (non-batched) search
            rows = self._rows_of(list(embeddings[0]), k)
            return [self._result(rows, norms[0])]
        grouped: list[list[dict]] = [[] for _ in embeddings]
        for row in self._rows_of([list(e) for e in embeddings], k):
            grouped[row["query_index"]].append(row)
        for rows in grouped:  # within a query LanceDB returns rows by distance; keep it explicit
            rows.sort(key=lambda r: r["_distance"])
        return [self._result(rows, n) for rows, n in zip(grouped, norms)]


def table_damage(table: Any, n_rows: int | None, every_row: bool = False) -> str | None:
    """What is wrong with a built table, or None: its row count against the manifest's ``n_rows``,
    then :data:`SAMPLE_ROWS` rows spread evenly over it (or ``every_row``): each has an id, a
    vector of finite values and unit length, and metadata that reads as a node. A healthy table
    costs a count and one small read; a damaged file fails the read, or gives values no build writes."""
    n = table.count_rows()
    if n_rows is not None and n != n_rows:
        return f"{n} rows where its manifest says {n_rows}"
    if n == 0:
        return None
    columns = ["id", "vector", "metadata"]
    if every_row:
        batches = table.to_lance().to_batches(columns=columns, batch_size=4096)
    else:
        offsets = sorted(set(np.linspace(0, n - 1, min(n, SAMPLE_ROWS)).round().astype(int).tolist()))
        batches = table.take_offsets(offsets).select(columns).to_arrow().to_batches()
    for batch in batches:
        ids = batch.column("id")
        if ids.null_count:
            return "a row has no id"
        vectors = batch.column("vector")
        if vectors.null_count:
            return "a row has no vector"
        dim = vectors.type.list_size
        values = vectors.flatten().to_numpy(zero_copy_only=False).reshape(-1, dim).astype(np.float64)
        lengths = np.einsum("ij,ij->i", values, values)
        bad = ~np.isfinite(lengths) | (np.abs(lengths - 1.0) > TOLERANCE)
        if bad.any():
            return f"the vector of chunk {ids[int(np.argmax(bad))]} is not finite or not of unit length"
        for meta in batch.column("metadata").to_pylist():
            metadata_dict_to_node(meta)
    return None


def read_whole(table: Any, n_rows: int | None) -> str | None:
    """:func:`table_damage` over every row, for a table LanceDB has just failed on: a read that
    fails too says the table is damaged."""
    try:
        return table_damage(table, n_rows, every_row=True)
    except Exception as exc:
        return f"it cannot be read: {first_line(exc)}"


def damaged_index(folder: Path, why: str, folder_id: tuple | None = None) -> CacheError:
    """The error for a table found damaged while in use; the folder is moved aside first (under
    the index's lock, unless it is no longer the one opened: another run has done so), so the
    next run builds it again."""
    moved = ""
    with locked(folder.parent / f"{folder.name}.lock"):
        try:
            st = os.stat(folder)
        except FileNotFoundError:
            st = None
        if st is not None and (folder_id is None or (st.st_dev, st.st_ino) == folder_id):
            aside = set_aside(folder, why)
            moved = f"; moved aside to {aside}"
            log.warning("the index %s is damaged (%s): moved aside to %s", folder, why, aside)
    return CacheError(f"the index {folder} is damaged: {why}{moved}",
                      hint="run the command again: the index is built again, its embeddings read from the cache")


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


@contextmanager
def locked(path: Path) -> Iterator[None]:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fh = open(path, "a")
    except OSError as exc:  # a read-only or full cache: say so before any work
        raise cache_fault(path.parent, exc) from None
    with fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
