"""A Markdown table of retrieval designs run on one question set, each paired against a base
(``lab compare NAME ... --designs-table --base NAME [--also NAME]``).

For each run: MRR, nDCG, span recall and IoU (where the eval set has spans), passages sent per
question (fewer where chunks of one document leave as one), context characters sent per question
(the mean and the largest), milliseconds per question (question embedding, search and second
stage) and LLM calls per question (served from the cache or not; document summaries, made once
per document, are not per question); then MRR against the base on the same questions
(:func:`lab.stats.paired.paired`: the mean per-question delta, its bootstrap interval, the
permutation p), Holm-adjusted across the designs compared with the base; ``also`` adds the same
against a second base in a column of its own. A difference is real when its interval excludes 0
and its adjusted p is under 0.05, as in ``lab compare``.
"""

from __future__ import annotations

from typing import Sequence

from lab.report.compare import Run
from lab.stats.paired import holm, paired


def mean(run, metric: str) -> float | None:
    vals = list(run.values(metric).values())
    return sum(vals) / len(vals) if vals else None


def passages(run) -> float:
    """Passages sent per question: the ranked list the keyword metrics read."""
    return sum(len(s["retrieved"]) for s in run.samples) / max(len(run.samples), 1)


def per_question_s(run) -> float:
    t = run.results.get("timings", {})
    n = max(len(run.samples), 1)
    return (t.get("embed_queries_s", 0) + t.get("retrieve_s", 0) + t.get("rerank_s", 0)) / n


def llm_calls(run) -> float:
    """LLM calls per question, made or served from the cache; document summaries are made once
    per document while the index is built, not per question, and are left out."""
    usage = run.results.get("llm_usage") or {}
    calls = sum(v.get("calls", 0) + v.get("cached", 0) for role, v in usage.items()
                if isinstance(v, dict) and role != "summary")
    return calls / max(len(run.samples), 1)


def verdicts(base, others, short: bool = False) -> list[str]:
    """Each of ``others`` against ``base`` on MRR, Holm-adjusted across them (``short``: without
    the interval, "no difference" for no detectable one)."""
    tests = [paired(base.values("mrr"), r.values("mrr")) for r in others]
    out = []
    for t, p in zip(tests, holm([t.p_permutation for t in tests])):
        real = t.ci[0] > 0 or t.ci[1] < 0
        verdict = ("**better**" if t.delta > 0 else "**worse**") if real and p < 0.05 else "no detectable difference"
        if short:
            out.append(f"{t.delta:+.3f}, p adj. {p:.3f}: {verdict.replace(' detectable', '')}")
        else:
            out.append(f"{t.delta:+.4f} [{t.ci[0]:+.3f}, {t.ci[1]:+.3f}], p adj. {p:.3f}: {verdict}")
    return out


def designs_table(runs: Sequence[Run], also: str | None = None) -> str:
    """The table of ``runs`` (the first is the base) in Markdown, with its footnote."""
    runs = list(runs)
    base, others = runs[0], runs[1:]
    against_base = verdicts(base, others)
    second = next((r for r in runs if r.label == also), None)
    against_also = dict(zip([r.label for r in runs if r is not second],
                            verdicts(second, [r for r in runs if r is not second], short=True))) if second else {}
    spans = any(mean(r, "span_recall") is not None for r in runs)
    head = ["design", "MRR", "nDCG"] + (["span recall", "span IoU"] if spans else []) + [
        "passages / q", "context chars (mean / max)", "ms / question", "LLM calls / q",
        f"MRR vs {base.label} (95% CI, p adj.)"] + ([f"MRR vs {second.label}"] if second else [])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for i, r in enumerate(runs):
        cells = [f"`{r.label}`", f"{mean(r, 'mrr'):.4f}", f"{mean(r, 'ndcg'):.4f}"]
        if spans:
            cells += [f"{mean(r, m):.3f}" if mean(r, m) is not None else "-" for m in ("span_recall", "span_iou")]
        chars = r.values("context_chars").values()
        cells += [f"{passages(r):.2f}", f"{mean(r, 'context_chars'):,.0f} / {max(chars):,.0f}",
                  f"{1000 * per_question_s(r):.1f}", f"{llm_calls(r):.3g}"]
        cells.append("(base)" if i == 0 else against_base[i - 1])
        if second:
            cells.append("(base)" if r is second else against_also[r.label])
        lines.append("| " + " | ".join(cells) + " |")
    lines.append(f"\n{len(base.samples)} questions; p adj.: Holm over the {len(others)} designs compared with "
                 f"{base.label}" + (f", and over the {len(runs) - 1} compared with {second.label}." if second else "."))
    return "\n".join(lines) + "\n"
