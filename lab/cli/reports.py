"""The verbs that read run folders only: report, compare, show (no model is loaded)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from lab.cli import options
from lab.cli.experiments import print_summary
from lab.errors import LabError
from lab.paths import follow_latest, resolve_run
from lab.report.compare import default_folder, load_runs, paired_lines, render_compare, table, warnings
from lab.report.designs import designs_table
from lab.report.html import render_run


def add_parsers(sub: Any, common: Any) -> None:
    rep = sub.add_parser("report", help="re-render report.html from a run folder's files",
                         epilog="example: lab report reports/turn13/20261122-130000")
    rep.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="a run folder, or reports/<NAME>/LATEST")

    cmp_ = sub.add_parser(
        "compare", help="compare runs: the story, paired statistics, movers (HTML + terminal)",
        description="Print the overall metrics of two or more runs side by side with deltas against the "
                    "first, warn when they are not comparable (other eval set or sample, other k, other "
                    "judge, or one experiment name run with different configs), and write compare.html: "
                    "every metric per run overall and per category, paired bootstrap intervals and "
                    "permutation/sign tests for each pair of adjacent runs, the questions that moved most, "
                    "and questions.csv/.parquet. Reads results files only; no model is loaded.",
        epilog="example: lab compare turn13 turn18 turn22-offline",
    )
    cmp_.add_argument("runs", nargs="+", metavar="RUN", help="a run folder, or an experiment NAME (its latest run)")
    options.reports(cmp_)
    cmp_.add_argument("--designs-table", action="store_true",
                      help="print only a Markdown table of the runs as retrieval designs (MRR, nDCG, spans, passages, "
                           "context, ms and LLM calls per question), each paired against the first RUN on MRR, "
                           "Holm-adjusted; no HTML")
    cmp_.add_argument("--also", metavar="RUN", help="with --designs-table: a second base, in a column of its own")
    cmp_.add_argument("--out", type=Path, metavar="DIR", help="folder for compare.html (default: reports/_compare/<names>)")
    options.force(cmp_, "the compare.html and exports in --out DIR")
    cmp_.add_argument("--no-html", action="store_true", help="print the table only")

    fun = sub.add_parser(
        "funnel", help="where each question lost its gold evidence, stage by stage (one or more runs)",
        description="The loss funnel: for each question with golden spans or keywords, the first stage that lost "
                    "its evidence (not in the knowledge base, chunking, first stage, second stage, context budget, "
                    "generation, judge) or kept all the way; per stage the questions lost there; for two or more "
                    "runs, the questions each adjacent pair recovered and newly lost at each stage, with paired "
                    "tests on the share of questions getting past each stage (Holm over the stages). Old runs "
                    "show the stages their files hold. Reads run files only; no model is loaded.",
        epilog="example: lab funnel turn13 turn18 turn22-tuned",
    )
    fun.add_argument("runs", nargs="+", metavar="RUN", help="a run folder, or an experiment NAME (its latest full run)")
    options.reports(fun)
    fun.add_argument("--category", metavar="NAME", help="only the questions of this category")
    fun.add_argument("--questions", action="store_true",
                     help="also list each question of the last RUN with the stage it was lost at and its evidence")

    show = sub.add_parser("show", help="print a run's summary table (with 95%% intervals) in the terminal",
                          epilog="example: lab show turn13")
    show.add_argument("run", metavar="RUN", help="an experiment NAME (its latest run) or a run folder")
    options.reports(show)



def cmd_report(args: argparse.Namespace) -> int:
    run_dir = follow_latest(args.run_dir)
    if not (run_dir / "results.json").is_file():
        raise LabError(f"{run_dir} is not a run folder (no results.json)", hint="pass reports/<NAME>/<run-id>")
    print(render_run(run_dir))
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    if args.designs_table:
        names = list(dict.fromkeys([*args.runs, *([args.also] if args.also else [])]))
        runs = load_runs(names, args.reports)
        for note in (r.note for r in runs if r.note):
            print(f"note: {note}", file=sys.stderr)  # stdout is the Markdown table
        print(designs_table(runs, args.also), end="")
        return 0
    runs = load_runs(args.runs, args.reports)
    # which runs the names stand for, and why the figures may not compare, before the figures
    notes = [f"note: {r.note}" for r in runs if r.note]
    for line in notes + [f"warning: {w}" for w in warnings([r.results for r in runs])]:
        print(line)
    print("\n".join(table([r.results for r in runs])))
    print("\n".join(paired_lines(runs)))
    if not args.no_html:
        out = render_compare(runs, args.out or default_folder(runs, args.reports), args.force or not args.out)
        print(f"comparison: {out}")
    return 0


def cmd_funnel(args: argparse.Namespace) -> int:
    from lab.report.funnel import evidence, terminal_lines

    runs = load_runs(args.runs, args.reports)
    for note in (r.note for r in runs if r.note):
        print(f"note: {note}")
    for w in warnings([r.results for r in runs]):  # as lab compare warns, before the figures
        print(f"warning: {w}")
    if args.category is not None:
        known = sorted({s["category"] for r in runs for s in r.samples})
        if args.category not in known:
            raise LabError(f"no question of category {args.category!r} in these runs",
                           hint=f"categories: {', '.join(known) or '(none)'}")
    print("\n".join(terminal_lines([(r.label, r.results, r.samples) for r in runs], args.category)))
    if args.questions:
        last = runs[-1]
        print(f"\n{last.label}: each question")
        for s in last.samples:
            if args.category is not None and s["category"] != args.category:
                continue
            e = evidence(s)
            if e is None:
                print(f"  {s['id']:<10} no gold evidence")
                continue
            pieces = "; ".join(f"{p['what']!r}: {p['state']} ({p['where']})" for p in e["pieces"])
            print(f"  {s['id']:<10} {e['label']:<26} {pieces}")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    folder = resolve_run(args.run, args.reports)
    print_summary(folder)
    print(f"report: {folder / 'report.html'}")
    return 0


COMMANDS = {"report": cmd_report, "compare": cmd_compare, "funnel": cmd_funnel, "show": cmd_show}
