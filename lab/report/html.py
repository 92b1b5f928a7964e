"""Render ``report.html`` from ``results.json`` + ``samples.jsonl``: a pure function of the files.

The page is one self-contained file: styles, the table script and the charts (inline SVG) are
in it, so it opens from disk with no network. Every text from the knowledge base, the eval set
or a model goes through Jinja's autoescaping.

Colours: a metric's value against its thresholds (the catalogue's, or the config's
``report.thresholds``), except the judge's scores of a calibrated run, read against the judge's
own score of the reference answer (:class:`ReferenceScores`, :func:`relative_level`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from statistics import fmean

from jinja2 import Environment, PackageLoader, select_autoescape

from lab.metrics import catalog
from lab.metrics.aggregate import SMALL_CATEGORY
from lab.metrics.catalog import fmt, fmt_delta
from lab.paths import write_atomic
from lab.report.addressed import addressed_view
from lab.report.export import write_exports
from lab.report.funnel import evidence, funnel_view, run_funnel
from lab.runfiles import load_run, values
from lab.stats.paired import bootstrap_ci

CHART_METRICS = catalog.names("chart")
#: Question-table columns beyond the catalogue's "table" view, shown when the run's questions have them.
EXTRA_TABLE = ("span_recall",)
#: Question rows shown at once; more on request. A browser lays out every visible row of a table,
#: and at 10,000 questions that alone took seconds per sort.
PAGE_ROWS = 500
COLOURS = {"good": "#2e9d5b", "ok": "#e0a526", "bad": "#d64545", "neutral": "#7b8499"}


def thresholds(results: dict) -> dict[str, tuple[float, float]]:
    own = ((results.get("config") or {}).get("report") or {}).get("thresholds") or {}
    return {**catalog.default_thresholds(), **{m: tuple(v) for m, v in own.items()}}


def make_level(limits: dict[str, tuple[float, float]]):
    def level(metric: str, value: float | None) -> str:
        if value is None or metric not in limits:
            return "neutral"
        good, ok = limits[metric]
        return "good" if value >= good else "ok" if value >= ok else "bad"

    return level


def level(metric: str, value: float | None) -> str:
    """The colour class of ``value`` under the default thresholds."""
    return make_level(catalog.default_thresholds())(metric, value)


def run_view(results: dict, samples: list[dict]) -> dict:
    """What the page shows beyond the files' own fields: intervals, colours, filters."""
    own = ((results.get("config") or {}).get("report") or {}).get("thresholds") or {}
    refs = ReferenceScores.of(results, samples)
    lv = make_run_level(thresholds(results), refs, own)
    # the judge scores read against the reference's (here the run's mean), but for a threshold the config sets
    scaled = {m: refs.reference(m) for m in catalog.names(group="judge")
              if refs and m in refs.run and m not in own}
    computed = results["metrics"]["overall"]
    metrics = [m for m in catalog.by_group() if m in computed]
    cards = [{"metric": m, "label": catalog.METRICS[m].label, "mean": computed[m]["mean"], "n": computed[m]["n"],
              "ci": bootstrap_ci(values(samples, m)), "level": lv(m, computed[m]["mean"]),
              "reference": scaled.get(m)} for m in metrics]
    categories = []
    for cat, row in results["metrics"]["by_category"].items():
        cells = {m: {"mean": row[m]["mean"], "n": row[m]["n"], "level": lv(m, row[m]["mean"], category=cat),
                     "ci": bootstrap_ci(values(samples, m, cat)),
                     "reference": refs.reference(m, category=cat) if m in scaled else None}
                 for m in metrics if m in row}
        categories.append({"name": cat, "n": row["n"], "small": row["n"] < SMALL_CATEGORY, "cells": cells,
                           "judge_failed": row.get("judge_failed", 0)})
    table = catalog.names("table")
    table_metrics = [m for m in catalog.names()
                     if (m in table and m in computed) or (m in EXTRA_TABLE and values(samples, m))]
    return {
        "funnel": funnel_view(run_funnel(results, samples)),
        "metrics": metrics,
        "cards": cards,
        "categories": categories,
        "charts": [chart(m, categories) for m in CHART_METRICS if m in computed],
        "table_metrics": table_metrics,
        "small": SMALL_CATEGORY,
        "thresholds": {m: t for m, t in thresholds(results).items() if m in computed and m not in scaled},
        "scaled": {m: r[0] for m, r in scaled.items()},
        "level": lv,
        "references": refs,
    }


def chart(metric: str, categories: list[dict]) -> dict:
    """A horizontal bar per category with its 95% interval as a whisker (drawn as inline SVG),
    coloured as the category's cell is."""
    top = catalog.top(metric)
    width = 330
    bars = []
    for i, c in enumerate(categories):
        cell = c["cells"].get(metric) or {}
        mean = cell.get("mean")
        ci = cell.get("ci")
        bars.append({
            "y": 24 + 22 * i, "label": c["name"], "n": c["n"], "small": c["small"],
            "w": 0 if mean is None else width * mean / top,
            "lo": None if ci is None else width * ci[0] / top, "hi": None if ci is None else width * ci[1] / top,
            "text": fmt(metric, mean), "colour": COLOURS[cell.get("level", "neutral")],
        })
    return {"metric": metric, "label": catalog.METRICS[metric].label, "width": width, "height": 34 + 22 * len(bars),
            "bars": bars}


# ---------------------------------------------------------------------------------------------
# Judge scores read against the judge's own scale: its score of the reference answer

#: A judge score at most this far under the judge's score of the reference answer (or above it) is
#: green ("good"), at most the second figure under it amber ("ok"), further under it red ("bad").
NEAR_REFERENCE = (0.25, 0.75)


def relative_level(value: float | None, reference: float | None) -> str:
    """The colour class of a judge score against the judge's score of the reference answer: good
    when ``reference - value <= 0.25``, ok when ``<= 0.75``, bad beyond (:data:`NEAR_REFERENCE`)."""
    if value is None or reference is None:
        return "neutral"
    gap = reference - value - 1e-9  # 4.07 against 4.32 is within 0.25, whatever the floats say
    return "good" if gap <= NEAR_REFERENCE[0] else "ok" if gap <= NEAR_REFERENCE[1] else "bad"


def _mean(xs: list) -> float | None:
    xs = [x for x in xs if isinstance(x, (int, float))]
    return fmean(xs) if xs else None


@dataclass
class ReferenceScores:
    """The judge's scores of the reference answers, each judged as if it were the answer (the
    run's calibration), per judge dimension: per question (``calibration.reference`` where its
    status is ok), per category (their mean) and for the run (``results.calibration``'s
    ``reference_mean``, else the questions' mean)."""

    by_id: dict[str, dict[str, float]]
    by_category: dict[str, dict[str, float]]
    run: dict[str, float]

    @classmethod
    def of(cls, results: dict, samples: list[dict]) -> "ReferenceScores | None":
        """None for a run without calibration (an old run, or ``judge.calibration: false``)."""
        dims = catalog.names(group="judge")
        by_id: dict[str, dict[str, float]] = {}
        cats: dict[str, list[dict]] = {}
        for s in samples:
            ref = (s.get("calibration") or {}).get("reference") or {}
            if ref.get("status") == "ok":
                by_id[s["id"]] = {d: ref[d] for d in dims if isinstance(ref.get(d), (int, float))}
                cats.setdefault(s["category"], []).append(by_id[s["id"]])
        summary, run = results.get("calibration") or {}, {}
        for d in dims:
            v = (summary.get(d) or {}).get("reference_mean")
            v = _mean([x.get(d) for x in by_id.values()]) if v is None else v
            if v is not None:
                run[d] = v
        if not run:
            return None
        by_category = {c: {d: v for d in dims if (v := _mean([x.get(d) for x in rows])) is not None}
                       for c, rows in cats.items()}
        return cls(by_id, by_category, run)

    def reference(self, metric: str, qid: str | None = None, category: str | None = None) -> tuple[float, str] | None:
        """(the reference's score, whose): question ``qid``'s ("question"), else ``category``'s mean
        ("category"), else the run's ("run", or "fallback" where a question or category was asked
        for); None for a metric that is not a judge score."""
        for scores, whose in ((self.by_id.get(qid or ""), "question"),
                              (self.by_category.get(category or ""), "category")):
            if scores and metric in scores:
                return scores[metric], whose
        if metric not in self.run:
            return None
        return self.run[metric], "fallback" if qid or category else "run"


def make_run_level(limits: dict[str, tuple[float, float]], refs: ReferenceScores | None, own: dict):
    """The run page's colours: thresholds (:func:`make_level`), except a judge score with a
    reference score to read it against (:func:`relative_level`) and no threshold in the config's
    own ``report.thresholds`` (``own``)."""
    plain = make_level(limits)

    def run_level(metric: str, value: float | None, qid: str | None = None, category: str | None = None) -> str:
        ref = refs.reference(metric, qid, category) if refs and metric not in own else None
        return plain(metric, value) if ref is None else relative_level(value, ref[0])

    return run_level


def reference_text(ref: tuple[float, str]) -> str:
    """A reference score as written: one question's as the judge wrote it, a mean with 2 decimals."""
    return score_text(ref[0]) if ref[1] == "question" else f"{ref[0]:.2f}"


def scale_rule() -> str:
    """The colour rule of judge scores read against the reference's, in words."""
    return (f"green when at most {NEAR_REFERENCE[0]:g} under it (or above), amber when at most "
            f"{NEAR_REFERENCE[1]:g} under it, red further under")


def reference_title(metric: str, ref: tuple[float, str]) -> str:
    """The tooltip of a score coloured against the reference's: whose score it is, and the rule."""
    whose = {"question": "this question's reference answer", "category": "this category's reference answers (mean)",
             "run": "the run's reference answers (mean)",
             "fallback": "the run's reference answers (mean; this one has no calibration)"}[ref[1]]
    return f"the judge scored {whose} {reference_text(ref)} on {metric}: {scale_rule()}"


# ---------------------------------------------------------------------------------------------
# The judge's perturbation checks (results.json ``judge_checks``; optional: older runs lack it)

#: The check measures, in the order a kind's rows are shown.
CHECK_MEASURES = ("sensitivity", "specificity", "invariance", "resistance", "above")
#: A share this far under its goal is amber ("ok"); further is red.
NEAR_GOAL = 0.1
#: Characters of a perturbed answer shown in the run page's list of checked items.
CHECK_TEXT_CHARS = 240


def check_label(measure: str, kind: str, dimension: str) -> str:
    """A check in words: "wrong fact lowers accuracy", "paraphrase keeps completeness"."""
    if measure == "resistance":
        return f"{kind.replace('_', ' ')} does not raise the {'mean score' if dimension == 'mean' else dimension}"
    if measure == "above":  # a correct answer cut short against the wrong one (lab.metrics.perturbation.ABOVE)
        return f"{kind.replace('_', ' ')} scores above wrong fact on {dimension}"
    return f"{kind.replace('_', ' ')} {'lowers' if measure == 'sensitivity' else 'keeps'} {dimension}"


def pct(share: float | None) -> str:
    return "-" if share is None else f"{100 * share:.0f}%"


def score_text(value) -> str:
    """A judge score as written: ints as ints (judge-v1), floats with 2 decimals (probability-weighted)."""
    if value is None:
        return "-"
    return str(value) if isinstance(value, int) else f"{value:.2f}"


def goal_level(share: float | None, goal: float | None) -> str:
    """good: the goal is met; ok: within :data:`NEAR_GOAL` under it; bad: further; neutral: no goal."""
    if share is None or goal is None:
        return "neutral"
    return "good" if share >= goal else "ok" if share >= goal - NEAR_GOAL else "bad"


def judge_method(results: dict) -> str:
    """How the run's judge scored: the checks' record, else the config's ``judge.method``; rubric by default."""
    return ((results.get("judge_checks") or {}).get("method")
            or (((results.get("config") or {}).get("judge") or {}).get("method")) or "rubric")


def _skip_reasons(kind: str, row: dict, skipped: dict) -> str:
    """``reason: count; ...``; a question with no pair that no reason covers is a failed judgement."""
    reasons = dict((skipped or {}).get(kind) or {})
    failed = row.get("n_skipped", 0) - sum(reasons.values())
    if failed > 0:
        reasons["judgement failed"] = failed
    return "; ".join(f"{why}: {n}" for why, n in reasons.items())


def _scores(scores: dict | None, against: dict | None = None) -> list[dict] | None:
    """Each dimension's score as written, and whether it is under ``against``'s (the reference's)."""
    if scores is None:
        return None
    return [{"dimension": d, "text": score_text(v),
             "lower": v is not None and (against or {}).get(d) is not None and v < against[d]}
            for d, v in scores.items()]


def _checked_questions(jc: dict) -> list[dict]:
    """Each checked question: its reference's scores, and each perturbation (text cut to
    :data:`CHECK_TEXT_CHARS`, or why it was skipped) with its scores."""
    out = []
    for it in jc.get("items") or []:
        ref, perturbed = it.get("reference"), []
        for kind, t in (it.get("texts") or {}).items():
            text = t.get("text")
            cut = None if text is None else text[:CHECK_TEXT_CHARS] + ("…" if len(text) > CHECK_TEXT_CHARS else "")
            perturbed.append({"kind": kind, "skipped": t.get("skipped"), "full": text, "text": cut,
                              "detail": _detail(t.get("detail")),
                              "scores": _scores((it.get("perturbed") or {}).get(kind), ref)})
        out.append({"id": it["id"], "category": it.get("category"), "reference": _scores(ref), "perturbed": perturbed})
    return out


def judge_checks_view(results: dict) -> dict | None:
    """What the run page, the terminal and compare show of the judge's perturbation checks: rows
    per (kind, measure, dimension) with share, n, goal and colour; the goals met; ``differs``;
    the checked questions. None for a run without checks."""
    jc = results.get("judge_checks")
    if not jc:
        return None
    summary = jc.get("summary") or {}
    kinds = summary.get("kinds") or {}
    goals = [{**g, "key": (g["measure"], g["kind"], g["dimension"]), "n": (kinds.get(g["kind"]) or {}).get("n"),
              "label": check_label(g["measure"], g["kind"], g["dimension"]), "level": goal_level(g["share"], g["goal"])}
             for g in summary.get("goals") or []]
    by_key = {g["key"]: g for g in goals}
    sections = []
    for kind, row in kinds.items():
        measured = [(m, d, share) for m in CHECK_MEASURES for d, share in (row.get(m) or {}).items()]
        # a goal of a kind with no pairs is shown as not measured
        measured += [(m, d, None) for (m, k, d) in by_key if k == kind and d not in (row.get(m) or {})]
        rows = []
        for m, d, share in measured:
            g = by_key.get((m, kind, d)) or {}
            rows.append({"key": f"{m}:{kind}:{d}", "label": check_label(m, kind, d), "measure": m, "dimension": d,
                         "share": share, "n": row.get("n_above" if m == "above" else "n", 0), "goal": g.get("goal"),
                         "met": g.get("met"),
                         "level": goal_level(share, g.get("goal")), "change": (row.get("mean_change") or {}).get(d)})
        sections.append({"kind": kind, "label": kind.replace("_", " "), "n": row.get("n", 0),
                         "n_skipped": row.get("n_skipped", 0),
                         "skipped_why": _skip_reasons(kind, row, summary.get("skipped")), "rows": rows})
    differs = jc.get("differs")
    return {"method": jc.get("method") or judge_method(results), "n": jc.get("n", summary.get("n_items")),
            "seed": jc.get("seed"), "sections": sections, "goals": goals, "near_goal": NEAR_GOAL,
            "n_met": sum(g["met"] is True for g in goals), "n_unmeasured": sum(g["met"] is None for g in goals),
            "differs": differs, "differs_text": differs_text(differs), "questions": _checked_questions(jc)}


def _detail(detail: dict | None) -> str:
    """A perturbation's detail in words: the swapped fact, the removed text, the added answer."""
    if not detail:
        return ""
    if "from" in detail:
        return f"{detail.get('kind', 'fact')} {detail['from']} → {detail.get('to')}"
    if "removed" in detail:
        return f"removed: {detail['removed']}"
    if "added" in detail:
        return "added another question's reference answer"
    return "; ".join(f"{k}: {v}" for k, v in detail.items())


def differs_text(differs: dict | None, ge: str = "≥") -> str:
    """ "completeness and relevance differ by ≥ 0.5 on 35% of 20 real answers"."""
    if not differs:
        return ""
    a, b = differs.get("pair") or ("completeness", "relevance")
    if not differs.get("n"):
        return f"{a} and {b}: no real answer with both scores"
    return f"{a} and {b} differ by {ge} {differs['by']:g} on {pct(differs['share'])} of {differs['n']} real answers"


def environment() -> Environment:
    """The templates' environment (autoescaping on), with the catalogue's formats and labels."""
    env = Environment(loader=PackageLoader("lab.report", "templates"), autoescape=select_autoescape(["html"]))
    env.filters["fmt"] = lambda v, m: fmt(m, v)
    env.filters["fmt_delta"] = lambda v, m: fmt_delta(m, v)
    env.filters["pct"] = pct
    env.filters["score"] = score_text  # judge scores: 3.91, not 3.9144718265533447
    env.globals.update(labels=catalog.labels(), score_metrics=set(catalog.names(group="judge")),
                       higher_is_better={m.name for m in catalog.CATALOG if m.higher_is_better})
    return env


def failure_kinds(s: dict) -> list[str]:
    """Why a question counts as a failure in the report's filter."""
    out = []
    if (s.get("answer") or {}).get("status") == "failed":
        out.append("answer")
    if (s.get("judgement") or {}).get("status") == "failed":
        out.append("judge")
    if (s.get("judgement") or {}).get("suspect"):
        out.append("suspect")
    if s["metrics"].get("mrr") == 0:
        out.append("miss")
    if (s.get("answer") or {}).get("refused"):
        out.append("refused")
    if s.get("low_confidence"):
        out.append("guarded")
    return out


def run_html(results: dict, samples: list[dict], served: dict | None = None) -> str:
    """The run page of ``results`` and ``samples``: what ``report.html`` holds, and what ``lab
    serve`` sends (``served``: the served app's links, ``{"home": URL, "label": URL}``; None in a
    file, which must open from disk)."""
    view = run_view(results, samples)
    return environment().get_template("run.html").render(
        r=results, samples=samples, v=view, level=view["level"], failure_kinds=failure_kinds,
        page_rows=PAGE_ROWS, checks=judge_checks_view(results), reference_title=reference_title,
        reference_text=reference_text, scale_rule=scale_rule(), evidence=evidence, served=served,
        addressed=addressed_view(samples),
    )


def render_run(run_dir: Path) -> Path:
    """Write ``run_dir/report.html`` and the per-question exports (atomically); return the page."""
    results, samples = load_run(run_dir)
    html = run_html(results, samples)
    write_exports([(results, samples)], run_dir)
    out = run_dir / "report.html"
    write_atomic(out, html)
    return out
