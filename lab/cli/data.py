"""The eval-set verbs: ``lab generate``, ``lab audit``, ``lab import``, ``lab export``.

They build models and read knowledge bases inside their handlers (see the top of
:mod:`lab.cli`): parsing ``lab --help`` imports none of torch, LanceDB or LlamaIndex.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lab.config import EmbeddingConfig, ExperimentConfig, LLMConfig, LoaderConfig, load_experiment
from lab.config.load import READABLE
from lab.cli import options
from lab.errors import ConfigError, DataError
from lab.paths import cache_root, check_output, claim_output, resolve_run, reviewed_note, write_atomic
from lab.evalsets.holdout import DEV_FRACTION, SEED
from lab.evalsets.interop import IMPORTERS
from lab.runfiles import load_run

if TYPE_CHECKING:
    from lab.rag.loaders import Corpus

ALL_FORMATS = list(READABLE)  # every format the lab reads, as a run given a folder of them reads it
ANSWER_CHECK_HELD_OUT = ("seventeen held-out documentation sets: 9% to 20% bad before review with it on ten, 22% "
                         "to 76% on seven (release notes got through on four); 22% to 50% without")


def add_parsers(sub: Any, common: Any) -> None:
    gen = sub.add_parser(
        "generate", help="write an eval set from a folder of documents (questions on golden spans)",
        description="Write questions about the documents under --kb, each on a golden span. The default "
                    "(--mode extractive) picks fact-bearing prose sentences by rule (never code, console "
                    "transcripts or option tables), spread over every document and section, and asks the LLM "
                    "(the local Qwen2.5-Coder-1.5B by default) only for the question each answers; the sentence "
                    "is the reference answer. --mode abstractive asks the LLM for excerpt, question and answer "
                    "from a window of text (for sets that grade answers). Rows are written as they are "
                    "accepted: Ctrl-C or --max-minutes keeps them, and the same command resumes (every call "
                    "is cached). Every rejected candidate is counted in OUT's sidecar, <name>.gen.json.",
        epilog="example: lab generate --kb ~/docs --out eval_sets/docs.jsonl --n 150 --max-minutes 20",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    gen.add_argument("--kb", type=Path, required=True, help="knowledge-base folder")
    gen.add_argument("--out", type=Path, required=True, help="eval set to write (JSONL)")
    gen.add_argument("--n", type=options.count, default=150, help="questions wanted (default: 150)")
    gen.add_argument("--mode", choices=("extractive", "abstractive"), default="extractive",
                     help="extractive (the default): the model writes only the question to a sentence chosen by "
                          "rule; abstractive: it writes excerpt, question and answer from a window of text")
    gen.add_argument("--answer-check", action="store_true",
                     help="extractive: ask the model for each question's answer from its passage (its sentence and those"
                          " within 2); drop the question whose answer is missing, a neighbour's words, or circular (a "
                          f"call a question; on {ANSWER_CHECK_HELD_OUT.replace('%', '%%')}; raise --max-candidates to 8 n)")
    gen.add_argument("--local-round-trip", type=int, default=2, metavar="W", choices=range(11),
                     help="extractive: drop a question a sentence within W of its own answers better, by words or by "
                          "meaning (0 to 10; default: 2; 0: off; held out: 4 of 15 bad rows, 2 of 22 good ones dropped)")
    gen.add_argument("--max-minutes", type=float, metavar="M",
                     help="stop after M minutes, keeping the questions accepted so far")
    gen.add_argument("--seed", type=int, default=0, help="seed of the document order (default: 0)")
    gen.add_argument("--mix", help="abstractive: category shares, e.g. direct_fact=0.5,numerical=0.25,spanning=0.25 "
                                   "(default: close to InsureLLM's; extractive: each sentence's category follows "
                                   "from what it states)")
    gen.add_argument("--max-candidates", type=options.count,
                     help="stop after this many LLM candidates (default: 4 n extractive, 3 n abstractive)")
    gen.add_argument("--config", metavar="NAME", help="take loader, embedding model and LLM (generation.llm) "
                                                     "from experiments/NAME.yaml, e.g. for OpenAI or a server")
    gen.add_argument("--llm", metavar="MODEL", help="local GGUF model name or path (default: "
                                                    "qwen2.5-coder-1.5b-instruct)")
    options.force(gen, "OUT")
    gen.add_argument("--excerpt", choices=("held", "copied", "cited"), default=None,
                     help="abstractive: how the model gives the excerpt its question stands on: held (the default: "
                          "copied under a grammar that allows only the window's sentences, so every excerpt is found), copied "
                          "(written freely, then located), cited (by sentence number, generate-qa-v2)")
    gen.add_argument("--cite", action="store_true", help="the same as --excerpt cited")
    gen.add_argument("--dry-run", action="store_true", help="print the LLM calls and time it would take on this "
                                                            "machine, and stop: nothing is generated or written")
    _shared(gen, common)

    aud = sub.add_parser(
        "audit", help="check an eval set: duplicates, coverage, spans, keywords, support, power",
        description="Find what makes an eval set measure less than it seems: duplicate questions, documents no "
                    "question touches, spans that do not match their document, keywords that favour BM25 or "
                    "match everything, reference answers their spans do not support (--check, an LLM call "
                    "per row) and, with --run, the smallest MRR difference each category can detect.",
        epilog="example: lab audit eval_sets/docs.jsonl --kb ~/docs --run turn13",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    aud.add_argument("eval_set", type=Path, metavar="EVAL_SET")
    aud.add_argument("--kb", type=Path, required=True, help="knowledge-base folder the set is about")
    aud.add_argument("--run", help="a run of this eval set: a run folder or an experiment NAME (its latest run), "
                                   "for the power figures")
    options.reports(aud)
    aud.add_argument("--check", action="store_true", help="ask the LLM whether each reference answer is "
                                                          "supported by its spans and answers its question "
                                                          "(two verdicts), and for each question's answer from "
                                                          "its span's passage (the answer check, which lists "
                                                          "the rows to read first)")
    aud.add_argument("--html", type=Path, help="page to write (default: EVAL_SET with .audit.html)")
    options.force(aud, "the --html page")
    aud.add_argument("--config", metavar="NAME", help="loader, embedding model and LLM from experiments/NAME.yaml")
    _shared(aud, common)

    imp = sub.add_parser(
        "import", help="bring an eval set from ragas, BEIR or CSV",
        description="Convert a ragas dataset (JSONL: user_input, reference, reference_contexts), a BEIR folder "
                    "(corpus.jsonl, queries.jsonl, qrels/test.tsv) or a CSV (question, reference_answer, "
                    "keywords, category) into the lab's eval-set JSONL. Nothing is written when the input has "
                    "an error.",
        epilog="example: lab import ragas testset.jsonl --kb ~/docs --out eval_sets/ragas.jsonl")
    imp.add_argument("kind", choices=IMPORTERS.names())
    imp.add_argument("source", type=Path, metavar="PATH")
    imp.add_argument("--out", type=Path, required=True)
    imp.add_argument("--kb", type=Path, help="ragas: the documents its reference_contexts come from (they become spans)")
    imp.add_argument("--kb-out", type=Path, help="beir: write the corpus here as a knowledge base")
    imp.add_argument("--category", default="direct_fact", help="category of rows that name none")
    imp.add_argument("--categories", metavar="A,B,...", help="the categories a row may name (default for CSV: the "
                                                             "lab's and --category; ragas and BEIR: any)")
    options.force(imp, "OUT", ", and add to a --kb-out folder that holds files (replaced files are counted)")

    spl = sub.add_parser(
        "split", help="write an eval set's dev and held-out halves (pick on one, report on the other)",
        description="Split an eval set into dev.jsonl and held-out.jsonl in --out: stratified by category and "
                    "seeded, the same halves `lab sweep` and `lab optimize` make of these questions with the same "
                    "--dev-fraction and --seed. Pick a design on the first (lab run NAME --eval DIR/dev.jsonl), "
                    "report it on the second.",
        epilog="example: lab split ../shared/benchmarks/insurellm/tests.jsonl --out reports/_designs/split")
    spl.add_argument("eval_set", type=Path, metavar="SET", help="the eval set (JSONL)")
    spl.add_argument("--out", type=Path, required=True, help="folder for dev.jsonl and held-out.jsonl")
    spl.add_argument("--dev-fraction", type=float, default=DEV_FRACTION,
                     help=f"share of each category in the dev half (default {DEV_FRACTION})")
    spl.add_argument("--seed", type=int, default=SEED, help=f"seed of the split (default {SEED})")
    options.force(spl, "the halves in --out")

    exp = sub.add_parser("export", help="write an eval set in ragas' EvaluationDataset format",
                         epilog="example: lab export eval_sets/company.jsonl --out company.ragas.jsonl")
    exp.add_argument("eval_set", type=Path, metavar="EVAL_SET")
    exp.add_argument("--out", type=Path, required=True)
    options.force(exp, "OUT")


def _shared(p: argparse.ArgumentParser, common: Any) -> None:
    options.cache(p)
    p.add_argument("--no-progress", action="store_true", help="no progress bars (progress lines are logged instead)")
    common(p)


def _settings(args: argparse.Namespace) -> tuple[LoaderConfig, EmbeddingConfig, LLMConfig]:
    """Loader, embedding model and LLM: from --config, else every format, MiniLM and the local Qwen."""
    if args.config:
        cfg: ExperimentConfig = load_experiment(args.config, args.experiments)
        llm = cfg.generation.llm if cfg.generation else cfg.judge.llm if cfg.judge else LLMConfig()
        loader, embedding = cfg.loader, cfg.embedding
    else:
        loader, embedding, llm = LoaderConfig(extensions=ALL_FORMATS), EmbeddingConfig(), LLMConfig()
    if getattr(args, "llm", None):
        llm = llm.model_copy(update={"model": args.llm})
    return loader, embedding, llm


def _corpus(kb: Path, loader: LoaderConfig) -> "Corpus":
    from lab.rag.loaders import load_folder  # heavy (see lab.cli)

    corpus = load_folder(kb.expanduser(), loader.extensions, loader.max_file_bytes, False, bool(loader.include_hidden))
    if not corpus.documents:
        raise DataError(f"no documents under {kb} ({', '.join(loader.extensions)})",
                        hint="point --kb at the folder of your documents")
    return corpus


def _embedder(embedding: EmbeddingConfig, cache: Path) -> Any:
    from lab.models.embeddings import build_embedding  # heavy (see lab.cli)
    from lab.models.resolve import offline_env_for, resolve_hf_model

    resolved = resolve_hf_model(embedding.model, "embedding model")
    offline_env_for([resolved])
    model = build_embedding(embedding, resolved, cache)
    return lambda texts: model.encode(list(texts), model.query_prefix)


def _generate_plan(args: argparse.Namespace, corpus: "Corpus") -> list[str]:
    """What ``lab generate`` will ask of its LLM, and how long that takes here: every call, the
    writer's and (abstractive) the support checks' (``role_cost``'s calls per accepted question
    count both, as measured here or on 2 cores); the extractive mode's no more than its candidates
    allow (the budget, or the sentences the rules find in ``corpus`` when fewer)."""
    from lab.eval.estimate import cached_questions, describe, role_cost
    from lab.evalsets.census import all_candidates
    from lab.evalsets.extract import blocks
    from lab.evalsets.questions import CANDIDATES_PER_QUESTION
    from lab.models.llm import build_llm
    from lab.models.resolve import resolve_llm

    _, _, llm_cfg = _settings(args)
    plan = resolve_llm(llm_cfg, _role(args), args.experiments.resolve().parent)
    budget = pool = None
    if args.mode == "extractive":  # the rules need no model: the candidates are known before any call
        budget = args.max_candidates or CANDIDATES_PER_QUESTION * args.n
        docs = {d.metadata["source"]: d.text for d in corpus.documents}
        cut = {s: blocks(text, s, corpus.literal.get(s, ())) for s, text in docs.items()}
        found = all_candidates(docs, cut)
        pool = sum(map(len, found.values()))
    cost, cached = role_cost(_role(args), plan, args.n, _cache(args), candidates=budget and min(budget, pool)), 0
    if budget is not None and (_cache(args) / "llm.sqlite").is_file():  # an earlier run's questions take no time
        cost, cached = cached_questions(build_llm(plan, _cache(args)), docs, args.seed, cost, cut, found)
    lines = describe([cost], args.n, "accepted questions wanted")
    if budget is not None:
        lines.append(f"  at most {min(budget, pool)} candidates: {pool} candidate sentences in these documents' prose, "
                     f"a budget of {budget} (--max-candidates)" + (f"; {cached} of their questions are cached, "
                                                                   "not counted above" if cached else ""))
    if args.max_minutes:
        lines.append(f"  stops after {args.max_minutes:g} minutes, keeping what was accepted")
    return lines


def _role(args: argparse.Namespace) -> str:
    """``lab generate``'s LLM role: ``questions``, ``questions-checked`` (--answer-check), ``testset`` (abstractive)."""
    extractive = "questions-checked" if getattr(args, "answer_check", False) else "questions"
    return extractive if args.mode == "extractive" else "testset"


def _cache(args: argparse.Namespace) -> Path:
    return cache_root(args.cache)


def _mix(text: str | None) -> dict[str, float] | None:
    from lab.evalsets.generate import MIX, TASKS

    if not text:
        return None
    out = {}
    for part in text.split(","):
        name, _, share = part.partition("=")
        name = name.strip()
        if name not in TASKS:
            raise ConfigError(f"--mix: unknown category {name!r}", hint=f"use {', '.join(TASKS)}")
        try:
            out[name] = float(share)
        except ValueError:
            raise ConfigError(f"--mix: {part!r} is not CATEGORY=SHARE", hint=f"e.g. {next(iter(MIX))}=0.5") from None
        if not math.isfinite(out[name]) or out[name] < 0:
            raise ConfigError(f"--mix: the share of {name} is {share.strip()}, not a number of 0 or more",
                              hint=f"give each category a share of 0 or more, e.g. --mix {next(iter(MIX))}=0.5,"
                                   "numerical=0.5 (0 leaves a category out)")
    if sum(out.values()) <= 0:
        raise ConfigError("--mix: the shares add up to 0", hint="give at least one positive share")
    return out


def cmd_generate(args: argparse.Namespace) -> int:
    if args.answer_check and args.mode != "extractive":
        raise ConfigError("--answer-check checks the extractive mode's questions",
                          hint="drop --answer-check, or use --mode extractive (the abstractive mode has its own checks)")
    if args.dry_run:
        print("\n".join(_generate_plan(args, _corpus(args.kb, _settings(args)[0]))) + "\ndry run: nothing was "
              "generated or written")
        return 0
    if args.max_minutes is not None and not (math.isfinite(args.max_minutes) and args.max_minutes > 0):
        raise ConfigError(f"--max-minutes {args.max_minutes}: give a number of minutes above 0", hint="e.g. --max-minutes 20")
    sidecar = Path(args.out).expanduser().with_suffix(".gen.json")
    resume = _unfinished(sidecar)  # an interrupted run's rows: the same command continues it
    out = check_output(args.out, (), args.kb, args.force or resume)
    sidecar = check_output(sidecar, (), args.kb, True, "--out's sidecar")
    mix = _mix(args.mix)
    with claim_output(out):  # a second `lab generate` into the same --out stops here while this one runs
        return _generate(args, check_output(out, (), args.kb, args.force or resume), sidecar, mix)


def _unfinished(sidecar: Path) -> bool:
    """Whether ``sidecar`` says its eval set was left unfinished (interrupted, or stopped by time)."""
    try:
        return json.loads(sidecar.read_text(encoding="utf-8")).get("complete") is False
    except (OSError, ValueError, AttributeError):
        return False


def _generate(args: argparse.Namespace, out: Path, sidecar: Path, mix: dict[str, float] | None) -> int:
    from lab.evalsets.generate import NothingAccepted, Options, generate  # heavy (see lab.cli)
    from lab.evalsets.pacing import Rows, candidate_sentences, short
    from lab.evalsets.questions import extractive
    from lab.models.llm import build_llm
    from lab.models.resolve import resolve_llm
    from lab.eval import estimate

    loader, embedding, llm_cfg = _settings(args)
    project = args.experiments.resolve().parent
    corpus = _corpus(args.kb, loader)
    for line in _generate_plan(args, corpus):  # before the first model call
        print(line, flush=True)
    writer = build_llm(resolve_llm(llm_cfg, _role(args), project), _cache(args))
    checks = args.mode == "abstractive" or args.answer_check
    checker = build_llm(resolve_llm(llm_cfg, "check", project), _cache(args)) if checks else None
    docs = {d.metadata["source"]: d.text for d in corpus.documents}
    out.parent.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + 60 * args.max_minutes if args.max_minutes else None
    show = not args.no_progress and sys.stderr.isatty()
    head = {"knowledge_base": str(args.kb), "n_documents": len(corpus.documents), "skipped_files": corpus.skipped,
            "model": {"backend": llm_cfg.backend, "model": llm_cfg.model, "fingerprint": writer.plan.fingerprint},
            "embedding_model": embedding.model}
    write_atomic(sidecar, json.dumps({**head, "mode": args.mode, "complete": False}, indent=2) + "\n")
    rows = Rows(out)
    try:
        if args.mode == "extractive":
            outcome = extractive(docs, writer, _embedder(embedding, _cache(args)), args.n, args.seed,
                                 args.max_candidates, show, on_row=rows, deadline=deadline, literal=corpus.literal,
                                 checker=checker, local_window=args.local_round_trip or None)
        else:
            opts = Options(n=args.n, seed=args.seed, max_candidates=args.max_candidates,
                           excerpt=args.excerpt or ("cited" if args.cite else "held"), **({"mix": mix} if mix else {}))
            outcome = generate(docs, writer, checker, _embedder(embedding, _cache(args)), opts, show_progress=show,
                               on_row=rows, deadline=deadline)
    finally:
        rows.close()
    stats = {**head, **outcome.stats}
    write_atomic(sidecar, json.dumps(stats, indent=2, ensure_ascii=False) + "\n")
    both = [u for u in stats["usage"].values() if u]  # the writer's and the support check's calls, as one
    estimate.record(_cache(args), {_role(args): {k: sum(u[k] for u in both) for k in ("calls", "cached", "seconds")}},
                    stats["n_accepted"], {_role(args): (writer.plan, None)})
    if not outcome.rows:  # an empty eval set is not one: the sidecar says why each candidate failed
        out.unlink(missing_ok=True)
        if stats.get("stopped") == "interrupted":
            raise KeyboardInterrupt
        raise NothingAccepted(f"no candidate of {stats['candidates']} passed the checks; see {sidecar} for each "
                              "filter's rejections", hint="a larger model (--llm, --config), or more candidates "
                                                          "(--max-candidates)")
    rej = {k: v["n"] for k, v in stats["rejected"].items() if v["n"]}
    print(f"{stats['n_accepted']} questions of {stats['n_requested']} from {stats['candidates']} candidates "
          f"({100 * stats['acceptance_rate']:.0f}% accepted) in {stats['seconds']:.0f} s")
    costs = [u["cost_usd"] for u in stats["usage"].values() if u]
    if None not in costs and sum(costs):
        print(f"cost: ${sum(costs):.4f}")
    if stats["seconds_per_accepted"]:
        print(f"{stats['seconds_per_accepted']:.1f} s per accepted question")
    print("by category: " + ", ".join(f"{c} {n}" for c, n in stats["by_category"].items()))
    print("rejected: " + (", ".join(f"{k} {n}" for k, n in rej.items()) or "none"))
    if (seen := stats.get("sentences")) is not None:  # the extractive mode: what the sentence rules left out
        left = ", ".join(f"{why} {e['n']}" for why, e in seen["left_out"].items())
        print(f"sentences: {seen['candidates']} candidates of {seen['prose_sentences']} in prose; left out: "
              f"{left or 'none'} (examples in {sidecar.name})")
    print("\n".join([*short(stats, len(docs), sidecar.name), f"wrote {out} and {sidecar}"]))  # fewer than asked
    if checker is None and not stats.get("stopped"):  # the default extractive mode: what --answer-check would add
        print(estimate.checked_hint(writer.plan, args.n, stats["candidates"], _cache(args), ANSWER_CHECK_HELD_OUT,
                                    candidate_sentences(stats), str(out), stats["n_accepted"]))
        print(estimate.audit_hint(str(out), str(args.kb), stats["n_accepted"]))
    if stats.get("stopped"):
        print(f"stopped ({stats['stopped']}) with {stats['n_accepted']} of {stats['n_requested']} questions: the "
              "same command continues (its calls are cached)")
        if stats["stopped"] == "interrupted":
            return 130
    return 0


def cmd_audit(args: argparse.Namespace) -> int:
    from lab.evalsets.audit import audit_eval_set  # heavy (see lab.cli)
    from lab.evalsets.evalset import load_eval_set
    from lab.report.audit import audit_lines, render_audit

    run = resolve_run(args.run, args.reports) if args.run else None
    page = check_output(args.html or args.eval_set.with_suffix(".audit.html"), [args.eval_set, *([run] if run else [])],
                        args.kb, args.force or args.html is None, "--html")  # the default page is the verb's own
    eval_set = load_eval_set(args.eval_set.expanduser(), None)
    if note := reviewed_note(eval_set.path):
        print(note, file=sys.stderr)
    sidecar = eval_set.path.with_suffix(".json")  # a reviewed copy's counts (the rows dropped)
    reviewed = json.loads(sidecar.read_text(encoding="utf-8")) \
        if eval_set.path.name.endswith(".reviewed.jsonl") and sidecar.is_file() else None
    samples = load_run(run)[1] if run else None
    loader, embedding, llm_cfg = _settings(args)
    corpus = _corpus(args.kb, loader)
    documents, support, answer_check = {d.metadata["source"]: d.text for d in corpus.documents}, None, None
    if args.check:  # the yes/no verdicts, and the answer from each span's passage
        from lab.evalsets.answercheck import model_checks, seed_of
        from lab.models.llm import build_llm
        from lab.models.resolve import resolve_llm

        llm = build_llm(resolve_llm(llm_cfg, "check", args.experiments.resolve().parent), _cache(args))
        support, answer_check = model_checks(llm, documents, corpus.literal, seed_of(eval_set.path), eval_set.rows,
                                             sys.stderr.isatty())
    findings = audit_eval_set(eval_set.rows, documents, source=str(args.eval_set),
                              embed=_embedder(embedding, _cache(args)), support=support, run_samples=samples,
                              reviewed=reviewed, literal=corpus.literal, answer_check=answer_check)
    write_atomic(page, render_audit(findings))
    print("\n".join([*audit_lines(findings, more=str(page)), f"page: {page}"]))
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from lab.evalsets.interop import import_set

    summary = import_set(args.kind, args.source.expanduser(), args.out.expanduser(), category=args.category,
                         kb=args.kb, kb_out=args.kb_out, overwrite=args.force,
                         categories=[c.strip() for c in args.categories.split(",")] if args.categories else None)
    print(", ".join(f"{k} {v}" for k, v in summary.items() if k not in {"kind", "out"}))
    print(f"wrote {args.out}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from lab.evalsets.interop import export_ragas

    summary = export_ragas(args.eval_set.expanduser(), args.out.expanduser(), overwrite=args.force)
    print(", ".join(f"{k} {v}" for k, v in summary.items() if k not in {"kind", "out"}))
    print(f"wrote {args.out} (ragas EvaluationDataset JSONL)")
    return 0


def cmd_split(args: argparse.Namespace) -> int:
    from lab.evalsets.holdout import split_file

    if args.out.is_file():
        raise DataError(f"--out {args.out} is a file", hint="give --out a folder (it is created if missing)")
    for half in ("dev.jsonl", "held-out.jsonl"):
        check_output(args.out / half, [args.eval_set], None, args.force)
    dev, held = split_file(args.eval_set.expanduser(), args.out.expanduser(), args.dev_fraction, args.seed)
    print(f"{len(dev)} dev and {len(held)} held-out questions in {args.out}")
    return 0


COMMANDS = {"generate": cmd_generate, "audit": cmd_audit, "import": cmd_import, "export": cmd_export,
            "split": cmd_split}
