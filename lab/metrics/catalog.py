"""The metric catalogue: one row per metric, and every table, chart, export, comparison, sweep and
search reads it.

A row says what a metric is called on a page (``label``), which stage produces it (``group``),
how its values look (``kind``), which way is better (``higher_is_better``; None for sizes, which
have no better direction), the default colour ``thresholds`` (green from, amber from), and the
``views`` that show it. Adding a metric is adding a row here and computing it in its stage.

Order matters and is part of what reports look like: :data:`CATALOG` is in the order of the
exports and comparisons (retrieval quality, then sizes, then answers); pages that group metrics
by stage (the run page's cards and per-category table) use :func:`by_group`.
"""

from __future__ import annotations

from dataclasses import dataclass

from lab.errors import ConfigError
from lab.registry import did_you_mean

#: Stages, in the order a run computes them and the run page groups them.
GROUPS = ("retrieval", "spans", "labels", "qrels", "judge", "answer", "ragas")
#: The stages computed from an answer (so from an LLM's reply); the others read retrieval alone.
ANSWER_GROUPS = ("judge", "answer", "ragas")
#: ragas' metrics the lab computes (``ragas.metrics``), with their labels; each is ``ragas_<name>`` here.
RAGAS_METRICS = {"faithfulness": "Faithfulness", "answer_relevancy": "Answer relevancy",
                 "context_precision": "Context precision", "context_recall": "Context recall"}
#: The metric a verb compares, gates or optimises when none is named.
DEFAULT_METRIC = "mrr"

#: Views: "terminal" (`lab run`/`lab show`), "table" (the run page's question table), "chart" (the
#: run page's per-category charts, and the per-category tables of compare.html), "compare" (`lab
#: compare`'s table and tests), "compare_chart" (compare.html's story charts), "movers" (compare.html's
#: movers and per-category charts), "sweep" (sweep/optimize tables), "sweep_chart" (their charts),
#: "runs" (the headline columns of `lab serve`'s runs table).
#: Cards, the run page's per-category table and the exports show every metric a run has.


@dataclass(frozen=True)
class Metric:
    name: str
    label: str
    group: str
    kind: str  # "share" (0-1, 4 decimals), "percent" (0-1 shown as %), "score" (judge 1-5), "ragas" (0-1, 3
    # decimals), "size" (a count)
    higher_is_better: bool | None
    thresholds: tuple[float, float] | None = None
    views: frozenset[str] = frozenset()


def _v(*names: str) -> frozenset[str]:
    return frozenset(names)


#: InsureLLM's dashboard thresholds: green >= 0.9, amber >= 0.75 for shares of 1; green >= 4.5,
#: amber >= 4.0 for the judge's 1-5 scores. A config's ``report.thresholds`` overrides them.
_SHARE, _SCORE = (0.9, 0.75), (4.5, 4.0)

CATALOG: tuple[Metric, ...] = (
    Metric("mrr", "MRR (keywords)", "retrieval", "share", True, _SHARE,
           _v("terminal", "table", "chart", "compare", "compare_chart", "movers", "sweep", "sweep_chart", "runs")),
    Metric("ndcg", "nDCG (keywords)", "retrieval", "share", True, _SHARE,
           _v("terminal", "table", "chart", "compare", "compare_chart", "sweep", "sweep_chart", "runs")),
    Metric("coverage", "Coverage (keywords)", "retrieval", "percent", True, _SHARE,
           _v("terminal", "table", "compare", "compare_chart", "sweep", "sweep_chart")),
    # rank metrics from golden spans and their twins (lab.metrics.spans.span_rank_scores)
    Metric("span_mrr", "MRR (spans)", "spans", "share", True, _SHARE,
           _v("terminal", "table", "chart", "compare", "compare_chart", "sweep", "sweep_chart", "runs")),
    Metric("span_ndcg", "nDCG (spans)", "spans", "share", True, _SHARE, _v("terminal", "table", "compare", "sweep")),
    Metric("span_precision", "Span precision", "spans", "share", True, None, _v("compare")),
    Metric("span_recall", "Span recall", "spans", "share", True, None, _v("terminal", "compare", "runs")),
    Metric("span_recall_any", "Span recall (twins count)", "spans", "share", True, None, _v("compare")),
    Metric("span_iou", "Span IoU", "spans", "share", True, None, _v("terminal", "table", "compare", "sweep")),
    Metric("label_recall", "Recall@k (labels)", "labels", "share", True, None, _v("compare")),
    Metric("label_mrr", "MRR@k (labels)", "labels", "share", True, None, _v("compare")),
    # document-level metrics against graded qrels, trec_eval's definitions, max-passage (lab.metrics.qrels)
    Metric("qrels_ndcg10", "nDCG@10 (qrels)", "qrels", "share", True, None,
           _v("terminal", "table", "chart", "compare", "compare_chart", "sweep", "sweep_chart")),
    Metric("qrels_recall100", "Recall@100 (qrels)", "qrels", "share", True, None, _v("terminal", "compare", "sweep")),
    Metric("qrels_mrr10", "MRR@10 (qrels)", "qrels", "share", True, None, _v("terminal", "table", "compare", "sweep")),
    Metric("qrels_map", "MAP (qrels)", "qrels", "share", True, None, _v("compare", "sweep")),
    Metric("context_chars", "Context chars", "retrieval", "size", None, None, _v("terminal", "compare", "sweep")),
    Metric("accuracy", "Accuracy", "judge", "score", True, _SCORE,
           _v("terminal", "table", "chart", "compare", "compare_chart", "movers", "sweep", "sweep_chart", "runs")),
    Metric("completeness", "Completeness", "judge", "score", True, _SCORE,
           _v("terminal", "table", "chart", "compare", "compare_chart", "sweep")),
    Metric("relevance", "Relevance", "judge", "score", True, _SCORE, _v("terminal", "table", "compare", "sweep")),
    Metric("answer_chars", "Answer chars", "answer", "size", None),
    Metric("sent_context_chars", "Context sent (chars)", "answer", "size", None),
    *(Metric(f"ragas_{name}", f"{label} (ragas)", "ragas", "ragas", True) for name, label in RAGAS_METRICS.items()),
)
METRICS: dict[str, Metric] = {m.name: m for m in CATALOG}


def names(view: str | None = None, group: str | None = None) -> tuple[str, ...]:
    """Metric names in catalogue order, those of ``view`` and/or ``group`` only when given."""
    return tuple(m.name for m in CATALOG if (view is None or view in m.views) and (group is None or m.group == group))


def by_group() -> tuple[str, ...]:
    """Every metric name, grouped by stage in :data:`GROUPS` order (catalogue order within one)."""
    return tuple(m.name for g in GROUPS for m in CATALOG if m.group == g)


def labels() -> dict[str, str]:
    """name -> label, in :func:`by_group` order (what the run page iterates)."""
    return {n: METRICS[n].label for n in by_group()}


def check(name: str, where: str = "--metric") -> str:
    """``name`` if the catalogue has it, else a ConfigError with the closest name and the list."""
    if name in METRICS:
        return name
    raise ConfigError(f"{where}: unknown metric {name!r}",
                      hint=f"{did_you_mean(name, METRICS)}metrics: {', '.join(METRICS)}")


def higher_is_better(name: str) -> bool:
    m = METRICS.get(name)
    return bool(m and m.higher_is_better)


def is_size(name: str) -> bool:
    """A count (characters), shown without decimals and without a better direction."""
    return _kind(name) == "size"


def is_score(name: str) -> bool:
    """The judge's 1-5 scores (charts run to 5, tables show the integer or 'failed')."""
    m = METRICS.get(name)
    return bool(m and m.kind == "score")


def needs_answers(name: str) -> bool:
    """Whether ``name`` is computed from an answer (:data:`ANSWER_GROUPS`): a run without answers
    (retrieval only) has none of its values."""
    return METRICS[name].group in ANSWER_GROUPS


def top(name: str) -> float:
    """The top of a chart's axis: 5 for the judge's scores, 1 for shares."""
    return 5.0 if is_score(name) else 1.0


def default_thresholds() -> dict[str, tuple[float, float]]:
    return {m.name: m.thresholds for m in CATALOG if m.thresholds is not None}


def _kind(name: str) -> str:
    m = METRICS.get(name)
    if m is not None:
        return m.kind
    return "ragas" if name.startswith("ragas_") else "size"


#: How each kind of metric shows a value and a difference.
FORMATS = {
    "score": (lambda v: f"{v:.2f}", lambda d: f"{d:+.2f}"),  # 3.17, +0.25
    "ragas": (lambda v: f"{v:.3f}", lambda d: f"{d:+.4f}"),  # 0.912, +0.0100
    "percent": (lambda v: f"{100 * v:.1f}%", lambda d: f"{100 * d:+.1f} pt"),  # 82.8%, -5.2 pt
    "share": (lambda v: f"{v:.4f}", lambda d: f"{d:+.4f}"),  # 0.7278, +0.0439
    "size": (lambda v: f"{v:,.0f}", lambda d: f"{d:+,.0f}"),  # 2,991, +310
}


def fmt(name: str, value: float | None) -> str:
    """A value as tables show it (see :data:`FORMATS`)."""
    return "-" if value is None else FORMATS[_kind(name)][0](value)


def fmt_delta(name: str, delta: float | None) -> str:
    """A difference as comparisons show it (see :data:`FORMATS`)."""
    return "-" if delta is None else FORMATS[_kind(name)][1](delta)
