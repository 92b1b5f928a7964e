"""The second stage: node postprocessors between retrieval and the answer, composed once.

:func:`build_chain` composes guard -> candidate cut -> rerank for an experiment; the query
engine (``lab ask``, :mod:`lab.rag.pipeline`) and the evaluator (:mod:`lab.eval.stages`) both
call :meth:`Chain.apply`, so they rank alike by construction.

- rerankers, registered in :data:`RERANKERS` under their config ``name``:
  ``flag_embedding`` (LlamaIndex ``FlagEmbeddingReranker``, bge-reranker models),
  ``sentence_transformer`` (LlamaIndex ``SentenceTransformerRerank``, ms-marco cross-encoders),
  ``llm_pointwise`` (a local LLM, :mod:`lab.rag.llm_reranker`), ``keyword_overlap``
  (:class:`KeywordOverlapReranker`, no model), ``doc_boost`` and ``doc_type_filter``
  (document-level signals, no model: :mod:`lab.rag.documents`);
- :class:`AutoActivatedReranker`, a policy that runs a reranker only when the first stage looks
  unsure; :class:`KeepFirst`, the candidate cut;
- :func:`low_confidence`, the guardrail for questions retrieval cannot answer.

Models resolve at start-up (:func:`resolve_reranker`), before any index is built, so a missing
cross-encoder stops the run at once with a message saying how to supply it. The pure decision
functions (:func:`jaccard`, :func:`activation`, :func:`low_confidence`) are what the tests check
by hand.
"""

from __future__ import annotations

import math
import re
import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, QueryBundle

from lab.config import ExperimentConfig, GuardrailConfig, HeadersConfig, MergeConfig, RerankerConfig
from lab.errors import CacheError, LabError
from lab.models.device import pick_device
from lab.models.resolve import ResolvedModel, resolve_gguf, resolve_hf_model
from lab.rag.cross_encoder import cache_scores
from lab.rag.sent import merge_by_document, send_headers, send_windows
from lab.rag.documents import DocBoostReranker, DocTypeFilter
from lab.rag.llm_reranker import LlamaCppRelevanceScorer, LLMPointwiseReranker
from lab.rag.retrievers import hide_from_models, z_fusion
from lab.registry import Registry

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





# ---------------------------------------------------------------------------------------------
# Rerankers from config


@dataclass
class RerankerPlan:
    """A reranker config with its model resolved (no weights loaded yet)."""

    cfg: RerankerConfig
    model: ResolvedModel


def resolve_reranker(cfg: RerankerConfig | None) -> RerankerPlan | None:
    if cfg is None:
        return None
    RERANKERS.check(cfg.name, where="reranker.name")
    if cfg.name in MODEL_FREE:
        return RerankerPlan(cfg, ResolvedModel(cfg.name.replace("_", "-"), "builtin", "builtin"))
    if cfg.name == "llm_pointwise":
        path = resolve_gguf(cfg.model)
        return RerankerPlan(cfg, ResolvedModel(cfg.model, str(path), "gguf"))
    kind = "reranker model (cross-encoder)"
    try:
        return RerankerPlan(cfg, resolve_hf_model(cfg.model, kind))
    except LabError as exc:
        exc.hint = (exc.hint or "") + (
            "; or run the experiment turn22-offline, whose second stage runs with packaged models; or train a "
            "cross-encoder on your documents (lab tune reranker --index turn18 --pseudo 1000 --out reranker-semantic) "
            "and run turn22-tuned"
        )
        raise


RERANKERS: Registry[Callable[[RerankerPlan, Any], BaseNodePostprocessor]] = Registry("reranker")
#: Rerankers that load no model (their plan names no weights).
MODEL_FREE = {"keyword_overlap", "doc_boost", "doc_type_filter"}


class FusedReranker(BaseNodePostprocessor):
    """A model reranker's order fused with the first stage's, for every reranker with a
    ``first_stage_weight`` (the cross-encoders and ``llm_pointwise``): ``inner`` (keeping every
    candidate) scores them, and the order is by ``z(inner) + weight * z(first)``
    (:func:`lab.rag.retrievers.z_fusion`); the best ``top_n`` are kept with that score."""

    inner: Any = Field(default=None)
    weight: float = Field(default=0.0)
    top_n: int = Field(default=3)

    @classmethod
    def class_name(cls) -> str:
        return "FusedReranker"

    @property
    def counters(self) -> dict:
        return getattr(self.inner, "counters", {})

    def _postprocess_nodes(self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
                           ) -> list[NodeWithScore]:
        first = [float(n.score or 0.0) for n in nodes]
        # LlamaIndex's rerankers set the score of the nodes they are given: they get copies
        scored = self.inner.postprocess_nodes([NodeWithScore(node=n.node, score=n.score) for n in nodes],
                                              query_bundle=query_bundle)
        by_id = {n.node.node_id: float(n.score or 0.0) for n in scored}
        fused = z_fusion([by_id[n.node.node_id] for n in nodes], first, self.weight)
        order = sorted(range(len(nodes)), key=lambda i: -fused[i])  # stable: ties keep retrieval order
        return [NodeWithScore(node=nodes[i].node, score=fused[i]) for i in order[: self.top_n]]


def _fused(plan: RerankerPlan, make: Callable[[int], BaseNodePostprocessor]) -> BaseNodePostprocessor:
    """``make(top_n)``, the model reranker; fused with the first stage when the config's
    ``first_stage_weight`` is set (null is off: the config reads 0 as null)."""
    w = plan.cfg.first_stage_weight
    if w is None:
        return make(plan.cfg.top_n)
    return FusedReranker(inner=make(10**6), weight=w, top_n=plan.cfg.top_n)


@RERANKERS.register("flag_embedding")
def _flag(plan: RerankerPlan, cache: Any) -> BaseNodePostprocessor:
    try:
        from llama_index.postprocessor.flag_embedding_reranker import FlagEmbeddingReranker
    except ImportError:
        raise LabError(
            "reranker 'flag_embedding' needs llama-index-postprocessor-flag-embedding-reranker",
            hint="pip install -e '.[flag]' inside .venv",
        ) from None
    return _fused(plan, lambda top_n: FlagEmbeddingReranker(model=plan.model.location, top_n=top_n,
                                                             use_fp16=plan.cfg.use_fp16))


@RERANKERS.register("sentence_transformer")
def _st(plan: RerankerPlan, cache: Any) -> BaseNodePostprocessor:
    from llama_index.core.postprocessor import SentenceTransformerRerank

    device = pick_device(plan.cfg.device, "reranker.device")  # auto: CUDA, then MPS, then the CPU
    return _fused(plan, lambda top_n: cache_scores(SentenceTransformerRerank(
        model=plan.model.location, top_n=top_n, device=device), plan.model.location, cache))


@RERANKERS.register("llm_pointwise")
def _llm(plan: RerankerPlan, cache: Any) -> BaseNodePostprocessor:
    scorer = LlamaCppRelevanceScorer(
        plan.model.location,
        n_ctx=plan.cfg.n_ctx,
        n_threads=plan.cfg.n_threads,
    )
    return _fused(plan, lambda top_n: LLMPointwiseReranker(scorer=scorer, top_n=top_n,
                                                           max_passage_chars=plan.cfg.max_passage_chars,
                                                           cache=cache))


@RERANKERS.register("keyword_overlap")
def _overlap(plan: RerankerPlan, cache: Any) -> BaseNodePostprocessor:
    c = plan.cfg
    return KeywordOverlapReranker(vector_weight=c.vector_weight, overlap_weight=c.overlap_weight,
                                  min_score=c.min_score, top_n=c.top_n)


@RERANKERS.register("doc_boost")
def _doc_boost(plan: RerankerPlan, cache: Any) -> BaseNodePostprocessor:
    c = plan.cfg
    return DocBoostReranker(weight=c.weight, aggregate=c.aggregate, top_n=c.top_n)


@RERANKERS.register("doc_type_filter")
def _doc_type_filter(plan: RerankerPlan, cache: Any) -> BaseNodePostprocessor:
    return DocTypeFilter(top_n=plan.cfg.top_n)


class KeepFirst(BaseNodePostprocessor):
    """Keeps the first ``k`` nodes: the candidates a reranker scores (``candidate_k``), as copies:
    LlamaIndex's cross-encoder rerankers overwrite the scores of the nodes they get, and the
    evaluator records the first stage's scores after reranking."""

    k: int = Field(default=5)

    @classmethod
    def class_name(cls) -> str:
        return "KeepFirst"

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        return [NodeWithScore(node=n.node, score=n.score) for n in nodes[: self.k]]


def build_reranker(plan: RerankerPlan | None, cache: Any) -> BaseNodePostprocessor | None:
    if plan is None:
        return None
    inner = RERANKERS.get(plan.cfg.name)(plan, cache)
    a = plan.cfg.activation
    if a is None:
        return inner
    return AutoActivatedReranker(inner=inner, top_n=plan.cfg.top_n, min_query_tokens=a.min_query_tokens,
                                 max_top_score=a.max_top_score, min_spread=a.min_spread)


# ---------------------------------------------------------------------------------------------
# The chain


@dataclass
class Ranked:
    """What the chain made of one question's first-stage nodes."""

    nodes: list[NodeWithScore]  # the final ranking (the guard never empties it: metrics score it)
    low_confidence: bool | None  # the guardrail's verdict; None without a guardrail
    suppress: bool  # answer "not enough information" without context or a model call
    rerank: dict | None  # auto-activation's decision {fired, why}; None without a policy
    rerank_s: float | None  # seconds in the candidate cut and reranker; None without a reranker


@dataclass
class Chain:
    """guard -> candidate cut -> rerank, for one experiment (see :func:`build_chain`)."""

    guardrail: GuardrailConfig | None
    candidate_k: int | None  # how many first-stage nodes the reranker scores
    reranker: BaseNodePostprocessor | None
    windows: bool = False  # sentence-window or child chunks: send each one's window or parent
    headers: HeadersConfig | None = None  # headers.send: each node leaves with its header's line
    merge: MergeConfig | None = None  # chunks of one document leave as one passage

    def apply(self, first: list[NodeWithScore], query_bundle: QueryBundle, rank_suppressed: bool = True) -> Ranked:
        """Rank one question. The guard judges the first-stage scores; ``rank_suppressed`` False
        skips reranking a question the guard suppresses (the query engine sends it nothing).
        Sentence-window nodes leave as their windows (:func:`lab.rag.sent.send_windows`), and
        merged by document with ``merge`` (:func:`lab.rag.sent.merge_by_document`), and with
        ``headers.send`` under their header's line (:func:`lab.rag.sent.send_headers`)."""
        g = self.guardrail
        low = None if g is None else low_confidence([score_float(n.score) or 0.0 for n in first], g.min_top_score)
        suppress = bool(low) and g is not None and g.suppress_generation
        if self.reranker is None or (suppress and not rank_suppressed):
            return Ranked(self._sent(list(first)), low, suppress, None, None)
        t0 = time.perf_counter()
        candidates = KeepFirst(k=self.candidate_k).postprocess_nodes(first, query_bundle=query_bundle)
        final = self.reranker.postprocess_nodes(candidates, query_bundle=query_bundle)
        decision = dict(self.reranker.last) if isinstance(self.reranker, AutoActivatedReranker) else None
        return Ranked(self._sent(final), low, suppress, decision, time.perf_counter() - t0)

    def _sent(self, nodes: list[NodeWithScore]) -> list[NodeWithScore]:
        sent = send_windows(nodes) if self.windows else nodes
        if self.merge is not None:
            sent = merge_by_document(sent, self.merge.joiner)
        return send_headers(sent, self.headers) if self.headers is not None else sent


class ChainPostprocessor(BaseNodePostprocessor):
    """A :class:`Chain` as one LlamaIndex node postprocessor, for the query engine: the ranked
    nodes, or none when the guard suppresses the question (so the generator answers "not enough
    information" without a call)."""

    _chain: Chain = PrivateAttr()

    def __init__(self, chain: Chain, **kwargs: Any):
        super().__init__(**kwargs)
        self._chain = chain

    @classmethod
    def class_name(cls) -> str:
        return "ChainPostprocessor"

    def _postprocess_nodes(self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
                           ) -> list[NodeWithScore]:
        ranked = self._chain.apply(nodes, query_bundle or QueryBundle(query_str=""), rank_suppressed=False)
        return [] if ranked.suppress else ranked.nodes


def build_chain(cfg: ExperimentConfig, reranker: BaseNodePostprocessor | None) -> Chain:
    """The experiment's second stage: its guardrail, its candidate cut (``reranker.candidate_k``,
    default every retrieved node) and its reranker (built by :func:`build_reranker`)."""
    r = cfg.reranker
    candidate_k = None if r is None else (r.candidate_k or cfg.retriever.top_k)
    send = cfg.headers if cfg.headers is not None and cfg.headers.send else None
    return Chain(cfg.guardrail, candidate_k, reranker, windows=cfg.chunker.sends_windows,
                 headers=send, merge=cfg.merge)


def score_float(score: object) -> float | None:
    """Scores as plain floats (rerankers may return numpy scalars, which JSON cannot hold); a
    score that is not finite (a damaged index or score cache) stops here, before any metric."""
    if score is None:
        return None
    value = float(score)  # type: ignore[arg-type]
    if not math.isfinite(value):
        raise CacheError(f"a retrieval score is {value}: an index or a score cache is damaged",
                         hint="move the cache's indexes/ folder and scores.sqlite aside (or delete them), then "
                              "run again: both are built again, the embeddings read from the cache")
    return value
