"""Second stages with no model: keyword-overlap rerank, a policy that switches a reranker on
only when the first stage looks unsure, and a guardrail for questions retrieval cannot answer.

All three are LlamaIndex node postprocessors, so the evaluator and the query engine use the
same code. The pure decision functions (:func:`jaccard`, :func:`activation`,
:func:`low_confidence`) are what the tests check by hand.
"""

from __future__ import annotations

import re
import statistics
from typing import Any, Sequence

from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, QueryBundle

#: A short English stop list (articles, pronouns, auxiliaries, prepositions, question words).
STOP_WORDS = frozenset("""
a about above after again against all am an and any are as at be been before being below between both but by
can could did do does doing down during each few for from further had has have having he her here hers him his
how i if in into is it its itself just me more most my no nor not of off on once only or other our ours out over
own same she should so some such than that the their theirs them then there these they this those through to too
under until up very was we were what when where which while who whom why will with would you your yours
""".split())
_WORD = re.compile(r"[a-z0-9]+(?:[.,'][a-z0-9]+)*")


def words(text: str) -> set[str]:
    """Lower-cased word set without stop words ("8,400" and "v2.1" stay whole)."""
    return {w for w in _WORD.findall(text.lower()) if w not in STOP_WORDS}


def jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a | b else 0.0


class KeywordOverlapReranker(BaseNodePostprocessor):
    """``final = vector_weight * first-stage score + overlap_weight * Jaccard(question words,
    chunk words)``; nodes under ``min_score`` are dropped, the best ``top_n`` kept."""

    vector_weight: float = Field(default=0.7)
    overlap_weight: float = Field(default=0.3)
    min_score: float = Field(default=0.3)
    top_n: int = Field(default=5)

    @classmethod
    def class_name(cls) -> str:
        return "KeywordOverlapReranker"

    def _postprocess_nodes(self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
                           ) -> list[NodeWithScore]:
        q = words(query_bundle.query_str if query_bundle else "")
        scored = []
        for n in nodes:
            overlap = jaccard(q, words(n.node.get_content()))
            final = self.vector_weight * float(n.score or 0.0) + self.overlap_weight * overlap
            n.node.metadata["lab_overlap"] = overlap
            hide_from_models(n.node, "lab_overlap")
            scored.append(NodeWithScore(node=n.node, score=final))
        scored.sort(key=lambda x: -x.score)
        return [n for n in scored if n.score >= self.min_score][: self.top_n]


def hide_from_models(node: Any, key: str) -> None:
    """Keep a metadata entry the lab records (scores) out of the text models read and embed."""
    for hidden in (node.excluded_llm_metadata_keys, node.excluded_embed_metadata_keys):
        if key not in hidden:
            hidden.append(key)


def activation(question: str, scores: Sequence[float], min_query_tokens: int, max_top_score: float,
               min_spread: float) -> list[str]:
    """Why the reranker should run for this question (empty: it should not).

    - ``long``: the question has more than ``min_query_tokens`` words;
    - ``low``: the best first-stage score is under ``max_top_score``;
    - ``flat``: best minus median score is under ``min_spread`` (the first stage cannot tell
      its candidates apart).
    """
    why = []
    if len(question.split()) > min_query_tokens:
        why.append("long")
    if scores:
        top = max(scores)
        if top < max_top_score:
            why.append("low")
        if top - statistics.median(scores) < min_spread:
            why.append("flat")
    return why


class AutoActivatedReranker(BaseNodePostprocessor):
    """Runs ``inner`` only when :func:`activation` gives a reason; otherwise keeps the
    first-stage order, cut to ``top_n``. ``last`` holds the latest decision."""

    inner: Any = Field(default=None)
    top_n: int = Field(default=3)
    min_query_tokens: int = Field(default=10)
    max_top_score: float = Field(default=0.35)
    min_spread: float = Field(default=0.08)
    _last: dict = PrivateAttr(default_factory=dict)

    @classmethod
    def class_name(cls) -> str:
        return "AutoActivatedReranker"

    @property
    def last(self) -> dict:
        return self._last

    @property
    def counters(self) -> dict:
        return getattr(self.inner, "counters", {})

    def _postprocess_nodes(self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
                           ) -> list[NodeWithScore]:
        question = query_bundle.query_str if query_bundle else ""
        why = activation(question, [float(n.score or 0.0) for n in nodes], self.min_query_tokens,
                         self.max_top_score, self.min_spread)
        self._last = {"fired": bool(why), "why": why}
        if why:
            return self.inner.postprocess_nodes(nodes, query_bundle=query_bundle)
        return list(nodes[: self.top_n])


def low_confidence(scores: Sequence[float], min_top_score: float) -> bool:
    """Retrieval too weak to answer from: nothing retrieved, or the best score under the bar."""
    return not scores or max(scores) < min_top_score


class LowConfidenceGuard(BaseNodePostprocessor):
    """For the query engine: passes nodes through, or none when :func:`low_confidence` (so the
    generator answers "not enough information" without a call)."""

    min_top_score: float = Field(default=0.3)

    @classmethod
    def class_name(cls) -> str:
        return "LowConfidenceGuard"

    def _postprocess_nodes(self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
                           ) -> list[NodeWithScore]:
        return [] if low_confidence([float(n.score or 0.0) for n in nodes], self.min_top_score) else nodes
