"""A Markdown table of retrieval designs run on one question set, each paired against a base.

    python scripts/designs_table.py --reports reports/_designs/held-out --base hybrid --also turn13 turn13 bm25 ...

For each named experiment, its latest run under ``--reports``: MRR, nDCG, span recall and IoU
(where the eval set has spans), passages sent per question (fewer where chunks of one document
leave as one), context characters sent per question (the mean and the largest), milliseconds per
question (question embedding, search and second stage) and LLM calls per question (served from the cache
or not; document summaries, made once per document, are not per question); then MRR against
``--base`` on the same questions (lab.report.stats.paired: the mean per-question delta, its
bootstrap interval, the permutation p), Holm-adjusted across the designs compared with the base;
``--also`` adds the same against a second base in a column of its own. A difference is real when its interval
excludes 0 and its adjusted p is under 0.05, as in `lab compare`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lab.report.compare import load_runs  # noqa: E402
from lab.report.stats import holm, paired  # noqa: E402


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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reports", type=Path, required=True)
    ap.add_argument("--base", required=True)
    ap.add_argument("--also", help="a second base, compared in a column of its own (e.g. turn13)")
    ap.add_argument("names", nargs="+")
    args = ap.parse_args()
    names = [args.base, *[n for n in args.names if n != args.base]]
    if args.also and args.also not in names:
        names.append(args.also)
    runs = load_runs(names, args.reports)
    base, others = runs[0], runs[1:]
    against_base = verdicts(base, others)
    also = next((r for r in runs if r.label == args.also), None)
    against_also = dict(zip([r.label for r in runs if r is not also],
                            verdicts(also, [r for r in runs if r is not also], short=True))) if also else {}
    spans = any(mean(r, "span_recall") is not None for r in runs)
    head = ["design", "MRR", "nDCG"] + (["span recall", "span IoU"] if spans else []) + [
        "passages / q", "context chars (mean / max)", "ms / question", "LLM calls / q",
        f"MRR vs {base.label} (95% CI, p adj.)"] + (
        [f"MRR vs {also.label}"] if also else [])
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for i, r in enumerate(runs):
        cells = [f"`{r.label}`", f"{mean(r, 'mrr'):.4f}", f"{mean(r, 'ndcg'):.4f}"]
        if spans:
            cells += [f"{mean(r, m):.3f}" if mean(r, m) is not None else "-" for m in ("span_recall", "span_iou")]
        chars = r.values("context_chars").values()
        cells += [f"{passages(r):.2f}", f"{mean(r, 'context_chars'):,.0f} / {max(chars):,.0f}",
                  f"{1000 * per_question_s(r):.1f}", f"{llm_calls(r):.3g}"]
        cells.append("(base)" if i == 0 else against_base[i - 1])
        if also:
            cells.append("(base)" if r is also else against_also[r.label])
        print("| " + " | ".join(cells) + " |")
    print(f"\n{len(base.samples)} questions; p adj.: Holm over the {len(others)} designs compared with {base.label}"
          + (f", and over the {len(runs) - 1} compared with {also.label}." if also else "."))
    return 0


if __name__ == "__main__":
    sys.exit(main())
