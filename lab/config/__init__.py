"""Experiment configs: the schema (:mod:`lab.config.schema`, :mod:`lab.config.components`) and
loading with ``extends:`` and overrides (:mod:`lab.config.load`), in one namespace."""

from lab.config.components import (
    AutoActivation,
    BM25Retriever,
    CachesConfig,
    ChunkerConfig,
    EmbeddingConfig,
    FixedTokenChunker,
    FlagEmbeddingRerankerConfig,
    GuardrailConfig,
    HybridRetriever,
    KeywordOverlapRerankerConfig,
    LLMPointwiseRerankerConfig,
    LoaderConfig,
    PageChunker,
    RecursiveCharacterChunker,
    RerankerConfig,
    RetrieverConfig,
    SemanticChunker,
    SentenceTransformerRerankerConfig,
    Strict,
    VectorRetriever,
)
from lab.config.load import (
    ANSWER_SECTIONS,
    component_names,
    dump_yaml,
    experiment_path,
    load_experiment,
    merge,
    retrieval_only,
    set_path,
)
from lab.config.schema import (
    DEFAULT_CATEGORIES,
    SCHEMA_VERSION,
    CharBudgetContext,
    ContextConfig,
    DataConfig,
    ExperimentConfig,
    GenerationConfig,
    JudgeConfig,
    LLMConfig,
    MetricsConfig,
    RagasConfig,
    ReportConfig,
    SampleConfig,
    TokenBudgetContext,
    TopNContext,
)

__all__ = [
    "ANSWER_SECTIONS", "AutoActivation", "BM25Retriever", "CachesConfig", "CharBudgetContext", "ChunkerConfig",
    "ContextConfig", "DataConfig", "DEFAULT_CATEGORIES", "EmbeddingConfig", "ExperimentConfig", "FixedTokenChunker",
    "FlagEmbeddingRerankerConfig", "GenerationConfig", "GuardrailConfig", "HybridRetriever", "JudgeConfig",
    "KeywordOverlapRerankerConfig", "LLMConfig", "LLMPointwiseRerankerConfig", "LoaderConfig", "MetricsConfig",
    "PageChunker", "RagasConfig", "RecursiveCharacterChunker", "RerankerConfig", "ReportConfig", "RetrieverConfig",
    "SampleConfig", "SCHEMA_VERSION", "SemanticChunker", "SentenceTransformerRerankerConfig", "Strict",
    "TokenBudgetContext", "TopNContext", "VectorRetriever", "component_names", "dump_yaml", "experiment_path",
    "load_experiment", "merge", "retrieval_only", "set_path",
]
