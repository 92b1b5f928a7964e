"""The verbs that run experiments: run, list, validate, models, ask, sweep, optimize.

They import lab.rag, lab.eval and lab.models inside their handlers: those pull in torch, LanceDB
and LlamaIndex (seconds), which the report verbs and `lab list` never need.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lab import heap
from lab.cli import options, track, workers
from lab.config import dump_yaml, load_experiment, run_overrides
from lab.config.load import describe
from lab.errors import DataError, LabError, RunFailedError
from lab.metrics import catalog
from lab.paths import cache_root, project_path, reviewed_note
from lab.progress import duration

from lab.report.terminal import all_failed, summary_lines
from lab.runfiles import load_run

if TYPE_CHECKING:
    from lab.eval.runner import RunOptions


def add_parsers(sub: Any, common: Any) -> None:
    run = sub.add_parser(
        "run", help="run an experiment and write reports/<NAME>/<run-id>/",
        description="Run experiments/NAME.yaml: build or reuse its index, retrieve (and rerank) for every "
                    "question, score, and write results.json, samples.jsonl and report.html.",
        epilog="example: lab run turn13 --limit 20",
    )
    run.add_argument("name", metavar="NAME", help="experiment name (a file in experiments/, without .yaml)")
    options.run(run)
    run.add_argument("--retrieval-only", action="store_true",
                     help="skip answers and the judge (sets generation, judge and ragas to null; recorded in "
                          "the run's config)")
    run.add_argument("--dry-run", action="store_true",
                     help="check the config, models and data, print the LLM calls and time the run would take "
                          "on this machine, and stop: nothing is run or written")
    run.add_argument("--allow-overlap", action="store_true",
                     help="run a tuned model (lab tune) on questions it was trained on; refused otherwise, as its "
                          "scores would flatter it (the overlap is recorded in results.json)")
    run.add_argument("--refresh", action="store_true",
                     help="a target: ask it every question again instead of reading its cached replies (the new "
                          "replies are cached)")
    run.add_argument("--track", action="store_true",
                     help="log the run to MLflow (needs the mlflow extra; a config's tracking: section does the same)")
    common(run)

    lst = sub.add_parser("list", help="list experiments", epilog="example: lab list")
    common(lst)

    val = sub.add_parser(
        "validate", help="check a config and resolve its models without running",
        epilog="example: lab validate turn22 --kb ~/my-docs",
    )
    val.add_argument("name", metavar="NAME")
    options.data(val)
    common(val)

    sw = sub.add_parser(
        "sweep", help="run an experiment over a grid of dials (index reused), table + chart of the metric",
        description="Run experiments/NAME.yaml once per point of a grid of config values (--set PATH=V1,V2,...; "
                    "several --set make a grid), retrieval only unless --answers, on one index and every cached "
                    "embedding. The points run on a dev split (stratified, seeded by --seed, as optimize's); the best "
                    "and the base on the held-out rest. Writes reports/_sweep/<NAME>-<dials>/sweep.html, .json, .csv",
        epilog="example: lab sweep hybrid --set retriever.alpha=0,0.25,0.5,0.75,1",
    )
    sw.add_argument("name", metavar="NAME")
    sw.add_argument("--set", dest="dials", action="append", required=True, metavar="PATH=V1,V2,...",
                    help="a config path and its values, e.g. retriever.alpha=0,0.5,1 (repeatable)")
    options.metric(sw, "the metric that picks the best point")
    sw.add_argument("--answers", action="store_true", help="also answer and judge at every point (slow)")
    options.split(sw)
    options.force(sw, "an earlier sweep of these dials (other values)")
    workers.add_options(sw)
    options.run(sw)
    common(sw)

    opt = sub.add_parser(
        "optimize", help="search chunk size, overlap and k with Optuna on a dev split; check on held-out",
        description="Split the eval set (stratified, seeded) into dev and held-out questions; run Optuna's TPE "
                    "sampler over --space ranges (default: chunker.chunk_size 400-1600 step 200, "
                    "chunker.chunk_overlap 0-300 step 50, retriever.top_k 2-8), each trial a retrieval-only "
                    "run on the dev questions; then score the best trial and the base experiment on the "
                    "held-out questions and write experiments/NAME-optimized.yaml. Indexes and embeddings are "
                    "reused across trials.",
        epilog="example: lab optimize turn13 --trials 12",
    )
    opt.add_argument("name", metavar="NAME")
    opt.add_argument("--space", action="append", metavar="PATH=LOW:HIGH[:STEP]",
                     help="a dial and its range (repeatable; replaces the default space)")
    opt.add_argument("--trials", type=options.count, default=12, help="Optuna trials (default: 12)")
    options.metric(opt, "the metric to maximise")
    options.split(opt, holdout_optional=False)
    opt.add_argument("--seed", dest="split_seed", type=int, default=13,
                     help="seed of the split and the sampler (default: 13)")
    opt.add_argument("--no-config", action="store_true", help="do not write experiments/NAME-optimized.yaml")
    options.force(opt, "experiments/NAME-optimized.yaml")
    workers.add_options(opt)
    options.run(opt, sample=False)
    common(opt)

    sub.add_parser("models", help="show where each known model resolves on this machine",
                   epilog="example: lab models")

    ask = sub.add_parser(
        "ask", help="answer a question with an experiment's pipeline (sources and timings)",
        description="Answer QUESTION with the query engine of experiments/NAME.yaml (retriever, reranker, "
                    "generator), printing the answer, the passages it read (cited ones marked) and the time "
                    "of each stage. Without QUESTION, read questions from standard input, one per line, as a "
                    "conversation (earlier turns are passed as history).",
        epilog='example: lab ask turn13 "Where is Harrowfield Aerial headquartered?"',
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ask.add_argument("name", metavar="NAME")
    ask.add_argument("question", nargs="?", metavar="QUESTION")
    options.data(ask)
    options.cache(ask)
    ask.add_argument("--history-turns", type=int, default=3, metavar="N",
                     help="conversation turns kept as history (default: 3)")
    common(ask)


def _overrides(args: argparse.Namespace) -> dict:
    """--kb, --eval, --limit, --seed and --retrieval-only as config overrides (one function for
    every verb and the Python API: :func:`lab.config.run_overrides`)."""
    return run_overrides(args.kb, args.eval, getattr(args, "limit", None), getattr(args, "seed", None),
                         answers=not getattr(args, "retrieval_only", False))


def _cache_root(args: argparse.Namespace) -> Path:
    """``--cache DIR``, else ``$LAB_CACHE``, else ``~/.cache/lab``."""
    return cache_root(getattr(args, "cache", None))


def _run_opts(args: argparse.Namespace, show_progress: bool | None = None) -> "RunOptions":
    from lab.eval.runner import RunOptions  # heavy (see the top of this module)

    if show_progress is None:
        show_progress = not args.no_progress and sys.stderr.isatty()
    return RunOptions(project_root=args.experiments.resolve().parent, reports_root=args.reports,
                      cache_root=_cache_root(args), show_progress=show_progress,
                      allow_overlap=getattr(args, "allow_overlap", False), refresh=getattr(args, "refresh", False))


def cmd_run(args: argparse.Namespace) -> int:
    with heap.loading():
        from lab.eval.runner import run_experiment  # heavy (see the top of this module)

    cfg = load_experiment(args.name, args.experiments, _overrides(args))
    if args.dry_run:
        from lab.eval.runner import dry_run  # heavy (see the top of this module)

        print("\n".join(dry_run(cfg, _run_opts(args, False))))
        return 0
    track.require(args, cfg)  # with --track or a tracking: section, mlflow must import: fail before running
    if note := reviewed_note(project_path(args.experiments.resolve().parent, cfg.data.eval_set)):
        print(note, file=sys.stderr)
    run_dir = run_experiment(cfg, _run_opts(args))
    results, samples = load_run(run_dir)
    print("\n".join(summary_lines(results, samples)))
    print(f"report: {run_dir / 'report.html'}")
    if args.retrieval_only:
        print(_next_step(args))
    if args.track or cfg.tracking is not None:
        track.after_run(args, run_dir, cfg.tracking)
    failed = all_failed(results, samples)
    if failed:  # written (and tracked), but it measured nothing: said last, and by the exit code
        raise RunFailedError(f"{failed}\n  the run in {run_dir} is kept, but its scores of that stage measure nothing",
                             hint="fix the LLM or its server (the error above) and run the same command again; "
                                  "what succeeded is cached")
    return 0


#: The sample a retrieval-only run suggests answering and judging next.
NEXT_SAMPLE = 10


def _next_step(args: argparse.Namespace) -> str:
    """After a retrieval-only run: the command that answers and judges a sample, with its cost here."""
    from lab.eval.estimate import estimate  # heavy (see the top of this module)
    from lab.judge.rubric import resolve_judge
    from lab.models.resolve import named_llm

    full = load_experiment(args.name, args.experiments, run_overrides(args.kb, args.eval, NEXT_SAMPLE, args.seed))
    if full.generation is None and full.judge is None:
        return "next: this config answers nothing (no generation or judge section): compare it with `lab compare`"
    root = args.experiments.resolve().parent
    # models named, not looked up: a hint must not assemble a 1.1 GB GGUF that the next run may never use
    generation = named_llm(full.generation.llm, "generation") if full.generation is not None else None
    query = named_llm(full.query.llm, "query rewriting") if full.query is not None else None
    costs = estimate(full, NEXT_SAMPLE, generation, query, resolve_judge(full.judge, root, models=False),
                     _cache_root(args))
    known = [c for c in costs if c.seconds is not None]
    here = all(c.source == "measured here" for c in known)  # else a figure not measured on this machine
    cost = f", about {duration(sum(c.seconds for c in known))} {'here' if here else '(2-core prior)'}" if known else ""
    return (f"next: lab run {args.name} --limit {NEXT_SAMPLE} answers and judges a stratified sample of "
            f"{NEXT_SAMPLE} questions ({sum(c.calls for c in costs)} LLM calls{cost}); "
            f"--dry-run says what the whole set costs")


def print_summary(run_dir: Path) -> None:
    print("\n".join(summary_lines(*load_run(run_dir))))


def cmd_list(args: argparse.Namespace) -> int:
    """Every experiment with its description; one that `lab run` would refuse, with its problem."""
    paths = sorted(args.experiments.glob("*.yaml"))
    width = max([18, *(len(p.stem) + 2 for p in paths)])  # a long name never runs into its description
    for path in paths:
        try:
            description, parent = describe(path)
        except LabError as exc:
            print(f"{path.stem:<{width}}BROKEN: " + next(x for x in exc.message.splitlines() + [""] if not x.endswith(":")))
            continue
        print(f"{path.stem:<{width}}{description}{f' (extends {parent})' if parent else ''}")
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    from lab.judge.rubric import resolve_judge  # heavy (see the top of this module)
    from lab.rag.pipeline import resolve_models

    cfg = load_experiment(args.name, args.experiments, _overrides(args))
    print(dump_yaml(cfg), end="")
    root = args.experiments.resolve().parent
    print("\n".join(_data_lines(cfg, root)))
    plans = resolve_models(cfg, root)
    judge = resolve_judge(cfg.judge, root)
    emb = plans.embedding
    print(f"# embedding model: {emb.name} -> {emb.location} ({emb.source})")
    if plans.reranker:
        m = plans.reranker.model
        print(f"# reranker model: {m.name} -> {m.location} ({m.source})")
    for plan in (plans.summary, plans.query, plans.generation, judge.llm if judge else None):
        if plan is not None:
            print(f"# {plan.role} LLM: {plan.cfg.backend} {plan.cfg.model} -> {plan.location}")
    return 0


def _data_lines(cfg: Any, root: Path) -> list[str]:
    """What a run of ``cfg`` would read: the knowledge base's files and the eval set's questions,
    checked as ``lab run`` checks them (a missing folder or a bad row is an error here)."""
    from lab.evalsets.evalset import load_eval_set  # heavy (see the top of this module)
    from lab.rag.loaders import walk

    kb = project_path(root, cfg.data.knowledge_base)
    if not kb.is_dir():
        raise DataError(f"knowledge base {kb} is not a folder" if kb.exists() else f"knowledge base {kb} does not exist",
                        hint="check the path given with --kb or the config's data.knowledge_base")
    files, _ = walk(kb, {e.lower() for e in cfg.loader.extensions}, bool(cfg.loader.include_hidden))
    questions = load_eval_set(project_path(root, cfg.data.eval_set), cfg.data.categories)
    return [f"# knowledge base: {kb} ({len(files)} files)",
            f"# eval set: {questions.path} ({questions.n_total} questions)"]


def cmd_models(args: argparse.Namespace) -> int:
    from lab.models.resolve import known_models  # heavy (see the top of this module)

    for name, source, where in known_models():
        print(f"{name:<42} {source:<10} {where}")
    return 0


def cmd_ask(args: argparse.Namespace) -> int:
    with heap.loading():
        from lab.rag.pipeline import open_pipeline, resolve_models  # heavy (see the top of this module)

    cfg = load_experiment(args.name, args.experiments, _overrides(args))
    root = args.experiments.resolve().parent
    t0 = time.perf_counter()
    plans = resolve_models(cfg, root)
    engine = open_pipeline(cfg, plans, root, _cache_root(args), show_progress=sys.stderr.isatty()).query_engine()
    startup = time.perf_counter() - t0
    questions = [args.question] if args.question else (line.strip() for line in sys.stdin)
    history: list[dict] = []
    failed: list[str] = []
    for question in questions:
        if not question:
            continue
        response = engine.ask(question, history[-2 * args.history_turns:] if args.history_turns else None)
        _print_answer(response, startup)
        if response.metadata["answer"].get("status") == "failed":
            failed.append(response.metadata["answer"]["error"])
        if response.metadata["answer"].get("refused"):
            print(_searched(args, cfg, project_path(root, cfg.data.knowledge_base)))
        history += [{"role": "user", "content": question}, {"role": "assistant", "content": str(response)}]
        startup = 0.0
    if failed:  # never an empty answer with exit code 0
        raise RunFailedError(f"{len(failed)} answer{'s' if len(failed) > 1 else ''} failed: {failed[0]}",
                             hint="fix the LLM or its server and ask again; answers that were made are cached")
    return 0


def _searched(args: argparse.Namespace, cfg: Any, kb: Path) -> str:
    """After a refusal: which knowledge base was searched, and how to search another."""
    if args.kb is not None:
        return f"\nnote: no answer in the knowledge base searched, {kb} (--kb)"
    return (f"\nnote: no answer in the knowledge base searched, {kb} (data.knowledge_base of {cfg.name}); "
            f"to search your own documents: lab ask {cfg.name} --kb DIR")


def _print_answer(response, startup: float) -> None:
    a, ctx, t = response.metadata["answer"], response.metadata["context"], response.metadata["timings"]
    print(a["text"] if a.get("status") != "failed" else "(no answer: the LLM call failed; the error is below)")
    print("\nsources:")
    for p in ctx["passages"]:
        mark = "cited" if p["number"] in a["citations"] else "     "
        print(f"  [{p['number']}] {mark} {p['source']}{' (truncated)' if p['truncated'] else ''}")
    gen = f"generate {t['generate_s']:.2f} s ({a['prompt_tokens']} prompt + {a['completion_tokens']} output tokens"
    gen += ", cached)" if a["cached"] else ")"
    first = f"start-up {startup:.1f} s · " if startup else ""
    print(f"\n{first}retrieve {1000 * t['retrieve_s']:.0f} ms · rerank {1000 * t['rerank_s']:.0f} ms · {gen}")


def cmd_sweep(args: argparse.Namespace) -> int:
    with heap.loading():
        from lab.eval.sweep import parse_dial, run_sweep, table  # heavy (see the top of this module)

    catalog.check(args.metric)
    dials = [parse_dial(d) for d in args.dials]
    folder = run_sweep(args.name, args.experiments, dials, _overrides(args), _run_opts(args), args.metric,
                       args.answers, not args.no_holdout, args.dev_fraction, **workers.options(args), force=args.force)
    print("\n".join(table(json.loads((folder / "sweep.json").read_text()))))
    print(f"sweep: {folder / 'sweep.html'}")
    return 0


def cmd_optimize(args: argparse.Namespace) -> int:
    with heap.loading():
        from lab.eval.optimize import DEFAULT_SPACE, parse_range, run_optimize  # heavy (see the top of this module)

    catalog.check(args.metric)
    ranges = [parse_range(s) for s in (args.space or DEFAULT_SPACE)]
    written = args.experiments / f"{args.name}-optimized.yaml"
    if not args.no_config and written.exists() and not args.force:  # refused before any trial
        raise DataError(f"{written} already exists: lab optimize writes its best point there",
                        hint="pass --force to replace it, or --no-config to write no config")
    s = run_optimize(args.name, args.experiments, ranges, _overrides(args), _run_opts(args, False), args.metric,
                     args.trials, args.dev_fraction, args.split_seed, not args.no_config, **workers.options(args))
    m = args.metric
    for i, p in enumerate(s["points"]):
        print(f"trial {p['trial']:>3}  {p['label']:<48} dev {m} {p['metrics'].get(m, 0):.4f}  {p['seconds']:6.1f} s"
              + ("   <- best" if i == s["best"] else ""))
    print(f"held-out ({s['n_held_out']} questions) {m}: best {s['held_out']['best'].get(m):.4f}, "
          f"{args.name} {s['held_out']['base'].get(m):.4f}")
    if s.get("config"):
        print(f"config: {s['config']}")
    print(f"optimize: {Path(s['folder']) / 'optimize.html'}")
    return 0


COMMANDS = {"run": cmd_run, "ask": cmd_ask, "sweep": cmd_sweep, "optimize": cmd_optimize, "list": cmd_list,
            "validate": cmd_validate, "models": cmd_models}
