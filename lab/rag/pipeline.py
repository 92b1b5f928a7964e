"""The system an experiment builds, usable outside the evaluator.

:func:`resolve_models` checks every model of the pipeline at start-up (weights present, keys set)
before any work; :func:`open_pipeline` opens (or builds) the index and wires retriever, the
second-stage chain (:func:`lab.rag.postprocess.build_chain`) and generator;
:meth:`Pipeline.query_engine` returns a LlamaIndex query engine over the LanceDB index::

    from lab.rag.pipeline import query_engine
    engine = query_engine("turn13", kb="~/my-docs")  # kb: your documents in place of the config's
    response = engine.query("Where is Harrowfield Aerial headquartered?")
    print(response, response.metadata["timings"])

The evaluator (:mod:`lab.eval`) uses the same :class:`Pipeline`: the same retriever, the same
chain and the same synthesizer, so a question is ranked and answered alike either way. This
module knows nothing of judges or metrics.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle

from lab.caches import SemanticQueryCache, VectorCache
from lab.config import ExperimentConfig, load_experiment, run_overrides
from lab.errors import ConfigError
from lab.models.embeddings import LabEmbedding, build_embedding
from lab.models.llm import LabLLM, build_llm
from lab.models.resolve import LLMPlan, ResolvedModel, offline_env_for, resolve_hf_model, resolve_llm
from lab.paths import cache_dir, project_path
from lab.prompts import Prompt
from lab.rag.generation import LabQueryEngine, LabSynthesizer, load_answer_prompt
from lab.rag.index import IndexHandle, ensure_fts, open_or_build
from lab.rag.loaders import Corpus, load_folder
from lab.rag.postprocess import Chain, ChainPostprocessor, RerankerPlan, build_chain, build_reranker, resolve_reranker
from lab.rag.query import load_query_prompt, wrap_retriever
from lab.rag.summaries import DocumentSummarizer, load_summary_prompt
from lab.rag.retrievers import NEEDS_FTS, build_retriever
from lab.rag.semantic_cache import SemanticCachedRetriever, open_semantic_cache, pipeline_scope

log = logging.getLogger(__name__)


@dataclass
class ModelPlans:
    """The pipeline's models, resolved (nothing loaded yet)."""

    embedding: ResolvedModel
    reranker: RerankerPlan | None
    generation: LLMPlan | None
    query: LLMPlan | None = None  # the query section's LLM (rewrites)
    summary: LLMPlan | None = None  # headers.summary's LLM (document summaries, while building)
    #: the prompts, loaded and checked once at start-up: "generation", "query", "summary"
    prompts: dict[str, Prompt] = field(default_factory=dict)


def resolve_models(cfg: ExperimentConfig, project_root: Path | None) -> ModelPlans:
    """Resolve every model the pipeline names; stops with a clear error before any work."""
    embed = resolve_hf_model(cfg.embedding.model, "embedding model")
    rerank = resolve_reranker(cfg.reranker)
    hf = [embed] + ([rerank.model] if rerank and rerank.model.source != "gguf" else [])
    offline_env_for(hf)
    gen = query = summary = None
    prompts: dict[str, Prompt] = {}
    if cfg.generation is not None:
        prompts["generation"] = load_answer_prompt(cfg.generation)
        gen = resolve_llm(cfg.generation.llm, "generation", project_root)
    if cfg.query is not None:
        prompts["query"] = load_query_prompt(cfg.query)
        query = resolve_llm(cfg.query.llm, "query rewriting", project_root)
    if cfg.headers is not None and cfg.headers.summary is not None:
        prompts["summary"] = load_summary_prompt(cfg.headers.summary)
        summary = resolve_llm(cfg.headers.summary.llm, "headers.summary", project_root)
    return ModelPlans(embed, rerank, gen, query, summary, prompts)


@dataclass
class Pipeline:
    cfg: ExperimentConfig
    plans: ModelPlans
    corpus: Corpus
    embed_model: LabEmbedding
    handle: IndexHandle
    retriever: BaseRetriever
    chain: Chain
    generator: LabLLM | None
    synthesizer: LabSynthesizer | None
    timings: dict = field(default_factory=dict)
    cache_root: Path | None = None
    query_llm: LabLLM | None = None  # rewrites questions (the query section)
    summary_llm: LabLLM | None = None  # summarises documents (headers.summary), when the index is built
    semantic: SemanticQueryCache | None = None  # the caches section's semantic query cache, if any

    @property
    def reranker(self) -> Any:
        return self.chain.reranker

    def retrieve_many(self, bundles: Sequence[QueryBundle]) -> list[list[NodeWithScore]]:
        """The first stage for many questions: the retriever's batched ``retrieve_many`` where it
        has one, else one ``retrieve`` per question, so a new retriever needs only ``_retrieve``."""
        many = getattr(self.retriever, "retrieve_many", None)
        if many is not None:
            return many(bundles)
        return [self.retriever.retrieve(b) for b in bundles]

    def rewrites(self, question: str) -> list[str] | None:
        """What the query section's LLM wrote for ``question`` (None without a query section)."""
        kept = getattr(self.retriever, "rewrites", None)
        return None if kept is None else kept.get(question, [])

    def pool(self, question: str) -> list[NodeWithScore] | None:
        """What the retriever chose its list from, where it keeps that (hybrid: every node the dense
        and the BM25 search returned, in fused order); None where the list is the first stage's."""
        pools = getattr(self.retriever, "pools", None)
        return None if pools is None else pools.get(question)

    def counters(self) -> dict[str, int]:
        """The pipeline's own counters since it opened: embeddings and reranker scores, computed
        and served from the cache."""
        rerank = getattr(self.reranker, "counters", None) or {}
        return {"embeddings_computed": self.embed_model.counters["computed"],
                "embeddings_cached": self.embed_model.counters["cached"],
                "rerank_scores_computed": rerank.get("computed", 0),
                "rerank_scores_cached": rerank.get("cached", 0)}

    def query_engine(self) -> LabQueryEngine:
        if self.synthesizer is None:
            raise ConfigError(f"experiment {self.cfg.name!r} has no generation section: it only retrieves")
        retriever = self.retriever
        if self.semantic is not None:  # `lab ask` is served from the same cache as the evaluator
            retriever = SemanticCachedRetriever(retriever, self.semantic, self.embed_model,
                                                self.handle.index.vector_store.table)
        return LabQueryEngine(retriever, self.synthesizer, [ChainPostprocessor(self.chain)])


def load_corpus(cfg: ExperimentConfig, project_root: Path) -> Corpus:
    return load_folder(project_path(project_root, cfg.data.knowledge_base), cfg.loader.extensions,
                       cfg.loader.max_file_bytes, cfg.embedding.embed_metadata, bool(cfg.loader.include_hidden))


def open_pipeline(cfg: ExperimentConfig, plans: ModelPlans, project_root: Path, cache_root: Path,
                  show_progress: bool = True, corpus: Corpus | None = None) -> Pipeline:
    timings: dict[str, float] = {}
    if corpus is None:
        t0 = time.perf_counter()
        corpus = load_corpus(cfg, project_root)
        timings["load_s"] = time.perf_counter() - t0
    embed_model = build_embedding(cfg.embedding, plans.embedding, cache_root)
    summary_llm = summarizer = None
    if plans.summary is not None and cfg.headers is not None and cfg.headers.summary is not None:
        summary_llm = build_llm(plans.summary, cache_root)  # the model loads at its first call
        summarizer = DocumentSummarizer(summary_llm, cfg.headers.summary, plans.prompts.get("summary"))
    handle = open_or_build(corpus, cfg, embed_model, cache_root, show_progress=show_progress,
                           summarizer=summarizer)
    timings.update(handle.timings)
    if cfg.retriever.top_k > handle.n_chunks:
        log.warning("retriever.top_k is %d but the index has %d chunks: every question gets at most %d",
                    cfg.retriever.top_k, handle.n_chunks, handle.n_chunks)
    if cfg.retriever.name in NEEDS_FTS:
        t1 = time.perf_counter()
        ensure_fts(handle, cache_root)
        timings["fts_s"] = time.perf_counter() - t1
    retriever = build_retriever(cfg.retriever, handle.index, embed_model)
    query_llm = build_llm(plans.query, cache_root) if plans.query is not None else None
    retriever = wrap_retriever(retriever, cfg.query, query_llm, cfg.retriever.top_k, show_progress,
                               plans.prompts.get("query"))
    reranker = None
    if plans.reranker is not None:
        reranker = build_reranker(plans.reranker, VectorCache(cache_root / "scores.sqlite"))
    generator = synthesizer = None
    if plans.generation is not None:
        generator = build_llm(plans.generation, cache_root)
        synthesizer = LabSynthesizer(generator, cfg.generation, plans.prompts.get("generation"))
    semantic = open_semantic_cache(cfg.caches, cache_root,
                                   pipeline_scope(handle.key, handle.index.vector_store.ann_query, cfg.query),
                                   cfg.retriever, embed_model.fingerprint, embed_model.query_prefix)
    return Pipeline(cfg, plans, corpus, embed_model, handle, retriever, build_chain(cfg, reranker), generator,
                    synthesizer, timings, cache_root, query_llm, summary_llm, semantic)


def query_engine(name: str, experiments_dir: Path = Path("experiments"), cache_root: Path | None = None, *,
                 kb: str | Path | None = None, eval_set: str | Path | None = None) -> LabQueryEngine:
    """The query engine of ``experiments/<name>.yaml`` (index built on first use); ``kb`` is a
    knowledge-base folder searched in place of the config's ``data.knowledge_base`` (as ``--kb``),
    ``eval_set`` an eval set in place of ``data.eval_set`` (as ``--eval``)."""
    cfg = load_experiment(name, experiments_dir, run_overrides(kb, eval_set))
    root = experiments_dir.resolve().parent
    plans = resolve_models(cfg, root)
    return open_pipeline(cfg, plans, root, cache_root or cache_dir(), show_progress=False).query_engine()
