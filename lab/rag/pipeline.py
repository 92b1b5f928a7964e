"""The system an experiment builds, usable outside the evaluator.

:func:`resolve_models` checks every model of the pipeline at start-up (weights present, keys set)
before any work; :func:`open_pipeline` opens (or builds) the index and wires retriever, the
second-stage chain (:func:`lab.rag.postprocess.build_chain`) and generator;
:meth:`Pipeline.query_engine` returns a LlamaIndex query engine over the LanceDB index::

    from lab.rag.pipeline import query_engine
    engine = query_engine("turn13")
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
from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever

from lab.caches import VectorCache
from lab.config import ExperimentConfig, load_experiment
from lab.errors import ConfigError
from lab.models.embeddings import LabEmbedding, build_embedding
from lab.models.llm import LabLLM, build_llm
from lab.models.resolve import LLMPlan, ResolvedModel, offline_env_for, resolve_hf_model, resolve_llm
from lab.paths import cache_dir, project_path
from lab.prompts import load_prompt
from lab.rag.generation import ANSWER_FIELDS, LabQueryEngine, LabSynthesizer
from lab.rag.index import IndexHandle, ensure_fts, open_or_build
from lab.rag.loaders import Corpus, load_folder
from lab.rag.postprocess import Chain, ChainPostprocessor, RerankerPlan, build_chain, build_reranker, resolve_reranker
from lab.rag.query import wrap_retriever
from lab.rag.summaries import DocumentSummarizer
from lab.rag.retrievers import NEEDS_FTS, build_retriever

log = logging.getLogger(__name__)


@dataclass
class ModelPlans:
    """The pipeline's models, resolved (nothing loaded yet)."""

    embedding: ResolvedModel
    reranker: RerankerPlan | None
    generation: LLMPlan | None
    query: LLMPlan | None = None  # the query section's LLM (rewrites)
    summary: LLMPlan | None = None  # headers.summary's LLM (document summaries, while building)


def resolve_models(cfg: ExperimentConfig, project_root: Path | None) -> ModelPlans:
    """Resolve every model the pipeline names; stops with a clear error before any work."""
    embed = resolve_hf_model(cfg.embedding.model, "embedding model")
    rerank = resolve_reranker(cfg.reranker)
    hf = [embed] + ([rerank.model] if rerank and rerank.model.source != "gguf" else [])
    offline_env_for(hf)
    gen = None
    if cfg.generation is not None:
        load_prompt(cfg.generation.prompt, ANSWER_FIELDS, where="generation.prompt")
        gen = resolve_llm(cfg.generation.llm, "generation", project_root)
    query = None
    if cfg.query is not None:
        load_prompt(cfg.query.prompt_name, {"n", "question", "history"}, where="query.prompt")
        query = resolve_llm(cfg.query.llm, "query rewriting", project_root)
    summary = None
    if cfg.headers is not None and cfg.headers.summary is not None:
        load_prompt(cfg.headers.summary.prompt, {"name", "document"}, where="headers.summary.prompt")
        summary = resolve_llm(cfg.headers.summary.llm, "headers.summary", project_root)
    return ModelPlans(embed, rerank, gen, query, summary)


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

    @property
    def reranker(self) -> Any:
        return self.chain.reranker

    def query_engine(self) -> LabQueryEngine:
        if self.synthesizer is None:
            raise ConfigError(f"experiment {self.cfg.name!r} has no generation section: it only retrieves")
        return LabQueryEngine(self.retriever, self.synthesizer, [ChainPostprocessor(self.chain)])


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
        summarizer = DocumentSummarizer(summary_llm, cfg.headers.summary)
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
    retriever = wrap_retriever(retriever, cfg.query, query_llm, cfg.retriever.top_k, show_progress)
    reranker = None
    if plans.reranker is not None:
        reranker = build_reranker(plans.reranker, VectorCache(cache_root / "scores.sqlite"))
    generator = synthesizer = None
    if plans.generation is not None:
        generator = build_llm(plans.generation, cache_root)
        synthesizer = LabSynthesizer(generator, cfg.generation)
    return Pipeline(cfg, plans, corpus, embed_model, handle, retriever, build_chain(cfg, reranker), generator,
                    synthesizer, timings, cache_root, query_llm, summary_llm)


def query_engine(name: str, experiments_dir: Path = Path("experiments"), cache_root: Path | None = None
                 ) -> LabQueryEngine:
    """The query engine of ``experiments/<name>.yaml`` (index built on first use)."""
    cfg = load_experiment(name, experiments_dir)
    root = experiments_dir.resolve().parent
    plans = resolve_models(cfg, root)
    return open_pipeline(cfg, plans, root, cache_root or cache_dir(), show_progress=False).query_engine()
