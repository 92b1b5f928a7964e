"""The experiment schema: every section of a config, validated by pydantic (``extra="forbid"``).

The pipeline's component sections (loader, chunker, embedding, retriever, reranker, caches,
guardrail) are in :mod:`lab.config.components`, the LLMs, context builders, generation and query
sections in :mod:`lab.config.answering`; this module holds the experiment itself, its data,
metrics, sample, report, judge and ragas sections. :mod:`lab.config` exports all of them: one namespace.
"""

from __future__ import annotations

import hashlib
import json
from typing import Literal, get_args

from pydantic import Field, model_serializer, model_validator

from lab.config.components import (
    CachesConfig,
    ChunkerConfig,
    EmbeddingConfig,
    GuardrailConfig,
    IndexConfig,
    MAX_K,
    LoaderConfig,
    RerankerConfig,
    RetrieverConfig,
    Strict,
)
from lab.config.answering import GenerationConfig, LLMConfig, QueryConfig
from lab.config.target import PIPELINE_SECTIONS, TargetConfig


#: What a contextual chunk header can name: the document's folder, its file name (without the
#: extension), its first Markdown heading, and a summary of it written by an LLM.
HEADER_FIELDS = ("doc_type", "name", "title", "summary")


class SummaryConfig(Strict):
    """Document summaries for contextual headers: the LLM reads a document's first ``max_chars``
    characters once and writes a short summary of it (cached by content: a rebuild of the index,
    or of another index over the same documents, makes no model call)."""

    llm: LLMConfig = Field(default_factory=lambda: LLMConfig(max_tokens=96))
    """The LLM that writes the summaries; its fingerprint is part of the index key."""
    prompt: str = Field("doc-summary-v1", description="A prompt file in lab/prompts (without .txt); it "
                        "fills {name} and {document}.")
    max_chars: int = Field(4000, gt=0, description="The document's first characters the LLM reads.")


class HeadersConfig(Strict):
    """Contextual chunk headers: a line naming each chunk's document (``contracts / Contract with
    Belvedere Insurance for Markellm``), and where ``summary`` is among the fields the document's
    summary on a line of its own, is put before the chunk's text where it is matched (the
    embedded text and the BM25 index), never where it is scored or sent: metrics and the answer's
    context read the chunk's own text, so a header cannot make a keyword appear in a chunk."""

    fields: list[Literal[HEADER_FIELDS]] = Field(
        default_factory=lambda: ["doc_type", "name", "title"], min_length=1,
        description="Parts of the header, in order; a part equal to an earlier one is left out; "
        "summary (an LLM call per document) goes on a line of its own.")
    separator: str = Field(" / ", description="Between the parts.")
    summary: SummaryConfig | None = Field(None, description="The summary's LLM and prompt (defaults when "
                                          "summary is among the fields).")
    send: bool | None = Field(None, description="true: the header's line (not the summary, which a model wrote) "
                              "is also sent before each chunk, so the answer, the metrics and the context size "
                              "read it; null or false: matched only.")

    @model_validator(mode="after")
    def _summary_needs_its_field(self) -> "HeadersConfig":
        if "summary" in self.fields and self.summary is None:
            self.summary = SummaryConfig()
        if self.summary is not None and "summary" not in self.fields:
            raise ValueError("summary is configured but 'summary' is not in fields: add it to fields "
                             "(e.g. [doc_type, name, title, summary]) or remove the summary section")
        return self

    def key_body(self) -> dict:
        """What the index key holds of the headers: without ``summary`` where it is unset, so
        tables built before summaries existed keep their keys, and without ``send``, which changes
        what is sent, not the table."""
        return self.model_dump(mode="json", exclude_none=True, exclude={"send"})


#: How a judge's scores are read (:mod:`lab.judge.methods`).
JUDGE_METHODS = ("rubric", "rubric-expected", "per-dimension", "claims", "split")


class JudgeConfig(Strict):
    """The judge: an LLM scores each answer's accuracy, completeness and relevance from 1 to 5
    against the reference answer, and is itself checked on every run (calibration, perturbation
    checks)."""

    llm: LLMConfig = Field(default_factory=lambda: LLMConfig(max_tokens=160))
    """The judging LLM (configured apart from the generator)."""
    prompt: str = Field("judge-v1", description="A prompt file in lab/prompts (without .txt). judge-v3 gives the "
                        "question, reference and answer as delimited data that is never an instruction "
                        "(docs/judge-injection.md).")
    calibration: bool = Field(
        True, description="Also judge each reference answer as the answer (should score high) and "
        "another question's reference (should score 1), and report the separation.",
    )
    max_attempts: int = Field(3, gt=0, description="Tries per judgement before it is recorded as failed.")
    method: Literal[JUDGE_METHODS] = Field(
        "rubric-expected", description="How scores are read. rubric-expected (the default for a llama_cpp judge, "
        "G-Eval): the prompt's reply, each score the expected value of its score token over 1..5 from the model's "
        "next-token probabilities; decimal scores, no feedback sentence, three short forward passes. rubric: the "
        "JSON reply's integer scores and one sentence of feedback, retried up to max_attempts; the default, and "
        "the only choice, for openai and openai_compatible judges, which give no probabilities. per-dimension: "
        "one call per dimension, each with its own rubric, scored by the expected digit. claims: the reference "
        "split into facts once per question; completeness from P(stated) per fact, accuracy from "
        "P(contradicts), relevance as per-dimension. split: accuracy and completeness measured apart, the figures, "
        "dates and names of the reference and the answer compared by rule (lab.evidence.facts) and the model asked "
        "per dimension only about the rest (opt-in; docs/judge.md). The method also scores the calibration pairs and the "
        "perturbation checks; the probability-weighted methods are deterministic, so judge.repeats repeats "
        "only answers for them; it is part of every judgement's prompt version and cache key, so changing it "
        "re-judges (answers stay cached), changes the config fingerprint, and lab compare names both judges.")
    checks: int | None = Field(
        None, ge=0, description="Perturbation checks: questions sampled (seeded, by category) whose reference "
        "answer is corrupted (wrong fact, partial, padded, paraphrase, refusal, and the wrong fact with an "
        "injected instruction to the judge, which must not score higher than the wrong fact alone) and judged. "
        "null: 20; 0: off.")
    repeats: int | None = Field(
        None, ge=2, le=20, description="Judge every answer this many times (seeds 1..k at repeat_temperature) "
        "and report flip rate and intra-class correlation per dimension. null: once.")
    repeat_temperature: float | None = Field(None, gt=0, le=2, description="Sampling temperature of repeats; null: 0.7.")
    anchored: bool | None = Field(
        None, description="Also judge each answer with its sentences that share nothing with the question and "
        "the reference answer left out (lab.metrics.injection.anchored), and keep the lower of the two scores per "
        "dimension: text that is not about the question (an aside to the judge in any wording or language) can "
        "lower a score, never raise it. One more judgement per answer that has such sentences (1 in 20 of "
        "turn13's answers). null: on; false: off, every answer judged whole only (docs/judge-injection.md).")

    @property
    def is_anchored(self) -> bool:
        """judge.anchored as it applies: on unless set to false."""
        return self.anchored is not False

    @model_validator(mode="after")
    def _local_method(self) -> "JudgeConfig":
        if self.method != "rubric" and self.llm.backend != "llama_cpp":
            if "method" not in self.model_fields_set:  # the default, for a model that gives no probabilities
                self.method = "rubric"
            else:
                raise ValueError(f"judge.method {self.method} reads next-token probabilities, which only a local "
                                 "model gives: set judge.llm.backend to llama_cpp, or judge.method to rubric")
        return self


#: ragas' metrics the lab computes (the catalogue's ``ragas_<name>`` rows name the same four: a test checks).
RagasMetric = Literal["faithfulness", "answer_relevancy", "context_precision", "context_recall"]


class RagasConfig(Strict):
    """ragas 0.4.3's metrics (the ``ragas`` extra) on a seeded sample of the questions; the report
    says which."""

    metrics: list[RagasMetric] = Field(default_factory=lambda: list(get_args(RagasMetric)))
    """ragas' metrics computed, by the judge's LLM and the experiment's embedding model (never OpenAI's)."""
    limit: int | None = Field(5, gt=0, description="Questions scored (a seeded sample: about 2 minutes each with "
                              "the local 1.5B model); null: all.")
    seed: int = 13
    """Seed of the sample."""


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


class DataConfig(Strict):
    knowledge_base: str = Field(description="Folder of documents, relative to the project root (KB= or --kb "
                                "overrides it).")
    eval_set: str = Field(description="JSONL eval set, relative to the project root (EVAL= or --eval overrides it).")
    labels: str | None = Field(
        None, description="CSV query_id,relevant_ids (chunk ids separated by ;) for recall@k and MRR@k.")
    categories: list[str] = Field(
        default_factory=lambda: list(DEFAULT_CATEGORIES),
        description="Declared question categories; an eval row with another category is an error.",
    )


class MetricsConfig(Strict):
    k: int = Field(10, gt=0, le=MAX_K, description="Cut-off of nDCG@k (and of recall@k and MRR@k against labels).")


class SampleConfig(Strict):
    limit: int | None = Field(None, gt=0, description="Evaluate a sample of this many questions, stratified by "
                              "category (LIMIT= or --limit); null: every question. Results and reports say it "
                              "is a sample.")
    seed: int = 13
    """Seed of the sample (SEED= or --seed)."""


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


class GateConfig(Strict):
    """``lab gate``'s defaults for this experiment: the baseline run it must not fall behind, and the
    metrics it is held to, each with its non-inferiority margin (in the metric's own units)."""

    baseline: str | None = Field(
        None, description="Baseline run: a run folder (relative to the project root) or an experiment name (its latest run).")
    metrics: dict[str, float] = Field(
        default_factory=lambda: {"mrr": 0.02},
        description="Metric -> margin: the candidate fails when it may be worse than the baseline by more than this.")
    alpha: float = Field(0.05, gt=0, lt=1, description="Family-wise error rate over the gated metrics (Holm).")

    @model_validator(mode="after")
    def _margins(self) -> "GateConfig":
        if not self.metrics:
            raise ValueError("gate.metrics is empty: name at least one metric and its margin, e.g. {mrr: 0.02}")
        for metric, margin in self.metrics.items():
            if margin < 0:
                raise ValueError(f"gate.metrics.{metric}: the margin {margin} is negative; write how much worse is allowed, e.g. 0.02")
        return self


class TrackingConfig(Strict):
    """MLflow tracking of every run of this experiment (needs the ``mlflow`` extra)."""

    uri: str | None = Field(
        None, description="MLflow tracking URI (a server, or sqlite:///path.db; a relative sqlite path is taken "
        "from the project root); null: $MLFLOW_TRACKING_URI, else sqlite:///mlruns.db in the project root.")
    experiment: str | None = Field(None, description="MLflow experiment name (default: the lab experiment's name).")


class MergeConfig(Strict):
    """Passages of one document sent as one (auto-merging by document): after the second stage,
    the chunks of a document among the final ones leave as one passage at its best chunk's rank,
    in document order, overlapping chunks joined where they overlap, others by ``joiner``. The
    same text goes out (less, where chunks overlapped), in fewer passages; the metrics rank
    passages, so a document's facts split over two chunks count at the better rank."""

    by: Literal["document"] = "document"
    """What is merged: ``document``, a document's final chunks into one passage."""
    joiner: str = Field("\n\n", description="Between chunks of one document that do not touch.")


class ExperimentConfig(Strict):
    """One experiment: ``experiments/NAME.yaml``, validated with unknown keys rejected."""

    schema_version: Literal[1] = SCHEMA_VERSION
    """The config format's version."""
    name: str = Field(description="Set from the file name (experiments/NAME.yaml), whatever the file says.")
    description: str = ""
    """What this config changes, in a line; lab list and the reports show it."""
    extends: str | None = None
    """The experiment this one inherits from (a NAME in experiments/): its keys, with this file's merged
    over them; a component whose name changes is replaced whole."""
    data: DataConfig
    """What a run reads: the documents, the questions, and labelled chunk ids."""
    loader: LoaderConfig = Field(default_factory=LoaderConfig)
    """Which files of the knowledge base are read, and how."""
    chunker: ChunkerConfig | None = None
    """How documents are cut into chunks; part of the index key (required without a target)."""
    headers: HeadersConfig | None = None
    """Contextual chunk headers: matched, never scored or sent unless headers.send. Part of the index
    key where set (with the summary model's fingerprint; send is not)."""
    embedding: EmbeddingConfig = Field(default_factory=EmbeddingConfig)
    """How chunks and questions are embedded."""
    index: IndexConfig | None = None
    """An ANN index on the chunk table; left out, search is exhaustive."""
    retriever: RetrieverConfig | None = None
    """The first stage: the chunks each question retrieves (required without a target)."""
    query: QueryConfig | None = None
    """Query-side rewriting by an LLM before the first stage."""
    reranker: RerankerConfig | None = None
    """The second stage: the first stage's candidates scored again, reordered and cut to top_n."""
    merge: MergeConfig | None = None
    """A document's final chunks sent as one passage."""
    guardrail: GuardrailConfig | None = None
    """Questions whose retrieval is too weak to answer from, flagged (and by default answered "not enough
    information" without a model call)."""
    caches: CachesConfig | None = None
    """Query-side caches: question embeddings (on when the section is left out) and a semantic cache of
    retrievals; hits are counted in results.json."""
    generation: GenerationConfig | None = Field(default_factory=GenerationConfig)
    """Answers. null, with judge and ragas null too, makes a retrieval-only run (lab run --retrieval-only)."""
    judge: JudgeConfig | None = Field(default_factory=JudgeConfig)
    """The judge of the answers; null: answers are not judged."""
    ragas: RagasConfig | None = None
    """ragas' metrics on a seeded sample of the questions."""
    metrics: MetricsConfig = Field(default_factory=MetricsConfig)
    """Settings of the retrieval metrics."""
    sample: SampleConfig = Field(default_factory=SampleConfig)
    """A seeded, stratified sample of the questions instead of all of them. Not part of the config
    fingerprint."""
    report: ReportConfig = Field(default_factory=ReportConfig)
    """How reports look; changes no number. Not part of the config fingerprint."""
    gate: GateConfig | None = None
    """lab gate's defaults for this experiment. Not part of the config fingerprint."""
    tracking: TrackingConfig | None = None
    """MLflow logging of every run of this experiment, as with lab run --track. Not part of the config
    fingerprint."""
    target: TargetConfig | None = None
    """A RAG system the lab did not build (a Python callable, an HTTP service, recorded outputs), evaluated
    in place of the pipeline: a config with a target sets none of chunker, headers, index, retriever, query,
    reranker, merge, guardrail, caches, generation (docs/own-rag.md)."""

    @model_validator(mode="before")
    @classmethod
    def _target_answers(cls, data: object) -> object:
        """A target answers for itself: ``generation: null`` (``--retrieval-only``) keeps its contexts only
        (``target.answers: false``), and no generation section is implied."""
        if isinstance(data, dict) and isinstance(data.get("target"), dict):
            data = dict(data)
            if "generation" in data and data["generation"] is None:
                data["target"] = {**data["target"], "answers": False}
            if data.get("generation") is None:
                data["generation"] = None
        return data

    @model_validator(mode="after")
    def _target_or_pipeline(self) -> "ExperimentConfig":
        if self.target is None:
            for section in ("chunker", "retriever"):
                if getattr(self, section) is None:
                    raise ValueError(f"{section} is missing: a config needs a {section} section, or a target "
                                     "section in place of the pipeline")
            return self
        given = [s for s in PIPELINE_SECTIONS if getattr(self, s) is not None]
        if given:
            raise ValueError(f"a target replaces the pipeline, but {', '.join(given)} {'is' if len(given) == 1 else 'are'} "
                             f"set: remove {'it' if len(given) == 1 else 'them'} (a target config extends another "
                             "target config, or none)")
        if self.ragas is not None:
            raise ValueError("ragas is not computed for a target run: set ragas to null")
        return self

    @model_serializer(mode="wrap")
    def _without_unset_target(self, handler: object) -> dict:
        """The config as a dict, without ``target`` where it is unset: a pipeline's resolved config, in
        config.yaml and results.json, is as it was before targets existed."""
        out = handler(self)  # type: ignore[operator]
        if self.target is None and isinstance(out, dict):
            out.pop("target", None)
        return out

    @model_validator(mode="after")
    def _rerank_fits(self) -> "ExperimentConfig":
        r = self.reranker
        if r is not None and self.retriever is not None:
            k = self.retriever.top_k
            if r.top_n > k:
                raise ValueError(f"reranker.top_n ({r.top_n}) exceeds retriever.top_k ({k})")
            if r.candidate_k is not None and not (r.top_n <= r.candidate_k <= k):
                raise ValueError(
                    f"reranker.candidate_k ({r.candidate_k}) must lie between top_n ({r.top_n}) "
                    f"and retriever.top_k ({k})"
                )
        answers = self.generation is not None or (self.target is not None and self.target.answers)
        if not answers and (self.judge is not None or self.ragas is not None):
            raise ValueError("judge and ragas grade answers: they need a generation section (or set them to null)")
        return self

    def fingerprint(self) -> str:
        """A stable hash of the resolved config (used to spot edited configs); the sample, the
        report's colours, the gate and tracking do not change what a run computes, so they are left
        out, and so are unset (null) fields, so that a new optional section leaves earlier
        fingerprints as they were."""
        body = self.model_dump(mode="json", exclude={"sample", "report", "gate", "tracking"}, exclude_none=True)
        return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]
