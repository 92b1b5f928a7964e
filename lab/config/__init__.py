"""Experiment configs: the schema (:mod:`lab.config.schema`, :mod:`lab.config.components`) and
loading with ``extends:`` and overrides (:mod:`lab.config.load`), in one namespace."""

from lab.config.components import (
    ANN_KINDS,
    AnnConfig,
    AutoActivation,
    BM25Retriever,
    CachesConfig,
    ChunkerConfig,
    EmbeddingConfig,
    FixedTokenChunker,
    FlagEmbeddingRerankerConfig,
    GuardrailConfig,
    HybridRetriever,
    IndexConfig,
    KeywordOverlapRerankerConfig,
    LLMPointwiseRerankerConfig,
    LoaderConfig,
    PageChunker,
    ParentChildChunker,
    RecursiveCharacterChunker,
    RerankerConfig,
    RetrieverConfig,
    SemanticChunker,
    SentenceWindowChunker,
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
    run_overrides,
    set_path,
)
from lab.config.answering import (
    CharBudgetContext,
    ContextConfig,
    GenerationConfig,
    LLMConfig,
    QueryConfig,
    TokenBudgetContext,
    TopNContext,
)
from lab.config.target import PIPELINE_SECTIONS, RequestKeys, ResponsePaths, TargetConfig
from lab.config.schema import (
    DEFAULT_CATEGORIES,
    SCHEMA_VERSION,
    DataConfig,
    ExperimentConfig,
    GateConfig,
    HeadersConfig,
    JudgeConfig,
    MergeConfig,
    MetricsConfig,
    RagasConfig,
    ReportConfig,
    SampleConfig,
    SummaryConfig,
    TrackingConfig,
)

__all__ = [
    "ANN_KINDS", "AnnConfig", "ANSWER_SECTIONS", "AutoActivation", "BM25Retriever", "CachesConfig", "CharBudgetContext", "ChunkerConfig",
    "ContextConfig", "DataConfig", "DEFAULT_CATEGORIES", "EmbeddingConfig", "ExperimentConfig", "FixedTokenChunker",
    "FlagEmbeddingRerankerConfig", "GateConfig", "GenerationConfig", "GuardrailConfig", "HeadersConfig", "HybridRetriever", "IndexConfig", "JudgeConfig",
    "KeywordOverlapRerankerConfig", "LLMConfig", "LLMPointwiseRerankerConfig", "LoaderConfig", "MetricsConfig",
    "PageChunker", "ParentChildChunker", "PIPELINE_SECTIONS", "QueryConfig", "RagasConfig", "RecursiveCharacterChunker", "RequestKeys", "RerankerConfig", "ReportConfig", "ResponsePaths", "RetrieverConfig",
    "MergeConfig", "SampleConfig", "SummaryConfig", "SCHEMA_VERSION", "SemanticChunker", "SentenceTransformerRerankerConfig", "SentenceWindowChunker", "Strict",
    "TargetConfig", "TokenBudgetContext", "TopNContext", "TrackingConfig", "VectorRetriever", "component_names", "dump_yaml", "experiment_path",
    "load_experiment", "merge", "retrieval_only", "run_overrides", "set_path",
]
