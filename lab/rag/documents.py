"""Document-level signals in the second stage, no model: :class:`DocBoostReranker` adds to each
candidate its document's summed evidence among the candidates (:func:`doc_boost`), and
:class:`DocTypeFilter` keeps the candidates of the document type a question names
(:func:`named_doc_types`). Registered in :data:`lab.rag.postprocess.RERANKERS` as ``doc_boost``
and ``doc_type_filter``."""

from __future__ import annotations

import re
import statistics
from typing import Sequence

from llama_index.core.bridge.pydantic import Field
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, QueryBundle

from lab.rag.retrievers import hide_from_models

_WORD = re.compile(r"[a-z0-9]+(?:[.,'][a-z0-9]+)*")  # lower-case words, inner . , ' kept


def doc_boost(scores: Sequence[float], docs: Sequence[str], weight: float, aggregate: str
              ) -> list[tuple[float, float]]:
    """(normalised score, document boost) of each candidate, from their first-stage ``scores`` and
    documents ``docs``; the final score is their sum. ``n`` is min-max normalised over the
    candidates (all 1.0 when they are equal), ``D(d)`` is the ``aggregate`` (sum, max or mean) of
    ``n`` over the candidates of document d, and the boost is ``weight * D(doc) / max D``."""
    lo, hi = (min(scores), max(scores)) if scores else (0.0, 0.0)
    norm = [1.0 if hi == lo else (s - lo) / (hi - lo) for s in scores]
    per_doc: dict[str, list[float]] = {}
    for n, d in zip(norm, docs):
        per_doc.setdefault(d, []).append(n)
    agg = {"sum": sum, "max": max, "mean": statistics.fmean}[aggregate]
    doc_score = {d: agg(v) for d, v in per_doc.items()}
    top = max(doc_score.values(), default=0.0)
    return [(n, weight * doc_score[d] / top if top > 0 else 0.0) for n, d in zip(norm, docs)]


class DocBoostReranker(BaseNodePostprocessor):
    """Reorders the candidates by :func:`doc_boost` (ties keep the first stage's order) and keeps
    ``top_n``; each node records its document's boost in ``lab_doc_boost``."""

    weight: float = Field(default=0.5)
    aggregate: str = Field(default="sum")
    top_n: int = Field(default=4)

    @classmethod
    def class_name(cls) -> str:
        return "DocBoostReranker"

    def _postprocess_nodes(self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
                           ) -> list[NodeWithScore]:
        parts = doc_boost([float(n.score or 0.0) for n in nodes],
                          [n.node.metadata.get("source", n.node.node_id) for n in nodes], self.weight, self.aggregate)
        order = sorted(range(len(nodes)), key=lambda i: -sum(parts[i]))  # stable: ties keep first-stage order
        out = []
        for i in order[: self.top_n]:
            node = nodes[i].node
            node.metadata["lab_doc_boost"] = parts[i][1]
            hide_from_models(node, "lab_doc_boost")
            out.append(NodeWithScore(node=node, score=sum(parts[i])))
        return out


def named_doc_types(question: str, doc_types: Sequence[str]) -> set[str]:
    """The document types (folder names) a question names, as a word in the singular or plural
    ("contract" and "Contracts" both name ``contracts``; "contractor" names nothing)."""
    found = set(_WORD.findall(question.lower()))
    named = set()
    for t in doc_types:
        base = t.lower()
        forms = {base, base[:-1] if base.endswith("s") else base + "s"}
        if base.endswith("ies"):
            forms.add(base[:-3] + "y")
        if found & forms:
            named.add(t)
    return named


class DocTypeFilter(BaseNodePostprocessor):
    """Keeps the candidates whose ``doc_type`` the question names (:func:`named_doc_types`), in
    their order, then the best ``top_n``; a question naming no type a candidate has keeps all."""

    top_n: int = Field(default=4)

    @classmethod
    def class_name(cls) -> str:
        return "DocTypeFilter"

    def _postprocess_nodes(self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
                           ) -> list[NodeWithScore]:
        types = {n.node.metadata.get("doc_type", "") for n in nodes} - {""}
        named = named_doc_types(query_bundle.query_str if query_bundle else "", sorted(types))
        kept = [n for n in nodes if n.node.metadata.get("doc_type") in named] if named else list(nodes)
        return kept[: self.top_n]
