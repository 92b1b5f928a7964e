"""A run over a target: a RAG system the lab did not build, asked every question, then scored as
a pipeline's run is.

:func:`evaluate_target` is what :func:`lab.eval.runner.evaluate` does for a config with a
``target:`` section: start-up opens the target (an unreachable URL, a missing module or file, an
unset header variable stops the run in seconds, exit 2), every question is asked through the
reply cache (:func:`lab.targets.calls.ask_all`), each reply becomes a sample
(:mod:`lab.eval.target_samples`), and the judge, its checks and calibration, the loss funnel and
the run files are the pipeline's own. ``results.json`` gains a ``target`` section: kind, place,
version, identity, calls made and cached, failures (ids and errors), the target's wall time,
the contexts located in the knowledge base at each level, and the injection scan of the contexts.
"""

from __future__ import annotations

import logging
import statistics
import time
from typing import Any, Callable

from lab.config import ExperimentConfig
from lab.eval.locate import LEVELS, Locator
from lab.eval.records import environment
from lab.eval.stages import Timer, judge_sections, judge_stage, retrieval_sections
from lab.eval.target_samples import not_observed, target_sample
from lab.evalsets.evalset import check_references
from lab.evalsets.twins import span_twins
from lab.judge.checks import paraphraser_for
from lab.judge.methods import grader
from lab.judge.repeats import repeat_judgements
from lab.judge.rubric import resolve_judge
from lab.metrics import catalog
from lab.metrics.funnel import finish, summarise
from lab.models.llm import build_llm
from lab.paths import project_path
from lab.progress import duration, run_all
from lab.rag.pipeline import load_corpus
from lab.runfiles import RESULTS_SCHEMA, Results, Sample
from lab.targets.calls import Asked, ask_all, cached_seconds, open_target

log = logging.getLogger(__name__)


def _concurrency(tcfg: Any) -> int:
    """Calls in flight at once: an http target's bound, a python target's only when its config sets one."""
    return tcfg.concurrency if tcfg.kind == "http" or "concurrency" in tcfg.model_fields_set else 1


def target_plan(cfg: ExperimentConfig, opts: Any, questions: Any) -> list[str]:
    """What a run of ``cfg``'s target would ask (``lab run --dry-run``): the target opened as at
    start-up (an unreachable URL or a missing module stops here), the questions with a cached reply
    (no call), and the time the rest would take at the median of the cached replies' wall times
    (unknown until the target has answered once: the lab cannot know a black box's speed)."""
    tcfg = cfg.target
    opened = open_target(tcfg, opts.project_root, getattr(opts, "target_object", None))
    n = len(questions.rows)
    if tcfg.kind == "replay":
        return [f"  target     replay {tcfg.where}: {n} questions read from the file, no call"]
    hit, seconds = (0, []) if getattr(opts, "refresh", False) else \
        cached_seconds(opened, [(r.id, r.question, []) for r in questions.rows], opts.cache_root)
    what = "answers and contexts" if tcfg.answers else "contexts only"
    line = f"  target     {tcfg.kind} {tcfg.where} (version {opened.version or 'unset'}): {n} questions, {what}; "
    line += f"{hit} cached (no call), {n - hit} to ask"
    if n - hit and seconds:
        each, concurrency = statistics.median(seconds), _concurrency(tcfg)
        line += f", about {duration(each * (n - hit) / max(1, concurrency))} ({each:.2f} s a question, " \
                f"the median of {len(seconds)} cached replies, {concurrency} at a time)"
    elif n - hit:
        line += ": its time is not known until it has answered (try --limit 5 first)"
    return [line]


def evaluate_target(cfg: ExperimentConfig, opts: Any, questions: Any, aggregate: Callable[..., dict], *,
                    quiet: bool = False) -> tuple[Results, list[Sample]]:
    """Run ``cfg``'s target over ``questions`` (:class:`lab.eval.runner.Questions`) and return its
    ``results.json`` and samples, written nowhere; ``aggregate`` is the run's metric aggregation
    (:func:`lab.eval.runner._metrics`). ``opts`` (:class:`lab.eval.runner.RunOptions`): its
    ``refresh`` asks every question again, its ``target_object`` is evaluated in place of importing
    ``target.python`` (:func:`lab.api.run` with a callable)."""
    timer, started, t_start = Timer(), time.time(), time.perf_counter()
    tcfg = cfg.target
    judge = resolve_judge(cfg.judge, opts.project_root) if tcfg.answers else None
    corpus = load_corpus(cfg, opts.project_root)
    documents = {d.metadata["source"]: d.text for d in corpus.documents}
    check_references(questions.eval_set, documents, corpus.root, cfg.loader.extensions)
    with timer.stage("target_open_s"):
        opened = open_target(tcfg, opts.project_root, getattr(opts, "target_object", None))
    if opened.version != tcfg.version:  # read from the service: resolved in the config (config.yaml, fingerprint)
        tcfg.version = opened.version
    locator, counts = Locator(documents), {level: 0 for level in LEVELS}  # the documents folded once, here
    twins = span_twins([(r.source, r.start_index, r.end_index) for row in questions.rows for r in row.references or []],
                       documents)
    rows = questions.rows
    if not quiet:
        log.info("target %s %s (%s), version %s: %d questions%s", tcfg.kind, tcfg.where,
                 opened.record.get("adapter") or opened.record.get("format") or "contract", opened.version or "unset",
                 len(rows), "" if tcfg.answers else ", contexts only")
    concurrency = _concurrency(tcfg)
    with timer.stage("target_s"):
        asked = ask_all(opened, [(r.id, r.question, []) for r in rows],
                        None if tcfg.kind == "replay" else opts.cache_root, refresh=getattr(opts, "refresh", False),
                        concurrency=concurrency,
                        runner=lambda fn, keys, n: run_all(fn, keys, "target", opts.show_progress, n))

    samples = []
    with timer.stage("score_s"):  # contexts located and scored
        for row, a in zip(rows, asked):
            samples.append(target_sample(cfg, row, a, locator, twins, questions.labels, counts))
    extra: dict = retrieval_sections(cfg, samples)
    metric_names = list(catalog.names(group="retrieval"))
    if any(s.get("references") for s in samples):
        metric_names += catalog.names(group="spans")
    if questions.labels is not None:
        metric_names += catalog.names(group="labels")
    failed = [s for s in samples if s["target"]["status"] == "failed"]
    if failed:  # n/a, with the reason beside it, as for a question without keywords
        extra.setdefault("not_scored", {})
        for m in metric_names:
            extra["not_scored"].setdefault(m, {"n": 0, "why": "the target's call failed", "ids": []})
            if extra["not_scored"][m]["why"] == "the target's call failed":
                extra["not_scored"][m].update(n=len(failed), ids=[s["id"] for s in failed])

    judge_llm = None
    if tcfg.answers:
        metric_names += catalog.names(group="answer")
        for s in samples:
            if s["answer"]["status"] == "ok":
                s["metrics"]["answer_chars"] = len(s["answer"]["text"])
                s["metrics"]["sent_context_chars"] = s["context"]["chars"]
        extra["answers"] = _answer_summary(samples)
    if judge is not None:
        judge_llm = build_llm(judge.llm, opts.cache_root)
        grade = grader(judge_llm, judge)
        checks = judge_stage(samples, grade, cfg.sample.seed, timer, opts.show_progress, paraphraser_for(judge_llm),
                             [r.reference_answer for r in questions.eval_set.rows])
        metric_names += catalog.names(group="judge")
        extra.update(judge_sections(samples, checks))
        if cfg.judge.repeats:
            with timer.stage("repeats_s"):
                extra["repeatability"] = repeat_judgements(
                    samples, judge_llm, judge, None, None, grade,
                    lambda fn, keys: run_all(fn, keys, "repeats", opts.show_progress, judge_llm.concurrency))

    for s in samples:
        rec = s.get("funnel")
        if rec and rec.get("items"):
            answered = [x for x, key in (("generation", "answer"), ("judge", "judgement"))
                        if key in s and s[key].get("status") != "failed"]
            s["funnel"] = finish({**rec, "seen": [*rec["seen"], *answered]}, s)
    extra["funnel"] = {**summarise(samples, cfg.data.categories), "not_observed": not_observed(samples)}

    metrics = aggregate(cfg, samples, metric_names, judged="judge" in extra)
    usage = {"target": _target_usage(asked)}
    if judge_llm is not None:
        usage["judge"] = judge_llm.usage.as_dict()
    extra["target"] = {**opened.record, **_target_summary(samples, asked, counts, concurrency)}
    timer["total_s"] = time.perf_counter() - t_start
    return _results(cfg, opts, started, questions, corpus, judge, metrics, extra, usage, timer), samples


def _answer_summary(samples: list[Sample]) -> dict:
    answers = [s["answer"] for s in samples]
    return {"n": len(samples), "failed": sum(1 for a in answers if a["status"] == "failed"),
            "failed_ids": [s["id"] for s in samples if s["answer"]["status"] == "failed"],
            "refused": sum(1 for a in answers if a["refused"]), "no_context": sum(1 for a in answers if a.get("no_context")),
            "with_citation": sum(1 for a in answers if a["citations"]), "cut_at_max_tokens": 0}


def _target_usage(asked: list[Asked]) -> dict:
    """The target as one more role of the run's usage table: calls, cached replies, the tokens and
    cost it reported (None where no reply reported them), its wall time."""
    replies = [a.reply for a in asked if a.reply is not None and not a.cached]
    sums: dict[str, Any] = {}
    for key in ("prompt_tokens", "completion_tokens", "cost_usd"):
        values = [(r.get("usage") or {}).get(key) for r in replies]
        sums[key] = sum(v for v in values if v is not None) if values and all(v is not None for v in values) else None
    return {"calls": sum(1 for a in asked if not a.cached), "cached": sum(1 for a in asked if a.cached),
            "prompt_tokens": sums["prompt_tokens"] or 0, "completion_tokens": sums["completion_tokens"] or 0,
            "seconds": round(sum(a.seconds or 0.0 for a in asked if not a.cached), 4), "cost_usd": sums["cost_usd"]}


def _target_summary(samples: list[Sample], asked: list[Asked], counts: dict[str, int], concurrency: int) -> dict:
    failed = [s for s in samples if s["target"]["status"] == "failed"]
    walls = [a.seconds for a in asked if a.seconds is not None and not a.cached and a.reply is not None]
    flagged = [s["id"] for s in samples if s["target"].get("context_flags")]
    return {"n": len(samples), "failed": len(failed), "failed_ids": [s["id"] for s in failed],
            "errors": {s["id"]: s["target"]["error"] for s in failed[:50]},
            "called": sum(1 for a in asked if not a.cached), "cached": sum(1 for a in asked if a.cached),
            "concurrency": concurrency, "wall_s_mean": round(sum(walls) / len(walls), 6) if walls else None,
            "contexts": {"n": sum(counts.values()), **counts}, "n_contexts_flagged": len(flagged), "flagged_ids": flagged}


def _results(cfg: ExperimentConfig, opts: Any, started: float, questions: Any, corpus: Any, judge: Any, metrics: dict,
             extra: dict, usage: dict, timer: Timer) -> Results:
    costs = [u["cost_usd"] for u in usage.values()]
    models: dict = {"embedding": None, "reranker": None, "generation": None, "judge": None}
    if judge is not None:
        models["judge"] = {**judge.llm.describe(), "prompt_version": judge.prompt.version,
                           "prompt_sha256": judge.prompt.sha256, "calibration": cfg.judge.calibration,
                           "max_attempts": cfg.judge.max_attempts, "method": cfg.judge.method,
                           "anchored": cfg.judge.is_anchored}
    t = extra["target"]
    return {
        "schema_version": RESULTS_SCHEMA, "name": cfg.name, "run_id": None,
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "description": cfg.description or f"target {t['kind']} {t['where']} (version {t['version'] or 'unset'})",
        "config": cfg.model_dump(mode="json"), "config_fingerprint": cfg.fingerprint(),
        "sample": {"is_sample": len(questions.rows) < questions.eval_set.n_total, "n_questions": len(questions.rows),
                   "n_total": questions.eval_set.n_total, "limit": cfg.sample.limit, "seed": cfg.sample.seed},
        "data": {"knowledge_base": str(project_path(opts.project_root, cfg.data.knowledge_base)),
                 "corpus_sha256": corpus.content_hash, "n_documents": len(corpus.documents), "n_chars": corpus.n_chars,
                 "skipped_files": corpus.skipped, "eval_set": str(questions.eval_path),
                 "eval_sha256": questions.eval_set.sha256, "categories": cfg.data.categories},
        "index": {"key": f"target:{t['identity']}", "path": None, "reused": True, "n_chunks": None,
                  "chunk_chars_mean": None, "texts_embedded": 0},
        "models": models, "metrics": metrics, **extra,
        "counters": {"target_calls": t["called"], "target_cached": t["cached"], "target_failed": t["failed"],
                     **{f"llm_calls_{role}": u["calls"] for role, u in usage.items()},
                     **{f"llm_cached_{role}": u["cached"] for role, u in usage.items()}},
        "llm_usage": usage, "cost_usd": None if any(c is None for c in costs) else sum(costs),
        "timings": dict(timer), "environment": environment(opts.project_root),
    }
