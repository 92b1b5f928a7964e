"""A Markdown table of retrieval designs run on one question set, each paired against a base.

    python scripts/designs_table.py --reports reports/_designs/held-out --base hybrid turn13 bm25 headers ...

For each named experiment, its latest run under ``--reports``: MRR, nDCG, span recall and IoU
(where the eval set has spans), context characters sent per question, milliseconds per question
(question embedding, search and second stage) and LLM calls per question (served from the cache or not); then MRR against ``--base`` on the same
questions (lab.report.stats.paired: the mean per-question delta, its bootstrap interval, the
permutation p), Holm-adjusted across the designs compared with the base. A difference is real
when its interval excludes 0 and its adjusted p is under 0.05, as in `lab compare`.
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


def per_question_s(run) -> float:
    t = run.results.get("timings", {})
    n = max(len(run.samples), 1)
    return (t.get("embed_queries_s", 0) + t.get("retrieve_s", 0) + t.get("rerank_s", 0)) / n


def llm_calls(run) -> float:
    usage = run.results.get("llm_usage") or {}
    calls = sum(v.get("calls", 0) + v.get("cached", 0) for v in usage.values() if isinstance(v, dict))
    return calls / max(len(run.samples), 1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reports", type=Path, required=True)
    ap.add_argument("--base", required=True)
    ap.add_argument("names", nargs="+")
    args = ap.parse_args()
    runs = load_runs([args.base, *[n for n in args.names if n != args.base]], args.reports)
    base, others = runs[0], runs[1:]
    tests = [paired(base.values("mrr"), r.values("mrr")) for r in others]
    adj = holm([t.p_permutation for t in tests])
    spans = any(mean(r, "span_recall") is not None for r in runs)
    head = ["design", "MRR", "nDCG"] + (["span recall", "span IoU"] if spans else []) + [
        "context chars", "ms / question", "LLM calls / q", f"MRR vs {base.label} (95% CI, p adj.)"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for i, r in enumerate(runs):
        cells = [f"`{r.label}`", f"{mean(r, 'mrr'):.4f}", f"{mean(r, 'ndcg'):.4f}"]
        if spans:
            cells += [f"{mean(r, m):.3f}" if mean(r, m) is not None else "-" for m in ("span_recall", "span_iou")]
        cells += [f"{mean(r, 'context_chars'):,.0f}", f"{1000 * per_question_s(r):.1f}", f"{llm_calls(r):.3g}"]
        if i == 0:
            cells.append("(base)")
        else:
            t, p = tests[i - 1], adj[i - 1]
            real = t.ci[0] > 0 or t.ci[1] < 0
            verdict = ("**better**" if t.delta > 0 else "**worse**") if real and p < 0.05 else "no detectable difference"
            cells.append(f"{t.delta:+.4f} [{t.ci[0]:+.3f}, {t.ci[1]:+.3f}], p adj. {p:.3f}: {verdict}")
        print("| " + " | ".join(cells) + " |")
    print(f"\n{len(base.samples)} questions; p adj.: Holm over the {len(others)} designs compared with {base.label}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
