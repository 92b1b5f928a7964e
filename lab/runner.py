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
from typing import Any, Iterator

from lab import faults
from lab.config import ExperimentConfig, dump_yaml

log = logging.getLogger(__name__)

RESULTS_SCHEMA = 1
RETRIEVAL_METRICS = ("mrr", "ndcg", "coverage", "context_chars")
SPAN_METRICS = ("span_precision", "span_recall", "span_iou")
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


def run_experiment(cfg: ExperimentConfig, opts: RunOptions) -> Path:
    from lab.evalset import check_references, load_eval_set, stratified_sample
    from lab.metrics.aggregate import by_category, mean_table
    from lab.pipeline import load_corpus, open_pipeline, project_path, resolve_models
    from lab.stages import answer_stage, judge_stage, ragas_stage, retrieve_stage

    timer = Timer()
    started = time.time()
    t_start = time.perf_counter()
    # --- start-up: resolve models and validate inputs before any heavy work -------------------
    plans = resolve_models(cfg, opts.project_root)
    eval_path = project_path(opts.project_root, cfg.data.eval_set)
    eval_set = load_eval_set(eval_path, cfg.data.categories)
    rows = eval_set.rows
    if cfg.sample.limit:
        rows = stratified_sample(rows, cfg.sample.limit, cfg.sample.seed)
    labels = None
    if cfg.data.labels:
        from lab.metrics.labels import load_labels

        labels = load_labels(project_path(opts.project_root, cfg.data.labels), [r.id for r in eval_set.rows])

    t_load = time.perf_counter()
    corpus = load_corpus(cfg, opts.project_root)
    check_references(eval_set, {d.metadata["source"]: d.text for d in corpus.documents})
    timer["load_s"] = time.perf_counter() - t_load

    # --- index, retrieve, rerank, score -----------------------------------------------------------
    pipe = open_pipeline(cfg, plans, opts.project_root, opts.cache_root, opts.show_progress, corpus=corpus)
    timer.update(pipe.timings)
    samples, finals = retrieve_stage(cfg, rows, pipe, timer, opts.show_progress, labels)

    extra: dict = {}
    if cfg.guardrail is not None:
        flagged = [s["id"] for s in samples if s.get("low_confidence")]
        extra["guardrail"] = {"min_top_score": cfg.guardrail.min_top_score,
                              "suppress_generation": cfg.guardrail.suppress_generation,
                              "n_flagged": len(flagged), "flagged_ids": flagged}
    if any("rerank" in s for s in samples):
        fired = [s for s in samples if s["rerank"]["fired"]]
        extra["rerank_activation"] = {
            "n_fired": len(fired), "n": len(samples),
            "why": {w: sum(w in s["rerank"]["why"] for s in fired) for w in ("long", "low", "flat")}}

    # --- answer, judge ------------------------------------------------------------------------------
    judge_llm = None
    metric_names = list(RETRIEVAL_METRICS)
    if any(s.get("references") for s in samples):  # eval rows with golden spans
        metric_names += SPAN_METRICS
    if labels is not None:
        metric_names += ["label_recall", "label_mrr"]
        extra["labels"] = _labels_summary(cfg.data.labels, labels, pipe.handle)
    if pipe.synthesizer is not None:
        suppress = cfg.guardrail is not None and cfg.guardrail.suppress_generation
        answer_stage(samples, finals, pipe.synthesizer, timer, opts.show_progress, suppress)
        metric_names += ["answer_chars", "sent_context_chars"]
        extra["answers"] = _answer_summary(samples)
    if plans.judge is not None:
        from lab.judge import calibration_summary
        from lab.llm import build_llm

        judge_llm = build_llm(plans.judge, opts.cache_root)
        judge_stage(samples, judge_llm, cfg.judge, cfg.sample.seed, timer, opts.show_progress)
        metric_names += ["accuracy", "completeness", "relevance"]
        failed = [s["id"] for s in samples if s["judgement"]["status"] == "failed"]
        extra["judge"] = {"n_judged": len(samples) - len(failed), "n_failed": len(failed), "failed_ids": failed}
        extra["calibration"] = calibration_summary(samples)
    if cfg.ragas is not None:
        from lab.llm import build_llm

        ragas_llm = judge_llm or build_llm(plans.judge or plans.generation, opts.cache_root)
        extra["ragas"] = ragas_stage(samples, finals, ragas_llm, pipe.embed_model, cfg.ragas, timer,
                                     opts.show_progress)
        metric_names += [f"ragas_{m}" for m in cfg.ragas.metrics]

    # --- aggregate and write --------------------------------------------------------------------
    metric_rows = [{"category": s["category"], **s["metrics"]} for s in samples]
    per_category = by_category(metric_rows, metric_names, cfg.data.categories)
    if "judge" in extra:
        for cat, row in per_category.items():
            row["judge_failed"] = sum(1 for s in samples if s["category"] == cat and s["metrics"]["judge_failed"])
    usage = {role: llm.usage.as_dict() for role, llm in (("generation", pipe.generator), ("judge", judge_llm))
             if llm is not None}
    costs = [u["cost_usd"] for u in usage.values()]
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
            "knowledge_base": str(project_path(opts.project_root, cfg.data.knowledge_base)),
            "corpus_sha256": pipe.corpus.content_hash,
            "n_documents": len(pipe.corpus.documents),
            "n_chars": pipe.corpus.n_chars,
            "skipped_files": pipe.corpus.skipped,
            "eval_set": str(eval_path),
            "eval_sha256": eval_set.sha256,
            "categories": cfg.data.categories,
        },
        "index": {
            "key": pipe.handle.key,
            "path": str(pipe.handle.path),
            "reused": pipe.handle.reused,
            "n_chunks": pipe.handle.n_chunks,
            "chunk_chars_mean": pipe.handle.manifest.get("chunk_chars_mean"),
            "texts_embedded": pipe.handle.embedded,
        },
        "models": _models(cfg, plans, pipe),
        "metrics": {
            "k": cfg.metrics.k,
            "overall": mean_table(metric_rows, metric_names),
            "by_category": per_category,
        },
        **extra,
        "counters": {
            "embeddings_computed": pipe.embed_model.counters["computed"],
            "embeddings_cached": pipe.embed_model.counters["cached"],
            "rerank_scores_computed": getattr(pipe.reranker, "counters", {}).get("computed", 0),
            "rerank_scores_cached": getattr(pipe.reranker, "counters", {}).get("cached", 0),
            **pipe.counters,
            **{f"llm_calls_{role}": u["calls"] for role, u in usage.items()},
            **{f"llm_cached_{role}": u["cached"] for role, u in usage.items()},
        },
        "llm_usage": usage,
        "cost_usd": None if not usage or any(c is None for c in costs) else sum(costs),
        "timings": dict(timer),
        "environment": environment(opts.project_root),
    }
    return write_run(results, samples, cfg, opts.reports_root)


def _labels_summary(path: str, labels: dict, handle: Any) -> dict:
    from lab.index import table_ids

    ids = table_ids(handle)
    missing = sorted({i for rel in labels.values() for i in rel if i not in ids})
    if missing:
        log.warning("%d labelled chunk ids are not in this index (labels made for another chunking?): %s",
                    len(missing), ", ".join(missing[:5]))
    return {"path": path, "n_labelled": len(labels), "n_missing_ids": len(missing), "missing_ids": missing[:20]}


def _answer_summary(samples: list[dict]) -> dict:
    n = len(samples)
    answers = [s["answer"] for s in samples]
    return {
        "n": n,
        "failed": sum(1 for a in answers if a.get("status") == "failed"),
        "failed_ids": [s["id"] for s in samples if s["answer"].get("status") == "failed"],
        "refused": sum(1 for a in answers if a["refused"]),
        "no_context": sum(1 for a in answers if a.get("no_context")),
        "with_citation": sum(1 for a in answers if a["citations"]),
        "cut_at_max_tokens": sum(1 for a in answers if a.get("finish_reason") == "length"),
    }


def _models(cfg: ExperimentConfig, plans: Any, pipe: Any) -> dict:
    emb = plans.embedding
    out: dict = {
        "embedding": {"name": emb.name, "location": emb.location, "source": emb.source,
                      "fingerprint": pipe.embed_model.fingerprint},
        "reranker": None if plans.reranker is None else {
            "name": plans.reranker.model.name, "location": plans.reranker.model.location,
            "source": plans.reranker.model.source, "kind": plans.reranker.cfg.name,
            "prompt_version": _prompt_version(plans.reranker.cfg.name),
        },
        "generation": None,
        "judge": None,
    }
    if plans.generation is not None:
        p = pipe.synthesizer.prompt
        out["generation"] = {**plans.generation.describe(), "prompt_version": p.version, "prompt_sha256": p.sha256,
                             "context_builder": cfg.generation.context.model_dump(mode="json")}
    if plans.judge is not None:
        from lab.judge import JUDGE_FIELDS
        from lab.prompts import load_prompt

        p = load_prompt(cfg.judge.prompt, JUDGE_FIELDS)
        out["judge"] = {**plans.judge.describe(), "prompt_version": p.version, "prompt_sha256": p.sha256,
                        "calibration": cfg.judge.calibration, "max_attempts": cfg.judge.max_attempts}
    return out


def _prompt_version(kind: str) -> str | None:
    if kind == "llm_pointwise":
        from lab.rerank import PROMPT_VERSION

        return PROMPT_VERSION
    return None


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
    try:
        return _write_run(results, samples, cfg, reports_root)
    except OSError as exc:  # disk full, read-only folder, a file where a folder should be
        from lab.errors import LabError

        raise LabError(f"cannot write the run into {reports_root / cfg.name}: {exc.strerror or exc}",
                       hint="free disk space or make the folder writable (or pass --reports DIR); every model "
                            "call is cached, so the rerun costs seconds") from None


def _write_run(results: dict, samples: list[dict], cfg: ExperimentConfig, reports_root: Path) -> Path:
    from lab.report.html import render_run

    base = reports_root / cfg.name
    base.mkdir(parents=True, exist_ok=True)
    for debris in base.glob(".*.tmp-*"):  # left by a run killed while writing (its process is gone)
        pid = debris.name.rsplit("-", 1)[-1]
        if pid.isdigit() and not faults.pid_alive(int(pid)):
            shutil.rmtree(debris, ignore_errors=True) if debris.is_dir() else debris.unlink(missing_ok=True)
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
        faults.point("run.before_rename")
        os.replace(tmp, base / run_id)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    latest_tmp = base / f".LATEST.tmp-{os.getpid()}"
    latest_tmp.write_text(run_id + "\n")
    os.replace(latest_tmp, base / "LATEST")
    return base / run_id
