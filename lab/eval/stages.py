"""The evaluator's stages over a set of questions: retrieve (+ rerank), answer, judge, ragas.

Each stage fills fields of the per-question sample dicts that become ``samples.jsonl``, and
adds its seconds to the run's timer. Model calls go through content caches, so a stage that
was interrupted resumes from what it stored, and a repeated run computes nothing.
"""

from __future__ import annotations

import random
import time
from contextlib import contextmanager
from typing import Any, Iterator, Sequence

from llama_index.core.schema import NodeWithScore, QueryBundle

from lab.config import ExperimentConfig, RagasConfig
from lab.evalsets.evalset import EvalRow, document_ids, qrels_sources
from lab.evalsets.twins import Twins, span_twins
from lab.judge.checks import DEFAULT_CHECKS, run_checks
from lab.metrics.injection import SUSPECT_RULE
from lab.judge.methods import Grader
from lab.judge.rubric import DIMENSIONS, calibration_summary, judge_item, judge_questions
from lab.eval.funnel import FunnelView, candidates_record, retrieval_side, sent_side
from lab.eval.ragas import evaluate_ragas
from lab.eval.records import Sample, retrieved_record
from lab.metrics import catalog
from lab.metrics.labels import label_scores
from lab.metrics.perturbation import differs
from lab.metrics.qrels import qrels_scores
from lab.metrics.retrieval import KEYWORD_METRICS, question_scores
from lab.metrics.spans import span_rank_scores, span_scores
from lab.models.llm import LabLLM, as_llamaindex_llm
from lab.progress import progress, run_all
from lab.rag import ann as ann_index
from lab.rag.index import index_passages
from lab.rag.generation import LabSynthesizer
from lab.rag.pipeline import Pipeline
from lab.rag.postprocess import score_float
from lab.rag.sent import passage_spans, sent_spans
from lab.rag.semantic_cache import nodes_by_ids


class Timer(dict):
    """Seconds per stage (``embed_queries_s``, ``retrieve_s``, ...), summed over calls."""

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self[name] = self.get(name, 0.0) + time.perf_counter() - t0


def ann_stage(cfg: ExperimentConfig, rows: Sequence[EvalRow], pipe: Pipeline, timer: Timer) -> dict | None:
    """Over an ANN index: its recall against exact search on these questions (None without an
    ``index.ann`` section; the reason, without recall, when the table was too small for one)."""
    built = pipe.handle.manifest.get("ann")
    if built is None:
        return None
    if not built.get("kind"):
        return dict(built)
    ann_query = pipe.handle.index.vector_store.ann_query or {}
    with timer.stage("ann_recall_s"):
        vectors = pipe.embed_model.encode([r.question for r in rows], pipe.embed_model.query_prefix)
        depth = getattr(cfg.retriever, "dense_k", None) or cfg.retriever.top_k
        measured = ann_index.recall(pipe.handle.index.vector_store.table, vectors, ann_query,
                                    pipe.handle.n_chunks, min(depth, pipe.handle.n_chunks))
    return {**built, "search": ann_query, **measured}


def retrieve_stage(cfg: ExperimentConfig, rows: Sequence[EvalRow], pipe: Pipeline, timer: Timer,
                   show_progress: bool, labels: dict | None = None, twins: dict[tuple, Twins] | None = None
                   ) -> tuple[list[Sample], list[list[NodeWithScore]], dict[str, int]]:
    """Retrieval metrics per question and the retrieval side of its loss funnel
    (:mod:`lab.eval.funnel`); returns (samples, the final nodes of each question, the query-side
    caches' counters). ``twins``: each golden span's twins (the run finds them at start-up,
    :func:`lab.evalsets.twins.span_twins`); found here from the corpus when not given."""
    embed_model, reranker = pipe.embed_model, pipe.reranker
    caches = cfg.caches
    counters: dict[str, int] = {}
    before = dict(embed_model.counters)
    with timer.stage("embed_queries_s"):
        vectors = embed_model.encode([r.question for r in rows], embed_model.query_prefix,
                                     use_cache=caches is None or caches.query_embeddings)
    counters["query_embeddings_computed"] = embed_model.counters["computed"] - before["computed"]
    counters["query_embeddings_cached"] = embed_model.counters["cached"] - before["cached"]
    bundles = [QueryBundle(query_str=r.question, embedding=v.tolist()) for r, v in zip(rows, vectors)]
    semantic = pipe.semantic  # opened with the pipeline, for `lab ask` too
    served = {i: hit for i, v in enumerate(vectors) if semantic and (hit := semantic.lookup(v)) is not None}
    with timer.stage("retrieve_s"):  # one batched LanceDB search for every question not served
        todo = [i for i in range(len(rows)) if i not in served]
        searched = dict(zip(todo, pipe.retrieve_many([bundles[i] for i in todo])))
        if served:
            searched.update({i: nodes_by_ids(pipe.handle.index.vector_store.table, hit["nodes"])
                             for i, hit in served.items()})
        firsts = [searched[i] for i in range(len(rows))]
    if semantic is not None:
        semantic.put_many([(rows[i].question, vectors[i],
                            [[n.node.node_id, score_float(n.score)] for n in searched[i]]) for i in todo])
        counters["semantic_cache_hits"] = len(served)
        counters["semantic_cache_misses"] = len(todo)
    per_question_retrieve = timer["retrieve_s"] / max(len(rows), 1)
    sources = {d.metadata["source"] for d in pipe.corpus.documents}  # spans in other documents: not scored
    documents = {d.metadata["source"]: d.text for d in pipe.corpus.documents}
    doc_ids = document_ids(documents)  # what a row's qrels keys may name
    if twins is None:
        twins = span_twins([(r.source, r.start_index, r.end_index) for row in rows for r in row.references or []],
                           documents)
    view = FunnelView(documents, index_passages(pipe.handle))
    samples, finals = [], []
    items = zip(rows, bundles, firsts)
    if reranker is not None:  # the slow stage: show a bar or log an ETA
        items = progress(items, len(rows), "rerank", bar=show_progress)
    for row, bundle, first in items:
        ranked = pipe.chain.apply(first, bundle)  # the query engine's chain: guard, candidate cut, rerank
        # the funnel's first stage: what the retriever chose from (a hybrid's dense and BM25 lists, before
        # fusion's cut), else its list; the fusion's cut, like the chain, is then the second stage
        pool = pipe.pool(row.question) or first
        final = ranked.nodes
        if ranked.rerank_s is not None:
            timer["rerank_s"] = timer.get("rerank_s", 0.0) + ranked.rerank_s
        first_rank = {n.node.node_id: (i + 1, n.score) for i, n in enumerate(first)}
        texts = [n.node.get_content() for n in final]
        if row.keywords:
            scores = question_scores(row.keywords, texts, cfg.metrics.k)
        else:  # a row with spans or labels alone: the keyword metrics are n/a, not 0
            scores = {name: None for name in KEYWORD_METRICS} | {"keyword_ranks": {}}
        ranks = scores.pop("keyword_ranks")
        scores["context_chars"] = sum(len(t) for t in texts)
        span_chars = None
        refs = [(r.source, r.start_index, r.end_index) for r in (row.references or []) if r.source in sources]
        span_ranks = None
        if refs:
            spans = span_scores(sent_spans(final, texts), refs)
            span_chars = spans.pop("span_chars")
            scores.update(spans)
            ranked_spans = span_rank_scores(passage_spans(final), [[ref, *_places(twins, ref)] for ref in refs],
                                            cfg.metrics.k)
            span_ranks = list(zip(ranked_spans.pop("span_ranks"), ranked_spans.pop("span_twin")))
            scores.update(ranked_spans)
        if labels is not None and row.id in labels:
            scores.update(label_scores(labels[row.id], [n.node.node_id for n in final], cfg.metrics.k))
        if row.qrels:  # document level, max-passage: each document at its best passage's rank
            scores.update(qrels_scores([n.node.metadata.get("source") for n in final],
                                       qrels_sources(row.qrels, doc_ids)))
        finals.append(final)
        samples.append(Sample(
            id=row.id,
            question=row.question,
            category=row.category,
            keywords=row.keywords or [],
            reference_answer=row.reference_answer,
            keyword_ranks=ranks,
            metrics=scores,
            retrieved=[retrieved_record(i + 1, n, first_rank[n.node.node_id]) for i, n in enumerate(final)],
            first_stage=[{"id": n.node.node_id, "score": score_float(n.score)} for n in first] if reranker else None,
            timings={"retrieve_s": per_question_retrieve, "rerank_s": ranked.rerank_s},
            candidates=candidates_record(pool),
            funnel=retrieval_side(row, pool, final, view, twins),
        ))
        if refs:
            samples[-1]["references"] = [_reference(ref, twins.get(ref), rank, twin)
                                         for ref, (rank, twin) in zip(refs, span_ranks)]
            samples[-1]["span_chars"] = span_chars
        rewrites = pipe.rewrites(row.question)
        if rewrites is not None:
            samples[-1]["query_rewrites"] = rewrites
        if ranked.rerank is not None:  # auto-activation's decision
            samples[-1]["rerank"] = ranked.rerank
        if semantic is not None:
            k = len(samples) - 1
            samples[-1]["semantic_cache"] = ({"hit": True, "of": served[k]["question"],
                                              "similarity": round(served[k]["similarity"], 4)}
                                             if k in served else {"hit": False})
        if ranked.low_confidence is not None:
            samples[-1]["low_confidence"] = ranked.low_confidence
    return samples, finals, counters


def _places(twins: dict[tuple, Twins], ref: tuple) -> list[tuple]:
    found = twins.get(ref)
    return found.places if found is not None else []


def _reference(ref: tuple, twins: Twins | None, rank: int | None, twin: bool) -> dict:
    """A golden span as samples.jsonl records it: its place, the rank of the first passage holding
    it (and whether that passage holds a twin), and its twins where it has any."""
    out = {"source": ref[0], "start": ref[1], "end": ref[2], "rank": rank}
    if twin:
        out["held_by_twin"] = True
    if twins is not None and twins.n:
        out["twins"] = [{"source": s, "start": a, "end": b} for s, a, b in twins.places]
        out["n_twins"] = twins.n
    return out


def answer_stage(samples: list[Sample], finals: list[list[NodeWithScore]], synthesizer: LabSynthesizer,
                 timer: Timer, show_progress: bool, suppress: bool = False) -> None:
    """Answer every question from its final nodes; adds ``context`` and ``answer`` to samples."""

    def one(k: int) -> tuple[dict, Any]:
        if samples[k].get("low_confidence") and suppress:  # the guardrail: no context, no call
            record, ctx = synthesizer.answer(samples[k]["question"], [])
            return {**record, "suppressed": True}, ctx
        return synthesizer.answer(samples[k]["question"], finals[k])

    with timer.stage("generate_s"):
        out = run_all(one, range(len(samples)), "generate", show_progress, synthesizer.lab_llm.concurrency)
    for s, final, (record, ctx) in zip(samples, finals, out):
        if s.get("funnel", {}).get("items"):  # what the budget kept of the gold evidence
            s["funnel"] = sent_side(s["funnel"], final, ctx, suppressed=bool(record.get("suppressed")))
        rec = ctx.as_record()
        s["context"] = rec
        s["answer"] = record
        s["metrics"]["answer_chars"] = len(record["text"])
        s["metrics"]["sent_context_chars"] = rec["chars"]
        s["timings"]["generate_s"] = None if record["cached"] else record["seconds"]


def judge_stage(samples: list[Sample], grade: Grader, seed: int, timer: Timer,
                show_progress: bool, paraphraser: Any = None, pool_texts: Sequence[str] = ()) -> dict | None:
    """Judge every answer with the run's ``grade`` (and calibrate the judge); adds
    ``judgement``/``calibration``. Returns the perturbation checks (``judge.checks`` questions;
    None when off)."""
    llm, cfg, prompt = grade.llm, grade.plan.cfg, grade.plan.prompt
    items = [judge_item(s) for s in samples]

    def runner(fn: Any, keys: list[int], what: str = "judge") -> list:
        return run_all(fn, keys, what, show_progress, llm.concurrency)

    with timer.stage("judge_s"):
        records = judge_questions(items, llm, prompt, cfg.max_attempts, cfg.calibration, seed, runner, grade)
    checks = None
    n_checks = DEFAULT_CHECKS if cfg.checks is None else cfg.checks
    if n_checks:
        with timer.stage("judge_checks_s"):
            checks = run_checks(items, min(n_checks, len(items)), seed, grade.scores, paraphraser,
                                pool_texts, lambda fn, keys: runner(fn, keys, "judge checks"))
        checks["method"] = grade.method
    version = grade.version
    for s, rec in zip(samples, records):
        j = rec["judgement"]
        s["judgement"] = {**j, "prompt_version": version}
        s["calibration"] = rec["calibration"]
        suspect = bool(j.get("suspect"))
        for d in DIMENSIONS:  # None when the judgement failed or is suspect: counted, not averaged
            s["metrics"][d] = None if suspect else j[d]
        s["metrics"]["judge_failed"] = 1 if j["status"] == "failed" else 0
        s["metrics"]["judge_suspect"] = 1 if suspect else 0
    return checks


def retrieval_sections(cfg: ExperimentConfig, samples: list[Sample]) -> dict:
    """``results.json``'s sections about the retrieval stage: the guardrail's flags, the
    reranker's auto-activation, and why the keyword or span metrics are n/a for some questions (each
    only when it applies)."""
    out: dict = {}
    if cfg.guardrail is not None:
        flagged = [s["id"] for s in samples if s.get("low_confidence")]
        out["guardrail"] = {"min_top_score": cfg.guardrail.min_top_score,
                            "suppress_generation": cfg.guardrail.suppress_generation,
                            "n_flagged": len(flagged), "flagged_ids": flagged}
    if any("rerank" in s for s in samples):
        fired = [s for s in samples if s["rerank"]["fired"]]
        out["rerank_activation"] = {
            "n_fired": len(fired), "n": len(samples),
            "why": {w: sum(w in s["rerank"]["why"] for s in fired) for w in ("long", "low", "flat")}}
    no_keywords = [s["id"] for s in samples if not s["keywords"]]
    if no_keywords:  # the reason beside the n/a, in results and reports
        out["not_scored"] = {m: {"n": len(no_keywords), "why": "no keywords in the eval row",
                                 "ids": no_keywords} for m in KEYWORD_METRICS}
    no_qrels = [s["id"] for s in samples if "qrels_map" not in s["metrics"]]
    if no_qrels and len(no_qrels) < len(samples):  # the qrels metrics are computed: say where they are n/a
        out.setdefault("not_scored", {}).update(
            {m: {"n": len(no_qrels), "why": "no qrels in the eval row", "ids": no_qrels}
             for m in catalog.names(group="qrels")})
    no_spans = [s["id"] for s in samples if not s.get("references")]
    if no_spans and len(no_spans) < len(samples):  # the span metrics are computed: say where they are n/a
        out.setdefault("not_scored", {}).update(
            {m: {"n": len(no_spans), "why": "no golden span in a document of the knowledge base", "ids": no_spans}
             for m in catalog.names(group="spans")})
    return out


def judge_sections(samples: list[Sample], checks: dict | None) -> dict:
    """``results.json``'s sections about the judge: judged, failed and suspect counts, the calibration
    summary and the perturbation checks (with how often completeness and relevance differ)."""
    failed = [s["id"] for s in samples if s["judgement"]["status"] == "failed"]
    suspect = [s["id"] for s in samples if s["judgement"].get("suspect")]
    out: dict = {"judge": {"n_judged": len(samples) - len(failed), "n_failed": len(failed), "failed_ids": failed,
                           "n_suspect": len(suspect), "suspect_ids": suspect, "suspect_rule": SUSPECT_RULE},
                 "calibration": calibration_summary(samples)}
    if checks is not None:
        real = [s["judgement"] for s in samples if s["judgement"]["status"] == "ok"]
        out["judge_checks"] = {**checks, "differs": differs(real)}
    return out


def ragas_stage(samples: list[Sample], finals: list[list[NodeWithScore]], llm: LabLLM, embed_model: Any,
                cfg: RagasConfig, timer: Timer, show_progress: bool) -> dict:
    """ragas metrics on a seeded sample of the questions; adds ``ragas`` to those samples."""
    chosen = list(range(len(samples)))
    if cfg.limit is not None and cfg.limit < len(samples):
        chosen = sorted(random.Random(cfg.seed).sample(chosen, cfg.limit))
    rows = [{"id": samples[k]["id"], "question": samples[k]["question"], "answer": samples[k]["answer"]["text"],
             "contexts": [n.node.get_content() for n in finals[k]], "reference": samples[k]["reference_answer"]}
            for k in chosen]
    with timer.stage("ragas_s"):
        scores = evaluate_ragas(rows, as_llamaindex_llm(llm, "ragas"), embed_model, tuple(cfg.metrics),
                                show_progress=show_progress)
    for k, sc in zip(chosen, scores):
        samples[k]["ragas"] = sc
        for m in cfg.metrics:
            samples[k]["metrics"][f"ragas_{m}"] = sc.get(m)
    return {"metrics": list(cfg.metrics), "n_questions": len(chosen), "of": len(samples),
            "ids": [samples[k]["id"] for k in chosen], "seed": cfg.seed}
