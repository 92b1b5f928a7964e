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
"""

from __future__ import annotations

from typing import Any

from lab.metrics import catalog
from lab.metrics.catalog import fmt_delta, higher_is_better
from lab.stats.power import ALPHA, POWER, detectable, mde, mde_text
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
