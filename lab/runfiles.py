"""The run files' schema and their one reader.

A run folder ``reports/<NAME>/<run-id>/`` holds ``config.yaml`` (the resolved config),
``results.json`` (:class:`Results`), ``samples.jsonl`` (one :class:`Sample` per line), the report
and the per-question exports. The keys below are a contract: reports of old runs are rendered and
compared from them, so a key is added (optional), never renamed or removed.

The writer (:func:`lab.eval.records.write_run`) and every reader (reports, comparisons, gates,
tracking, the judge's checks and agreement) import this module, so there is one schema and one
way to read it. A file that cannot be read is a :class:`~lab.errors.DataError` naming the file,
the line and the fix, never a traceback.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TypedDict

from lab.errors import DataError

#: ``results.json``'s ``schema_version``.
RESULTS_SCHEMA = 1


# ---------------------------------------------------------------------------------------------
# samples.jsonl


class Retrieved(TypedDict):
    """A chunk the pipeline sent on, at its final rank."""

    rank: int
    id: str
    source: str | None
    page: str | None
    doc_type: str | None
    score: float | None
    first_stage_rank: int
    first_stage_score: float | None
    start_char_idx: int | None
    end_char_idx: int | None
    text: str


class FunnelItem(TypedDict, total=False):
    """One piece of a question's gold evidence through the loss funnel's stages
    (:mod:`lab.eval.funnel` records it, :mod:`lab.metrics.funnel` judges it). Always: kind,
    rank, lost_at; a run's own record also chunk and candidate_rank."""

    kind: str  # "span" | "keyword"
    source: str  # a span's place: source, start, end
    start: int
    end: int
    text: str  # a span's text, for a row without keywords (the answer is checked against it)
    keyword: str
    n_chunks: int  # a keyword: how many chunks of the index hold it
    chunk: str | None  # the first chunk of the index holding it
    candidate_rank: int | None  # the first of the first stage's candidates holding it
    rank: int | None  # the first passage of the final list holding it
    sent: int | None  # the sent passage holding it (its number in the context)
    stated: bool  # whether the answer states it
    lost_at: str | None  # the stage it was lost at (None: not lost)


class FunnelRecord(TypedDict, total=False):
    """A question's loss funnel: the stages the run lets it see, each piece of its evidence, and
    where the question was lost (``lost_at``: a stage, ``kept``, or None for a row without gold
    evidence). Built at retrieval (:func:`lab.eval.funnel.retrieval_side`), extended after the
    context (:func:`~lab.eval.funnel.sent_side`) and finished with the answer side
    (:func:`lab.metrics.funnel.finish`), each returning a new record."""

    lost_at: str | None
    seen: list[str]
    items: list[FunnelItem]
    n_candidates: int
    budget: dict  # {dropped: [ids], truncated: [ids]}
    stated_by: str  # "claims": the claims judge's P(stated), not keyword matching
    claims: list[dict]  # [{fact, stated}]
    stated: float  # the share of the gold the answer states
    answer_excerpt: str
    diagnostics: dict  # {utilisation, unsupported, refused_with_gold}
    accuracy: float
    derived: bool  # an old run's record, derived from its files


class Sample(TypedDict, total=False):
    """One question. Always: id, question, category, keywords, reference_answer, keyword_ranks,
    metrics, retrieved, first_stage, timings. The rest when a stage that writes it ran:
    references and span_chars (golden spans), query_rewrites (the query section), rerank
    (auto-activation), semantic_cache,
    low_confidence (guardrail), context and answer (generation), judgement and calibration
    (judge), ragas."""

    id: str
    question: str
    category: str
    keywords: list[str]
    reference_answer: str
    keyword_ranks: dict[str, int | None]
    metrics: dict[str, float | int | None]  # metric name (lab.metrics.catalog) -> value
    retrieved: list[Retrieved]
    first_stage: list[dict] | None  # [{id, score}] before reranking; None without a reranker
    # since the loss funnel: the retriever's candidates [{id, rank, score}] (at most 100), and the
    # question's funnel
    candidates: list[dict]
    funnel: FunnelRecord
    timings: dict[str, float | None]
    # [{source, start, end}]; since the span rank metrics also rank (of the first passage holding the
    # span, None: none), held_by_twin (true where that passage holds a twin), and, for a span with
    # twins (the same text elsewhere: lab.evalsets.twins), twins [{source, start, end}] and n_twins
    references: list[dict]
    query_rewrites: list[str]  # the LLM's rewrites of the question (query: multi_query)
    span_chars: int | None
    rerank: dict  # {fired, why}
    semantic_cache: dict  # {hit, of?, similarity?}
    low_confidence: bool
    context: dict
    answer: dict
    judgement: dict
    calibration: dict | None
    judge_checks: dict
    repeatability: dict
    ragas: dict
    target: dict  # a target's run: {status, cached, seconds, error?, located?, context_flags?, usage?}


# ---------------------------------------------------------------------------------------------
# results.json


class Results(TypedDict, total=False):
    """A run's aggregates and provenance. Always: schema_version, name, run_id, created_at,
    description, config, config_fingerprint, sample, data, index, models, metrics, counters,
    llm_usage, cost_usd, timings, environment. The rest when the stage ran: guardrail,
    rerank_activation, labels, answers, judge ({n_judged, n_failed, failed_ids}; since the injection
    detector also {n_suspect, suspect_ids, suspect_rule}), calibration, judge_checks (the perturbation checks:
    {n, seed, method, summary, items, differs}), repeatability (judge.repeats / generation.repeats:
    {judge_repeats, answer_repeats, temperature, method, deterministic, n_questions, by_dimension}), ragas; not_scored when a metric is n/a for some
    questions ({metric: {n, why, ids}}); since the loss funnel, funnel ({stages, n, n_without_gold,
    overall: {n, lost: {stage: n}, kept}, by_category, derived, diagnostics?, judge_vs_evidence?},
    lab.metrics.funnel.summarise); since lab race, sequential on a race's runs ({race, stopped_at, of,
    reason, seed, alpha, effect, metrics}: the first stopped_at questions of a seeded order of `of`;
    since the betting sequence also sequence, absent where it was eb)."""

    schema_version: int
    name: str
    run_id: str | None
    created_at: str
    description: str
    config: dict
    config_fingerprint: str
    sample: dict  # {is_sample, n_questions, n_total, limit, seed}
    data: dict  # {knowledge_base, corpus_sha256, n_documents, n_chars, skipped_files, eval_set, eval_sha256, categories}
    index: dict  # {key, path, reused, n_chunks, chunk_chars_mean, texts_embedded}
    models: dict  # {embedding, reranker, generation, judge}
    metrics: dict  # {k, overall: {metric: {mean, n}}, by_category: {category: {n, metric: {mean, n}}}}
    guardrail: dict
    rerank_activation: dict
    labels: dict
    answers: dict
    judge: dict
    calibration: dict | None
    judge_checks: dict
    repeatability: dict
    ragas: dict
    not_scored: dict
    funnel: dict
    sequential: dict
    target: dict  # a target's run (docs/own-rag.md): {kind, where, version, identity, n, failed, ...}
    counters: dict[str, int]
    llm_usage: dict[str, dict]
    cost_usd: float | None
    timings: dict[str, float]
    environment: dict


# ---------------------------------------------------------------------------------------------
# A run in progress: reports/<NAME>/.running-<pid>.json, replaced atomically as the run goes and
# removed when it ends (lab.eval.status writes it; lab serve reads it)

#: The status files' names (a dot file: never taken for a run folder).
RUNNING_GLOB = ".running-*.json"


class Running(TypedDict):
    """A run in progress: ``{name, pid, host, started_at, updated_at (seconds since the epoch),
    stage, done, total, elapsed_s, eta_s (None until an item is done), n_questions}``."""

    name: str
    pid: int
    host: str
    started_at: float
    updated_at: float
    stage: str
    done: int
    total: int
    elapsed_s: float
    eta_s: float | None
    n_questions: int | None


def read_running(path: Path) -> Running | None:
    """The status in ``path``, or None where it is gone or unreadable (a run that just ended)."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and isinstance(doc.get("pid"), int) else None  # type: ignore[return-value]


# ---------------------------------------------------------------------------------------------
# The reader

_FIX = "the run folder is damaged (an interrupted copy or a hand edit?): rerun the experiment (every model " \
       "call is cached, so it costs seconds) or delete the folder"


def _parse(path: Path, text: str, what: str, lineno: int = 1) -> object:
    """``text`` as JSON, or the error that names ``path`` and the line (``lineno``: the line
    ``text`` starts on)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(f"{path} line {lineno + exc.lineno - 1}: not valid JSON ({exc.msg})", hint=_FIX) from None
    except RecursionError:
        raise DataError(f"{path} line {lineno}: nested too deeply to be {what}", hint=_FIX) from None


def _text(path: Path, missing_hint: str = _FIX) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DataError(f"{path}: no such file", hint=missing_hint) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: cannot be read ({getattr(exc, 'strerror', None) or exc})", hint=_FIX) from None


def read_results(run_dir: Path) -> Results:
    """``results.json`` of the run in ``run_dir``."""
    path = Path(run_dir) / "results.json"
    text = _text(path, "pass a run folder (reports/<NAME>/<run-id>) or a NAME that `lab run NAME` has written")
    results = _parse(path, text, "a run's results")
    if not isinstance(results, dict) or not isinstance(results.get("metrics"), dict):
        raise DataError(f"{path}: not a run's results (no 'metrics' object)", hint=_FIX)
    return results  # type: ignore[return-value]


def read_samples(run_dir: Path) -> list[Sample]:
    """``samples.jsonl`` of the run in ``run_dir``: one dict per question, in file order."""
    path = Path(run_dir) / "samples.jsonl"
    samples: list[Sample] = []
    for lineno, line in enumerate(_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        row = _parse(path, line, "a question", lineno)
        if not isinstance(row, dict):
            raise DataError(f"{path} line {lineno}: not a question's record (a JSON object)", hint=_FIX)
        samples.append(row)  # type: ignore[arg-type]
    return samples


def load_run(run_dir: Path, samples: bool = True) -> tuple[Results, list[Sample]]:
    """(results, samples) of the run in ``run_dir``. With ``samples=False``, or where a run has no
    ``samples.jsonl`` and only its results are wanted, the list is empty."""
    results = read_results(run_dir)
    if not samples or not (Path(run_dir) / "samples.jsonl").exists():
        return results, []
    return results, read_samples(run_dir)


def overall_means(results: Results) -> dict[str, float | None]:
    """metric -> overall mean, what sweeps and searches compare."""
    return {m: v["mean"] for m, v in results["metrics"]["overall"].items()}


def values(samples: list[Sample], metric: str, category: str | None = None) -> list[float]:
    """Per-question values of ``metric`` (numbers only, as the means in results.json use)."""
    return [s["metrics"][metric] for s in samples
            if isinstance(s["metrics"].get(metric), (int, float)) and not isinstance(s["metrics"][metric], bool)
            and (category is None or s["category"] == category)]
