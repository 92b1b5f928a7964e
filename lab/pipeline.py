"""The pipeline an experiment builds, usable outside the evaluator.

:func:`resolve_models` checks every model of a config at start-up (weights present, keys set)
before any work; :func:`open_pipeline` opens (or builds) the index and wires retriever,
postprocessors and generator; :meth:`Pipeline.query_engine` returns a LlamaIndex query engine
over the LanceDB index::

    from lab.pipeline import query_engine
    engine = query_engine("turn13")
    response = engine.query("Where is Harrowfield Aerial headquartered?")
    print(response, response.metadata["timings"])
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab.config import ExperimentConfig


@dataclass
class ModelPlans:
    embedding: Any  # lab.models.ResolvedModel
    reranker: Any  # lab.rerank.RerankerPlan | None
    generation: Any  # lab.llm.LLMPlan | None
    judge: Any  # lab.llm.LLMPlan | None


def project_path(project_root: Path, value: str) -> Path:
    """A config path: absolute as written, else relative to the project root."""
    p = Path(value).expanduser()
    return p if p.is_absolute() else (project_root / p)


def resolve_models(cfg: ExperimentConfig, project_root: Path | None) -> ModelPlans:
    """Resolve every model the config names; stops with a clear error before any work."""
    from lab.llm import resolve_llm
    from lab.models import offline_env_for, resolve_hf_model
    from lab.prompts import load_prompt
    from lab.rerank import resolve_reranker

    embed = resolve_hf_model(cfg.embedding.model, "embedding model")
    rerank = resolve_reranker(cfg.reranker)
    hf = [embed] + ([rerank.model] if rerank and rerank.model.source != "gguf" else [])
    offline_env_for(hf)
    gen = judge = None
    if cfg.generation is not None:
        from lab.generation import ANSWER_FIELDS

        load_prompt(cfg.generation.prompt, ANSWER_FIELDS, where="generation.prompt")
        gen = resolve_llm(cfg.generation.llm, "generation", project_root)
    if cfg.judge is not None:
        from lab.judge import JUDGE_FIELDS

        load_prompt(cfg.judge.prompt, JUDGE_FIELDS, where="judge.prompt")
        judge = resolve_llm(cfg.judge.llm, "judge", project_root)
    return ModelPlans(embed, rerank, gen, judge)


@dataclass
class Pipeline:
    cfg: ExperimentConfig
    plans: ModelPlans
    corpus: Any
    embed_model: Any
    handle: Any  # lab.index.IndexHandle
    retriever: Any
    reranker: Any
    generator: Any  # lab.llm.LabLLM | None
    synthesizer: Any  # lab.generation.LabSynthesizer | None
    timings: dict = field(default_factory=dict)
    cache_root: Path | None = None
    counters: dict = field(default_factory=dict)  # query-side caches, filled by the evaluator

    @property
    def candidate_k(self) -> int | None:
        """How many retrieved nodes the reranker scores (None without a reranker)."""
        r = self.cfg.reranker
        return None if r is None else (r.candidate_k or self.cfg.retriever.top_k)

    def postprocessors(self) -> list:
        out: list = []
        g = self.cfg.guardrail
        if g is not None and g.suppress_generation:  # on first-stage scores, before any rerank
            from lab.second_stage import LowConfidenceGuard

            out.append(LowConfidenceGuard(min_top_score=g.min_top_score))
        if self.reranker is not None:
            from lab.rerank import KeepFirst

            out += [KeepFirst(k=self.candidate_k), self.reranker]
        return out

    def query_engine(self) -> Any:
        from lab.generation import LabQueryEngine

        if self.synthesizer is None:
            from lab.errors import ConfigError

            raise ConfigError(f"experiment {self.cfg.name!r} has no generation section: it only retrieves")
        return LabQueryEngine(self.retriever, self.synthesizer, self.postprocessors())


def load_corpus(cfg: ExperimentConfig, project_root: Path) -> Any:
    from lab.ingest import load_folder

    return load_folder(project_path(project_root, cfg.data.knowledge_base), cfg.loader.extensions,
                       cfg.loader.max_file_bytes, cfg.embedding.embed_metadata)


def open_pipeline(cfg: ExperimentConfig, plans: ModelPlans, project_root: Path, cache_root: Path,
                  show_progress: bool = True, corpus: Any = None) -> Pipeline:
    from lab.embeddings import VectorCache, build_embedding
    from lab.index import ensure_fts, open_or_build
    from lab.rerank import build_reranker
    from lab.retrieval import NEEDS_FTS, build_retriever

    timings: dict[str, float] = {}
    if corpus is None:
        t0 = time.perf_counter()
        corpus = load_corpus(cfg, project_root)
        timings["load_s"] = time.perf_counter() - t0
    embed_model = build_embedding(cfg.embedding, plans.embedding, cache_root)
    handle = open_or_build(corpus, cfg, embed_model, cache_root, show_progress=show_progress)
    timings.update(handle.timings)
    if cfg.retriever.name in NEEDS_FTS:
        t1 = time.perf_counter()
        ensure_fts(handle, cache_root)
        timings["fts_s"] = time.perf_counter() - t1
    retriever = build_retriever(cfg.retriever, handle.index, embed_model)
    reranker = None
    if plans.reranker is not None:
        reranker = build_reranker(plans.reranker, VectorCache(cache_root / "scores.sqlite"))
    generator = synthesizer = None
    if plans.generation is not None:
        from lab.generation import LabSynthesizer
        from lab.llm import build_llm

        generator = build_llm(plans.generation, cache_root)
        synthesizer = LabSynthesizer(generator, cfg.generation)
    return Pipeline(cfg, plans, corpus, embed_model, handle, retriever, reranker, generator, synthesizer, timings,
                    cache_root)


def query_engine(name: str, experiments_dir: Path = Path("experiments"), cache_root: Path | None = None) -> Any:
    """The query engine of ``experiments/<name>.yaml`` (index built on first use)."""
    from lab.config import load_experiment
    from lab.models import cache_dir

    cfg = load_experiment(name, experiments_dir)
    root = experiments_dir.resolve().parent
    plans = resolve_models(cfg, root)
    return open_pipeline(cfg, plans, root, cache_root or cache_dir(), show_progress=False).query_engine()
