"""Paired statistics of adjacent runs, read together: a test per metric and category, the p-values
adjusted for how many tests are read at once, and what each comparison could have detected.

For each pair of adjacent runs, every metric both have is compared overall, and every quality
metric (one with a better direction) also per category, with :func:`lab.stats.paired.paired`
(mean delta, bootstrap interval, permutation p, sign test) and
:func:`lab.stats.power.detectable` (the minimum detectable effect at 80% power).

Multiple comparisons (quality metrics; sizes such as context chars say what changed, not whether
it is better, and keep their unadjusted p):

- **p adj.** (Holm, :func:`lab.stats.paired.holm`) within each *family* of a pair: the overall
  rows of its quality metrics form one family, and each quality metric's category rows another.
  Within a family, the chance of calling any true "no difference" real stays at most 5%.
- **q** (Benjamini-Hochberg, :func:`lab.stats.paired.benjamini_hochberg`) over every test of a
  quality metric on the page, all pairs together: the expected share of false ones among the
  changes with q < 0.05 stays at most 5%. Shown beside p adj., not used for the verdict.
- **Verdict**: a change is real when its 95% interval excludes 0 and its p adj. < 0.05
  (a size: its permutation p < 0.05); otherwise "no detectable difference", with the smallest
  difference the comparison could have detected at alpha 0.05 (``mde``). Adjustment makes that
  larger: ``mde_adjusted`` is the figure at alpha / (family size), the strictest threshold Holm
  applies, so an upper bound for the adjusted verdict's detectable difference.

What moved, read from those rows (compare.html's top, its charts and movers, and the terminal):

- :func:`decision`: three lines: the differences found real (quality metrics and their
  categories, after adjustment), how many comparisons found none, and how many questions would
  settle the largest undecided difference (:func:`lab.stats.power.needed_n` of its standardised
  difference, at alpha / its family's size, Holm's strictest step).
- :func:`standardized`: a comparison's mean delta over the sd of its deltas (Cohen's d_z), what
  makes "moved most" comparable across metrics of different scales.
- :func:`charted`: the metrics charted (those found real, else the largest standardised
  differences, and always the runs' chosen metrics); :func:`mover_metrics`: a pair's movers'
  metrics (the one that :func:`moved_most`, and the chosen ones).
"""

from __future__ import annotations

import math
from typing import Any, Iterable

from lab.metrics import catalog
from lab.metrics.catalog import fmt_delta, higher_is_better
from lab.stats.power import ALPHA, POWER, detectable, mde, mde_text, needed_n
from lab.stats.paired import benjamini_hochberg, holm, paired, paired_deltas


def direction(metric: str, delta: float | None) -> str:
    """The colour of a change: "up" or "down" for a quality metric, "flat" for none or a size."""
    if delta is None or abs(delta) < 1e-12 or not higher_is_better(metric):
        return "flat"
    return "up" if delta > 0 else "down"


def _stats(a: Any, b: Any, metric: str, category: str | None = None) -> dict:
    va, vb = a.values(metric, category), b.values(metric, category)
    x = detectable(paired_deltas(va, vb))
    return {**paired(va, vb).as_dict(), "sd": x["sd"], "mde": x["mde"], "mde_why": x["mde_why"],
            "p_adjusted": None, "q": None, "family": None, "family_size": None, "mde_adjusted": None}


def pair_rows(a: Any, b: Any, metrics: list[str], categories: list[str]) -> list[dict]:
    """Runs ``a`` and ``b`` (objects with ``results`` and ``values(metric, category)``) compared
    on each of ``metrics`` both have: ``{"metric", "overall", "categories"}``, the categories
    (quality metrics only) where both scored a question. Not yet adjusted: see :func:`adjust`."""
    rows = []
    for m in metrics:
        if m not in a.results["metrics"]["overall"] or m not in b.results["metrics"]["overall"]:
            continue
        cats = [] if not higher_is_better(m) else [  # sizes: the overall row is enough
            {"category": c, **_stats(a, b, m, c)} for c in categories]
        rows.append({"metric": m, "overall": _stats(a, b, m), "categories": [c for c in cats if c["n"]]})
    return rows


def _span(sizes: list[int]) -> str:
    return "-" if not sizes else str(min(sizes)) if min(sizes) == max(sizes) else f"{min(sizes)} to {max(sizes)}"


def adjust(pairs: list[dict], alpha: float = ALPHA) -> dict:
    """Adjust every pair's rows (``pairs``: ``[{"b": label, "rows": pair_rows(...)}]``) in place:
    ``p_adjusted``, ``q``, ``family``, ``family_size``, ``mde_adjusted``, and ``real``, ``verdict``,
    ``dir``, ``detectable`` and ``detectable_adjusted`` (the MDEs as the page writes them)
    on every row. Returns the method: family sizes, test count and :func:`method_text`."""
    tests, overall_sizes, category_sizes = [], [], []
    for p in pairs:
        quality = [r for r in p["rows"] if higher_is_better(r["metric"])]
        families = [("overall", [r["overall"] for r in quality if r["overall"]["n"]])]
        families += [(f"{r['metric']} by category", r["categories"]) for r in quality]
        for name, family in families:
            if not family:
                continue
            (overall_sizes if name == "overall" else category_sizes).append(len(family))
            for s, adj in zip(family, holm([s["p_permutation"] for s in family])):
                s.update(p_adjusted=adj, family=name, family_size=len(family),
                         mde_adjusted=mde(s["n"], s["sd"], alpha / len(family)))
            tests += family
    for s, q in zip(tests, benjamini_hochberg([s["p_permutation"] for s in tests])):
        s["q"] = q
    for p in pairs:
        for r in p["rows"]:
            for s in [r["overall"]] + r["categories"]:
                s.update(_verdict(r["metric"], s, p["b"], alpha))
    method = {"alpha": alpha, "power": POWER, "n_tests": len(tests), "overall_sizes": overall_sizes,
              "category_sizes": category_sizes}
    return {**method, "text": method_text(method)}


def method_text(method: dict) -> str:
    """The adjustment in words, for the page and the terminal."""
    if not method["n_tests"]:
        return "no quality metric compared: nothing adjusted"
    alpha = f"{method['alpha']:g}"
    fams = []
    if method["overall_sizes"]:
        fams.append(f"the overall rows of the {_span(method['overall_sizes'])} quality metrics")
    if method["category_sizes"]:
        fams.append(f"the {_span(method['category_sizes'])} categories of each metric")
    return (f"p adj.: Holm across {' and across '.join(fams)}, per pair of runs; q: Benjamini-Hochberg over all "
            f"{method['n_tests']} tests of quality metrics here. A change is real when its 95% CI excludes 0 and "
            f"p adj. < {alpha}; sizes are not adjusted. Could detect: the smallest mean difference detected with "
            f"{method['power']:.0%} power at two-sided alpha {alpha} (paired t-test, the deltas' sd); adjusted: the "
            "same at alpha / the number of tests adjusted together, Holm's strictest step")


def _verdict(metric: str, s: dict, b_label: str, alpha: float) -> dict:
    adjusted = higher_is_better(metric)
    p = s["p_adjusted"] if adjusted else s["p_permutation"]
    real = bool(s["n"] and s["ci"] is not None and p is not None and p < alpha and (s["ci"][0] > 0 or s["ci"][1] < 0))
    if not s["n"]:
        text = "no shared questions"
    elif real:
        better = (s["delta"] > 0) == higher_is_better(metric)
        text = (f"{b_label} {'better' if better else 'worse'}" if adjusted
                else f"{b_label} {'higher' if s['delta'] > 0 else 'lower'}")
    else:
        note = f"; p < {alpha:g} before adjustment" if adjusted and s["significant"] else ""
        text = f"no detectable difference ({mde_text(metric, s)}{note})"
    return {"real": real, "verdict": text, "dir": direction(metric, s["delta"]) if real else "flat",
            "detectable": _diff(metric, s["mde"]), "detectable_adjusted": _diff(metric, s["mde_adjusted"])}


def _diff(metric: str, value: float | None) -> str | None:
    return None if value is None else fmt_delta(metric, value).lstrip("+")


def pval(p: float | None) -> str:
    if p is None:
        return "-"
    return "<0.0001" if p < 0.0001 else f"{p:.4f}"


def lines(pairs: list[dict], method: dict) -> list[str]:
    """The terminal's paired statistics: one line per quality metric of ``lab compare``'s table
    and adjacent pair, then the method."""
    out = []
    for p in pairs:
        rows = {r["metric"]: r for r in p["rows"]}
        for m in catalog.names("compare"):
            s = (rows.get(m) or {}).get("overall")
            if not higher_is_better(m) or not s or not s["n"]:
                continue
            after = (f", >= {_diff(m, s['mde_adjusted'])} after adjustment"
                     if s["mde"] is not None and s["mde_adjusted"] is not None and s["family_size"] > 1 else "")
            verdict = "real" if s["real"] else f"not detectable ({mde_text(m, s, ge='>=')}{after})"
            out.append(f"{p['a']} -> {p['b']} {m}: delta {fmt_delta(m, s['delta'])} "
                       f"[{fmt_delta(m, s['ci'][0])}, {fmt_delta(m, s['ci'][1])}] n={s['n']}, "
                       f"p(perm)={s['p_permutation']:.4f}, {s['wins']}/{s['losses']}/{s['ties']} w/l/t, "
                       f"p(sign)={s['p_sign']:.4f}, p adj={pval(s['p_adjusted'])}, q={pval(s['q'])}: {verdict}")
        found = [f"{r['metric']} {c['category']} {fmt_delta(r['metric'], c['delta'])} (p adj {pval(c['p_adjusted'])})"
                 for r in p["rows"] for c in r["categories"] if c["real"]]
        if any(r["categories"] for r in p["rows"]):
            out.append(f"{p['a']} -> {p['b']} by category, real after adjustment: {', '.join(found) or 'none'}")
    if out:
        out.append(method["text"])
    return out


# ---------------------------------------------------------------------------------------------
# What moved: the decision summary, the metrics charted, the movers' metric

#: When no difference is found real, compare.html charts this many metrics: the largest
#: standardised differences.
N_UNDECIDED_CHARTS = 3


def standardized(s: dict) -> float:
    """|mean delta| / sd of the per-question deltas (Cohen's d_z): how far a comparison moved in
    units of its own noise, comparable across metrics. 0 when nothing moved (or no question is
    shared); inf when every question moved by the same non-zero amount (sd 0)."""
    if not s.get("n") or s.get("delta") is None or abs(s["delta"]) < 1e-12:
        return 0.0
    return abs(s["delta"]) / s["sd"] if s.get("sd") else math.inf


def _quality(pairs: list[dict]) -> list[tuple[dict, dict]]:
    """(pair, row) of every quality metric compared on shared questions, in the pages' order."""
    return [(p, r) for p in pairs for r in p["rows"] if higher_is_better(r["metric"]) and r["overall"]["n"]]


def chosen_metrics(results: Iterable[dict]) -> list[str]:
    """The metrics the runs themselves name: their stored configs' ``gate.metrics`` (what the
    experiment is held to), in catalogue order; none for a run without a gate section."""
    named = {m for r in results for m in ((((r.get("config") or {}).get("gate") or {}).get("metrics")) or {})}
    return [m for m in catalog.names() if m in named]


def charted(pairs: list[dict], chosen: Iterable[str] = (), unmoved: Iterable[str] = ()) -> tuple[list[str], str]:
    """The quality metrics compare.html charts, in the pairs' row order, and why in words: each
    found real in a pair (overall or in a category); when none is, the :data:`N_UNDECIDED_CHARTS`
    with the largest :func:`standardized` difference (over the pairs; ties in row order); always
    the ``chosen`` ones (:func:`chosen_metrics`); and, when nothing moved and nothing is chosen,
    ``unmoved`` (the catalogue's defaults)."""
    rows = _quality(pairs)
    order = list(dict.fromkeys(r["metric"] for _, r in rows))
    found = {r["metric"] for _, r in rows if any(s["real"] for s in [r["overall"]] + r["categories"])}
    why = "the metrics with a detectable difference (overall or in a category)"
    if not found:
        d: dict[str, float] = {}
        for _, r in rows:
            d[r["metric"]] = max(d.get(r["metric"], 0.0), standardized(r["overall"]))
        found = set(sorted((m for m in order if d[m] > 0), key=lambda m: -d[m])[:N_UNDECIDED_CHARTS])
        why = (f"no difference is detectable: the {len(found)} metric{'s' if len(found) > 1 else ''} that moved most "
               "(mean delta in sd of the per-question deltas)") if found else "nothing moved"
    chosen = [m for m in chosen if m in order]
    if chosen:
        why += f"; the runs' chosen metric{'s' if len(chosen) > 1 else ''} (gate.metrics): " + ", ".join(
            catalog.METRICS[m].label for m in chosen)
    if not found and not chosen:
        return list(unmoved), "nothing moved: the default metrics"
    return [m for m in order if m in found or m in chosen], why


def moved_most(pair: dict) -> str | None:
    """The pair's quality metric that moved most: the largest :func:`standardized` difference among
    those found real overall, else among all (ties: the first in row order); None when none moved."""
    rows = [r for _, r in _quality([pair])]
    real = [r for r in rows if r["overall"]["real"]]
    best = max(real or rows, key=lambda r: standardized(r["overall"]), default=None)
    return best["metric"] if best is not None and standardized(best["overall"]) > 0 else None


def mover_metrics(pair: dict, chosen: Iterable[str] = (), unmoved: Iterable[str] = ()) -> dict[str, str]:
    """The metrics whose movers the pair lists, each with why: the one that :func:`moved_most`, the
    ``chosen`` ones (:func:`chosen_metrics`), and ``unmoved`` (the catalogue's) when neither is."""
    most = moved_most(pair)
    why = {m: "the runs' chosen metric (gate.metrics)" for m in chosen if m != most}
    if most:
        d = standardized(next(r["overall"] for r in pair["rows"] if r["metric"] == most))
        why = {most: "moved most: " + (f"{d:.2f} sd of its per-question deltas" if d < math.inf
                                         else "every question by the same amount"), **why}
    return why or {m: "no metric moved" for m in unmoved}


def _and(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


#: A category holding this share of a pair's questions moves with the overall rows: its deltas are not listed.
ALMOST_ALL = 0.9


def _found_text(p: dict, items: list[tuple[str, str | None, dict]]) -> str:
    """ "B beats A on MRR (keywords) by +0.2500 [+0.1333, +0.3667], ..." for one pair and direction:
    the overall rows, then the categories' with their intervals where the metric did not move
    overall; a category that moved with metrics listed overall gets its deltas alone ("and in
    direct_fact by +0.2708 and +0.2708": a category holding most of the rows repeats the overall
    line, nine metrics long, otherwise), and one holding :data:`ALMOST_ALL` of them is said to
    move on each ("and in direct_fact on each (43 of the 45 questions)": its deltas are the overall's)."""
    better = (items[0][2]["delta"] > 0) == higher_is_better(items[0][0])
    overall = [m for m, c, _ in items if c is None]
    full = [x for x in items if x[1] is None] + [x for x in items if x[1] is not None and x[0] not in overall]
    parts = [f"{catalog.METRICS[m].label}{f' in {c}' if c else ''} by {fmt_delta(m, s['delta'])} "
             f"[{fmt_delta(m, s['ci'][0])}, {fmt_delta(m, s['ci'][1])}]" for m, c, s in full]
    echoed: dict[str, list[tuple[str, dict]]] = {}
    for m, c, s in items:
        if c is not None and m in overall:
            echoed.setdefault(c, []).append((m, s))
    total = max((s.get("n", 0) for _, c, s in items if c is None), default=0)
    for c, ms in echoed.items():
        held = max(s.get("n", 0) for _, s in ms)
        if [m for m, _ in ms] == overall and total and held >= ALMOST_ALL * total:
            parts.append(f"in {c} on each ({held} of the {total} questions)")
        elif [m for m, _ in ms] == overall:  # every metric listed overall: its deltas alone, in that order
            parts.append(f"in {c} by " + _and([fmt_delta(m, s["delta"]) for m, s in ms]))
        else:
            parts.append(f"in {c} on " + _and([f"{catalog.METRICS[m].label} by {fmt_delta(m, s['delta'])}"
                                               for m, s in ms]))
    return f"{p['b']} {'beats' if better else 'trails'} {p['a']} on {_and(parts)}"


def decision(pairs: list[dict], method: dict, power: float = POWER) -> list[dict]:
    """compare.html's three-line summary (``[{"key", "head", "text"}]``, also the terminal's),
    from adjusted pairs (:func:`adjust`):

    1. ``found``: every quality-metric comparison found real after adjustment, overall and per
       category, with its sign, mean delta and 95% interval, grouped by pair and direction;
    2. ``not_found``: how many overall comparisons (named) and category comparisons are not;
    3. ``settle``: the undecided overall comparison with the largest :func:`standardized`
       difference ``d`` (ties: the first), and the questions a paired t-test needs to detect ``d``
       with ``power`` at alpha / its family's size (:func:`lab.stats.power.needed_n`): the
       number that would settle it, were the true difference the one observed.

    Sizes (context chars) are not adjusted and not counted."""
    found, open_rows, open_names = [], [], []
    n_overall = n_cats = open_cats = 0
    for p in pairs:
        groups: dict[bool, list] = {}
        names = []
        for r in p["rows"]:
            m = r["metric"]
            if not higher_is_better(m):
                continue
            for s in [r["overall"]] + r["categories"]:
                if not s["n"]:
                    continue
                overall = s is r["overall"]
                if s["real"]:
                    better = (s["delta"] > 0) == higher_is_better(m)
                    groups.setdefault(better, []).append((m, None if overall else s["category"], s))
                elif overall:
                    open_rows.append((p, r))
                    names.append(catalog.METRICS[m].label)
                else:
                    open_cats += 1
                n_overall, n_cats = n_overall + overall, n_cats + (not overall)
        found += [_found_text(p, groups[better]) for better in (True, False) if better in groups]
        if names:
            open_names.append((f"{p['b']} vs {p['a']}: " if len(pairs) > 1 else "") + ", ".join(names))
    not_found = (f"{len(open_rows)} of {n_overall} {'metric comparisons' if len(pairs) > 1 else 'metrics'}"
                 + (f" ({'; '.join(open_names)})" if open_names else "")
                 + (f"; {open_cats} of {n_cats} category comparisons" if n_cats else ""))
    return [{"key": "found", "head": "Detectable",
             "text": "; ".join(found) or "nothing: no quality metric or category differs after adjustment"},
            {"key": "not_found", "head": "Not detectable", "text": not_found},
            {"key": "settle", "head": "To settle", "text": _settle_text(open_rows, method["alpha"], power)}]


def _settle_text(open_rows: list[tuple[dict, dict]], alpha: float, power: float) -> str:
    if not open_rows:
        return "nothing undecided: every metric compared differs detectably"
    plannable = [(p, r) for p, r in open_rows if 0 < standardized(r["overall"]) < math.inf]
    if not plannable:
        return "the undecided metrics did not move, so no number of questions would settle them"
    p, r = max(plannable, key=lambda pr: standardized(pr[1]["overall"]))
    m, s = r["metric"], r["overall"]
    d, size = standardized(s), s["family_size"] or 1
    level = f"{alpha:g}" + (f" / {size} (Holm's strictest step)" if size > 1 else "")
    return (f"about {needed_n(d, alpha / size, power):,} questions for the largest undecided difference, "
            f"{catalog.METRICS[m].label} {fmt_delta(m, s['delta'])} ({p['b']} vs {p['a']}, {s['n']} questions now, "
            f"{d:.2f} sd of its per-question deltas), at {power:.0%} power and alpha {level}, were the true "
            "difference the one observed")
