"""Does the judge measure accuracy apart from completeness? A perturbed set of known-good answers
and the pairs that say so (``scripts/judge_split.py``).

:func:`build` makes, for each sampled question (those whose reference can be cut short first,
then the others, each group stratified by category), from its reference answer without a model:

- ``wrong_fact``: one figure, date or name swapped (:func:`lab.judge.perturb.wrong_fact`);
- ``cut_short``: the reference cut before its last fact, a prefix that keeps at least one fact
  (:func:`lab.judge.perturb.cut_short`): correct, and partial;
- ``partial``: one fact left out anywhere (:func:`lab.judge.perturb.partial`);
- ``padded``: another question's unrelated reference answer added;
- ``refusal``: "I don't have enough information ...".

:func:`measure` reads a method's scores of every row and the reference's: for each pair below,
the share of questions where it holds, with its n (the issue's targets in :data:`TARGETS`):

- a correct answer cut short keeps its accuracy within one point of the reference's, and scores
  above the wrong answer on accuracy; it still loses completeness;
- a wrong answer loses accuracy; a padded one keeps accuracy and completeness within one point
  and loses relevance; a refusal loses accuracy and completeness.
"""

from __future__ import annotations

import random
from typing import Callable, Mapping, Sequence

from lab.judge.checks import stratified
from lab.judge.perturb import REFUSAL, cut_short, fact_pool, padded, partial, wrong_fact

KINDS = ("reference", "wrong_fact", "cut_short", "partial", "padded", "refusal")
#: (name, kind, dimension, test against the reference or another kind, least share).
PAIRS = [
    ("cut short keeps accuracy (within one point)", "cut_short", "accuracy", "within", 0.8),
    ("cut short above wrong fact on accuracy", "cut_short", "accuracy", "above:wrong_fact", 0.9),
    ("cut short lowers completeness", "cut_short", "completeness", "lower", 0.9),
    ("wrong fact lowers accuracy", "wrong_fact", "accuracy", "lower", 0.95),
    ("partial keeps accuracy (within one point)", "partial", "accuracy", "within", 0.8),
    ("partial above wrong fact on accuracy", "partial", "accuracy", "above:wrong_fact", 0.9),
    ("partial lowers completeness", "partial", "completeness", "lower", 0.9),
    ("padded keeps accuracy (within one point)", "padded", "accuracy", "within", 0.9),
    ("padded keeps completeness (within one point)", "padded", "completeness", "within", None),
    ("padded lowers relevance", "padded", "relevance", "lower", 0.8),
    ("refusal lowers accuracy", "refusal", "accuracy", "lower", None),
    ("refusal lowers completeness", "refusal", "completeness", "lower", None),
]


def build(items: Sequence[Mapping], n: int, seed: int) -> list[dict]:
    """The perturbed set of ``n`` of ``items`` ({id, category, question, reference, keywords}): one
    row per question and kind that could be made, ``{id, category, question, reference,
    keywords, kind, text, detail}``; those that can be cut short come first."""
    pool = fact_pool([it["reference"] for it in items])
    can = [it for it in items if not isinstance(cut_short(it["reference"], it["question"], pool.common, pool.plain), str)]
    cannot = [it for it in items if it not in can]
    chosen = [can[i] for i in stratified(can, n, seed)][:n]
    chosen += [cannot[i] for i in stratified(cannot, n - len(chosen), seed)] if len(chosen) < n else []
    rows = []
    for it in chosen:
        rng = random.Random(f"{seed}:{it['id']}")
        ref, q, kws = it["reference"], it["question"], list(it.get("keywords") or [])
        others = [o["reference"] for o in items if o["id"] != it["id"]]
        made = {"reference": (ref, {}), "wrong_fact": wrong_fact(ref, q, kws, pool, rng),
                "cut_short": cut_short(ref, q, pool.common, pool.plain),
                "partial": partial(ref, q, kws, pool.common, pool.plain), "padded": padded(ref, q, others, rng),
                "refusal": (REFUSAL, {})}
        for kind in KINDS:
            if not isinstance(made[kind], str):
                text, detail = made[kind]
                rows.append({"id": it["id"], "category": it.get("category"), "question": q, "reference": ref,
                             "keywords": kws, "kind": kind, "text": text, "detail": detail})
    return rows


def measure(rows: Sequence[Mapping], scores: Callable[[Mapping], Mapping | None]) -> dict:
    """Each pair of :data:`PAIRS` as ``{name: {share, n, goal, met}}`` and the mean scores per kind,
    from ``scores(row)`` (None: a failed judgement, left out and counted)."""
    by: dict[str, dict[str, Mapping]] = {}
    failed = 0
    for r in rows:
        s = scores(r)
        if s is None:
            failed += 1
            continue
        by.setdefault(r["id"], {})[r["kind"]] = s
    out: dict = {"pairs": {}, "means": {}, "n_failed": failed}
    for name, kind, dim, test, goal in PAIRS:
        flags = []
        for got in by.values():
            ref, mine = got.get("reference"), got.get(kind)
            if ref is None or mine is None:
                continue
            if test == "within":
                flags.append(abs(mine[dim] - ref[dim]) <= 1.0)
            elif test == "lower":
                flags.append(mine[dim] < ref[dim])
            else:
                other = got.get(test.split(":", 1)[1])
                if other is not None:
                    flags.append(mine[dim] > other[dim])
        share = sum(flags) / len(flags) if flags else None
        out["pairs"][name] = {"share": share, "n": len(flags), "hits": sum(flags), "goal": goal,
                              "met": None if share is None or goal is None else share >= goal}
    for kind in KINDS:
        got = [g[kind] for g in by.values() if kind in g]
        if got:
            out["means"][kind] = {d: sum(x[d] for x in got) / len(got) for d in ("accuracy", "completeness", "relevance")}
            out["means"][kind]["n"] = len(got)
    return out


def table(results: Mapping[str, Mapping]) -> str:
    """The methods side by side: one Markdown row per pair (hits of n), then the mean scores."""
    names = list(results)
    lines = ["| check | goal | " + " | ".join(names) + " |", "|---|---:|" + "---:|" * len(names)]
    for name, *_rest, goal in PAIRS:
        cells = []
        for m in names:
            p = results[m]["pairs"][name]
            cells.append("-" if p["share"] is None else f"{p['hits']} of {p['n']} ({p['share']:.0%})")
        lines.append(f"| {name} | {'-' if goal is None else f'{goal:.0%}'} | " + " | ".join(cells) + " |")
    for kind in KINDS:
        cells = []
        for m in names:
            x = results[m]["means"].get(kind)
            cells.append("-" if x is None else f"{x['accuracy']:.2f} / {x['completeness']:.2f} / {x['relevance']:.2f}")
        lines.append(f"| mean {kind.replace('_', ' ')} (accuracy / completeness / relevance) | | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
