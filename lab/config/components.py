"""The pipeline's component configs: loader, chunkers, embedding, retrievers, rerankers, and
the query-side options (caches, guardrail). :mod:`lab.config` exports them with the rest of the
schema: one namespace."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, Union

from pydantic import (AfterValidator, BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler,
                      model_serializer, model_validator)


class Strict(BaseModel):
    """The base of every config section: unknown keys are errors. A field's description is the
    docstring under it (or its ``Field(description=...)``); the config reference
    (``docs/reference/config.md``) is generated from them."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class LoaderConfig(Strict):
    """How documents are read from the knowledge-base folder, sorted by path. A symbolic link is
    followed only when it resolves inside the folder; every file skipped is listed with its reason
    in the results and the report."""

    name: Literal["folder"] = "folder"
    """The loader: ``folder``, every file under the knowledge base with one of the extensions."""
    extensions: list[str] = Field(default_factory=lambda: [".md", ".txt"])
    """File extensions loaded (case-insensitive). Text files are read as UTF-8 (a notebook's JSON, as
    Sphinx's ``<name>.ipynb.txt``, as the notebook); ``.pdf``, ``.docx``, ``.html``, ``.htm`` and
    ``.ipynb`` through their readers (a broken one is skipped and listed). Other files are not read."""
    max_file_bytes: int = Field(5_000_000, gt=0, description="Size limit of one file in bytes; a larger file stops "
                                "the run with its name (split it, or raise the limit).")
    include_hidden: bool | None = Field(
        None, description="Load dot-files and dot-folders (.git/, .obsidian/, .notes.md); by default (null or false) "
        "they are skipped and listed as skipped. Links leaving the knowledge base are never followed.")


class ChunkerBase(Strict):
    """The base of every chunker's config. ``sends_windows``: True when what is matched is not what
    is sent (a found node stands for its window or parent: :mod:`lab.rag.sent`)."""

    sends_windows: ClassVar[bool] = False


class _CharacterChunker(ChunkerBase):
    """Chunkers sized in characters (their ``chunk_size`` and ``chunk_overlap`` fields): the overlap
    must be smaller than the chunk (LangChain's rule)."""

    @model_validator(mode="after")
    def _overlap_below_size(self) -> "_CharacterChunker":
        size, overlap = getattr(self, "chunk_size"), getattr(self, "chunk_overlap")
        if overlap >= size:
            raise ValueError(f"chunk_overlap ({overlap}) must be smaller than chunk_size ({size})")
        return self


class RecursiveCharacterChunker(_CharacterChunker):
    """LangChain's RecursiveCharacterTextSplitter: sizes in characters."""

    name: Literal["recursive_character"]
    """Picks this chunker."""
    chunk_size: int = Field(1000, gt=0)
    """Largest chunk, in characters."""
    chunk_overlap: int = Field(200, ge=0)
    """Characters shared by consecutive chunks; smaller than ``chunk_size``."""
    separators: list[str] | None = None
    """Where to cut, tried in order; null: LangChain's ``["\\n\\n", "\\n", " ", ""]`` (paragraphs, lines,
    words, characters)."""


class SemanticChunker(ChunkerBase):
    """LlamaIndex SemanticSplitterNodeParser, with embeddings batched across documents."""

    name: Literal["semantic"]
    """Picks this chunker."""
    buffer_size: int = Field(1, ge=0)
    """Sentences on each side embedded with a sentence when comparing it to the next (1: groups of
    three; each sentence is embedded three times)."""
    breakpoint_percentile_threshold: int = Field(95, gt=0, le=100)
    """A chunk ends where the cosine distance between consecutive sentence groups is above this
    percentile of all such distances in the document: higher, fewer and longer chunks."""


class FixedTokenChunker(ChunkerBase):
    """Windows of a fixed number of tokens (tiktoken, offline) with an overlap in tokens."""

    name: Literal["fixed_token"]
    """Picks this chunker."""
    chunk_tokens: int = Field(600, gt=0)
    """Tokens per chunk (tiktoken's ``encoding``)."""
    overlap_tokens: int = Field(90, ge=0, description="Tokens shared by consecutive chunks (90 = 15% of 600).")
    encoding: Literal["cl100k_base"] = Field("cl100k_base", description="The encoding shipped offline with llama-index-core.")

    @model_validator(mode="after")
    def _overlap_below_size(self) -> "FixedTokenChunker":
        if self.overlap_tokens >= self.chunk_tokens:
            raise ValueError(f"overlap_tokens ({self.overlap_tokens}) must be smaller than chunk_tokens "
                             f"({self.chunk_tokens})")
        return self


class PageChunker(_CharacterChunker):
    """One chunk per PDF page; other documents by the recursive character splitter."""

    name: Literal["page"]
    """Picks this chunker: one chunk per PDF page (answers can cite "page N")."""
    chunk_size: int = Field(1000, gt=0, description="For documents without pages.")
    chunk_overlap: int = Field(200, ge=0, description="For documents without pages.")


class SentenceWindowChunker(ChunkerBase):
    """Small-to-big: one node per sentence (LlamaIndex's SentenceWindowNodeParser), matched alone;
    what is sent, scored and counted is its window, the ``window_size`` sentences each side of it
    (the exact source text, with its offsets)."""

    name: Literal["sentence_window"]
    """Picks this chunker."""
    #: what is matched is not what is sent: each found node stands for its window (lab.rag.sent)
    sends_windows: ClassVar[bool] = True
    window_size: int = Field(3, ge=0, description="Sentences each side of the matched one that are sent with it.")


class ParentChildChunker(ChunkerBase):
    """Small-to-big with parents: recursive character chunks of ``parent_size`` are cut again into
    children of ``child_size``; children are embedded and matched, their parents are sent (once per
    question however many of its children were found: the auto-merging idea), with the parent's
    exact text and offsets."""

    name: Literal["parent_child"]
    """Picks this chunker."""
    #: what is matched is not what is sent: each found child stands for its parent (lab.rag.sent)
    sends_windows: ClassVar[bool] = True
    parent_size: int = Field(2000, gt=0)
    """Largest parent, in characters (recursive character chunks): what a found child sends."""
    parent_overlap: int = Field(0, ge=0)
    """Characters shared by consecutive parents."""
    child_size: int = Field(400, gt=0)
    """Largest child, in characters; smaller than ``parent_size``. Children are embedded, indexed
    for BM25 and matched."""
    child_overlap: int = Field(0, ge=0)
    """Characters shared by consecutive children of one parent."""

    @model_validator(mode="after")
    def _children_fit(self) -> "ParentChildChunker":
        if self.child_size >= self.parent_size:
            raise ValueError(f"child_size ({self.child_size}) must be smaller than parent_size ({self.parent_size})")
        return self


ChunkerConfig = Annotated[
    Union[RecursiveCharacterChunker, SemanticChunker, FixedTokenChunker, PageChunker, SentenceWindowChunker,
          ParentChildChunker],
    Field(discriminator="name")
]


#: Where a model runs (lab.models.device); ``auto`` is kept as null, so writing it keeps a config's fingerprint.
Device = Annotated[Literal["auto", "cpu", "cuda", "mps"] | None, AfterValidator(lambda d: None if d == "auto" else d),
                   Field(description="Where the model runs: auto (or null, the default) picks CUDA, then Apple's MPS, "
                         "then the CPU; cpu, cuda or mps force one (one this machine lacks stops the run at start-up). "
                         "Never part of the index key or the caches' keys; results.json records the device used.")]


class EmbeddingConfig(Strict):
    """The embedding model of chunks and questions. The model, ``embed_metadata`` and
    ``passage_prefix`` are part of the index key; ``batch_size`` is not."""

    model: str = Field(
        "sentence-transformers/all-MiniLM-L6-v2",
        description="Hub name, or a local folder. Resolved offline (see lab.models.resolve).",
    )
    embed_metadata: bool = Field(
        False, description="Prepend node metadata (source, doc_type) to the embedded text."
    )
    batch_size: int = Field(8, gt=0, description="Texts per forward pass; small batches are fastest on CPU.")
    query_prefix: str = ""
    """Put before every question when it is embedded (E5 models expect ``query: ``); part of the
    query caches' keys."""
    passage_prefix: str = ""
    """Put before every chunk when it is embedded (E5 models expect ``passage: ``); part of the
    index key."""
    device: Device = None


#: ANN index kinds (LanceDB's vector indexes); ``auto`` picks ``AUTO_KIND`` at or above ``min_rows``.
ANN_KINDS = ("auto", "ivf_pq", "ivf_hnsw_sq", "ivf_hnsw_pq", "ivf_flat")


class AnnConfig(Strict):
    """An approximate-nearest-neighbour index on the table's vectors (LanceDB's IVF_PQ, IVF_HNSW_SQ,
    IVF_HNSW_PQ or IVF_FLAT). Build parameters are part of the index key; the query parameters
    (``nprobes``, ``refine_factor``, ``ef``) are not. Every run over an ANN index also measures its
    recall against exact search on the run's own questions."""

    kind: Literal[ANN_KINDS] = Field("auto", description="auto: an IVF_FLAT index when the table has at least "
                                     "min_rows rows, exact search below (bench/scale.py: exact search passes 50 ms "
                                     "per question at 25,000-35,000 rows here).")
    min_rows: int = Field(25_000, gt=0, description="auto: the smallest table that gets an index.")
    num_partitions: int | None = Field(None, gt=0, description="IVF partitions (null: LanceDB's default, "
                                       "about sqrt(rows)).")
    num_sub_vectors: int | None = Field(None, gt=0, description="PQ sub-vectors; must divide the embedding "
                                        "size (null: LanceDB's default, dimension / 16).")
    num_bits: Literal[4, 8] = Field(8, description="PQ bits per sub-vector code.")
    m: int = Field(20, gt=0, description="HNSW: neighbours per node.")
    ef_construction: int = Field(300, gt=0, description="HNSW: candidate list size while building.")
    nprobes: int = Field(20, gt=0, description="Query: IVF partitions searched.")
    refine_factor: int | None = Field(None, gt=0, description="Query: re-rank refine_factor x k candidates "
                                      "with full vectors (null: no refinement).")
    ef: int | None = Field(None, gt=0, description="Query, HNSW kinds: candidate list size (null: LanceDB's "
                           "default, 1.5 x k).")

    @model_validator(mode="after")
    def _ef_covers_refine(self) -> "AnnConfig":
        if self.ef is not None and self.refine_factor is not None and self.ef < 10 * self.refine_factor:
            raise ValueError(f"ef ({self.ef}) must be at least 10 x refine_factor ({self.refine_factor}) "
                             f"(LanceDB's rule): raise ef to {10 * self.refine_factor} or lower refine_factor")
        return self


class IndexConfig(Strict):
    """How the chunk table is searched: exhaustively (no ``ann``), or through an ANN index."""

    ann: AnnConfig | None = None
    """An ANN index on the table's vectors; null: exhaustive search, and index keys as before."""


#: The most candidates a retriever returns: beyond it, a run writes a page nobody can read, and
#: LanceDB's limits overflow. A top_k above the index's size is cut to it, with a warning.
MAX_K = 10_000


class VectorRetriever(Strict):
    """Dense retrieval: the chunks whose embeddings are closest (cosine) to the question's."""

    name: Literal["vector"]
    """Picks this retriever."""
    top_k: int = Field(4, gt=0, le=MAX_K)
    """Chunks retrieved per question; above the index's size it is cut to it, with a warning."""


class BM25Retriever(Strict):
    """BM25 through LanceDB's native full-text index over the chunks' text."""

    name: Literal["bm25"]
    """Picks this retriever."""
    top_k: int = Field(4, gt=0, le=MAX_K)
    """Chunks retrieved per question; above the index's size it is cut to it, with a warning."""


class HybridRetriever(Strict):
    """Dense top dense_k + BM25 top sparse_k, fused, top_k kept (see lab.rag.retrievers)."""

    name: Literal["hybrid"]
    """Picks this retriever."""
    top_k: int = Field(4, gt=0, le=MAX_K)
    """Chunks kept per question after fusion."""
    dense_k: int = Field(20, gt=0, le=MAX_K, description="Candidates from the dense (vector) side.")
    sparse_k: int = Field(20, gt=0, le=MAX_K, description="Candidates from the BM25 side.")
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


def _zero_is_off(w: float | None) -> float | None:
    """A first-stage weight of 0 adds nothing to the model's order, so it is the off value, null:
    the scores recorded are the model's own, not z-scores."""
    return None if w == 0 else w


#: A model reranker's ``first_stage_weight``: null (0 reads as null) is off; w > 0 fuses
#: (:class:`lab.rag.postprocess.FusedReranker`).
FirstStageWeight = Annotated[
    float | None,
    Field(
        ge=0,
        description="null (or 0): order by the reranker's own score, which is the score recorded; w > 0: by "
        "z(reranker) + w * z(first-stage score), each z-scored over the candidates of each question, and that "
        "sum is the score recorded (for a cross-encoder, lab tune reranker picks w on its dev split: the "
        "model card's dev.fusion).",
    ),
    AfterValidator(_zero_is_off),
]


class _CrossEncoderBase(_RerankerBase):
    first_stage_weight: FirstStageWeight = None


class FlagEmbeddingRerankerConfig(_CrossEncoderBase):
    """A cross-encoder through FlagEmbedding (the ``flag`` extra): bge-reranker models."""

    name: Literal["flag_embedding"]
    """Picks this reranker."""
    model: str = "BAAI/bge-reranker-base"
    """Hub name or local folder of the cross-encoder. No package carries bge-reranker-base's
    weights: without the hub the run stops at start-up, saying how to supply them."""
    use_fp16: bool = False
    """Score in half precision (faster on a GPU; on a CPU leave it off)."""


class SentenceTransformerRerankerConfig(_CrossEncoderBase):
    """A cross-encoder through sentence-transformers."""

    name: Literal["sentence_transformer"]
    """Picks this reranker."""
    model: str = "cross-encoder/ms-marco-MiniLM-L-6-v2"
    """Hub name or local folder of the cross-encoder."""
    device: Device = None


class LLMPointwiseRerankerConfig(_RerankerBase):
    """A local LLM scores each (question, passage) pair: log P(yes) - log P(no)."""

    name: Literal["llm_pointwise"]
    """Picks this reranker."""
    model: str = Field("qwen2.5-coder-1.5b-instruct", description="A GGUF name or path.")
    first_stage_weight: FirstStageWeight = None
    max_passage_chars: int = Field(1500, gt=0)
    """Characters of each passage the LLM reads (the rest is cut off for scoring only)."""
    n_ctx: int = Field(1024, gt=0)
    """The reranker's llama.cpp context window, in tokens."""
    n_threads: int | None = None
    """CPU threads of the reranker's llama.cpp (null: all cores)."""

    @model_serializer(mode="wrap")
    def _off_written_as_zero(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Off is written ``first_stage_weight: 0.0``, as this reranker wrote it before null was its
        off value: the resolved config of a run, and so its fingerprint, stay as they were."""
        if self.first_stage_weight is None:
            return handler(self.model_copy(update={"first_stage_weight": 0.0}))
        return handler(self)


class KeywordOverlapRerankerConfig(_RerankerBase):
    """final = vector_weight * first-stage score + overlap_weight * Jaccard(question, chunk words)."""

    name: Literal["keyword_overlap"]
    """Picks this reranker."""
    top_n: int = Field(5, gt=0)
    """How many nodes the reranker keeps."""
    vector_weight: float = Field(0.7, ge=0)
    """Weight of the first stage's score."""
    overlap_weight: float = Field(0.3, ge=0)
    """Weight of the Jaccard overlap of the question's and the chunk's words (stop words left out)."""
    min_score: float = Field(0.3, description="Chunks scoring under this are dropped.")


class DocBoostRerankerConfig(_RerankerBase):
    """Document-level signal: each candidate's first-stage score (min-max over the candidates) plus
    ``weight`` times its document's share of the evidence (the ``aggregate`` of its candidates'
    normalised scores, over the best document's). Chunks of documents that many strong candidates
    come from move up; no model."""

    name: Literal["doc_boost"]
    """Picks this reranker."""
    top_n: int = Field(4, gt=0)
    """How many nodes the reranker keeps."""
    weight: float = Field(0.5, ge=0, description="0: the first stage's order; larger: the documents' weight.")
    aggregate: Literal["sum", "max", "mean"] = Field(
        "sum", description="How a document's candidates' scores make its score.")


class DocTypeFilterRerankerConfig(_RerankerBase):
    """Metadata filter: when a question names a document type (a knowledge-base folder:
    "contract" or "contracts" names ``contracts/``), only candidates of the named types are kept,
    in the first stage's order; a question naming none, or none that a candidate has, keeps all."""

    name: Literal["doc_type_filter"]
    """Picks this reranker."""
    top_n: int = Field(4, gt=0)
    """How many nodes the reranker keeps."""


RerankerConfig = Annotated[
    Union[FlagEmbeddingRerankerConfig, SentenceTransformerRerankerConfig, LLMPointwiseRerankerConfig,
          KeywordOverlapRerankerConfig, DocBoostRerankerConfig, DocTypeFilterRerankerConfig],
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
