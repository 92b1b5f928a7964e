"""Aggregation of per-question metrics: overall and per category."""

from __future__ import annotations

from collections import defaultdict
from typing import Iterable, Sequence

#: Categories with fewer questions than this get a warning in reports.
SMALL_CATEGORY = 10


def mean_table(rows: Sequence[dict], metrics: Iterable[str]) -> dict:
    """{metric: {"mean": m, "n": n}} over rows that have a number for that metric."""
    out = {}
    for name in metrics:
        values = [r[name] for r in rows if isinstance(r.get(name), (int, float))]
        out[name] = {"mean": sum(values) / len(values) if values else None, "n": len(values)}
    return out


def by_category(rows: Sequence[dict], metrics: Sequence[str], category_order: Sequence[str]) -> dict:
    """Per category (in ``category_order``, then any others), the :func:`mean_table`."""
    groups: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        groups[row["category"]].append(row)
    order = [c for c in category_order if c in groups] + sorted(set(groups) - set(category_order))
    return {c: {"n": len(groups[c]), **mean_table(groups[c], metrics)} for c in order}
