"""``sweep.html`` / ``optimize.html``: a search's metric per point as an inline SVG chart and a
table, and its held-out check (the chosen point beside the base on questions it was not chosen
on: paired test, optimism) or, without one, the warning that the best point is optimistic.
Also the held-out check's terminal lines. A pure function of ``sweep.json``/``optimize.json``,
old ones (without the held-out keys) included."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lab.metrics import catalog
from lab.paths import write_atomic
from lab.report.html import environment

#: What a search without a held-out split says of its best point (``lab sweep --no-holdout``).
OPTIMISTIC = "best point chosen and scored on the same questions: optimistic"


def point_label(point: dict[str, Any]) -> str:
    """``{"retriever.alpha": 0.25}`` -> ``alpha=0.25`` (the last part of each dial's path)."""
    return ",".join(f"{k.split('.')[-1]}={v}" for k, v in point.items())


def chart(summary: dict, metric: str) -> dict:
    rows = summary["points"]
    values = [r["metrics"].get(metric) for r in rows]
    known = [v for v in values if v is not None]
    top = catalog.top(metric)
    lo = min(known) if known else 0.0
    hi = max(known) if known else top
    pad = max((hi - lo) * 0.15, 0.01 * top)
    lo, hi = max(0.0, lo - pad), min(top, hi + pad)
    width, height, left, bottom = 120 + 70 * len(rows), 220, 50, 170
    pts = []
    for i, (r, v) in enumerate(zip(rows, values)):
        if v is None:
            continue
        x = left + 30 + 70 * i
        y = bottom - (bottom - 30) * (v - lo) / ((hi - lo) or 1)
        pts.append({"x": x, "y": y, "v": v, "label": r["label"], "best": i == summary["best"]})
    return {"metric": metric, "label": catalog.METRICS[metric].label if metric in catalog.METRICS else metric, "width": width, "height": height, "lo": lo,
            "hi": hi, "bottom": bottom, "left": left, "points": pts,
            "path": " ".join(f"{'M' if j == 0 else 'L'}{p['x']:.1f},{p['y']:.1f}" for j, p in enumerate(pts))}


def held_out_view(summary: dict) -> dict | None:
    """The held-out check as the page and the terminal show it; None when there is none (a sweep
    run with ``--no-holdout``, an old sweep, or no point with the metric)."""
    held, best = summary.get("held_out"), summary.get("best")
    if not held or best is None:
        return None
    m = summary["metric"]
    chosen = summary["points"][best]
    dev = held.get("dev") or {}
    dev_best = dev.get("best", chosen["metrics"].get(m))
    held_best = held["best"].get(m)
    optimism = held.get("optimism")
    if optimism is None and dev_best is not None and held_best is not None:  # optimize.json before the check
        optimism = dev_best - held_best
    base_point = held.get("base_point") or {}
    test = held.get("paired")
    return {
        "metric": m, "n_dev": summary.get("n_dev"), "n_held_out": summary.get("n_held_out"), "seed": summary.get("seed"),
        "rows": [{"role": "chosen", "label": chosen["label"], "dev": dev_best, "metrics": held["best"],
                  "run": held.get("best_run")},
                 {"role": "base", "label": summary["experiment"] + (f" ({point_label(base_point)})" if base_point else ""),
                  "dev": dev.get("base"), "metrics": held["base"], "run": held.get("base_run")}],
        "test": test, "optimism": optimism, "margin": held.get("margin") or {},
        "verdict": None if not test else "real" if test["significant"] else "not detectable",
    }


def held_out_lines(summary: dict) -> list[str]:
    """The terminal's lines after the points: the held-out check, or the optimism warning."""
    view = held_out_view(summary)
    if view is None:
        if summary.get("holdout"):
            return [f"no point has {summary['metric']}: nothing to check on the held-out questions"]
        return [f"note: {OPTIMISTIC} (without --no-holdout the best point is checked on held-out questions)"]
    m, t = view["metric"], view["test"]
    width = max(24, *(len(r["label"]) + 2 for r in view["rows"]))
    lines = [f"points on {view['n_dev']} dev questions (stratified, seed {view['seed']}); the chosen point and the "
             f"base on the {view['n_held_out']} held-out questions:",
             f"  {m:<{width}}{'dev':>10}{'held-out':>10}"]
    lines += [f"  {r['label']:<{width}}{catalog.fmt(m, r['dev']):>10}{catalog.fmt(m, r['metrics'].get(m)):>10}"
              f"   {r['role']}" for r in view["rows"]]
    if t and t["n"]:
        p = f"{t['p_permutation']:.4f}"
        lines.append(f"held-out {m}, chosen - base: {catalog.fmt_delta(m, t['delta'])} "
                     f"[{catalog.fmt_delta(m, t['ci'][0])}, {catalog.fmt_delta(m, t['ci'][1])}] n={t['n']}, "
                     f"p(perm)={p}, {t['wins']}/{t['losses']}/{t['ties']} w/l/t: {view['verdict']}")
    lines.append(f"optimism (chosen point's dev - held-out {m}): {catalog.fmt_delta(m, view['optimism'])}")
    if view["margin"].get("dev") is not None:
        lines.append(f"margin over the base: dev {catalog.fmt_delta(m, view['margin']['dev'])}, "
                     f"held-out {catalog.fmt_delta(m, view['margin']['held_out'])}")
    return lines


def render_sweep(summary: dict, out: Path) -> Path:
    rows = summary["points"]
    metrics = [m for m in catalog.names("sweep") if rows and m in rows[0]["metrics"]]
    charts = [chart(summary, m) for m in catalog.names("sweep_chart") if m in metrics]
    held = held_out_view(summary)
    optimistic = held is None and not summary.get("holdout")
    html = environment().get_template("sweep.html").render(s=summary, metrics=metrics, charts=charts, held=held,
                                                           optimistic=OPTIMISTIC if optimistic else None)
    write_atomic(out, html)
    return out
