"""``lab power``: how many questions a difference needs, from a run's per-question values (reads
run files only); ``lab race``: two configs on the same questions, stopped as soon as an
anytime-valid confidence sequence decides."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from lab.cli import options
from lab.errors import LabError
from lab.metrics import catalog
from lab.paths import resolve_run
from lab.runfiles import load_run
from lab.stats.power import ALPHA, POWER, RHO, plan, plan_lines
from lab.stats.sequences import DEFAULT_SEQUENCE, SEQUENCES


def add_parsers(sub: Any, common: Any) -> None:
    pw = sub.add_parser(
        "power", help="how many questions a difference needs, and what a run's questions can detect",
        description="From a run's per-question values: per row (overall, then each category), the questions "
                    "there are now, the smallest mean difference they detect (80% power, two-sided alpha 0.05, "
                    "paired t-test) and, with --delta, the questions needed to detect that difference (fixed-n, and "
                    "the median questions to a decision under each lab race --sequence, simulated). With "
                    "two --run, the sd of the paired differences B - A observed over the questions both scored; "
                    "with one, the sd of a difference is assumed: sd(metric) x sqrt(2 x (1 - rho)), the "
                    "difference of two pipelines whose per-question values correlate at rho (--rho, default "
                    f"{RHO:g}). Never fewer than the 6 questions a permutation test needs to reach p < 0.05. "
                    "Reads run files only.",
        epilog="example: lab power --run turn13 --delta 0.03")
    pw.add_argument("--run", dest="runs", action="append", required=True, metavar="RUN",
                    help="an experiment NAME (its latest run) or a run folder; twice for the observed paired sd")
    pw.add_argument("--delta", type=float, help="the mean difference to detect, in the metric's units "
                                                "(0.03 = 0.03 MRR, or 3 points of coverage)")
    options.metric(pw, "the metric")
    pw.add_argument("--category", help="one category only (default: overall and every category)")
    pw.add_argument("--power", type=float, default=POWER, help=f"the power wanted (default {POWER:g})")
    pw.add_argument("--alpha", type=float, default=ALPHA, help=f"two-sided significance level (default {ALPHA:g})")
    pw.add_argument("--rho", type=float, default=RHO,
                    help="with one run: the assumed correlation of two pipelines' per-question values "
                         f"(default {RHO:g})")
    options.reports(pw)

    rc = sub.add_parser(
        "race", help="compare two configs question by question, stopping as soon as the answer is clear",
        description="Both configs evaluate the same questions in one seeded random order; after each question "
                    "the paired differences B - A of each --metric update an anytime-valid confidence sequence "
                    "(--sequence: by default the hedged-capital betting sequence of Waudby-Smith & Ramdas), valid "
                    "however often it is looked at. A race whose metrics are all retrieval metrics answers and "
                    "judges nothing. The race "
                    "stops when every metric's sequence excludes 0 (a difference), or lies within +-EFFECT "
                    "(--effect: futile, no difference that matters is left), or when the questions or --max run "
                    "out (then the fixed-n paired test decides, as lab compare). Several metrics share alpha "
                    "(Bonferroni). The two runs of the questions used are ordinary run folders; "
                    "reports/_race/A--B/<run-id>/ holds race.json and compare.html with the sequence plotted. "
                    "Every model call is cached: rerun with a larger --max to continue the same order.",
        epilog="example: lab race turn13 hybrid --kb ../shared/benchmarks/insurellm/knowledge-base "
               "--eval ../shared/benchmarks/insurellm/tests.jsonl")
    rc.add_argument("a", metavar="A", help="the baseline experiment (a config NAME)")
    rc.add_argument("b", metavar="B", help="the candidate experiment")
    rc.add_argument("--metric", dest="metrics", action="append", metavar="METRIC",
                    help=f"a metric to decide on (default {catalog.DEFAULT_METRIC}; repeat for several: each at "
                         "alpha / their number)")
    rc.add_argument("--alpha", type=float, default=ALPHA, help=f"error rate of the whole race (default {ALPHA:g})")
    rc.add_argument("--sequence", choices=SEQUENCES, default=DEFAULT_SEQUENCE,
                    help="the anytime-valid confidence sequence: betting (hedged capital, the narrowest valid one; "
                         "default), eb "
                         "(empirical Bernstein, the races' sequence before betting) or normal-mixture (asymptotic: "
                         "valid only as the questions grow)")
    rc.add_argument("--by-category", action="store_true", dest="by_category",
                    help="also a sequence per metric and category (each category's questions in the race's order); "
                         "the family, metrics x (1 + categories), shares alpha; the overall metrics still decide "
                         "when to stop, and each category says what its sequence shows at the stop")
    rc.add_argument("--effect", type=float, help="the smallest difference that matters: stop as futile once the "
                                                 "sequence rules out a difference this large")
    rc.add_argument("--max", dest="max_n", type=int, metavar="N", help="at most N questions (default: all)")
    rc.add_argument("--step", type=int, default=10, help="questions evaluated per batch (the decision is read "
                                                         "after each question; default 10)")
    rc.add_argument("--seed", type=int, default=13, help="seed of the question order (default 13)")
    rc.add_argument("--gate", dest="margin", type=float, metavar="MARGIN",
                    help="a non-inferiority gate instead of a comparison: pass (exit 0) once the sequence rules out a "
                         "drop of B as large as MARGIN on every metric, fail (exit 1) once it shows a larger drop on "
                         "one; where the questions run out, the fixed-n gate (lab gate) decides")
    rc.add_argument("--junit", type=Path, metavar="FILE", help="with --gate: a JUnit XML report (testsuite 'lab gate')")
    rc.add_argument("--kb", help="knowledge-base folder (overrides data.knowledge_base of both)")
    rc.add_argument("--eval", help="eval set JSONL (overrides data.eval_set of both)")
    rc.add_argument("--retrieval-only", action="store_true",
                    help="skip answers and the judge (a race whose metrics are all retrieval metrics always does)")
    options.reports(rc)
    options.cache(rc)
    options.experiments(rc)


def cmd_race(args: argparse.Namespace) -> int:
    import sys

    from lab.config import run_overrides
    from lab.eval.race import RaceOptions, race  # heavy: loads the pipeline's libraries
    from lab.eval.runner import RunOptions
    from lab.paths import cache_root
    from lab.report.race import render_race

    if not 0 < args.alpha < 1:
        raise LabError(f"--alpha {args.alpha} must lie between 0 and 1")
    if args.effect is not None and args.effect <= 0:
        raise LabError(f"--effect {args.effect}: give the smallest difference that matters as a positive number")
    if args.max_n is not None and args.max_n < 1:
        raise LabError(f"--max {args.max_n}: give at least 1")
    metrics = args.metrics or [catalog.DEFAULT_METRIC]
    for m in metrics:
        catalog.check(m)
        if args.margin is not None and not catalog.higher_is_better(m):
            raise LabError(f"--gate on {m}: a sequential gate reads metrics where higher is better",
                           hint="gate it with lab gate after full runs")
    if args.margin is not None and args.margin < 0:
        raise LabError(f"--gate {args.margin}: give the largest acceptable drop as a number >= 0")
    if args.junit is not None and args.margin is None:
        raise LabError("--junit needs --gate MARGIN", hint="example: lab race turn13 candidate --gate 0.02 --junit gate.xml")
    opts = RunOptions(project_root=args.experiments.resolve().parent, reports_root=args.reports,
                      cache_root=cache_root(args.cache), show_progress=False)
    overrides = run_overrides(args.kb, args.eval, answers=not args.retrieval_only)
    folder = race((args.a, args.b), args.experiments, overrides, opts,
                  RaceOptions(metrics=metrics, alpha=args.alpha, effect=args.effect, max_n=args.max_n,
                              step=args.step, seed=args.seed, margin=args.margin, by_category=args.by_category,
                              sequence=args.sequence),
                  say=lambda line: print(line, file=sys.stderr))
    lines, passed = render_race(folder, args.junit)
    print("\n".join(lines))
    return 1 if passed is False else 0


def cmd_power(args: argparse.Namespace) -> int:
    if len(args.runs) > 2:
        raise LabError(f"--run given {len(args.runs)} times", hint="give one run, or two for their paired differences")
    catalog.check(args.metric)
    runs = []
    for ref in args.runs:
        folder = resolve_run(ref, args.reports)
        if not (folder / "samples.jsonl").is_file():
            raise LabError(f"{folder} has no samples.jsonl: no per-question values to estimate a spread from",
                           hint="pass a run folder written by `lab run`")
        runs.append(load_run(folder))
    twice = len(runs) == 2 and runs[0][0]["name"] == runs[1][0]["name"]
    runs = [(f"{r['name']}@{r['run_id']}" if twice else r["name"], samples) for r, samples in runs]
    print("\n".join(plan_lines(plan(runs, args.metric, args.delta, args.category, args.alpha, args.power, args.rho))))
    return 0


COMMANDS = {"power": cmd_power, "race": cmd_race}
