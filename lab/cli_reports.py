"""The ``lab`` verbs that read runs or run many: compare, show, sweep, optimize."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from lab.cli import _overrides, _print_summary


def cmd_compare(args: argparse.Namespace) -> int:
    from lab.report.compare import default_folder, load_runs, paired_lines, render_compare, table, warnings

    runs = load_runs(args.runs, args.reports)
    print("\n".join(table([r.results for r in runs])))
    print("\n".join(paired_lines(runs)))
    for w in warnings([r.results for r in runs]):
        print(f"warning: {w}")
    if not args.no_html:
        out = render_compare(runs, args.out or default_folder(runs, args.reports))
        print(f"comparison: {out}")
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    from lab.models import cache_dir
    from lab.runner import RunOptions
    from lab.sweep import parse_dial, run_sweep, table

    dials = [parse_dial(d) for d in args.dials]
    if args.cache:
        os.environ["LAB_CACHE"] = str(args.cache.resolve())
    opts = RunOptions(project_root=args.experiments.resolve().parent, reports_root=args.reports,
                      cache_root=cache_dir(), show_progress=not args.no_progress and sys.stderr.isatty())
    folder = run_sweep(args.name, args.experiments, dials, _overrides(args), opts, args.metric, args.answers)
    import json

    print("\n".join(table(json.loads((folder / "sweep.json").read_text()))))
    print(f"sweep: {folder / 'sweep.html'}")
    return 0


def cmd_optimize(args: argparse.Namespace) -> int:
    from lab.models import cache_dir
    from lab.optimize import DEFAULT_SPACE, parse_range, run_optimize
    from lab.runner import RunOptions

    ranges = [parse_range(s) for s in (args.space or DEFAULT_SPACE)]
    if args.cache:
        os.environ["LAB_CACHE"] = str(args.cache.resolve())
    opts = RunOptions(project_root=args.experiments.resolve().parent, reports_root=args.reports,
                      cache_root=cache_dir(), show_progress=False)
    overrides = _overrides(args)
    s = run_optimize(args.name, args.experiments, ranges, overrides, opts, args.metric, args.trials,
                     args.dev_fraction, args.split_seed, not args.no_config)
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


def cmd_show(args: argparse.Namespace) -> int:
    from lab.report.compare import resolve_run

    folder = resolve_run(args.run, args.reports)
    _print_summary(folder)
    print(f"report: {folder / 'report.html'}")
    return 0
