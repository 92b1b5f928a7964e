"""``lab gate``'s verdicts from two run folders' files: is the candidate run no worse than the
baseline run, by more than a margin per metric, on the questions both answered?

- :func:`gate_runs` checks the pair (the same eval set, shared questions, per-question values of
  every gated metric) and tests each metric with :func:`lab.stats.noninferiority.gate_metrics`
  (one-sided paired t-tests against the margins, Holm across the metrics);
- :func:`gate_lines` is the terminal view (one line per metric and a verdict), :func:`junit_xml`
  the JUnit XML file for CI systems (testsuite "lab gate", one testcase per metric).

A metric where higher is better is gated on ``baseline - candidate``; one where lower is better,
and a size (``context_chars``: more text to read, more cost), on ``candidate - baseline``.
Nothing here loads a model or a config: the candidate's ``gate:`` section is read from its
results.json (:func:`gate_section`).
"""

from __future__ import annotations

import math
import time
import xml.etree.ElementTree as ET
from typing import Mapping

from lab.errors import ConfigError, DataError
from lab.metrics import catalog
from lab.metrics.catalog import fmt, fmt_delta
from lab.report.compare import Run, warnings
from lab.report.latest import is_sample, sample_text
from lab.stats.noninferiority import METHOD, MetricGate, gate_metrics

DEFAULT_MARGIN, DEFAULT_ALPHA = 0.02, 0.05
SUITE = "lab gate"


def gate_section(results: dict) -> dict | None:
    """The ``gate:`` section of a run's stored config (None when the run has none)."""
    return (results.get("config") or {}).get("gate")


def better_higher(metric: str) -> bool:
    """The direction a gate holds ``metric`` to: the catalogue's, and lower for sizes."""
    return catalog.METRICS[metric].higher_is_better is True


def _span(metric: str) -> float | None:
    """The widest possible difference of ``metric`` (None for sizes): 4 for the judge's 1-5
    scores, 1 for shares, percentages and ragas scores."""
    if catalog.is_size(metric):
        return None
    return 4.0 if catalog.is_score(metric) else 1.0


def check_margins(margins: Mapping[str, float], alpha: float, where: str = "--metric") -> None:
    """ConfigError for an unknown metric (with "did you mean"), a margin that is negative, not a
    number, or as wide as the metric's whole range (a unit slip: 2 meant as 2 points of a share
    is 0.02), and an alpha outside (0, 1)."""
    if not margins:
        raise ConfigError(f"{where}: no metric to gate", hint="name one, e.g. --metric mrr=0.02")
    for metric, margin in margins.items():
        catalog.check(metric, where)
        unit = "points of a share: 2 points is 0.02" if catalog.METRICS[metric].kind == "percent" else "its own units"
        if not isinstance(margin, (int, float)) or not math.isfinite(margin) or margin < 0:
            raise ConfigError(f"{where}: the margin of {metric} is {margin!r}; it must be a number >= 0",
                              hint=f"how much worse than the baseline is acceptable, in {unit}, e.g. {metric}=0.02")
        span = _span(metric)
        if span is not None and margin >= span:
            raise ConfigError(f"{where}: the margin of {metric} is {margin}, the metric's whole range ({span:g}): "
                              "every candidate would pass",
                              hint=f"write the margin in {unit}, e.g. {metric}=0.02")
    if not 0 < alpha < 1:
        raise ConfigError(f"--alpha {alpha} is outside (0, 1)", hint="the usual family-wise error rate is 0.05")


def _shared_ids(baseline: Run, candidate: Run) -> list[str]:
    if baseline.results["data"]["eval_sha256"] != candidate.results["data"]["eval_sha256"]:
        raise DataError(
            f"{baseline.label} and {candidate.label} were run over different eval sets "
            f"({baseline.results['data']['eval_set']} {baseline.results['data']['eval_sha256'][:12]}, "
            f"{candidate.results['data']['eval_set']} {candidate.results['data']['eval_sha256'][:12]})",
            hint="gate a candidate against a baseline run over the same eval set file")
    ids = [s["id"] for s in baseline.samples if s["id"] in candidate.by_id]
    if not ids:
        raise DataError(f"{baseline.label} and {candidate.label} share no questions{_cause(baseline, candidate)}",
                        hint=_same_questions_hint(baseline, candidate))
    return ids


def _asked(run: Run) -> str:
    """``turn13 (20261125-101500) is a sample of 4 of 150 questions (--limit 4, seed 13)``."""
    what = f"is {sample_text(run.results)}" if is_sample(run.results) else \
        f"asked all {run.results['sample']['n_total']} questions"
    return f"{run.label} ({run.folder.name}) {what}"


def _differ(baseline: Run, candidate: Run) -> bool:
    """Whether the runs asked other questions of their eval set (a sample, of another size or seed)."""
    return set(baseline.by_id) != set(candidate.by_id)


def _cause(baseline: Run, candidate: Run) -> str:
    """``, because the runs asked different questions: A ... and B ...`` (which is a sample, of
    how many questions) when their question sets differ, else nothing."""
    if not _differ(baseline, candidate):
        return ""
    return f", because the runs asked different questions: {_asked(baseline)} and {_asked(candidate)}"


def _same_questions_hint(baseline: Run, candidate: Run) -> str:
    samples = [r.results["name"] for r in (baseline, candidate) if is_sample(r.results)]
    if samples and _differ(baseline, candidate):
        return (f"gate runs over the same questions: run {' and '.join(dict.fromkeys(samples))} without --limit "
                f"(lab run {samples[0]}), or pass two run folders made with the same --limit and --seed")
    return "run both over the same questions (the same --limit and --seed, or none)"


def _values(run: Run, metric: str, ids: list[str], role: str) -> dict[str, float]:
    values = run.values(metric)
    if not any(q in values for q in ids):
        answer = catalog.METRICS[metric].group in ("judge", "answer", "ragas")
        raise DataError(f"the {role} run {run.label} ({run.folder}) has no per-question values of {metric}",
                        hint="a retrieval-only run has no answer or judge metrics; gate on mrr, ndcg or coverage"
                        if answer else f"gate on a metric the run has: see the metrics in {run.folder / 'samples.jsonl'}")
    return {q: values[q] for q in ids if q in values}


def gate_runs(baseline: Run, candidate: Run, margins: Mapping[str, float], alpha: float,
              where: str = "--metric") -> dict:
    """Every gated metric's verdict (see :mod:`lab.stats.noninferiority`), the runs, and the
    reasons they may not be comparable (warnings, not failures); ``where`` names the margins'
    source in errors."""
    started = time.perf_counter()
    check_margins(margins, alpha, where)
    if baseline.label == candidate.label:  # a committed copy of a run: tell them apart by folder
        baseline.label, candidate.label = (f"{r.label} ({r.folder})" for r in (baseline, candidate))
    ids = _shared_ids(baseline, candidate)
    values, left_out = {}, []
    for metric in margins:
        base, cand = _values(baseline, metric, ids, "baseline"), _values(candidate, metric, ids, "candidate")
        both = [q for q in ids if q in base and q in cand]
        if len(both) < 2:
            cause = _cause(baseline, candidate) or (
                f", of {len(ids)} shared (the others have no value in one run: failed items)" if len(ids) > len(both)
                else "")
            raise DataError(f"{metric}: only {len(both)} question(s) have a value in both runs{cause}; a paired "
                            "test needs 2", hint=_same_questions_hint(baseline, candidate) if _differ(baseline, candidate)
                            else "run both over more questions")
        missing = [q for q in ids if q not in both]
        if missing:
            left_out.append(f"{metric}: {len(missing)} of {len(ids)} shared questions have no value in one run "
                            f"(failed items) and are left out: {', '.join(missing[:10])}"
                            + (" ..." if len(missing) > 10 else ""))
        values[metric] = ({q: base[q] for q in both}, {q: cand[q] for q in both})
    rows = gate_metrics(values, margins, {m: better_higher(m) for m in margins}, alpha)
    runs = [baseline, candidate]
    return {
        "baseline": _run_info(baseline), "candidate": _run_info(candidate), "alpha": alpha, "method": METHOD,
        "n_shared": len(ids), "only_baseline": len(baseline.samples) - len(ids),
        "only_candidate": len(candidate.samples) - len(ids),
        "metrics": [r.as_dict() for r in rows], "passed": all(r.passed for r in rows),
        "warnings": warnings([r.results for r in runs]) + left_out,
        "seconds": time.perf_counter() - started,
    }


def _run_info(run: Run) -> dict:
    return {"label": run.label, "name": run.results["name"], "run_id": run.results["run_id"], "folder": str(run.folder)}


def metric_line(g: dict) -> str:
    """``PASS mrr  baseline 0.7278 candidate 0.7356  worst plausible drop -0.0012 < margin 0.0200 (...)``."""
    m = g["metric"]
    worse = "drop" if g["higher_is_better"] else "rise"
    sign = "<" if g["passed"] else ">="
    return (f"{'PASS' if g['passed'] else 'FAIL'} {m:<14} baseline {fmt(m, g['baseline'])} candidate "
            f"{fmt(m, g['candidate'])}  worst plausible {worse} {fmt_delta(m, g['bound'])} {sign} margin "
            f"{fmt_delta(m, g['margin']).lstrip('+')} (p_adj {_p(g['p_adjusted'])}, n {g['n']})")


def _p(p: float) -> str:
    return "<0.0001" if p < 0.0001 else f"{p:.4f}"


def verdict_line(result: dict) -> str:
    m = result["metrics"]
    b, c = result["baseline"]["label"], result["candidate"]["label"]
    family = f"Holm over {len(m)} metric{'s' if len(m) > 1 else ''}, alpha {result['alpha']:g}"
    if result["passed"]:
        return f"gate PASSED: {c} is not worse than {b} by more than the margin on {', '.join(g['metric'] for g in m)} ({family})"
    failed = [g["metric"] for g in m if not g["passed"]]
    return (f"gate FAILED: {c} may be worse than {b} by more than the margin on {', '.join(failed)} "
            f"({len(failed)} of {len(m)}; {family})")


def gate_lines(result: dict) -> list[str]:
    """The terminal view: the pair, one line per metric, the warnings, the verdict."""
    extra = [f"{result[k]} only in the {k.split('_')[1]}" for k in ("only_baseline", "only_candidate") if result[k]]
    out = [f"gate: {result['candidate']['label']} against {result['baseline']['label']}, "
           f"{result['n_shared']} shared questions" + (f" ({', '.join(extra)})" if extra else "")
           + f"; {result['method']}"]
    out += [f"warning: {w}" for w in result["warnings"]]  # before the figures they qualify
    out += [metric_line(g) for g in result["metrics"]]
    out.append(verdict_line(result))
    return out


def junit_xml(result: dict) -> str:
    """A JUnit XML report: ``<testsuites>`` holding one ``<testsuite name="lab gate">``, one
    ``<testcase classname="lab gate" name=METRIC>`` per gated metric, a ``<failure>`` in each that
    failed (its message is the metric's line), the runs and the method as properties."""
    m = result["metrics"]
    failures = sum(not g["passed"] for g in m)
    counts = {"tests": str(len(m)), "failures": str(failures), "errors": "0"}
    root = ET.Element("testsuites", {"name": SUITE, **counts, "time": f"{result['seconds']:.3f}"})
    suite = ET.SubElement(root, "testsuite", {"name": SUITE, **counts, "skipped": "0",
                                              "time": f"{result['seconds']:.3f}"})
    props = ET.SubElement(suite, "properties")
    for name, value in (("baseline", result["baseline"]["folder"]), ("candidate", result["candidate"]["folder"]),
                        ("alpha", f"{result['alpha']:g}"), ("method", result["method"]),
                        ("shared_questions", str(result["n_shared"]))):
        ET.SubElement(props, "property", {"name": name, "value": value})
    for g in m:
        case = ET.SubElement(suite, "testcase", {"classname": SUITE, "name": g["metric"], "time": "0"})
        line = metric_line(g)
        if not g["passed"]:
            failure = ET.SubElement(case, "failure", {"message": line, "type": "NonInferiorityFailed"})
            failure.text = _details(g, result)
        ET.SubElement(case, "system-out").text = line
    if result["warnings"]:
        ET.SubElement(suite, "system-err").text = "\n".join(f"warning: {w}" for w in result["warnings"])
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _details(g: dict, result: dict) -> str:
    return (f"{result['candidate']['label']} vs {result['baseline']['label']}: mean drop {g['mean_drop']:+.6f}, "
            f"upper bound {g['bound']:+.6f} at one-sided level {g['level']:.6g} (Holm), margin {g['margin']:g}, "
            f"p {g['p']:.6g}, p_adj {g['p_adjusted']:.6g}, alpha {result['alpha']:g}, n {g['n']}")
