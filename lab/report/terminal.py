"""The terminal views: a run's summary (``lab run``, ``lab show``), from its files alone."""

from __future__ import annotations

from lab.metrics import catalog
from lab.metrics.catalog import fmt
from lab.report.addressed import addressed_line
from lab.report.html import differs_text, judge_checks_view, pct, values
from lab.stats.paired import bootstrap_ci


def cell(name: str, stat: dict, n: int) -> str:
    """A mean as the terminal tables show it, with its own n where that differs from ``n``, the
    row's question count (a metric n/a for some questions: keyword metrics on a row without
    keywords, span metrics on one without golden spans)."""
    mean = fmt(name, stat["mean"])
    return mean if stat.get("n", n) == n or stat["mean"] is None else f"{mean} (n={stat['n']})"


def summary_lines(results: dict, samples: list[dict], intervals: bool = True) -> list[str]:
    """Overall and per-category means, each with its own n where it differs from the row's
    (:func:`cell`); with ``intervals``, the 95% bootstrap interval of each overall mean on the line
    below it."""
    m = results["metrics"]
    cols = [c for c in catalog.names("terminal") if c in m["overall"]]
    out = [f"{results['name']} run {results['run_id']} ({results['sample']['n_questions']} questions"
           f"{' of ' + str(results['sample']['n_total']) + ', a sample' if results['sample']['is_sample'] else ''}; "
           f"index {'reused' if results['index']['reused'] else 'built'}, {results['index']['texts_embedded']} "
           "texts embedded)"]
    out.append(f"{'category':<14}{'n':>5}" + "".join(f"{c:>17}" for c in cols))
    n = results['sample']['n_questions']
    out.append(f"{'overall':<14}{n:>5}" + "".join(f"{cell(c, m['overall'][c], n):>17}" for c in cols))
    if intervals and samples:
        cells = []
        for c in cols:
            ci = bootstrap_ci(values(samples, c))
            cells.append("-" if ci is None else f"[{fmt(c, ci[0])}, {fmt(c, ci[1])}]")
        out.append(f"{'  95% CI':<19}" + "".join(f"{x:>17}" for x in cells))
    for cat, row in m["by_category"].items():
        out.append(f"{cat:<14}{row['n']:>5}" + "".join(f"{cell(c, row[c], row['n']):>17}" for c in cols))
    judge, calib = results.get("judge"), results.get("calibration")
    if judge and judge["n_failed"]:
        out.append(f"judge: {judge['n_failed']} failed judgements, left out of the means "
                   f"({', '.join(judge['failed_ids'])})")
    if judge and judge.get("n_suspect"):
        out.append(f"judge: {judge['n_suspect']} suspect judgements (text addressed to the evaluator), left out of "
                   f"the means ({', '.join(judge['suspect_ids'])})")
    if calib and calib.get("n_pairs"):
        c = calib["mean"]
        out.append(f"judge calibration: reference-as-answer {c['reference_mean']:.2f}, another question's "
                   f"reference {c['mismatched_mean']:.2f}, separated in {100 * c['separated']:.0f}% of "
                   f"{calib['n_pairs']} questions")
    out += judge_checks_lines(results)
    if addressed := addressed_line(samples):
        out.append(addressed)
    for role, u in (results.get("llm_usage") or {}).items():
        cost = f", ${u['cost_usd']:.4f}" if u.get("cost_usd") else ""
        out.append(f"{role} LLM: {u['calls']} calls, {u['cached']} from cache, {u['prompt_tokens']} prompt + "
                   f"{u['completion_tokens']} output tokens, {u['seconds']:.1f} s{cost}")
    out.append(f"time: {results['timings'].get('total_s', 0):.1f} s")
    return out


def judge_checks_lines(results: dict) -> list[str]:
    """The judge's perturbation checks in two lines: the goals met, each goal's share (with the
    goal beside those missed); then how often completeness and relevance differ, and what was
    skipped. No lines for a run without checks."""
    v = judge_checks_view(results)
    if v is None:
        return []
    parts, prev = [], None
    for g in v["goals"]:
        # "paraphrase keeps accuracy 94%, completeness 81%"; "partial scores above wrong fact on accuracy" apart
        head = (g["measure"] if g["measure"] in ("sensitivity", "above") else "keeps", g["kind"])
        shown = ("not measured" if g["share"] is None
                 else pct(g["share"]) + (f" (goal {pct(g['goal'])})" if g["met"] is False else ""))
        parts.append(f"{g['dimension'] if head == prev else g['label']} {shown}")
        prev = head
    unmeasured = f" ({v['n_unmeasured']} not measured)" if v["n_unmeasured"] else ""
    out = [f"judge checks ({v['method']}, {v['n']} questions): {v['n_met']} of {len(v['goals'])} goals met"
           f"{unmeasured}; " + ", ".join(parts)]
    second = [differs_text(v["differs"], ge=">=")] if v["differs"] else []
    skipped = [f"{s['label']} {s['n_skipped']} ({s['skipped_why']})" for s in v["sections"] if s["n_skipped"]]
    if skipped:
        second.append("skipped: " + ", ".join(skipped))
    if second:
        out.append("  " + "; ".join(second))
    return out


def all_failed(results: dict, samples: list[dict]) -> str | None:
    """What a written run failed to measure at all: every call to its target failed, every answer
    failed, or every judgement did (with the first error), else None. Such a run is kept, but its
    metrics of that stage say nothing, and ``lab run`` says so and exits with code 3."""
    for section, key, what in (("target", "target", "call to the target"), ("answers", "answer", "answer"),
                               ("judge", "judgement", "judgement")):
        counts = results.get(section) or {}
        n = counts.get("n", counts.get("n_judged", 0) + counts.get("n_failed", 0))
        failed = counts.get("failed", counts.get("n_failed", 0))
        if n and failed == n:
            first = next((s[key].get("error") for s in samples if (s.get(key) or {}).get("error")), None)
            return f"every {what} failed ({failed} of {n}){f': {first}' if first else ''}"
    return None
