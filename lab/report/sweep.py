"""``sweep.html``: a sweep's metric per point as an inline SVG chart and a table."""

from __future__ import annotations

from pathlib import Path

from lab.metrics import catalog
from lab.paths import write_atomic
from lab.report.html import environment


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


def render_sweep(summary: dict, out: Path) -> Path:
    rows = summary["points"]
    metrics = [m for m in catalog.names("sweep") if rows and m in rows[0]["metrics"]]
    charts = [chart(summary, m) for m in catalog.names("sweep_chart") if m in metrics]
    html = environment().get_template("sweep.html").render(s=summary, metrics=metrics, charts=charts)
    write_atomic(out, html)
    return out
