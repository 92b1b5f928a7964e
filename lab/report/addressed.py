"""Which questions were answered from a passage that speaks to an AI assistant or an evaluator:
the run page's banner and marks and ``lab show``'s line, from ``samples.jsonl``'s context alone
(:func:`lab.metrics.addressed.addressed_passages`; older runs render the same way)."""

from __future__ import annotations

from lab.metrics.addressed import addressed_passages

#: Questions named in the terminal's line before "and N more".
SHOWN = 8


def addressed_view(samples: list[dict]) -> dict:
    """``{"n", "ids", "by_id": {id: [{"number", "source", "reasons"}]}}``: the questions whose
    context held such a passage."""
    by_id = {s["id"]: found for s in samples if (found := addressed_passages(s.get("context")))}
    return {"n": len(by_id), "ids": list(by_id), "by_id": by_id}


def addressed_line(samples: list[dict]) -> str | None:
    """The terminal's line, or None when no passage of the run speaks to an assistant or evaluator."""
    v = addressed_view(samples)
    if not v["n"]:
        return None
    named = [f"{i} ([{p[0]['number']}] {p[0]['source']})" for i, p in list(v["by_id"].items())[:SHOWN]]
    more = f" and {v['n'] - SHOWN} more" if v["n"] > SHOWN else ""
    return (f"context: {v['n']} questions answered from a passage addressed to an AI assistant or evaluator "
            f"(a planted instruction may have steered the answer): {', '.join(named)}{more}")
