"""The evaluator's stages over a set of questions: retrieve (+ rerank), answer, judge, ragas.

Each stage fills fields of the per-question sample dicts that become ``samples.jsonl``, and
adds its seconds to the run's timer. Model calls go through content caches, so a stage that
was interrupted resumes from what it stored, and a repeated run computes nothing.
"""

from __future__ import annotations

import time
from typing import Any, Sequence

from lab.progress import progress, run_all


def _num(score: object) -> float | None:
    """Scores as plain floats (rerankers may return numpy scalars, which JSON cannot hold)."""
    return None if score is None else float(score)


def retrieve_stage(cfg: Any, rows: Sequence[Any], pipe: Any, timer: Any, show_progress: bool,
                   labels: dict | None = None) -> tuple[list[dict], list[list[Any]]]:
    """Keyword metrics per question; returns (samples, the final nodes of each question)."""
    from llama_index.core.schema import QueryBundle

    from lab.metrics.retrieval import question_scores
    from lab.metrics.labels import label_scores
    from lab.metrics.spans import span_scores
    from lab.second_stage import low_confidence

    embed_model, reranker = pipe.embed_model, pipe.reranker
    caches = cfg.caches
    before = dict(embed_model.counters)
    with timer.stage("embed_queries_s"):
        vectors = embed_model.encode([r.question for r in rows], embed_model.query_prefix,
                                     use_cache=caches is None or caches.query_embeddings)
    pipe.counters["query_embeddings_computed"] = embed_model.counters["computed"] - before["computed"]
    pipe.counters["query_embeddings_cached"] = embed_model.counters["cached"] - before["cached"]
    bundles = [QueryBundle(query_str=r.question, embedding=v.tolist()) for r, v in zip(rows, vectors)]
    semantic = _semantic_cache(cfg, pipe)
    served = {i: hit for i, v in enumerate(vectors) if semantic and (hit := semantic.lookup(v)) is not None}
    with timer.stage("retrieve_s"):  # one batched LanceDB search for every question not served
        todo = [i for i in range(len(rows)) if i not in served]
        searched = dict(zip(todo, pipe.retriever.retrieve_many([bundles[i] for i in todo])))
        if served:
            from lab.semantic_cache import nodes_by_ids

            searched.update({i: nodes_by_ids(pipe.handle.index.vector_store.table, hit["nodes"])
                             for i, hit in served.items()})
        firsts = [searched[i] for i in range(len(rows))]
    if semantic is not None:
        semantic.put_many([(rows[i].question, vectors[i], [[n.node.node_id, _num(n.score)] for n in searched[i]])
                           for i in todo])
        pipe.counters["semantic_cache_hits"] = len(served)
        pipe.counters["semantic_cache_misses"] = len(todo)
    per_question_retrieve = timer["retrieve_s"] / max(len(rows), 1)
    sources = {d.metadata["source"] for d in pipe.corpus.documents}  # spans in other documents: not scored
    candidate_k = pipe.candidate_k
    samples, finals = [], []
    items = zip(rows, bundles, firsts)
    if reranker is not None:  # the slow stage: show a bar or log an ETA
        items = progress(items, len(rows), "rerank", bar=show_progress)
    for row, bundle, first in items:
        t1 = time.perf_counter()
        final = first
        if reranker is not None:
            final = reranker.postprocess_nodes(first[:candidate_k], query_bundle=bundle)
        t2 = time.perf_counter()
        if reranker is not None:
            timer["rerank_s"] = timer.get("rerank_s", 0.0) + (t2 - t1)
        first_rank = {n.node.node_id: (i + 1, n.score) for i, n in enumerate(first)}
        texts = [n.node.get_content() for n in final]
        scores = question_scores(row.keywords, texts, cfg.metrics.k)
        ranks = scores.pop("keyword_ranks")
        scores["context_chars"] = sum(len(t) for t in texts)
        span_chars = None
        refs = [(r.source, r.start_index, r.end_index) for r in (row.references or []) if r.source in sources]
        if refs:
            spans = span_scores([(n.node.metadata.get("source"), n.node.start_char_idx, n.node.end_char_idx, len(t))
                                 for n, t in zip(final, texts)], refs)
            span_chars = spans.pop("span_chars")
            scores.update(spans)
        if labels is not None and row.id in labels:
            scores.update(label_scores(labels[row.id], [n.node.node_id for n in final], cfg.metrics.k))
        finals.append(final)
        samples.append({
            "id": row.id,
            "question": row.question,
            "category": row.category,
            "keywords": row.keywords,
            "reference_answer": row.reference_answer,
            "keyword_ranks": ranks,
            "metrics": scores,
            "retrieved": [
                {
                    "rank": i + 1,
                    "id": n.node.node_id,
                    "source": n.node.metadata.get("source"),
                    "page": n.node.metadata.get("page"),
                    "doc_type": n.node.metadata.get("doc_type"),
                    "score": _num(n.score),
                    "first_stage_rank": first_rank[n.node.node_id][0],
                    "first_stage_score": _num(first_rank[n.node.node_id][1]),
                    "start_char_idx": n.node.start_char_idx,
                    "end_char_idx": n.node.end_char_idx,
                    "text": n.node.get_content(),
                }
                for i, n in enumerate(final)
            ],
            "first_stage": [{"id": n.node.node_id, "score": _num(n.score)} for n in first] if reranker else None,
            "timings": {"retrieve_s": per_question_retrieve, "rerank_s": (t2 - t1) if reranker else None},
        })
        if refs:
            samples[-1]["references"] = [{"source": src, "start": a, "end": b} for src, a, b in refs]
            samples[-1]["span_chars"] = span_chars
        if reranker is not None and hasattr(reranker, "last"):  # auto-activation's decision
            samples[-1]["rerank"] = dict(reranker.last)
        if semantic is not None:
            k = len(samples) - 1
            samples[-1]["semantic_cache"] = ({"hit": True, "of": served[k]["question"],
                                              "similarity": round(served[k]["similarity"], 4)}
                                             if k in served else {"hit": False})
        if cfg.guardrail is not None:
            samples[-1]["low_confidence"] = low_confidence([_num(n.score) or 0.0 for n in first],
                                                           cfg.guardrail.min_top_score)
    return samples, finals


def _semantic_cache(cfg: Any, pipe: Any) -> Any:
    if cfg.caches is None or cfg.caches.semantic_threshold is None:
        return None
    from lab.semantic_cache import SemanticQueryCache, scope_key

    scope = scope_key(pipe.handle.key, cfg.retriever, pipe.embed_model.fingerprint, pipe.embed_model.query_prefix)
    return SemanticQueryCache(pipe.cache_root / "semantic.sqlite", scope, cfg.caches.semantic_threshold)


def answer_stage(samples: list[dict], finals: list[list[Any]], synthesizer: Any, timer: Any,
                 show_progress: bool, suppress: bool = False) -> None:
    """Answer every question from its final nodes; adds ``context`` and ``answer`` to samples."""

    def one(k: int) -> tuple[dict, Any]:
        if samples[k].get("low_confidence") and suppress:  # the guardrail: no context, no call
            record, ctx = synthesizer.answer(samples[k]["question"], [])
            return {**record, "suppressed": True}, ctx
        return synthesizer.answer(samples[k]["question"], finals[k])

    with timer.stage("generate_s"):
        out = run_all(one, range(len(samples)), "generate", show_progress, synthesizer.lab_llm.concurrency)
    for s, (record, ctx) in zip(samples, out):
        rec = ctx.as_record()
        s["context"] = rec
        s["answer"] = record
        s["metrics"]["answer_chars"] = len(record["text"])
        s["metrics"]["sent_context_chars"] = rec["chars"]
        s["timings"]["generate_s"] = None if record["cached"] else record["seconds"]


def judge_stage(samples: list[dict], llm: Any, cfg: Any, seed: int, timer: Any, show_progress: bool) -> None:
    """Judge every answer (and calibrate the judge); adds ``judgement``/``calibration``."""
    from lab.judge import DIMENSIONS, JUDGE_FIELDS, judge_questions
    from lab.prompts import load_prompt

    prompt = load_prompt(cfg.prompt, JUDGE_FIELDS, where="judge.prompt")
    items = [{"id": s["id"], "category": s["category"], "question": s["question"],
              "reference": s["reference_answer"], "answer": s["answer"]["text"],
              "answer_error": s["answer"].get("error")} for s in samples]

    def runner(fn: Any, keys: list[int]) -> list:
        return run_all(fn, keys, "judge", show_progress, llm.concurrency)

    with timer.stage("judge_s"):
        records = judge_questions(items, llm, prompt, cfg.max_attempts, cfg.calibration, seed, runner)
    for s, rec in zip(samples, records):
        j = rec["judgement"]
        s["judgement"] = {**j, "prompt_version": prompt.version}
        s["calibration"] = rec["calibration"]
        for d in DIMENSIONS:
            s["metrics"][d] = j[d]  # None when the judgement failed: counted, not averaged
        s["metrics"]["judge_failed"] = 1 if j["status"] == "failed" else 0


def ragas_stage(samples: list[dict], finals: list[list[Any]], llm: Any, embed_model: Any, cfg: Any,
                timer: Any, show_progress: bool) -> dict:
    """ragas metrics on a seeded sample of the questions; adds ``ragas`` to those samples."""
    import random

    from lab.llm import as_llamaindex_llm
    from lab.ragas_eval import evaluate_ragas

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
