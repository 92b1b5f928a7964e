"""ANN indexes on the chunk table, and what they cost in recall.

An ``index.ann`` section gives the table one of LanceDB's vector indexes (IVF_PQ, IVF_HNSW_SQ,
IVF_HNSW_PQ, IVF_FLAT). Its build parameters are part of the index key (:func:`build_params`),
so two configs that differ in them never share a table; it is built in the table's temporary
folder, before the folder is renamed into place, so an interrupted build leaves nothing behind.
Queries then run with the config's ``nprobes``, ``refine_factor`` and ``ef`` (:func:`query_params`).

Every run over an ANN index measures the price: :func:`recall` searches the run's own questions
both through the index and exhaustively (LanceDB's ``bypass_vector_index``) and reports recall@k
of the first against the second, with the time per query of each.
"""

from __future__ import annotations

import time
from typing import Any, Sequence

import numpy as np

from lab.config import AnnConfig

#: The kind ``auto`` builds once a table has ``min_rows`` rows. bench/scale.py at 10^6 rows: IVF_FLAT
#: (1000 partitions, nprobes 20) 5.0 ms per question at recall@10 1.000; IVF_PQ needs refine_factor
#: 100 to reach 0.998 (19 ms), and without one finds 0.29 of the true neighbours (3.2 ms).
AUTO_KIND = "ivf_flat"
#: Kinds whose stored vectors are compressed (product quantisation): distances are approximate.
PQ_KINDS = ("ivf_pq", "ivf_hnsw_pq")
#: The distance of every lab table: LanceDB's default (squared L2, on unit vectors; see LabLanceDBVectorStore).
DISTANCE = "l2"
#: The depths at which recall against exact search is reported (those above the table's size are dropped).
RECALL_KS = (1, 5, 10)

_BUILD_FIELDS = {
    "ivf_pq": ("num_partitions", "num_sub_vectors", "num_bits"),
    "ivf_hnsw_sq": ("num_partitions", "m", "ef_construction"),
    "ivf_hnsw_pq": ("num_partitions", "num_sub_vectors", "num_bits", "m", "ef_construction"),
    "ivf_flat": ("num_partitions",),
}


def build_params(ann: AnnConfig) -> dict:
    """What goes into the index key: the kind and the parameters that change the index's contents
    (``auto`` keeps its threshold and the parameters of the kind it would build)."""
    kind = AUTO_KIND if ann.kind == "auto" else ann.kind
    out: dict = {"kind": ann.kind}
    if ann.kind == "auto":
        out["min_rows"] = ann.min_rows
    out.update({f: getattr(ann, f) for f in _BUILD_FIELDS[kind]})
    return out


def query_params(ann: AnnConfig) -> dict:
    """The search-time settings (not in the index key: they change answers, not the table)."""
    return {"nprobes": ann.nprobes, "refine_factor": ann.refine_factor, "ef": ann.ef}


def kind_for(ann: AnnConfig | None, n_rows: int) -> str | None:
    """The index kind a table of ``n_rows`` gets, or None for exact search."""
    if ann is None:
        return None
    if ann.kind == "auto":
        return AUTO_KIND if n_rows >= ann.min_rows else None
    return ann.kind


def _index_config(kind: str, ann: AnnConfig) -> Any:
    from lancedb.index import HnswPq, HnswSq, IvfFlat, IvfPq

    common = {"distance_type": DISTANCE, "num_partitions": ann.num_partitions}
    if kind == "ivf_pq":
        return IvfPq(**common, num_sub_vectors=ann.num_sub_vectors, num_bits=ann.num_bits)
    if kind == "ivf_hnsw_sq":
        return HnswSq(**common, m=ann.m, ef_construction=ann.ef_construction)
    if kind == "ivf_hnsw_pq":
        return HnswPq(**common, num_sub_vectors=ann.num_sub_vectors, num_bits=ann.num_bits, m=ann.m,
                      ef_construction=ann.ef_construction)
    return IvfFlat(**common)


def check(ann: AnnConfig, dim: int, n_rows: int) -> str | None:
    """Why this index cannot be built on a table of ``n_rows`` vectors of size ``dim`` (None: it can)."""
    kind = kind_for(ann, n_rows)
    if kind is None:
        return None
    if "num_sub_vectors" in _BUILD_FIELDS[kind] and ann.num_sub_vectors and dim % ann.num_sub_vectors:
        return (f"index.ann.num_sub_vectors {ann.num_sub_vectors} does not divide the embedding size {dim}: "
                f"use a divisor such as {', '.join(str(d) for d in _divisors(dim))}")
    parts = ann.num_partitions or 1
    if parts > n_rows:
        return f"index.ann.num_partitions {parts} exceeds the table's {n_rows} rows: use at most {n_rows}"
    if "num_bits" in _BUILD_FIELDS[kind] and n_rows < 2 ** ann.num_bits:
        return (f"a PQ index ({kind}) trains {2 ** ann.num_bits} centroids per sub-vector and the table has "
                f"{n_rows} rows: use kind ivf_flat or ivf_hnsw_sq, or num_bits 4")
    return None


def advice(ann: AnnConfig, n_rows: int) -> str | None:
    """A warning for settings that build but lose most neighbours (None: nothing to say)."""
    kind = kind_for(ann, n_rows)
    if kind in PQ_KINDS and not ann.refine_factor:
        return (f"index.ann: {kind} without refine_factor ranks by compressed distances (bench/scale.py: recall@10 "
                "0.29 at 10^6 rows); set refine_factor (40-100), or use kind ivf_flat; every run reports the recall")
    return None


def _divisors(n: int) -> list[int]:
    return [d for d in (8, 12, 16, 24, 32, 48, 64, 96) if n % d == 0][:4]


def create(table: Any, ann: AnnConfig, n_rows: int) -> dict | None:
    """Build the index this config asks for on ``table`` (nothing when exact search applies);
    returns what the manifest records of it."""
    kind = kind_for(ann, n_rows)
    if kind is None:
        return None
    t0 = time.perf_counter()
    table.create_index("vector", config=_index_config(kind, ann), replace=True)
    return {"kind": kind, "params": build_params(ann), "rows": n_rows, "build_s": round(time.perf_counter() - t0, 3)}


def apply(query: Any, params: dict) -> Any:
    """A LanceDB vector query with the ANN search settings applied."""
    if params.get("nprobes"):
        query = query.nprobes(params["nprobes"])
    if params.get("refine_factor"):
        query = query.refine_factor(params["refine_factor"])
    if params.get("ef"):
        query = query.ef(params["ef"])
    return query


def _ids(table: Any, vectors: np.ndarray, k: int, params: dict | None) -> tuple[list[list[str]], float]:
    """Top-``k`` ids per vector (``params`` None: exhaustive), and the seconds per query."""
    out: list[list[str]] = []
    t0 = time.perf_counter()
    for vec in vectors:
        q = table.search(vec.tolist(), vector_column_name="vector").limit(k).select(["id", "_distance"])
        q = q.bypass_vector_index() if params is None else apply(q, params)
        out.append(q.to_arrow().column("id").to_pylist())
    return out, (time.perf_counter() - t0) / max(len(vectors), 1)


def recall_at(ann_ids: Sequence[Sequence[str]], exact_ids: Sequence[Sequence[str]], k: int) -> float:
    """Mean over queries of |ANN top k ∩ exact top k| / |exact top k|."""
    scores = []
    for a, e in zip(ann_ids, exact_ids):
        truth = set(e[:k])
        if truth:
            scores.append(len(truth & set(a[:k])) / len(truth))
    return float(np.mean(scores)) if scores else float("nan")


def recall(table: Any, vectors: np.ndarray, params: dict, n_rows: int, depth: int) -> dict:
    """ANN recall against exact search on ``vectors`` (a run's questions), at RECALL_KS and at
    ``depth`` (the run's first-stage depth), with milliseconds per query of both searches."""
    ks = sorted({k for k in (*RECALL_KS, depth) if k <= n_rows})
    k_max = max(ks)
    exact, exact_s = _ids(table, vectors, k_max, None)
    approx, ann_s = _ids(table, vectors, k_max, params)
    return {"n_queries": len(vectors), "recall_at": {str(k): round(recall_at(approx, exact, k), 4) for k in ks},
            "ms_per_query": {"ann": round(ann_s * 1000, 3), "exact": round(exact_s * 1000, 3)}}
