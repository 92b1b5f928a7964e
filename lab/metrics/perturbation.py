"""The arithmetic of the judge's perturbation checks: pure functions over judged items.

An item is one question: the judge's scores of its reference answer (``reference``) and of each
perturbation of it (``{kind: scores | None}``, None where the perturbation was skipped or its
judgement failed). For a perturbation kind, on the items that have both judgements:

- **sensitivity** per targeted dimension: share where the perturbed answer scored strictly
  below the reference (a wrong fact should lower accuracy);
- **specificity** per untargeted dimension: share where it stayed within :data:`WITHIN` of the
  reference (a padded answer is still accurate);
- **invariance** (paraphrases): share within :data:`WITHIN` on every dimension.

Targets (:data:`GOALS`) are the shares a judge should reach before it is trusted.
"""

from __future__ import annotations

from typing import Mapping, Sequence

WITHIN = 1.0
#: (measure, kind, dimension) -> least share. ``differs`` is completeness vs relevance on real answers.
GOALS = {
    ("sensitivity", "wrong_fact", "accuracy"): 0.95,
    ("sensitivity", "partial", "completeness"): 0.90,
    ("sensitivity", "padded", "relevance"): 0.80,
    ("specificity", "padded", "accuracy"): 0.90,
    ("invariance", "paraphrase", "accuracy"): 0.90,
    ("invariance", "paraphrase", "completeness"): 0.90,
    ("invariance", "paraphrase", "relevance"): 0.90,
}


def _share(flags: Sequence[bool]) -> float | None:
    return sum(flags) / len(flags) if flags else None


def summarize(items: Sequence[Mapping], targets: Mapping[str, Sequence[str]], keeps: Mapping[str, Sequence[str]],
              dimensions: Sequence[str]) -> dict:
    """``{kind: {n, n_skipped, sensitivity: {dim: share}, specificity|invariance: {dim: share},
    mean_change: {dim: perturbed - reference}}}`` plus ``n_items`` and the ``goals`` checked."""
    out: dict = {"n_items": len(items), "kinds": {}}
    kinds = list(targets)
    for kind in kinds:
        pairs = [(it["reference"], it["perturbed"].get(kind)) for it in items
                 if it.get("reference") is not None and it["perturbed"].get(kind) is not None]
        row: dict = {"n": len(pairs), "n_skipped": len(items) - len(pairs)}
        if pairs:
            row["sensitivity"] = {d: _share([p[d] < r[d] for r, p in pairs]) for d in targets[kind]}
            name = "invariance" if not targets[kind] else "specificity"
            row[name] = {d: _share([abs(p[d] - r[d]) <= WITHIN for r, p in pairs]) for d in keeps[kind]}
            row["mean_change"] = {d: sum(p[d] - r[d] for r, p in pairs) / len(pairs) for d in dimensions}
        out["kinds"][kind] = row
    out["goals"] = check_goals(out["kinds"])
    return out


def check_goals(kinds: Mapping[str, Mapping]) -> list[dict]:
    """Each goal with the share reached (None when not measured) and whether it is met."""
    rows = []
    for (measure, kind, dim), least in GOALS.items():
        got = (kinds.get(kind) or {}).get(measure, {}).get(dim)
        rows.append({"measure": measure, "kind": kind, "dimension": dim, "goal": least, "share": got,
                     "met": None if got is None else got >= least})
    return rows


def differs(judgements: Sequence[Mapping], a: str = "completeness", b: str = "relevance", by: float = 0.5) -> dict:
    """How often two dimensions of real judgements differ by at least ``by``: 0 means the judge
    gives one score twice."""
    ok = [j for j in judgements if j.get(a) is not None and j.get(b) is not None]
    return {"n": len(ok), "share": _share([abs(j[a] - j[b]) >= by for j in ok]), "pair": [a, b], "by": by}
