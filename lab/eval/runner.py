"""Runner: one experiment, end to end, into ``reports/<NAME>/<run-id>/``.

Start-up resolves every model and validates every input before any work, so a missing model
or a bad eval row stops the run in seconds. The stages (:mod:`lab.eval.stages`) fill the samples;
:func:`lab.eval.records.write_run` writes the folder atomically.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

from lab.config import ExperimentConfig
from lab.errors import ConfigError
from lab.evalsets.leakage import overlaps
from lab.evalsets.evalset import EvalRow, EvalSet, check_qrels, check_references, load_eval_set, stratified_sample
from lab.evalsets.twins import span_twins
from lab.judge.rubric import JudgePlan, resolve_judge
from lab.judge.checks import paraphraser_for
from lab.judge.methods import grader
from lab.judge.repeats import repeat_judgements
from lab.eval.estimate import describe, estimate, record
from lab.eval.records import environment, write_run
from lab.eval.status import running
from lab.eval.target import evaluate_target, target_plan
from lab.runfiles import RESULTS_SCHEMA, Results, Sample
from lab.eval.stages import (Timer, ann_stage, answer_stage, judge_sections, judge_stage, ragas_stage,
                             retrieval_sections, retrieve_stage)
from lab.metrics import catalog
from lab.metrics.aggregate import by_category, mean_table
from lab.metrics.funnel import finish, summarise
from lab.metrics.labels import labelled_ids, load_labels
from lab.models.device import device_record
from lab.models.llm import LabLLM, build_llm
from lab.models.tuned import card_summary, read_card, training_questions
from lab.paths import inside, project_path
from lab.progress import run_all
from lab.rag.index import IndexHandle, index_passages
from lab.rag.llm_reranker import PROMPT_VERSION as LLM_RERANK_PROMPT
from lab.rag.pipeline import ModelPlans, Pipeline, load_corpus, open_pipeline, resolve_models

log = logging.getLogger(__name__)


@dataclass(kw_only=True)
class RunOptions:
    """Where a run reads and writes, and how it reports progress: the same for every experiment a
    verb runs. Keywords only, so that a new option can never shift the meaning of a caller's
    arguments."""

    project_root: Path
    reports_root: Path
    cache_root: Path
    show_progress: bool = True
    allow_overlap: bool = False  # run a tuned model on questions it was trained on (recorded)
    refresh: bool = False  # a target: ask every question again instead of reading its cached replies
    target_object: object = None  # a target: this Python object in place of importing target.python (lab.api.run)


def run_experiment(cfg: ExperimentConfig, opts: RunOptions, *, quiet: bool = False) -> Path:
    """Run ``cfg`` end to end and write its run folder (:func:`evaluate`, then
    :func:`lab.eval.records.write_run`). While it runs, ``reports/<NAME>/.running-<pid>.json``
    says how far it is (:mod:`lab.eval.status`). ``quiet`` leaves out the start-up lines that
    say what the run will cost, for a caller that runs many small runs and reports on them itself."""
    with running(inside(opts.reports_root, cfg.name), cfg.name):
        results, samples = evaluate(cfg, opts, quiet=quiet)
        return write_run(results, samples, cfg, opts.reports_root)


def evaluate(cfg: ExperimentConfig, opts: RunOptions, *, quiet: bool = False) -> tuple[Results, list[Sample]]:
    """Run ``cfg`` and return its ``results.json`` and samples, written nowhere: the stages fill
    the samples and return their sections of ``results.json``, which this function only
    assembles. A caller with a section of its own (``lab race``'s ``sequential``) adds it and
    writes the folder with :func:`lab.eval.records.write_run`, inside :func:`lab.eval.status.running`
    as :func:`run_experiment` does. ``quiet``: as for :func:`run_experiment`."""
    if cfg.target is not None:  # a system the lab did not build: asked, then scored as a pipeline's run is
        return evaluate_target(cfg, opts, _questions(cfg, opts.project_root), _metrics, quiet=quiet)
    timer = Timer()
    started = time.time()
    t_start = time.perf_counter()
    # --- start-up: resolve models and validate inputs before any heavy work -------------------
    plans = resolve_models(cfg, opts.project_root)
    judge = resolve_judge(cfg.judge, opts.project_root)
    questions = _questions(cfg, opts.project_root)
    t_load = time.perf_counter()
    corpus = load_corpus(cfg, opts.project_root)
    documents = {d.metadata["source"]: d.text for d in corpus.documents}
    check_references(questions.eval_set, documents, corpus.root, cfg.loader.extensions)
    check_qrels(questions.eval_set, documents)
    tuned = check_tuned(plans, questions, corpus.content_hash, opts.allow_overlap)
    if not quiet:
        for line in plan_lines(cfg, plans, judge, questions, opts):  # the cost, before the first model call
            log.info("%s", line)
    # each golden span's twins: the same text elsewhere, which counts as the span in the span rank metrics
    twins = span_twins([(r.source, r.start_index, r.end_index) for row in questions.rows for r in row.references or []],
                       documents)
    timer["load_s"] = time.perf_counter() - t_load

    # --- index, retrieve, rerank, score -----------------------------------------------------------
    pipe = open_pipeline(cfg, plans, opts.project_root, opts.cache_root, opts.show_progress, corpus=corpus)
    timer.update(pipe.timings)
    samples, finals, query_counters = retrieve_stage(cfg, questions.rows, pipe, timer, opts.show_progress,
                                                     questions.labels, twins)
    extra: dict = {}
    ann = ann_stage(cfg, questions.rows, pipe, timer)
    if ann is not None:  # only with an index.ann section: results of runs without one keep their keys
        extra["ann"] = ann
    extra.update(retrieval_sections(cfg, samples))
    metric_names = list(catalog.names(group="retrieval"))
    if any(s.get("references") for s in samples):  # eval rows with golden spans
        metric_names += catalog.names(group="spans")
    if any(row.qrels for row in questions.rows):  # eval rows with graded relevant documents
        metric_names += catalog.names(group="qrels")
    if questions.labels is not None:
        metric_names += catalog.names(group="labels")
        extra["labels"] = _labels_summary(cfg.data.labels, questions.labels, pipe.handle)

    # --- answer, judge, ragas ---------------------------------------------------------------------
    judge_llm = paraphraser = None
    if pipe.synthesizer is not None:
        suppress = cfg.guardrail is not None and cfg.guardrail.suppress_generation
        answer_stage(samples, finals, pipe.synthesizer, timer, opts.show_progress, suppress)
        metric_names += catalog.names(group="answer")
        extra["answers"] = _answer_summary(samples)
    if judge is not None:
        judge_llm = build_llm(judge.llm, opts.cache_root)
        paraphraser = paraphraser_for(pipe.generator)
        grade = grader(judge_llm, judge)  # once per run: its method's prompts are loaded once
        checks = judge_stage(samples, grade, cfg.sample.seed, timer, opts.show_progress,
                             paraphraser, [r.reference_answer for r in questions.eval_set.rows])
        metric_names += catalog.names(group="judge")
        extra.update(judge_sections(samples, checks))
        answer_repeats = cfg.generation.repeats if cfg.generation is not None else None
        if cfg.judge.repeats or answer_repeats:
            with timer.stage("repeats_s"):
                extra["repeatability"] = repeat_judgements(
                    samples, judge_llm, judge, pipe.synthesizer, answer_repeats, grade,
                    lambda fn, keys: run_all(fn, keys, "repeats", opts.show_progress, judge_llm.concurrency))
    if cfg.ragas is not None:
        ragas_llm = judge_llm or build_llm(plans.generation, opts.cache_root)
        extra["ragas"] = ragas_stage(samples, finals, ragas_llm, pipe.embed_model, cfg.ragas, timer,
                                     opts.show_progress)
        metric_names += [f"ragas_{m}" for m in cfg.ragas.metrics]

    # --- the loss funnel: the answer side and each question's verdict ---------------------------
    for s in samples:
        rec = s.get("funnel")
        if rec and rec.get("items"):
            answered = [x for x, key in (("generation", "answer"), ("judge", "judgement")) if key in s]
            s["funnel"] = finish({**rec, "seen": [*rec["seen"], *answered]}, s)
    extra["funnel"] = summarise(samples, cfg.data.categories)

    # --- aggregate and write --------------------------------------------------------------------
    metrics = _metrics(cfg, samples, metric_names, judged="judge" in extra)
    usage = _usage(pipe, judge_llm, getattr(paraphraser, "lab_llm", None) if judge is not None else None)
    record(opts.cache_root, usage, len(questions.rows), {role: (plan, jp) for role, plan, jp in (
        ("generation", plans.generation, None), ("query", plans.query, None),
        ("judge", judge.llm if judge else None, judge), ("paraphrase", plans.generation if judge else None, None))
        if plan is not None}, cfg)
    timer["total_s"] = time.perf_counter() - t_start
    models = _models(cfg, plans, judge, pipe)
    for role, summary in tuned.items():  # only runs of tuned models: other runs' results keep their keys
        models[role]["tuned"] = summary
    results = _results(cfg, opts, started, questions, pipe, models, metrics, extra,
                       {**pipe.counters(), **query_counters}, usage, timer)
    return results, samples


def plan_lines(cfg: ExperimentConfig, plans: ModelPlans, judge: JudgePlan | None, questions: "Questions",
               opts: RunOptions) -> list[str]:
    """What a run of ``cfg`` will ask of its LLMs, and how long that takes here (:mod:`lab.eval.estimate`)."""
    n = len(questions.rows)
    lines = describe(estimate(cfg, n, plans.generation, plans.query, judge, opts.cache_root), n)
    if cfg.generation is not None or judge is not None:  # a sample smaller than this one, where it is not already
        smaller = ", or --limit 10 (a stratified sample)" if n > 10 else ""
        lines.append(f"  cheaper first: --retrieval-only (no LLM call){smaller}")
    return lines


def dry_run(cfg: ExperimentConfig, opts: RunOptions) -> list[str]:
    """Start-up only (models resolved, eval set and knowledge base checked): the plan a run of
    ``cfg`` would follow, and nothing run or written."""
    plans = resolve_models(cfg, opts.project_root)
    judge = resolve_judge(cfg.judge, opts.project_root)
    questions = _questions(cfg, opts.project_root)
    corpus = load_corpus(cfg, opts.project_root)
    check_references(questions.eval_set, {d.metadata["source"]: d.text for d in corpus.documents}, corpus.root,
                     cfg.loader.extensions)
    check_qrels(questions.eval_set, [d.metadata["source"] for d in corpus.documents])
    check_tuned(plans, questions, corpus.content_hash, opts.allow_overlap)
    target = target_plan(cfg, opts, questions) if cfg.target is not None else []
    return [f"{cfg.name}: {len(corpus.documents)} documents, eval set {questions.eval_path}",
            *plan_lines(cfg, plans, judge, questions, opts), *target, "dry run: nothing was run or written"]


def check_tuned(plans: ModelPlans, questions: "Questions", corpus_hash: str, allow_overlap: bool) -> dict[str, dict]:
    """The leakage guard: a tuned model (``lab tune``) must not have been trained on the questions
    it is evaluated on (same or near-duplicate text, same golden span). Refuses the run, or with
    ``allow_overlap`` records how many overlap. Returns what ``results.json`` records of each tuned
    model, by role ("embedding", "reranker"); a model tuned on other documents is said, not refused."""
    out: dict[str, dict] = {}
    roles = [("embedding", plans.embedding), ("reranker", plans.reranker.model if plans.reranker else None)]
    rows = [(r._line, r.question, [x.content for x in r.references or []]) for r in questions.rows]
    for role, model in roles:
        if model is None or model.source != "tuned":
            continue
        card = read_card(Path(model.location)) or {}
        clash = overlaps(training_questions(Path(model.location)), rows)
        if clash and not allow_overlap:
            first = clash[0]
            raise ConfigError(
                f"{role} model {model.name!r} was trained on {len(clash)} question(s) of the eval set "
                f"{questions.eval_path}: line {first.eval_line} {first.eval_question!r} ({first.why} of the training "
                f"question {first.train_question!r}, {first.train_origin})",
                hint=f"evaluate on questions it was not trained on, or tune it again with --holdout "
                     f"{questions.eval_path} (those questions are then left out of training); --allow-overlap runs "
                     "anyway and records the overlap")
        if card.get("kb") and card["kb"] != corpus_hash:
            log.warning("%s model %s was tuned on other documents (knowledge base %s, this run's is %s)", role,
                        model.name, card["kb"], corpus_hash)
        out[role] = {**card_summary(card), "overlap": len(clash), "same_kb": card.get("kb") == corpus_hash}
    return out


@dataclass
class Questions:
    """The run's questions, validated at start-up: the eval set, the rows asked (its stratified
    sample under ``sample.limit``) and the chunk labels, if any."""

    eval_path: Path
    eval_set: EvalSet
    rows: list[EvalRow]
    labels: dict | None


def _questions(cfg: ExperimentConfig, project_root: Path) -> Questions:
    eval_path = project_path(project_root, cfg.data.eval_set)
    label_path = project_path(project_root, cfg.data.labels) if cfg.data.labels else None
    eval_set = load_eval_set(eval_path, cfg.data.categories, labelled_ids(label_path) if label_path else ())
    rows = eval_set.rows
    if cfg.sample.limit:
        rows = stratified_sample(rows, cfg.sample.limit, cfg.sample.seed)
    labels = load_labels(label_path, [r.id for r in eval_set.rows]) if label_path else None
    return Questions(eval_path, eval_set, rows, labels)


def _metrics(cfg: ExperimentConfig, samples: list[Sample], names: list[str], judged: bool) -> dict:
    """``results.json``'s ``metrics``: means overall and per category of ``names``."""
    rows = [{"category": s["category"], **s["metrics"]} for s in samples]
    per_category = by_category(rows, names, cfg.data.categories)
    if judged:
        for cat, row in per_category.items():
            row["judge_failed"] = sum(1 for s in samples if s["category"] == cat and s["metrics"]["judge_failed"])
            row["judge_suspect"] = sum(1 for s in samples if s["category"] == cat and s["metrics"].get("judge_suspect"))
    return {"k": cfg.metrics.k, "overall": mean_table(rows, names), "by_category": per_category}


def _usage(pipe: Pipeline, judge_llm: LabLLM | None, paraphrase_llm: LabLLM | None) -> dict[str, dict]:
    """Each LLM role's calls, cache hits, tokens and cost (the paraphraser only when it ran)."""
    return {role: llm.usage.as_dict() for role, llm in (("summary", pipe.summary_llm), ("query", pipe.query_llm),
                                                        ("generation", pipe.generator),
                                                        ("judge", judge_llm), ("paraphrase", paraphrase_llm))
            if llm is not None and (role != "paraphrase" or llm.usage.calls + llm.usage.cached)}


def _results(cfg: ExperimentConfig, opts: RunOptions, started: float, questions: Questions, pipe: Pipeline,
             models: dict, metrics: dict, extra: dict, counters: dict, usage: dict, timer: Timer) -> Results:
    costs = [u["cost_usd"] for u in usage.values()]
    return {
        "schema_version": RESULTS_SCHEMA,
        "name": cfg.name,
        "run_id": None,  # set by write_run
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "description": cfg.description,
        "config": cfg.model_dump(mode="json"),
        "config_fingerprint": cfg.fingerprint(),
        "sample": {
            "is_sample": len(questions.rows) < questions.eval_set.n_total,
            "n_questions": len(questions.rows),
            "n_total": questions.eval_set.n_total,
            "limit": cfg.sample.limit,
            "seed": cfg.sample.seed,
        },
        "data": {
            "knowledge_base": str(project_path(opts.project_root, cfg.data.knowledge_base)),
            "corpus_sha256": pipe.corpus.content_hash,
            "n_documents": len(pipe.corpus.documents),
            "n_chars": pipe.corpus.n_chars,
            "skipped_files": pipe.corpus.skipped,
            "eval_set": str(questions.eval_path),
            "eval_sha256": questions.eval_set.sha256,
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
        "models": models,
        "metrics": metrics,
        **extra,
        "counters": {
            **counters,
            **{f"llm_calls_{role}": u["calls"] for role, u in usage.items()},
            **{f"llm_cached_{role}": u["cached"] for role, u in usage.items()},
        },
        "llm_usage": usage,
        "cost_usd": None if not usage or any(c is None for c in costs) else sum(costs),
        "timings": dict(timer),
        "environment": environment(opts.project_root),
    }


def _labels_summary(path: str, labels: dict, handle: IndexHandle) -> dict:
    ids = {p.id for p in index_passages(handle)}
    missing = sorted({i for rel in labels.values() for i in rel if i not in ids})
    if missing:
        log.warning("%d labelled chunk ids are not in this index (labels made for another chunking?): %s",
                    len(missing), ", ".join(missing[:5]))
    return {"path": path, "n_labelled": len(labels), "n_missing_ids": len(missing), "missing_ids": missing[:20]}


def _answer_summary(samples: list[Sample]) -> dict:
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


def _models(cfg: ExperimentConfig, plans: ModelPlans, judge: JudgePlan | None, pipe: Pipeline) -> dict:
    emb = plans.embedding
    out: dict = {
        "embedding": {"name": emb.name, "location": emb.location, "source": emb.source,
                      "fingerprint": pipe.embed_model.fingerprint, "device": pipe.embed_model.device_record()},
        "reranker": None if plans.reranker is None else {
            "name": plans.reranker.model.name, "location": plans.reranker.model.location,
            "source": plans.reranker.model.source, "kind": plans.reranker.cfg.name,
            "prompt_version": _prompt_version(plans.reranker.cfg.name),
            **({"device": device_record(plans.reranker.cfg.device)} if hasattr(plans.reranker.cfg, "device") else {}),
        },
        "generation": None,
        "judge": None,
    }
    if plans.generation is not None:
        p = pipe.synthesizer.prompt
        out["generation"] = {**plans.generation.describe(), "prompt_version": p.version, "prompt_sha256": p.sha256,
                             "context_builder": cfg.generation.context.model_dump(mode="json")}
    if judge is not None:
        p = judge.prompt
        out["judge"] = {**judge.llm.describe(), "prompt_version": p.version, "prompt_sha256": p.sha256,
                        "calibration": cfg.judge.calibration, "max_attempts": cfg.judge.max_attempts,
                        "method": cfg.judge.method, "anchored": cfg.judge.is_anchored}
    return out


def _prompt_version(kind: str) -> str | None:
    return LLM_RERANK_PROMPT if kind == "llm_pointwise" else None
