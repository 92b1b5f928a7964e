"""Compare runs from their files alone: metrics side by side, and what makes them incomparable.

- :func:`warnings` names every difference that makes a delta misleading: another eval set or
  sample, another metric k, another judge (model, prompt or parameters) for the answer scores,
  or the same experiment name run with a different resolved config.
- :func:`table` is the terminal view; :func:`render_compare` writes ``compare.html`` (what moved
  in three lines, the story, per-category tables, paired statistics of adjacent runs,
  per-question movers) and the per-question exports. Nothing here loads a model.
- The charts and movers follow what moved (:func:`lab.report.pairs.charted`,
  :func:`lab.report.pairs.mover_metrics`): the metrics found real, else those that moved most, and
  the runs' own chosen metrics; the catalogue's ``compare_chart`` and ``movers`` views when
  nothing moved at all.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from lab.errors import DataError
from lab.metrics import catalog
from lab.metrics.catalog import fmt, higher_is_better
from lab.evidence.text import fold
from lab.paths import check_output, inside, write_atomic
from lab.report.export import FILES as EXPORT_FILES, write_exports
from lab.report.html import NEAR_GOAL, environment, judge_checks_view, judge_method
from lab.report.latest import choose_run
from lab.report.pairs import (adjust, charted, chosen_metrics, decision, direction, mover_metrics, pair_rows,
                              pval)
from lab.report.pairs import lines as pair_lines
from lab.runfiles import load_run
from lab.report.funnel import blind_groups, funnel_view, run_funnel
from lab.report.funnel import pair as funnel_pair
from lab.stats.paired import bootstrap_ci


def _judge_identity(r: dict) -> tuple | None:
    j = (r.get("models") or {}).get("judge")
    if not j:
        return None
    return (j["backend"], j["model"], j.get("fingerprint"), j["prompt_version"], j.get("prompt_sha256"),
            j["temperature"], j.get("max_tokens"), judge_method(r))


def _judge_name(r: dict, method: bool = True) -> str | None:
    """"model (prompt version, method)"; the method left out where it is the default, rubric."""
    j = (r.get("models") or {}).get("judge")
    if not j:
        return None
    m = judge_method(r)
    return f"{j['model']} ({j['prompt_version']}{', ' + m if method or m != 'rubric' else ''})"


def warnings(runs: list[dict]) -> list[str]:
    """Reasons the runs' figures are not comparable (empty when they are)."""
    out = []

    def differ(get) -> bool:
        return len({json.dumps(get(r), sort_keys=True) for r in runs}) > 1

    if differ(lambda r: r["data"]["eval_sha256"]):
        out.append("different eval sets: " + ", ".join(f"{r['name']} {r['data']['eval_sha256'][:12]}" for r in runs))
    if differ(lambda r: (r["sample"]["n_questions"], r["sample"].get("limit"), r["sample"].get("seed"))):
        out.append("different questions (sample size or seed): " + ", ".join(
            f"{r['name']} {r['sample']['n_questions']} of {r['sample']['n_total']}" for r in runs))
    if differ(lambda r: r["metrics"]["k"]):
        out.append("different metric k: " + ", ".join(f"{r['name']} k={r['metrics']['k']}" for r in runs))
    judged = [r for r in runs if _judge_identity(r)]
    if len({_judge_identity(r) for r in judged}) > 1:
        out.append("judged by different judges, so answer scores are not comparable: " + ", ".join(
            f"{r['name']} {_judge_name(r, method=False)}" for r in judged))
    by_name: dict[str, set] = {}
    for r in runs:
        by_name.setdefault(r["name"], set()).add(r["config_fingerprint"])
    for name, prints in by_name.items():
        if len(prints) > 1:
            out.append(f"{name} was run with {len(prints)} different resolved configs: a changed config "
                       "should have been a new experiment file")
    return out


def table(runs: list[dict]) -> list[str]:
    """Overall metrics side by side, with the delta of each run against the first, and a mean's
    own n where it differs from its run's question count (a metric n/a for some questions)."""
    names = [f"{r['name']}@{r['run_id'][-6:]}" if sum(x["name"] == r["name"] for x in runs) > 1 else r["name"]
             for r in runs]
    metrics = [m for m in catalog.names("compare") if any(m in r["metrics"]["overall"] for r in runs)]
    rows = []
    for m in metrics:
        cells = []
        base = runs[0]["metrics"]["overall"].get(m, {}).get("mean")
        for i, r in enumerate(runs):
            stat = r["metrics"]["overall"].get(m, {})
            v = stat.get("mean")
            size = catalog.is_size(m)
            cell = "-" if v is None else (f"{v:,.0f}" if size else f"{v:.4f}")
            if i and v is not None and base is not None:
                d = v - base
                cell += f" ({d:+,.0f})" if size else f" ({d:+.4f})"
                if higher_is_better(m) and d:
                    cell += " ▲" if d > 0 else " ▼"
            if v is not None and stat.get("n", r["sample"]["n_questions"]) != r["sample"]["n_questions"]:
                cell += f" n={stat['n']}"
            cells.append(cell)
        rows.append((m, cells))
    width = max([24] + [len(c) + 2 for _, cells in rows for c in cells])
    lines = [f"{'metric':<16}" + "".join(f"{n:>{width}}" for n in names)]
    return lines + [f"{m:<16}" + "".join(f"{c:>{width}}" for c in cells) for m, cells in rows]


def paired_lines(runs: list[Run]) -> list[str]:
    """The terminal's paired statistics: one line per quality metric and adjacent pair (adjusted
    as on the page: see :mod:`lab.report.pairs`), the categories found real, and the method;
    then the page's three-line summary (:func:`lab.report.pairs.decision`)."""
    pairs, method = paired_view(runs)
    return pair_lines(pairs, method) + [f"{x['head']}: {x['text']}" for x in decision(pairs, method)]


# ---------------------------------------------------------------------------------------------
# The HTML comparison

PALETTE = ("#4c6ef5", "#e8590c", "#2b8a3e", "#ae3ec9", "#1098ad", "#f08c00", "#c2255c", "#5c940d")
#: The movers' metrics when no metric moved (and the runs choose none): the catalogue's "movers".
MOVER_METRICS = catalog.names("movers")
N_MOVERS = 5
#: Per-question values each mover's side shows beside its own metric, when the question has them.
SIDE_METRICS = ("span_recall",)


@dataclass
class Run:
    folder: Path
    results: dict
    samples: list[dict]
    label: str = ""
    by_id: dict = field(default_factory=dict)
    # (the runs' ids, pairs, method) of the list this run heads: see paired_view
    paired: tuple | None = field(default=None, repr=False, compare=False)
    #: which run an experiment NAME stood for, when not simply its newest (lab.report.latest)
    note: str | None = None

    def __post_init__(self) -> None:
        self.by_id = {s["id"]: s for s in self.samples}

    def values(self, metric: str, category: str | None = None) -> dict[str, float]:
        return {s["id"]: s["metrics"][metric] for s in self.samples
                if isinstance(s["metrics"].get(metric), (int, float))
                and (category is None or s["category"] == category)}


def load_runs(refs: list[str], reports_root: Path) -> list[Run]:
    """The runs ``refs`` name: run folders, or experiment NAMEs, each its latest full run
    (:func:`lab.report.latest.choose_run`; ``Run.note`` says when a NAME stood for another run)."""
    runs = []
    for ref in refs:
        chosen = choose_run(ref, reports_root)
        results, samples = load_run(chosen.folder)
        runs.append(Run(chosen.folder, results, samples, note=chosen.note))
    return labelled(runs)


def labelled(runs: list[Run]) -> list[Run]:
    """``runs``, each labelled by its experiment name, with its run id where a name comes twice."""
    for r in runs:
        twice = sum(x.results["name"] == r.results["name"] for x in runs) > 1
        r.label = f"{r.results['name']}@{r.results['run_id']}" if twice else r.results["name"]
    return runs


def _arrow(delta: float | None) -> str:
    if delta is None or abs(delta) < 1e-12:
        return "="
    return "▲" if delta > 0 else "▼"


def _present(runs: list[Run]) -> list[str]:
    return [m for m in catalog.by_group() if any(m in r.results["metrics"]["overall"] for r in runs)]


def _categories(runs: list[Run]) -> list[str]:
    out: list[str] = []
    for r in runs:
        out += [c for c in r.results["metrics"]["by_category"] if c not in out]
    return out


def paired_view(runs: list[Run]) -> tuple[list[dict], dict]:
    """Each adjacent pair's paired statistics, adjusted together (:mod:`lab.report.pairs`):
    ``[{"a", "b", "rows"}]`` and the method. Computed once per list of runs."""
    key = tuple(id(r) for r in runs)  # the terminal lines and the page share one computation
    if runs[0].paired is None or runs[0].paired[0] != key:
        present, categories = _present(runs), _categories(runs)
        pairs = [{"a": a.label, "b": b.label, "rows": pair_rows(a, b, present, categories)}
                 for a, b in zip(runs, runs[1:])]
        runs[0].paired = (key, pairs, adjust(pairs))
    return runs[0].paired[1], runs[0].paired[2]


def compare_view(runs: list[Run]) -> dict:
    """Everything ``compare.html`` shows, computed from the runs' files."""
    present = _present(runs)
    story = []
    for m in present:
        base = runs[0].results["metrics"]["overall"].get(m, {}).get("mean")
        cells = []
        for i, r in enumerate(runs):
            cell = r.results["metrics"]["overall"].get(m)
            mean = None if cell is None else cell["mean"]
            delta = None if i == 0 or mean is None or base is None else mean - base
            cells.append({"mean": mean, "n": None if cell is None else cell["n"],
                          "ci": bootstrap_ci(list(r.values(m).values())) if cell else None,
                          "delta": delta, "dir": direction(m, delta), "arrow": _arrow(delta)})
        story.append({"metric": m, "cells": cells})

    categories = _categories(runs)
    cat_metrics = [m for m in catalog.names("table") if m in present]
    per_category = []
    for m in cat_metrics:
        rows = []
        for cat in categories:
            cells, base = [], None
            for i, r in enumerate(runs):
                row = r.results["metrics"]["by_category"].get(cat) or {}
                mean = (row.get(m) or {}).get("mean")
                if i == 0:
                    base = mean
                delta = None if i == 0 or mean is None or base is None else mean - base
                cells.append({"mean": mean, "n": (row.get(m) or {}).get("n"), "delta": delta,
                              "dir": direction(m, delta), "arrow": _arrow(delta)})
            rows.append({"category": cat, "n": max((c["n"] or 0) for c in cells), "cells": cells})
        per_category.append({"metric": m, "rows": rows})

    pairs, method = paired_view(runs)
    chosen = chosen_metrics(r.results for r in runs)
    for p, (a, b) in zip(pairs, zip(runs, runs[1:])):
        p["movers"] = movers(a, b, mover_metrics(p, chosen, [m for m in MOVER_METRICS if m in present]))
    shown, why = charted(pairs, chosen, [m for m in catalog.names("compare_chart") if m in present])
    funnels = [(r.label, funnel_view(run_funnel(r.results, r.samples))) for r in runs]
    any_gold = any(f["n"] for _, f in funnels)
    return {
        "funnels": funnels if any_gold else [],
        "funnel_blind": blind_groups(funnels),
        "funnel_pairs": [funnel_pair(a.label, a.samples, b.label, b.samples, fa["stages"], fb["stages"])
                         for (a, (_, fa)), (b, (_, fb)) in zip(zip(runs, funnels), zip(runs[1:], funnels[1:]))]
        if any_gold else [],
        "runs": runs,
        "decision": decision(pairs, method),
        "story": story,
        "categories": categories,
        "per_category": per_category,
        "pairs": pairs,
        "method": method,
        "charts": [_story_chart(m, story, runs) for m in shown],
        "charted": why,
        "category_charts": [_category_chart(m, categories, runs) for m in shown],
        "warnings": warnings([r.results for r in runs]),
        "judge_checks": judge_checks_compare(runs),
        "colours": {r.label: PALETTE[i % len(PALETTE)] for i, r in enumerate(runs)},
    }


def judge_checks_compare(runs: list[Run]) -> dict | None:
    """Each run's judge checks side by side: every goal's share (None for a run without checks),
    how often completeness and relevance differ, and whether the judge changed (model, prompt
    version or method), in which case each column is its own judge's figures. None when no run
    has checks."""
    views = [judge_checks_view(r.results) for r in runs]
    if not any(views):
        return None
    first: dict[tuple, dict] = {}
    for v in views:
        for g in (v or {}).get("goals", []):
            first.setdefault(g["key"], g)
    rows = [{"key": ":".join(key), "label": g["label"], "goal": g["goal"],
             "cells": [next((x for x in v["goals"] if x["key"] == key), None) if v else None for v in views]}
            for key, g in first.items()]
    differs = next((v["differs"] for v in views if v and v["differs"]), None) or {}
    judged = [r.results for r in runs if (r.results.get("models") or {}).get("judge")]
    changed = len({(r["models"]["judge"]["model"], r["models"]["judge"]["prompt_version"], judge_method(r))
                   for r in judged}) > 1
    return {"rows": rows, "changed": changed, "pair": differs.get("pair") or ["completeness", "relevance"],
            "by": differs.get("by", 0.5), "near_goal": NEAR_GOAL,
            "runs": [{"label": r.label, "judge": _judge_name(r.results), "checks": v} for r, v in zip(runs, views)]}


def _chunk_view(chunk: dict, keywords: list[str]) -> dict:
    text = chunk.get("text") or ""
    low = fold(text, "case")
    return {**chunk, "keywords_in": [k for k in keywords if fold(k, "case") in low], "snippet": text[:600],
            "cut": len(text) > 600}


def movers(a: Run, b: Run, metrics: dict[str, str]) -> list[dict]:
    """Per metric of ``metrics`` (metric -> why it is shown), the questions that gained and lost
    most from A to B, with what each retrieved."""
    out = []
    for m, why in metrics.items():
        va, vb = a.values(m), b.values(m)
        deltas = sorted(((vb[q] - va[q], q) for q in va if q in vb), key=lambda t: (t[0], t[1]))
        if not deltas:
            continue

        def side(run: Run, q: str) -> dict:
            s = run.by_id[q]
            return {"value": s["metrics"].get(m), "keyword_ranks": s.get("keyword_ranks") or {},
                    "also": {x: s["metrics"][x] for x in SIDE_METRICS
                             if x != m and isinstance(s["metrics"].get(x), (int, float))},
                    "retrieved": [_chunk_view(c, s.get("keywords") or []) for c in s.get("retrieved") or []],
                    "answer": (s.get("answer") or {}).get("text"), "judgement": s.get("judgement")}

        def item(d: float, q: str) -> dict:
            s = b.by_id[q]
            return {"id": q, "question": s["question"], "category": s["category"], "delta": d,
                    "reference_answer": s.get("reference_answer"), "a": side(a, q), "b": side(b, q)}

        gained = [item(d, q) for d, q in sorted(deltas, key=lambda t: (-t[0], t[1])) if d > 0][:N_MOVERS]
        lost = [item(d, q) for d, q in deltas if d < 0][:N_MOVERS]
        out.append({"metric": m, "why": why, "gained": gained, "lost": lost,
                    "n_up": sum(d > 0 for d, _ in deltas), "n_down": sum(d < 0 for d, _ in deltas),
                    "n_same": sum(d == 0 for d, _ in deltas)})
    return out


def _story_chart(metric: str, story: list[dict], runs: list[Run]) -> dict:
    top = catalog.top(metric)
    row = next(s for s in story if s["metric"] == metric)
    height = 150
    bars = []
    for i, (r, c) in enumerate(zip(runs, row["cells"])):
        if c["mean"] is None:
            continue
        ci = c["ci"] or (c["mean"], c["mean"])
        bars.append({"x": 40 + 70 * i, "h": height * c["mean"] / top, "lo": height * ci[0] / top,
                     "hi": height * ci[1] / top, "label": r.label, "text": fmt(metric, c["mean"]),
                     "colour": PALETTE[i % len(PALETTE)]})
    return {"metric": metric, "label": catalog.METRICS[metric].label, "top": top, "plot_h": height,
            "width": 60 + 70 * len(runs), "bars": bars}


def _category_chart(metric: str, categories: list[str], runs: list[Run]) -> dict:
    top = catalog.top(metric)
    width = 300
    groups = []
    y = 26
    for cat in categories:
        bars = []
        for i, r in enumerate(runs):
            mean = ((r.results["metrics"]["by_category"].get(cat) or {}).get(metric) or {}).get("mean")
            bars.append({"y": y + 12 * i, "w": 0 if mean is None else width * mean / top, "mean": mean,
                         "colour": PALETTE[i % len(PALETTE)], "label": r.label})
        groups.append({"category": cat, "y": y, "bars": bars})
        y += 12 * len(runs) + 10
    return {"metric": metric, "label": catalog.METRICS[metric].label, "width": width, "height": y + 4,
            "groups": groups, "score": catalog.is_score(metric)}


def default_folder(runs: list[Run], reports_root: Path) -> Path:
    """``reports/_compare/<label>--<label>...``: one folder per set of runs compared."""
    name = "--".join(re.sub(r"[^A-Za-z0-9_.@-]", "_", r.label) for r in runs)
    if len(name) > 120:
        name = name[:100] + "-" + hashlib.sha256(name.encode()).hexdigest()[:10]
    return inside(reports_root / "_compare", name)


def compare_html(runs: list[Run], report_links: dict[str, str], race: dict | None = None,
                 served: dict | None = None) -> str:
    """The comparison page of ``runs``: what ``compare.html`` holds and what ``lab serve`` sends.
    ``report_links``: each run's label -> its page's address; ``race``: lab race's sequence;
    ``served``: the served app's links and the command that reproduces the page (None in a file)."""
    view = compare_view(runs)
    view["race"] = race  # lab race: the sequence's path, plotted above the comparison
    view["report_links"] = report_links
    return environment().get_template("compare.html").render(v=view, pval=pval, served=served)


def render_compare(runs: list[Run], folder: Path, force: bool = True, race: dict | None = None) -> Path:
    """Write ``compare.html`` and the per-question exports of every run into ``folder``: never
    into a compared run's folder, and over existing files only with ``force``."""
    if folder.exists() and not folder.is_dir():
        raise DataError(f"--out {folder} is a file", hint="give --out a folder (it is created if missing)")
    for name in ("compare.html", *EXPORT_FILES):
        check_output(folder / name, [r.folder for r in runs], None, force, "--out")
    folder.mkdir(parents=True, exist_ok=True)
    html = compare_html(runs, {r.label: os.path.relpath(r.folder / "report.html", folder) for r in runs}, race)
    write_exports([(r.results, r.samples) for r in runs], folder)
    out = folder / "compare.html"
    write_atomic(out, html)
    return out
