"""Runner: one experiment, end to end, into ``reports/<NAME>/<run-id>/``.

Start-up resolves every model and validates every input before any work, so a missing model
or a bad eval row stops the run in seconds. The run folder is written under a temporary name
and renamed into place when complete: a folder that exists is a finished run.
"""

from __future__ import annotations

import json
import logging
import os
import platform
import shutil
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from lab.config import ExperimentConfig, dump_yaml

log = logging.getLogger(__name__)

RESULTS_SCHEMA = 1
RETRIEVAL_METRICS = ("mrr", "ndcg", "coverage", "context_chars")
PACKAGES = (
    "llama-index-core",
    "llama-index-vector-stores-lancedb",
    "lancedb",
    "sentence-transformers",
    "torch",
    "langchain-text-splitters",
    "llama-cpp-python",
    "pydantic",
)


@dataclass
class RunOptions:
    project_root: Path
    reports_root: Path
    cache_root: Path
    show_progress: bool = True


class Timer(dict):
    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self[name] = self.get(name, 0.0) + time.perf_counter() - t0


def _path(project_root: Path, value: str) -> Path:
    p = Path(value).expanduser()
    return p if p.is_absolute() else (project_root / p)


def run_experiment(cfg: ExperimentConfig, opts: RunOptions) -> Path:
    from lab.embeddings import build_embedding
    from lab.evalset import load_eval_set, stratified_sample
    from lab.ingest import load_folder
    from lab.models import offline_env_for, resolve_hf_model
    from lab.rerank import resolve_reranker

    timer = Timer()
    started = time.time()
    t_start = time.perf_counter()
    # --- start-up: resolve models and validate inputs before any heavy work -------------------
    embed_model_ref = resolve_hf_model(cfg.embedding.model, "embedding model")
    rerank_plan = resolve_reranker(cfg.reranker)
    offline_env_for([embed_model_ref] + ([rerank_plan.model] if rerank_plan and rerank_plan.model.source != "gguf" else []))
    kb_path = _path(opts.project_root, cfg.data.knowledge_base)
    eval_path = _path(opts.project_root, cfg.data.eval_set)
    eval_set = load_eval_set(eval_path, cfg.data.categories)
    rows = eval_set.rows
    if cfg.sample.limit:
        rows = stratified_sample(rows, cfg.sample.limit, cfg.sample.seed)
    with timer.stage("load_s"):
        corpus = load_folder(kb_path, cfg.loader.extensions, cfg.loader.max_file_bytes, cfg.embedding.embed_metadata)

    # --- index ----------------------------------------------------------------------------------
    from lab.embeddings import VectorCache
    from lab.index import open_or_build

    embed_model = build_embedding(cfg.embedding, embed_model_ref, opts.cache_root)
    handle = open_or_build(corpus, cfg, embed_model, opts.cache_root, show_progress=opts.show_progress)
    for name, seconds in handle.timings.items():
        timer[name] = seconds
    reranker = None
    if rerank_plan is not None:
        from lab.rerank import build_reranker

        reranker = build_reranker(rerank_plan, VectorCache(opts.cache_root / "scores.sqlite"))

    # --- retrieve, rerank, score ------------------------------------------------------------------
    samples = _evaluate(cfg, rows, handle, embed_model, reranker, timer, opts.show_progress)

    # --- aggregate and write --------------------------------------------------------------------
    from lab.metrics.aggregate import by_category, mean_table

    metric_rows = [{"category": s["category"], **s["metrics"]} for s in samples]
    timer["total_s"] = time.perf_counter() - t_start
    results = {
        "schema_version": RESULTS_SCHEMA,
        "name": cfg.name,
        "run_id": None,  # set below
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "description": cfg.description,
        "config": cfg.model_dump(mode="json"),
        "config_fingerprint": cfg.fingerprint(),
        "sample": {
            "is_sample": len(rows) < eval_set.n_total,
            "n_questions": len(rows),
            "n_total": eval_set.n_total,
            "limit": cfg.sample.limit,
            "seed": cfg.sample.seed,
        },
        "data": {
            "knowledge_base": str(kb_path),
            "corpus_sha256": corpus.content_hash,
            "n_documents": len(corpus.documents),
            "n_chars": corpus.n_chars,
            "skipped_files": corpus.skipped,
            "eval_set": str(eval_path),
            "eval_sha256": eval_set.sha256,
            "categories": cfg.data.categories,
        },
        "index": {
            "key": handle.key,
            "path": str(handle.path),
            "reused": handle.reused,
            "n_chunks": handle.n_chunks,
            "chunk_chars_mean": handle.manifest.get("chunk_chars_mean"),
            "texts_embedded": handle.embedded,
        },
        "models": {
            "embedding": {"name": embed_model_ref.name, "location": embed_model_ref.location,
                          "source": embed_model_ref.source, "fingerprint": embed_model.fingerprint},
            "reranker": None if rerank_plan is None else {
                "name": rerank_plan.model.name, "location": rerank_plan.model.location,
                "source": rerank_plan.model.source, "kind": rerank_plan.cfg.name,
                "prompt_version": _prompt_version(rerank_plan.cfg.name),
            },
        },
        "metrics": {
            "k": cfg.metrics.k,
            "overall": mean_table(metric_rows, RETRIEVAL_METRICS),
            "by_category": by_category(metric_rows, RETRIEVAL_METRICS, cfg.data.categories),
        },
        "counters": {
            "embeddings_computed": embed_model.counters["computed"],
            "embeddings_cached": embed_model.counters["cached"],
            "rerank_scores_computed": getattr(reranker, "counters", {}).get("computed", 0) if reranker else 0,
            "rerank_scores_cached": getattr(reranker, "counters", {}).get("cached", 0) if reranker else 0,
        },
        "timings": dict(timer),
        "environment": environment(opts.project_root),
    }
    return write_run(results, samples, cfg, opts.reports_root)


def _prompt_version(kind: str) -> str | None:
    if kind == "llm_pointwise":
        from lab.rerank import PROMPT_VERSION

        return PROMPT_VERSION
    return None


def _evaluate(cfg, rows, handle, embed_model, reranker, timer: Timer, show_progress: bool) -> list[dict]:
    from llama_index.core.schema import QueryBundle

    from lab.metrics.retrieval import question_scores
    from lab.progress import progress
    from lab.retrieval import build_retriever

    with timer.stage("embed_queries_s"):
        vectors = embed_model.encode([r.question for r in rows], embed_model.query_prefix)
    retriever = build_retriever(cfg.retriever, handle.index, embed_model)
    bundles = [QueryBundle(query_str=r.question, embedding=v.tolist()) for r, v in zip(rows, vectors)]
    with timer.stage("retrieve_s"):  # one batched LanceDB search for every question
        firsts = retriever.retrieve_many(bundles)
    per_question_retrieve = timer["retrieve_s"] / max(len(rows), 1)
    candidate_k = (cfg.reranker.candidate_k or cfg.retriever.top_k) if cfg.reranker else None
    samples = []
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
    return samples


def _num(score: object) -> float | None:
    """Scores as plain floats (rerankers may return numpy scalars, which JSON cannot hold)."""
    return None if score is None else float(score)


def environment(project_root: Path) -> dict:
    from importlib import metadata

    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    commit, dirty = None, None
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=project_root, capture_output=True,
                                text=True, timeout=10).stdout.strip() or None
        status = subprocess.run(["git", "status", "--porcelain"], cwd=project_root, capture_output=True,
                                text=True, timeout=10).stdout
        dirty = bool(status.strip()) if commit else None
    except (OSError, subprocess.SubprocessError):
        pass
    import lab

    return {
        "lab": lab.__version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "packages": versions,
        "git_commit": commit,
        "git_dirty": dirty,
    }


def write_run(results: dict, samples: list[dict], cfg: ExperimentConfig, reports_root: Path) -> Path:
    """Write the run folder atomically (temporary folder, then rename) and render its report."""
    from lab.report.html import render_run

    base = reports_root / cfg.name
    base.mkdir(parents=True, exist_ok=True)
    run_id = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    suffix = 1
    while (base / run_id).exists():
        suffix += 1
        run_id = f"{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{suffix}"
    results["run_id"] = run_id
    tmp = base / f".{run_id}.tmp-{os.getpid()}"
    tmp.mkdir()
    try:
        (tmp / "config.yaml").write_text(dump_yaml(cfg), encoding="utf-8")
        (tmp / "results.json").write_text(json.dumps(results, indent=2, default=str), encoding="utf-8")
        with open(tmp / "samples.jsonl", "w", encoding="utf-8") as fh:
            for s in samples:
                fh.write(json.dumps(s, default=str) + "\n")
        render_run(tmp)
        os.replace(tmp, base / run_id)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    latest_tmp = base / f".LATEST.tmp-{os.getpid()}"
    latest_tmp.write_text(run_id + "\n")
    os.replace(latest_tmp, base / "LATEST")
    return base / run_id
