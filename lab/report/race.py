"""``lab race``'s page and terminal lines, from the race folder's ``race.json`` and its two runs:
the comparison page of the two runs with each metric's confidence sequence plotted (the interval
narrowing question by question, the stopping point marked), and the decision in words."""

from __future__ import annotations

import json
from pathlib import Path

from lab.errors import DataError
from lab.metrics import catalog
from lab.metrics.catalog import fmt_delta

PLOT_W, PLOT_H, PAD = 560, 180, 40
REASONS = {"difference": "every metric's confidence sequence excluded 0",
           "futile": "every metric's confidence sequence ruled out a difference as large as the effect that matters",
           "decided": "every metric decided (a difference or futile)",
           "exhausted": "the questions ran out before a decision: the fixed-n paired test decides",
           "budget": "--max was reached before a decision: rerun with a larger --max to continue the same order"}


def load(folder: Path) -> dict:
    path = Path(folder) / "race.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(f"{path}: no such file", hint="pass a race folder: reports/_race/A--B/<run-id>") from None


def plots(race: dict) -> list[dict]:
    """Per metric: the sequence's band, the running mean and 0, in SVG coordinates."""
    out = []
    for p in race["paths"]:
        n = len(p["lower"])
        if not n:
            continue
        span = 4.0 if catalog.is_score(p["metric"]) else 1.0

        def x(t: int) -> float:
            return PAD + (PLOT_W - PAD - 10) * (t - 1) / max(n - 1, 1)

        def y(v: float) -> float:
            v = max(-span, min(span, v))
            return 10 + (PLOT_H - 30) * (span - v) / (2 * span)

        upper = [(x(t + 1), y(v)) for t, v in enumerate(p["upper"])]
        lower = [(x(t + 1), y(v)) for t, v in enumerate(p["lower"])]
        band = " ".join(f"{a:.1f},{b:.1f}" for a, b in upper + lower[::-1])
        mean = " ".join(f"{x(t + 1):.1f},{y(v):.1f}" for t, v in enumerate(p["mean"]))
        out.append({"metric": p["metric"], "label": catalog.METRICS[p["metric"]].label, "n": n, "band": band,
                    "mean": mean, "zero": y(0.0), "stop_x": x(n), "w": PLOT_W, "h": PLOT_H, "pad": PAD,
                    "top": f"{span:+g}", "bottom": f"{-span:+g}", "last": {"mean": p["mean"][-1],
                                                                          "lower": p["lower"][-1],
                                                                          "upper": p["upper"][-1]}})
    return out


def lines(race: dict) -> list[str]:
    """The decision in words, for the terminal."""
    a, b = race["a"], race["b"]
    out = [f"{b} against {a}: stopped after {race['stopped_at']} of {race['n_total']} questions "
           f"({race['reason']}: {REASONS[race['reason']]})"]
    for m, v in race["verdicts"].items():
        if v.get("n"):
            out.append(f"  {m}: {v['verdict']}, {b} - {a} {fmt_delta(m, v['mean'])}, "
                       f"{1 - race['alpha']:.0%} confidence sequence [{fmt_delta(m, v['lower'])}, "
                       f"{fmt_delta(m, v['upper'])}] over {v['n']} questions")
        else:
            out.append(f"  {m}: no values")
    saved = race["questions_saved"]
    out.append(f"  {saved} questions not run ({race['llm_calls_saved']:,} LLM calls saved at this race's calls per "
               f"question); {race['wall_s']:.1f} s")
    return out


def render_race(folder: Path) -> list[str]:
    """Write the race folder's ``compare.html`` (the two runs, the sequence plotted) and return the
    terminal lines: the decision, and the fixed-n paired test where the questions ran out."""
    from lab.report.compare import load_runs, paired_lines, render_compare

    race = load(folder)
    runs = load_runs([race["runs"][race["a"]], race["runs"][race["b"]]], Path(folder).parent)
    page = render_compare(runs, Path(folder), force=True, race={**race, "plots": plots(race),
                                                                 "reason_text": REASONS[race["reason"]]})
    out = lines(race)
    if race["reason"] in ("exhausted", "budget"):
        out += ["  the fixed-n paired test over those questions:"] + ["    " + x for x in paired_lines(runs)]
    out.append(f"race: {Path(folder) / 'race.json'}")
    out.append(f"comparison: {page}")
    return out
