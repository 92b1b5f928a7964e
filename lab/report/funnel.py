"""The loss funnel as reports show it: a run's funnel (from ``results.json``, or derived from an
old run's samples), two runs' movers with paired tests on each stage's share, and the terminal's
table (``lab funnel``). The stages and verdicts are :mod:`lab.metrics.funnel`'s."""

from __future__ import annotations

from typing import Mapping, Sequence

from lab.metrics.funnel import (KEPT, LABELS, ORDER, RETRIEVAL, RETRIEVAL_STAGES, comparable, lost_at_by_id, movers,
                                question_funnel, summarise, survival_values)
from lab.stats.paired import holm, paired

#: A stage after "lost at" / "recovered at".
AT = {"kb": "the knowledge base", "chunking": "chunking", "first_stage": "the first stage",
      "second_stage": "the second stage", "budget": "the context budget", "generation": "generation",
      "judge": "the judge", RETRIEVAL: "retrieval (stage not recorded)"}
#: Every stage name, in pipeline order (``retrieval`` where old runs cannot split the first four).
STAGE_ORDER = [s for s in sorted(ORDER, key=ORDER.__getitem__) if s != KEPT]
#: The family-wise error rate of the stage tests of one pair of runs (Holm over the stages).
ALPHA = 0.05


def run_funnel(results: Mapping, samples: Sequence[Mapping]) -> dict:
    """A run's funnel: what it recorded, else derived from its samples (old runs)."""
    rec = results.get("funnel")
    if isinstance(rec, Mapping) and rec.get("stages") is not None:
        return dict(rec)
    return summarise(samples, (results.get("data") or {}).get("categories"))


def unseen(funnel: Mapping) -> list[str]:
    """The stages a run's files cannot show, in words (for old runs and retrieval-only runs)."""
    stages = funnel.get("stages", [])
    hidden = funnel.get("not_observed") or []  # a target's run: stages the system evaluated does not expose
    out = []
    if hidden:
        out += [f"{LABELS[s]} (not observed: the target does not expose it)" for s in hidden if s != "budget"]
    elif RETRIEVAL in stages:
        out.append("where before the final list (the knowledge base, chunking, the first stage or the second: "
                   "this run did not record its candidates)")
    for stage, why in (("budget", "no context was built"), ("generation", "no answers"),
                       ("judge", "not judged")):
        if stage not in stages:
            out.append(f"{LABELS[stage]} ({'not observed: the target does not expose it' if stage in hidden else why})")
    return out


def rows(funnel: Mapping, part: Mapping | None = None) -> list[dict]:
    """The funnel's bars: per stage seen, the questions still holding their evidence on entering
    it (``entering``), lost there, and their shares of the questions with gold evidence."""
    part = part if part is not None else funnel["overall"]
    n = part["n"] or 0
    left, out = n, []
    for stage in funnel["stages"]:
        lost = part["lost"].get(stage, 0)
        out.append({"stage": stage, "label": LABELS[stage], "entering": left, "lost": lost,
                    "share_lost": lost / n if n else None, "share_entering": left / n if n else None})
        left -= lost
    out.append({"stage": KEPT, "label": LABELS[KEPT], "entering": left, "lost": 0,
                "share_lost": None, "share_entering": left / n if n else None})
    return out


def stage_tests(a: Mapping[str, str], b: Mapping[str, str], stages: Sequence[str]) -> list[dict]:
    """Per stage, the paired test of the share of questions that got past it (B - A), over the
    questions both runs have, Holm-adjusted over the stages given (:func:`pair` gives those where
    some question moved); each with its verdict."""
    tests = []
    for stage in stages:
        p = paired(survival_values(a, stage), survival_values(b, stage))
        tests.append({"stage": stage, "label": LABELS[stage], "n": p.n, "a": p.mean_a, "b": p.mean_b,
                      "delta": p.delta, "ci": p.ci, "p": p.p_permutation, "wins": p.wins, "losses": p.losses})
    ps = [t["p"] if t["p"] is not None else 1.0 for t in tests]
    for t, adj in zip(tests, holm(ps) if ps else []):
        t["p_adj"] = adj
        real = adj < ALPHA and t["ci"] is not None and (t["ci"][0] > 0 or t["ci"][1] < 0)
        t["verdict"] = ("more get past it" if t["delta"] > 0 else "fewer get past it") if real else "not detectable"
    return tests


def pair(a_label: str, a: Sequence[Mapping], b_label: str, b: Sequence[Mapping],
         seen_a: Sequence[str] | None = None, seen_b: Sequence[str] | None = None) -> dict:
    """Two runs' funnels compared question by question: movers per stage, the paired test of each
    stage both runs see, and a sentence. Where one run cannot split the stages before the final
    list, both are compared there as one (``retrieval``). ``seen_a``/``seen_b``: the stages each
    run sees, where the caller has its funnel already (else summarised here)."""
    la, lb = comparable(lost_at_by_id(a), lost_at_by_id(b))
    seen_a = list(seen_a) if seen_a is not None else summarise(a)["stages"]
    seen_b = list(seen_b) if seen_b is not None else summarise(b)["stages"]
    if RETRIEVAL in seen_a or RETRIEVAL in seen_b:
        seen_a, seen_b = (list(dict.fromkeys(RETRIEVAL if x in RETRIEVAL_STAGES else x for x in s))
                          for s in (seen_a, seen_b))
    both = [x for x in STAGE_ORDER if x in seen_a and x in seen_b]
    # a stage only one run has (answers, a judge) is past the horizon both see: there, kept
    la, lb = ({q: v if v in both else KEPT for q, v in x.items()} for x in (la, lb))
    moved = movers(la, lb)
    parts = []
    for stage, m in moved.items():
        bits = []
        if m["recovered"]:
            bits.append(f"{len(m['recovered'])} recovered")
        if m["newly_lost"]:
            bits.append(f"{len(m['newly_lost'])} newly lost")
        parts.append(f"{' and '.join(bits)} at {AT[stage]}")
    # a stage where no question moved cannot reject: tested, it would only dilute Holm's family
    return {"a": a_label, "b": b_label, "n": len([q for q in la if q in lb]), "movers": moved,
            "tests": stage_tests(la, lb, [x for x in both if x in moved]),
            "summary": f"{a_label} -> {b_label}: " + ("; ".join(parts) if parts else "no question moved")}


def evidence(sample: Mapping) -> dict | None:
    """One question's verdict with the evidence each piece left (for the report's row)."""
    f = question_funnel(sample)
    if f is None:
        return None
    pieces = []
    for i in f["items"]:
        what = i["keyword"] if i["kind"] == "keyword" else f"{i['source']} [{i['start']}:{i['end']}]"
        where = []
        if i.get("n_chunks"):
            where.append(f"in {i['n_chunks']} chunk{'s' if i['n_chunks'] > 1 else ''}, first {i['chunk']}")
        elif i.get("chunk") is not None:
            where.append(f"chunk {i['chunk']}")
        if i.get("candidate_rank") is not None:
            where.append(f"candidate #{i['candidate_rank']}")
        if i.get("rank") is not None:
            where.append(f"final #{i['rank']}")
        if i.get("sent") is not None:
            where.append(f"sent as [{i['sent']}]")
        if i.get("stated") is not None:
            where.append("stated" if i["stated"] else "not stated")
        state = ("not in the knowledge base" if i.get("lost_at") == "kb" else f"lost at {AT[i['lost_at']]}"
                 if i.get("lost_at")
                 else "sent" if i.get("sent") is not None else "retrieved")
        pieces.append({"kind": i["kind"], "what": what, "state": state, "where": ", ".join(where) or "-"})
    return {"lost_at": f["lost_at"], "label": LABELS[f["lost_at"]], "pieces": pieces,
            "excerpt": f.get("answer_excerpt"), "accuracy": f.get("accuracy"), "stated": f.get("stated"),
            "diagnostics": f.get("diagnostics"), "budget": f.get("budget"), "derived": bool(f.get("derived")),
            "claims": f.get("claims") or []}


def blind_groups(funnels: Sequence[tuple[str, Mapping]]) -> list[tuple[list[str], str]]:
    """What each run cannot see (:func:`unseen`), each said once with the runs it applies to."""
    blind: dict[str, list[str]] = {}
    for label, f in funnels:
        for line in unseen(f):
            blind.setdefault(line, []).append(label)
    return [(labels, line) for line, labels in blind.items()]


# ---------------------------------------------------------------------------------------------
# The terminal


def terminal_lines(runs: Sequence[tuple[str, Mapping, Sequence[Mapping]]], category: str | None = None) -> list[str]:
    """``lab funnel``: per stage, the questions each run lost there (count and share), then for
    each adjacent pair the movers and the stage tests."""
    funnels = [(label, run_funnel(res, smp)) for label, res, smp in runs]
    stages = [s for s in STAGE_ORDER if any(s in f["stages"] for _, f in funnels)]
    width = max([22, *(len(LABELS[s]) + 2 for s in stages)])
    col = max([16, *(len(label) + 2 for label, _ in funnels)])
    out = [f"{'lost at' + (f' ({category})' if category else ''):<{width}}" + "".join(f"{lab:>{col}}" for lab, _ in funnels)]

    def part(f: Mapping) -> Mapping | None:
        return f["overall"] if category is None else f["by_category"].get(category)

    for stage in [*stages, KEPT]:
        cells = []
        for _, f in funnels:
            p = part(f)
            if p is None or (stage != KEPT and stage not in f["stages"]):
                cells.append("-")
                continue
            n = p["kept"] if stage == KEPT else p["lost"].get(stage, 0)
            cells.append(f"{n} ({n / p['n']:.0%})" if p["n"] else "0")
        out.append(f"{LABELS[stage]:<{width}}" + "".join(f"{c:>{col}}" for c in cells))
    out.append(f"{'questions with gold':<{width}}" + "".join(
        f"{(part(f) or {}).get('n', 0):>{col}}" for _, f in funnels))
    for labels, line in blind_groups(funnels):
        out.append(f"{', '.join(labels)}: cannot see {line}")
    for ((la, ra, sa), (_, fa)), ((lb, rb, sb), (_, fb)) in zip(zip(runs, funnels), zip(runs[1:], funnels[1:])):
        if (ra.get("data") or {}).get("eval_sha256") != (rb.get("data") or {}).get("eval_sha256"):
            out += ["", f"{la} -> {lb}: not paired: different eval sets (a question id may name another question)"]
            continue
        if category is not None:
            sa = [s for s in sa if s.get("category") == category]
            sb = [s for s in sb if s.get("category") == category]
        p = pair(la, sa, lb, sb, fa["stages"], fb["stages"])
        out.append("")
        out.append(p["summary"])
        for t in p["tests"]:
            if t["delta"] is None or not (t["wins"] or t["losses"]):
                continue
            out.append(f"  past {t['label']:<{width - 2}} {t['a']:.0%} -> {t['b']:.0%}  "
                       f"{t['delta']:+.3f} [{t['ci'][0]:+.3f}, {t['ci'][1]:+.3f}]  p adj {t['p_adj']:.3f}: {t['verdict']}"
                       if t["ci"] is not None else f"  past {t['label']}: {t['delta']:+.3f}")
    return out


# ---------------------------------------------------------------------------------------------
# The pages

#: A colour per stage (the kept share green), the same on the run and the compare page.
STAGE_COLOURS = {"kb": "#6c757d", "chunking": "#ae3ec9", "first_stage": "#d64545", "second_stage": "#e8590c",
                 RETRIEVAL: "#c92a2a", "budget": "#f08c00", "generation": "#1098ad", "judge": "#4c6ef5",
                 KEPT: "#2e9d5b"}
BAR_WIDTH = 420


def _segments(funnel: Mapping, part: Mapping) -> list[dict]:
    n = part["n"] or 0
    x, out = 0.0, []
    for stage in [*funnel["stages"], KEPT]:
        count = part["kept"] if stage == KEPT else part["lost"].get(stage, 0)
        w = BAR_WIDTH * count / n if n else 0.0
        if count:
            out.append({"stage": stage, "label": LABELS[stage], "n": count, "share": count / n, "x": x, "w": w,
                        "colour": STAGE_COLOURS[stage]})
        x += w
    return out


def funnel_view(funnel: Mapping) -> dict:
    """The run page's funnel panel: a 100% bar per category (and overall) split by the stage each
    question was lost at, kept last; the counts table; what the run cannot see."""
    bars = [{"name": "all questions", "n": funnel["overall"]["n"], "segments": _segments(funnel, funnel["overall"]),
             "lost": funnel["overall"]["lost"], "kept": funnel["overall"]["kept"]}]
    for cat, part in funnel["by_category"].items():
        bars.append({"name": cat, "n": part["n"], "segments": _segments(funnel, part), "lost": part["lost"],
                     "kept": part["kept"]})
    for i, b in enumerate(bars):
        b["y"] = 28 + 24 * i
    legend, x = [], 0
    for s in [*funnel["stages"], KEPT]:
        legend.append({"stage": s, "label": LABELS[s], "colour": STAGE_COLOURS[s], "x": x})
        x += 22 + 7 * len(LABELS[s])
    return {"stages": funnel["stages"], "labels": LABELS, "bars": bars, "width": max(170 + BAR_WIDTH + 10, x),
            "height": 40 + 24 * len(bars), "unseen": unseen(funnel), "n": funnel["n"],
            "n_without_gold": funnel.get("n_without_gold", 0), "diagnostics": funnel.get("diagnostics"),
            "judge_vs_evidence": funnel.get("judge_vs_evidence"), "derived": funnel.get("derived"),
            "legend": legend}
