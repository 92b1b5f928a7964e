"""Experiment configs: YAML files validated by pydantic, with ``extends:`` inheritance.

A config names every choice of a run. ``turn18.yaml`` says ``extends: turn13`` and lists only
what changed; the fully resolved config is written into every run folder.

Merging rule for ``extends``: mappings merge key by key, the child winning; a component
section (``chunker``, ``retriever``, ``reranker``) whose ``name`` changes is replaced whole,
so a semantic chunker does not inherit ``chunk_size`` from a recursive one. ``reranker: null``
in a child removes the parent's reranker.
"""

from __future__ import annotations

import copy
import json
import re
import typing
from pathlib import Path
from typing import Annotated, Any, Literal, Union

import yaml
from pydantic import Field, ValidationError, model_validator

from lab.answer_config import (  # noqa: F401  (re-exported: the schema lives in one namespace)
    CharBudgetContext,
    ContextConfig,
    GenerationConfig,
    JudgeConfig,
    LLMConfig,
    RagasConfig,
    Strict,
    TokenBudgetContext,
    TopNContext,
)
from lab.errors import ConfigError

SCHEMA_VERSION = 1
DEFAULT_CATEGORIES = (
    "direct_fact",
    "temporal",
    "spanning",
    "comparative",
    "numerical",
    "relationship",
    "holistic",
)
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class DataConfig(Strict):
    knowledge_base: str = Field(description="Folder of documents, relative to the project root.")
    eval_set: str = Field(description="JSONL eval set, relative to the project root.")
    labels: str | None = Field(
        None, description="CSV query_id,relevant_ids (chunk ids separated by ;) for recall@k and MRR@k.")
    categories: list[str] = Field(
        default_factory=lambda: list(DEFAULT_CATEGORIES),
        description="Declared question categories; an eval row with another category is an error.",
    )


class LoaderConfig(Strict):
    name: Literal["folder"] = "folder"
    extensions: list[str] = Field(default_factory=lambda: [".md", ".txt"])
    max_file_bytes: int = Field(5_000_000, gt=0, description="Larger files are an error.")


class RecursiveCharacterChunker(Strict):
    """LangChain's RecursiveCharacterTextSplitter: sizes in characters."""

    name: Literal["recursive_character"]
    chunk_size: int = Field(1000, gt=0)
    chunk_overlap: int = Field(200, ge=0)
    separators: list[str] | None = None

    @model_validator(mode="after")
    def _overlap_below_size(self) -> "RecursiveCharacterChunker":
        if self.chunk_overlap >= self.chunk_size:
            raise ValueError(
                f"chunk_overlap ({self.chunk_overlap}) must be smaller than chunk_size ({self.chunk_size})"
            )
        return self


class SemanticChunker(Strict):
    """LlamaIndex SemanticSplitterNodeParser, with embeddings batched across documents."""

    name: Literal["semantic"]
    buffer_size: int = Field(1, ge=0)
    breakpoint_percentile_threshold: int = Field(95, gt=0, le=100)


class FixedTokenChunker(Strict):
    """Windows of a fixed number of tokens (tiktoken, offline) with an overlap in tokens."""

    name: Literal["fixed_token"]
    chunk_tokens: int = Field(600, gt=0)
    overlap_tokens: int = Field(90, ge=0, description="Tokens shared by consecutive chunks (90 = 15% of 600).")
    encoding: Literal["cl100k_base"] = Field("cl100k_base", description="The encoding shipped offline with llama-index-core.")

    @model_validator(mode="after")
    def _overlap_below_size(self) -> "FixedTokenChunker":
        if self.overlap_tokens >= self.chunk_tokens:
            raise ValueError(f"overlap_tokens ({self.overlap_tokens}) must be smaller than chunk_tokens "
                             f"({self.chunk_tokens})")
        return self


class PageChunker(Strict):
    """One chunk per PDF page; other documents by the recursive character splitter."""

    name: Literal["page"]
    chunk_size: int = Field(1000, gt=0, description="For documents without pages.")
    chunk_overlap: int = Field(200, ge=0, description="For documents without pages.")


ChunkerConfig = Annotated[
    Union[RecursiveCharacterChunker, SemanticChunker, FixedTokenChunker, PageChunker], Field(discriminator="name")
]


class EmbeddingConfig(Strict):
    model: str = Field(
        "sentence-transformers/all-MiniLM-L6-v2",
        description="Hub name, or a local folder. Resolved offline (see lab.models).",
    )
    embed_metadata: bool = Field(
        False, description="Prepend node metadata (source, doc_type) to the embedded text."
    )
    batch_size: int = Field(8, gt=0, description="Texts per forward pass; small batches are fastest on CPU.")
    query_prefix: str = ""
    passage_prefix: str = ""


class VectorRetriever(Strict):
    name: Literal["vector"]
    top_k: int = Field(4, gt=0)


class BM25Retriever(Strict):
    """BM25 through LanceDB's native full-text index over the chunks' text."""

    name: Literal["bm25"]
    top_k: int = Field(4, gt=0)


class HybridRetriever(Strict):
    """Dense top dense_k + BM25 top sparse_k, fused, top_k kept (see lab.hybrid)."""

    name: Literal["hybrid"]
    top_k: int = Field(4, gt=0)
    dense_k: int = Field(20, gt=0, description="Candidates from the dense (vector) side.")
    sparse_k: int = Field(20, gt=0, description="Candidates from the BM25 side.")
    fusion: Literal["weighted", "rrf"] = Field(
        "weighted", description="weighted: alpha * minmax(dense) + (1 - alpha) * minmax(bm25); rrf: reciprocal rank fusion.")
    alpha: float = Field(0.5, ge=0, le=1, description="Weight of the dense side in weighted fusion.")
    rrf_k: int = Field(60, gt=0, description="The k of RRF: score = sum of 1 / (rrf_k + rank).")


RetrieverConfig = Annotated[Union[VectorRetriever, BM25Retriever, HybridRetriever], Field(discriminator="name")]


class AutoActivation(Strict):
    """Run the reranker only for questions the first stage looks unsure about."""

    min_query_tokens: int = Field(10, ge=0, description="Fire for questions of more words than this.")
    max_top_score: float = Field(0.35, description="Fire when the best first-stage score is under this.")
    min_spread: float = Field(0.08, ge=0, description="Fire when best minus median score is under this.")


class _RerankerBase(Strict):
    top_n: int = Field(3, gt=0, description="How many nodes the reranker keeps.")
    candidate_k: int | None = Field(
        None,
        gt=0,
        description="How many of the retrieved nodes are scored (default: all retrieved).",
    )
    activation: AutoActivation | None = Field(
        None, description="null: always rerank; a mapping: only when the policy fires (recorded per question).")


class FlagEmbeddingRerankerConfig(_RerankerBase):
    name: Literal["flag_embedding"]
    model: str = "BAAI/bge-reranker-base"
    use_fp16: bool = False


class SentenceTransformerRerankerConfig(_RerankerBase):
    name: Literal["sentence_transformer"]
    model: str = "cross-encoder/ms-marco-MiniLM-L-6-v2"


class LLMPointwiseRerankerConfig(_RerankerBase):
    """A local LLM scores each (question, passage) pair: log P(yes) - log P(no)."""

    name: Literal["llm_pointwise"]
    model: str = Field("qwen2.5-coder-1.5b-instruct", description="A GGUF name or path.")
    first_stage_weight: float = Field(
        0.0,
        ge=0,
        description="0: order by the LLM's score alone; w > 0: by z(LLM) + w * z(first-stage "
        "score), z-scored over the candidates of each question.",
    )
    max_passage_chars: int = Field(1500, gt=0)
    n_ctx: int = Field(1024, gt=0)
    n_threads: int | None = None


class KeywordOverlapRerankerConfig(_RerankerBase):
    """final = vector_weight * first-stage score + overlap_weight * Jaccard(question, chunk words)."""

    name: Literal["keyword_overlap"]
    top_n: int = Field(5, gt=0)
    vector_weight: float = Field(0.7, ge=0)
    overlap_weight: float = Field(0.3, ge=0)
    min_score: float = Field(0.3, description="Chunks scoring under this are dropped.")


RerankerConfig = Annotated[
    Union[FlagEmbeddingRerankerConfig, SentenceTransformerRerankerConfig, LLMPointwiseRerankerConfig,
          KeywordOverlapRerankerConfig],
    Field(discriminator="name"),
]


class CachesConfig(Strict):
    """Query-side caches (the chunk-embedding cache is always on)."""

    query_embeddings: bool = Field(True, description="Serve repeated questions' embeddings from the cache.")
    semantic_threshold: float | None = Field(
        None, gt=0, le=1,
        description="Reuse the retrieval of an earlier question whose embedding is at least this cosine "
        "close (null: no semantic cache).")


class GuardrailConfig(Strict):
    """Flag questions whose first-stage retrieval is too weak to answer from."""

    min_top_score: float = Field(0.3, description="Flag when the best first-stage score is under this.")
    suppress_generation: bool = Field(
        True, description="Answer flagged questions 'not enough information' without calling the generator.")


class MetricsConfig(Strict):
    k: int = Field(10, gt=0, description="Cut-off of nDCG@k.")


class SampleConfig(Strict):
    limit: int | None = Field(None, gt=0, description="Evaluate a stratified sample of this size.")
    seed: int = 13


class ReportConfig(Strict):
    thresholds: dict[str, tuple[float, float]] = Field(
        default_factory=dict,
        description="Colour thresholds per metric, (green from, amber from), e.g. mrr: [0.9, 0.75]; "
        "they override the defaults and change only how reports look.",
    )

    @model_validator(mode="after")
    def _ordered(self) -> "ReportConfig":
        for metric, (good, ok) in self.thresholds.items():
            if good < ok:
                raise ValueError(f"thresholds.{metric}: green from {good} is below amber from {ok}; write [green, amber]")
        return self


class ExperimentConfig(Strict):
    schema_version: Literal[1] = SCHEMA_VERSION
    name: str = Field(description="Set from the file name.")
    description: str = ""
    extends: str | None = None
    data: DataConfig
    loader: LoaderConfig = Field(default_factory=LoaderConfig)
    chunker: ChunkerConfig
    embedding: EmbeddingConfig = Field(default_factory=EmbeddingConfig)
    retriever: RetrieverConfig
    reranker: RerankerConfig | None = None
    guardrail: GuardrailConfig | None = None
    caches: CachesConfig | None = None
    generation: GenerationConfig | None = Field(default_factory=GenerationConfig)
    judge: JudgeConfig | None = Field(default_factory=JudgeConfig)
    ragas: RagasConfig | None = None
    metrics: MetricsConfig = Field(default_factory=MetricsConfig)
    sample: SampleConfig = Field(default_factory=SampleConfig)
    report: ReportConfig = Field(default_factory=ReportConfig)

    @model_validator(mode="after")
    def _rerank_fits(self) -> "ExperimentConfig":
        r = self.reranker
        if r is not None:
            k = self.retriever.top_k
            if r.top_n > k:
                raise ValueError(f"reranker.top_n ({r.top_n}) exceeds retriever.top_k ({k})")
            if r.candidate_k is not None and not (r.top_n <= r.candidate_k <= k):
                raise ValueError(
                    f"reranker.candidate_k ({r.candidate_k}) must lie between top_n ({r.top_n}) "
                    f"and retriever.top_k ({k})"
                )
        if self.generation is None and (self.judge is not None or self.ragas is not None):
            raise ValueError("judge and ragas grade answers: they need a generation section (or set them to null)")
        return self

    def fingerprint(self) -> str:
        """A stable hash of the resolved config (used to spot edited configs); the sample and the
        report's colours do not change what a run computes, so they are left out, and so are unset
        (null) fields, so that a new optional section leaves earlier fingerprints as they were."""
        import hashlib

        body = self.model_dump(mode="json", exclude={"sample", "report"}, exclude_none=True)
        return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]


# ---------------------------------------------------------------------------------------------
# Loading

COMPONENT_SECTIONS = ("chunker", "retriever", "reranker", "context")


def experiment_path(name: str, experiments_dir: Path) -> Path:
    """Map an experiment NAME to its file, refusing names that leave ``experiments_dir``."""
    if not name or not _NAME_RE.match(name) or ".." in name:
        raise ConfigError(
            f"invalid experiment name {name!r}",
            hint="use the file name of a config in experiments/ without .yaml, e.g. turn13",
        )
    path = experiments_dir / f"{name}.yaml"
    if not path.is_file():
        available = sorted(p.stem for p in experiments_dir.glob("*.yaml"))
        import difflib

        close = difflib.get_close_matches(name, available, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise ConfigError(
            f"no experiment {name!r}: {path} does not exist",
            hint=f"{hint}available: {', '.join(available) or '(none)'}",
        )
    return path


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path} line {mark.line + 1}" if mark else str(path)
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"{where}: invalid YAML: {problem}", hint="fix the YAML syntax") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of keys, not {type(data).__name__}")
    return data


def merge(parent: dict[str, Any], child: dict[str, Any]) -> dict[str, Any]:
    """Merge ``child`` over ``parent`` (see the module docstring for the rule)."""
    out = copy.deepcopy(parent)
    for key, value in child.items():
        base = out.get(key)
        if isinstance(base, dict) and isinstance(value, dict):
            if key in COMPONENT_SECTIONS and value.get("name", base.get("name")) != base.get("name"):
                out[key] = copy.deepcopy(value)
            else:
                out[key] = merge(base, value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _resolve_raw(path: Path, experiments_dir: Path, chain: list[Path]) -> tuple[dict, list[Path]]:
    if path in chain:
        cycle = " -> ".join(p.stem for p in chain + [path])
        raise ConfigError(f"{chain[0]}: extends cycle: {cycle}", hint="remove one of the extends: lines")
    raw = _read_yaml(path)
    chain = chain + [path]
    parent_name = raw.get("extends")
    if parent_name is None:
        return raw, chain
    if not isinstance(parent_name, str):
        raise ConfigError(f"{path} line {_line_of(path, ('extends',))}: 'extends' must be an experiment name")
    parent_path = experiments_dir / f"{parent_name}.yaml"
    if not _NAME_RE.match(parent_name) or not parent_path.is_file():
        raise ConfigError(
            f"{path} line {_line_of(path, ('extends',))}: extends {parent_name!r}, "
            f"but {parent_path} does not exist",
            hint=f"available: {', '.join(sorted(p.stem for p in experiments_dir.glob('*.yaml')))}",
        )
    parent, chain = _resolve_raw(parent_path, experiments_dir, chain)
    return merge(parent, raw), chain


def _line_of(path: Path, loc: tuple) -> int | None:
    """1-based line of the key at ``loc`` in the YAML file, or None."""
    try:
        node = yaml.compose(path.read_text(encoding="utf-8"))
    except Exception:
        return None
    line = None
    for key in loc:
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                if k.value == str(key):
                    line, node = k.start_mark.line + 1, v
                    break
            else:
                return line
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            node = node.value[key]
            line = node.start_mark.line + 1
        else:
            return line
    return line


def _format_validation_error(exc: ValidationError, chain: list[Path]) -> str:
    lines = []
    for err in exc.errors():
        loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p in _TAGS))
        dotted = ".".join(str(p) for p in loc) or "(top level)"
        where = str(chain[0])
        for path in chain:  # the child first: report where the value was written
            line = _line_of(path, loc)
            if line is not None:
                where = f"{path} line {line}"
                break
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = "unknown key (remove it, or check its spelling against the docs)"
        elif err["type"] == "union_tag_invalid":
            msg = f"{msg} (valid names: {err['ctx'].get('expected_tags')})"
        lines.append(f"{where}: field '{dotted}': {msg}")
    return "\n".join(lines)


def component_names(union: Any) -> list[str]:
    """The ``name`` tags of a discriminated union of component configs."""
    inner = typing.get_args(union)[0]
    members = typing.get_args(inner) or (inner,)  # Union[X] collapses to X
    return [typing.get_args(m.model_fields["name"].annotation)[0] for m in members]


SECTION_UNIONS = {
    ("chunker",): ChunkerConfig,
    ("retriever",): RetrieverConfig,
    ("reranker",): RerankerConfig,
    ("generation", "context"): ContextConfig,
}
_TAGS = {tag for union in SECTION_UNIONS.values() for tag in component_names(union)}


def _check_component_names(raw: dict, chain: list[Path]) -> None:
    """Unknown component names fail with 'did you mean' and the valid names."""
    from lab.registry import Registry

    for loc, union in SECTION_UNIONS.items():
        value: Any = raw
        for part in loc:
            value = value.get(part) if isinstance(value, dict) else None
        if not (isinstance(value, dict) and "name" in value):
            continue
        section = ".".join(loc)
        reg: Registry[None] = Registry(section)
        for tag in component_names(union):
            reg.register(tag)(None)
        where = str(chain[0])
        for path in chain:
            line = _line_of(path, (*loc, "name"))
            if line is not None:
                where = f"{path} line {line}"
                break
        reg.check(str(value["name"]), where=f"{where}: field '{section}.name'")


def load_experiment(
    name: str,
    experiments_dir: Path,
    overrides: dict[str, Any] | None = None,
) -> ExperimentConfig:
    """Load, merge and validate ``experiments/<name>.yaml``.

    ``overrides`` is a nested mapping merged last (e.g. ``{"data": {"knowledge_base": ...}}``).
    """
    path = experiment_path(name, experiments_dir)
    raw, chain = _resolve_raw(path, experiments_dir, [])
    raw = dict(raw)
    raw["name"] = name
    raw["extends"] = _read_yaml(path).get("extends")  # the direct parent, for the record
    if overrides:
        raw = merge(raw, overrides)
    _check_component_names(raw, chain)
    try:
        return ExperimentConfig.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(
            f"invalid experiment config {name!r}:\n" + _format_validation_error(exc, chain),
            hint="README.md, section Configs, lists every key and its default",
        ) from None


def dump_yaml(config: ExperimentConfig) -> str:
    return yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)
