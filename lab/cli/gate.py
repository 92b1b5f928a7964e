"""``lab gate BASELINE CANDIDATE``: a non-inferiority check of a candidate run against a baseline
run, for CI (exit 0 pass, 1 fail, 2 error; a JUnit XML file). Reads run files only; the
experiment's YAML is read only for its ``gate:`` section, where the candidate run's stored config
has none (runs made before the section was added)."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from lab.config import GateConfig, load_experiment
from lab.cli import options
from lab.errors import ConfigError, LabError
from lab.paths import check_output, write_atomic
from lab.report.compare import load_runs
from lab.report.latest import Chosen, choose_run
from lab.runfiles import read_results
from lab.metrics.catalog import DEFAULT_METRIC
from lab.report.gate import DEFAULT_ALPHA, DEFAULT_MARGIN, gate_lines, gate_runs, gate_section, junit_xml

EXAMPLE = "example: lab gate turn13 hybrid --metric mrr=0.02 --metric ndcg=0.03 --junit gate.xml"


def add_parsers(sub: Any, common: Any) -> None:
    g = sub.add_parser(
        "gate", help="fail (exit 1) when a candidate run may be worse than a baseline run by more than a margin",
        description="A paired non-inferiority test per metric over the questions both runs share: the drop "
                    "d = baseline - candidate per question (candidate - baseline where lower is better, and for "
                    "sizes), a one-sided paired t-test of H0 mean(d) >= margin, Holm-adjusted across the gated "
                    "metrics. A metric passes when its adjusted p < alpha, which is when the worst plausible "
                    "drop (the one-sided upper confidence bound at Holm's level) is below the margin. Metrics "
                    "and margins: --metric NAME=MARGIN (repeatable), or --metric NAME --margin MARGIN pairs in "
                    "order; without --metric, the candidate config's gate: section, else mrr=0.02. With one RUN, the "
                    "baseline is the gate: section's. Margins are "
                    "in the metric's units (coverage 0.02 = 2 points; judge scores on 1-5). Exit codes: 0 every "
                    "metric passes, 1 any fails, 2 error (unknown metric, other eval sets, no shared "
                    "questions, missing values, bad margins; nothing is written). Runs that are not "
                    "comparable (other sample, k or judge) are warned about, not failed.",
        epilog=EXAMPLE)
    g.add_argument("runs", nargs="+", metavar="RUN",
                   help="BASELINE CANDIDATE: run folders or experiment NAMEs (their latest run); one RUN alone is "
                        "the candidate, gated against its config's gate.baseline")
    g.add_argument("--metric", action="append", default=[], metavar="NAME[=MARGIN]",
                   help="a metric to gate and its margin, e.g. --metric mrr=0.02 (repeatable)")
    g.add_argument("--margin", action="append", type=float, default=[], metavar="MARGIN",
                   help="the margin of the next --metric given without one, in order (--metric mrr --margin 0.02)")
    g.add_argument("--alpha", type=float, default=None,
                   help=f"family-wise error rate over the metrics (default: the gate: section's, else {DEFAULT_ALPHA})")
    g.add_argument("--junit", type=Path, metavar="FILE", help="write a JUnit XML report (testsuite 'lab gate')")
    options.force(g, "the --junit file")
    options.reports(g)
    common(g)


def _number(text: str, where: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ConfigError(f"{where}: the margin {text!r} is not a number", hint="e.g. --metric mrr=0.02") from None
    if not math.isfinite(value):
        raise ConfigError(f"{where}: the margin {text!r} is not a finite number", hint="e.g. --metric mrr=0.02")
    return value


def margins_from_args(metrics: list[str], margins: list[float], section: GateConfig | None) -> dict[str, float]:
    """--metric NAME=MARGIN, and --metric NAME paired in order with --margin; a bare NAME with no
    --margin at all takes the gate: section's margin for it. No --metric: the section's metrics,
    else mrr=0.02."""
    if not metrics:
        if margins:
            raise ConfigError("--margin without --metric", hint="name its metric: --metric mrr --margin 0.02")
        return dict(section.metrics) if section else {DEFAULT_METRIC: DEFAULT_MARGIN}
    bare = [m for m in metrics if "=" not in m]
    if margins and len(margins) != len(bare):
        raise ConfigError(f"{len(bare)} --metric without a margin but {len(margins)} --margin",
                          hint="give each --metric its margin: --metric mrr=0.02 --metric ndcg=0.03")
    out: dict[str, float] = {}
    paired = iter(margins)
    for entry in metrics:
        name, _, text = entry.partition("=")
        name = name.strip()
        if name in out:
            raise ConfigError(f"--metric {name} is given twice", hint="gate each metric once")
        if "=" in entry:
            out[name] = _number(text.strip(), f"--metric {entry}")
        elif margins:
            out[name] = next(paired)
        elif section and name in section.metrics:
            out[name] = section.metrics[name]
        else:
            raise ConfigError(f"--metric {name} has no margin",
                              hint=f"write --metric {name}=0.02, or --metric {name} --margin 0.02")
    return out


def _section(results: dict, experiments: Path) -> tuple[GateConfig | None, str]:
    """The candidate's gate: section and where it came from: the run's stored config, else the
    experiment's file (when it exists), else none."""
    raw, where = gate_section(results), "the candidate run's stored config"
    if raw is None and (experiments / f"{results['name']}.yaml").is_file():
        cfg = load_experiment(results["name"], experiments)
        if cfg.gate is not None:
            return cfg.gate, str(experiments / f"{results['name']}.yaml")
    if raw is None:
        return None, ""
    try:
        return GateConfig.model_validate(raw), where
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'gate'}: {e['msg']}" for e in exc.errors())
        raise ConfigError(f"the gate: section stored in {results['name']}'s run is invalid: {problems}",
                          hint="pass the metrics with --metric NAME=MARGIN") from None


def _baseline(ref: str | None, section: GateConfig | None, experiments: Path, reports: Path) -> Chosen:
    if ref is not None:
        return choose_run(ref, reports)
    if section is None or section.baseline is None:
        raise ConfigError("lab gate with one RUN needs a baseline: the candidate's config has no gate.baseline",
                          hint="pass two runs, lab gate BASELINE CANDIDATE, or set gate: {baseline: ...} in its config")
    in_project = experiments.resolve().parent / section.baseline  # a run folder relative to the project root
    return choose_run(str(in_project) if (in_project / "results.json").is_file() else section.baseline, reports)


def cmd_gate(args: argparse.Namespace) -> int:
    if len(args.runs) > 2:
        raise LabError(f"lab gate takes a BASELINE and a CANDIDATE, got {len(args.runs)} runs",
                       hint="gate one candidate at a time: lab gate turn13 hybrid")
    chosen = choose_run(args.runs[-1], args.reports)  # a NAME: its latest full run (lab.report.latest)
    candidate = chosen.folder
    section, where = _section(read_results(candidate), args.experiments)
    margins = margins_from_args(args.metric, args.margin, section)
    alpha = args.alpha if args.alpha is not None else (section.alpha if section else DEFAULT_ALPHA)
    base_chosen = _baseline(args.runs[0] if len(args.runs) == 2 else None, section, args.experiments, args.reports)
    baseline = base_chosen.folder
    for note in (c.note for c in (base_chosen, chosen) if c.note):
        print(f"note: {note}")  # which run a NAME stands for, before anything is computed from it
    if args.junit:
        check_output(args.junit, [baseline, candidate], None, args.force, "--junit")
    base_run, cand_run = load_runs([str(baseline), str(candidate)], args.reports)
    result = gate_runs(base_run, cand_run, margins, alpha, "--metric" if args.metric else f"gate.metrics ({where})")
    lines = gate_lines(result)
    if where and not args.metric:
        lines.insert(1, f"metrics and margins from the gate: section of {where}")
    print("\n".join(lines))
    if args.junit:
        args.junit.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(args.junit, junit_xml(result))
        print(f"junit: {args.junit}")
    return 0 if result["passed"] else 1


COMMANDS = {"gate": cmd_gate}
