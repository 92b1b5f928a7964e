"""``lab power``: how many questions a difference needs, from a run's per-question values.
Reads run files only."""

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


def add_parsers(sub: Any, common: Any) -> None:
    pw = sub.add_parser(
        "power", help="how many questions a difference needs, and what a run's questions can detect",
        description="From a run's per-question values: per row (overall, then each category), the questions "
                    "there are now, the smallest mean difference they detect (80% power, two-sided alpha 0.05, "
                    "paired t-test) and, with --delta, the questions needed to detect that difference. With "
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


COMMANDS = {"power": cmd_power}
