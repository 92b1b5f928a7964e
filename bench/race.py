"""lab race's confidence sequences on real runs' paired differences: validity under no difference,
coverage, and questions to a decision, for each ``--sequence``, beside a t-test read after every
question and the fixed-n test of the whole set.

    .venv/bin/python bench/race.py --pair LABEL RUN_A RUN_B [--pair ...] [--metric mrr] [--alpha 0.05]
        [--null-paths 2000] [--orders 300] [--seeds 20] [--judge-sim] [--out FILE] [--smoke]

Per pair (the per-question differences ``d = B - A`` of ``--metric`` over the questions both runs
scored, read from their ``samples.jsonl``):

- the fixed-n test of the whole set: mean, sd, the paired t-test's p and ``lab compare``'s
  (permutation p, bootstrap interval);
- **no difference**: ``--null-paths`` paths, each the real differences in a random order with
  random signs (a difference of mean 0 at every step, the shape of the real ones): the share on
  which each sequence ever excludes 0 (a false claim; at most alpha if it is valid), and the share
  on which a paired t-test read after every question from the 5th is ever below alpha;
- **coverage**: ``--null-paths`` paths drawn with replacement from the real differences (mean
  ``mean(d)``), as long as the set: the share on which each sequence holds ``mean(d)`` at every
  question (at least 1 - alpha if valid);
- **races**: the real differences in ``lab race``'s order for seeds 1..``--seeds``
  (``random.Random(seed).shuffle`` of the eval set's ids, as ``lab.eval.race.order``), and in
  ``--orders`` more random orders: the questions each sequence needs to exclude 0 (the race's stop
  without ``--effect``; the set's size where it never does), whether it decided, and on which side
  (checked against the fixed-n test), and the interval's width after the whole set.

``--judge-sim``: judged races, simulated (no judged runs of both configs are needed): per-question
accuracy differences (judge scores 1-5: a difference in [-4, 4]) drawn from :data:`JUDGE_NULL`, a
shape with most questions tied, plus 1 on a share of questions for a true difference; each read by
the betting and eb sequences on [-4, 4] and by the betting sequence on the sign of the difference
in [-1, 1] (a per-question sign test: it decides whether B wins more questions than it loses, not
the mean).

Writes the figures as JSON (``--out``, default bench/race.json) and prints them. ``--smoke``: two
made-up runs of 40 questions in a temporary folder, few paths, no file written
(``tests/bench/test_bench_race.py``).
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path

import numpy as np
from scipy import stats

from lab.runfiles import read_samples
from lab.stats.paired import paired
from lab.stats.power import diff_range
from lab.stats.sequences import SEQUENCES, first_exclusion, sequence_cs

ROOT = Path(__file__).resolve().parents[1]

#: The shape of a judged accuracy difference under no difference: P(d = k) for k = -3..3, most
#: questions tied (sd 0.76, near the 0.70 of the judged race in docs/decisions.md).
JUDGE_NULL = {-3: 0.01, -2: 0.02, -1: 0.12, 0: 0.70, 1: 0.12, 2: 0.02, 3: 0.01}
T_FROM = 5  # the first question a peeking t-test is read at


def differences(run_a: Path, run_b: Path, metric: str) -> tuple[list[str], dict[str, float], dict]:
    """The eval set's ids (A's file order), the differences B - A by id over the questions both
    runs scored, and lab compare's fixed-n test of them."""
    sa, sb = read_samples(run_a), read_samples(run_b)

    def vals(samples):
        return {s["id"]: float(v) for s in samples
                if isinstance(v := (s.get("metrics") or {}).get(metric), (int, float)) and not isinstance(v, bool)}

    va, vb = vals(sa), vals(sb)
    ids = [s["id"] for s in sa]
    diff = {q: vb[q] - va[q] for q in ids if q in va and q in vb}
    d = np.asarray(list(diff.values()))
    test = paired(va, vb)
    fixed = {"n": int(d.size), "mean": float(d.mean()), "sd": float(d.std(ddof=1)),
             "p_t": float(stats.ttest_1samp(d, 0.0).pvalue), "p_permutation": test.p_permutation,
             "ci": list(test.ci) if test.ci else None}
    return ids, diff, fixed


def peeked_t(x: np.ndarray, alpha: float) -> np.ndarray:
    """Per path, the first t (from :data:`T_FROM`) at which a two-sided one-sample t-test of the
    first t values is below ``alpha``; 0 where never."""
    t = np.arange(1, x.shape[-1] + 1, dtype=float)
    mean = np.cumsum(x, axis=-1) / t
    var = (np.cumsum(x * x, axis=-1) - t * mean ** 2) / np.maximum(t - 1, 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        stat = np.abs(mean) / np.sqrt(np.maximum(var, 0) / t)
    p = np.where((t >= T_FROM) & (var > 1e-12), 2 * stats.t.sf(stat, np.maximum(t - 1, 1)), 1.0)
    hit = p < alpha
    return np.where(hit.any(axis=-1), hit.argmax(axis=-1) + 1, 0)


def _share(first: np.ndarray) -> float:
    return round(float((first > 0).mean()), 4)


def _spread(n: np.ndarray) -> dict:
    return {"median": float(np.median(n)), "p10": float(np.percentile(n, 10)), "p90": float(np.percentile(n, 90))}


def race_orders(ids: list[str], diff: dict[str, float], seeds: int) -> np.ndarray:
    """The differences in lab race's order for seeds 1..``seeds`` (``lab.eval.race.order``: the eval
    set's rows shuffled by ``random.Random(seed)``; the questions without both values left out)."""
    out = []
    for seed in range(1, seeds + 1):
        order = list(ids)
        random.Random(seed).shuffle(order)
        out.append([diff[q] for q in order if q in diff])
    return np.asarray(out)


def study(ids: list[str], diff: dict[str, float], fixed: dict, metric: str, alpha: float, null_paths: int,
          orders: int, seeds: int, rng: np.random.Generator) -> dict:
    """The module docstring's figures for one pair."""
    lo, hi = diff_range(metric)
    d = np.asarray(list(diff.values()))
    n = d.size
    null = np.stack([rng.permutation(d) for _ in range(null_paths)]) * rng.choice([-1.0, 1.0], (null_paths, n))
    boot = rng.choice(d, size=(null_paths, n))
    shuffled = np.stack([rng.permutation(d) for _ in range(orders)])
    seeded = race_orders(ids, diff, seeds)
    sign = np.sign(fixed["mean"])
    out = {"fixed": fixed, "null": {}, "coverage": {}, "races": {}, "orders": {}, "width_at_n": {}}
    for name in SEQUENCES:
        out["null"][name] = _share(first_exclusion(name, null, alpha, lo, hi, 0.0, n))
        out["coverage"][name] = round(1 - _share(first_exclusion(name, boot, alpha, lo, hi, fixed["mean"], n)), 4)
        cs = sequence_cs(name, seeded, alpha, lo, hi, n)
        decided = (cs.lower > 0) | (cs.upper < 0)
        hit = decided.any(axis=-1)
        stop = np.where(hit, decided.argmax(axis=-1) + 1, n)
        side = np.where(cs.lower[np.arange(stop.size), stop - 1] > 0, 1.0, -1.0)
        out["races"][name] = {"stops": stop.tolist(), "decided": int(hit.sum()), **_spread(stop),
                              "agree_with_fixed_n": int((hit & (side == sign)).sum())}
        first = first_exclusion(name, shuffled, alpha, lo, hi, 0.0, n)
        out["orders"][name] = {"decided": _share(first), **_spread(np.where(first > 0, first, n))}
        out["width_at_n"][name] = round(float(np.median(cs.upper[:, -1] - cs.lower[:, -1])), 4)
    out["null"]["t-test read after every question"] = _share(peeked_t(null, alpha))
    first = peeked_t(seeded, alpha)
    out["races"]["t-test read after every question"] = {"stops": np.where(first > 0, first, n).tolist(),
                                                       "decided": int((first > 0).sum()),
                                                       **_spread(np.where(first > 0, first, n))}
    return out


def judge_sim(alpha: float, paths: int, rng: np.random.Generator, lengths: tuple[int, ...] = (75, 150)) -> dict:
    """Judged races on simulated accuracy differences (the module docstring): per scenario, the
    share of paths decided within each length and the median questions to a decision, per reading;
    the fixed-n t-test's share below alpha at each length. The scenarios: no difference; no
    difference in the mean but a skewed one (B wins 20% of the questions by a point and loses 10%
    by two: the sign reading claims "B better" where the mean is equal); a true difference of
    about 0.25 and 0.5 (a share of the questions a point better)."""
    ks, ps = np.asarray(list(JUDGE_NULL)), np.asarray(list(JUDGE_NULL.values()))
    n = max(lengths)
    scenarios = {
        "no difference": lambda: rng.choice(ks, p=ps, size=(paths, n)),
        "mean 0, skewed (B +1 on 20%, -2 on 10%)": lambda: rng.choice([1, 0, -2], p=[0.2, 0.7, 0.1], size=(paths, n)),
        "about +0.25 (25% of questions a point better)":
            lambda: np.clip(rng.choice(ks, p=ps, size=(paths, n)) + (rng.random((paths, n)) < 0.25), -4, 4),
        "about +0.5 (50% of questions a point better)":
            lambda: np.clip(rng.choice(ks, p=ps, size=(paths, n)) + (rng.random((paths, n)) < 0.5), -4, 4),
    }
    out = {}
    for label, draw in scenarios.items():
        x = draw().astype(float)
        readings = {"betting on [-4, 4]": first_exclusion("betting", x, alpha, -4, 4),
                    "eb on [-4, 4]": first_exclusion("eb", x, alpha, -4, 4),
                    "betting on the sign, [-1, 1]": first_exclusion("betting", np.sign(x), alpha, -1, 1),
                    "t-test read after every question": peeked_t(x, alpha)}
        row = {name: {**{f"decided_by_{m}": round(float(((first > 0) & (first <= m)).mean()), 4) for m in lengths},
                      "median": float(np.median(np.where(first > 0, first, n)))} for name, first in readings.items()}
        row["fixed-n t-test"] = {f"power_at_{m}": round(float((stats.ttest_1samp(x[:, :m], 0.0, axis=1).pvalue
                                                              < alpha).mean()), 4) for m in lengths}
        out[f"{label}, mean {x.mean():+.3f}"] = row
    return out


def lines(result: dict) -> list[str]:
    """The figures in words, for the terminal."""
    out = []
    for p in result["pairs"]:
        f = p["fixed"]
        out.append(f"{p['label']}: {f['n']} questions, {result['metric']} difference mean {f['mean']:+.4f}, sd "
                   f"{f['sd']:.4f}; fixed-n: t-test p {f['p_t']:.2g}, permutation p {f['p_permutation']:.2g}, "
                   f"bootstrap interval [{f['ci'][0]:+.4f}, {f['ci'][1]:+.4f}]")
        out.append(f"  no difference ({result['null_paths']} paths, signs flipped): false claims " + ", ".join(
            f"{k} {v:.2%}" for k, v in p["null"].items()))
        out.append(f"  coverage ({result['null_paths']} resampled paths): " + ", ".join(
            f"{k} {v:.2%}" for k, v in p["coverage"].items()))
        for name, r in p["races"].items():
            agree = f", {r['agree_with_fixed_n']} on the fixed-n test's side" if "agree_with_fixed_n" in r else ""
            out.append(f"  races, seeds 1-{len(r['stops'])}, {name}: decided {r['decided']}{agree}; questions median "
                       f"{r['median']:g} (p10 {r['p10']:g}, p90 {r['p90']:g})")
        for name, r in p["orders"].items():
            out.append(f"  {result['orders']} random orders, {name}: decided {r['decided']:.0%}, median "
                       f"{r['median']:g} (p10 {r['p10']:g}, p90 {r['p90']:g}); width after all {f['n']}: "
                       f"{p['width_at_n'][name]}")
    for effect, row in (result.get("judge_sim") or {}).items():
        out.append(f"judged (simulated), {effect}:")
        for name, r in row.items():
            out.append(f"  {name}: " + ", ".join(f"{k} {v:g}" for k, v in r.items()))
    return out


def _made_up(folder: Path, n: int = 40) -> tuple[Path, Path]:
    """Two runs of ``n`` questions whose MRRs differ by about 0.3 (the smoke's input)."""
    rng = np.random.default_rng(0)
    a = rng.choice([0.0, 0.25, 0.5, 1.0], n)
    b = np.clip(a + rng.choice([0.0, 0.5, 0.75], n), 0, 1)
    runs = []
    for name, values in (("a", a), ("b", b)):
        run = folder / name
        run.mkdir(parents=True)
        (run / "samples.jsonl").write_text("".join(json.dumps({"id": f"q{i}", "metrics": {"mrr": float(v)}}) + "\n"
                                                   for i, v in enumerate(values)))
        runs.append(run)
    return runs[0], runs[1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pair", nargs=3, action="append", metavar=("LABEL", "RUN_A", "RUN_B"), default=[])
    ap.add_argument("--metric", default="mrr")
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--null-paths", type=int, default=2000)
    ap.add_argument("--orders", type=int, default=300)
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--judge-sim", action="store_true")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "race.json")
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(13)
    with tempfile.TemporaryDirectory() as tmp:
        if args.smoke:
            args.pair = [("made-up", *_made_up(Path(tmp)))]
            args.null_paths, args.orders, args.seeds = 200, 20, 5
        if not args.pair:
            ap.error("give at least one --pair LABEL RUN_A RUN_B")
        t0 = time.perf_counter()
        pairs = []
        for label, run_a, run_b in args.pair:
            ids, diff, fixed = differences(Path(run_a), Path(run_b), args.metric)
            pairs.append({"label": label, "run_a": str(run_a), "run_b": str(run_b),
                          **study(ids, diff, fixed, args.metric, args.alpha, args.null_paths, args.orders,
                                  args.seeds, rng)})
        result = {"metric": args.metric, "alpha": args.alpha, "null_paths": args.null_paths, "orders": args.orders,
                  "pairs": pairs}
        if args.judge_sim or args.smoke:
            result["judge_sim"] = judge_sim(args.alpha, args.null_paths, rng)
        result["seconds"] = round(time.perf_counter() - t0, 1)
    print("\n".join(lines(result)))
    if args.smoke:
        p = pairs[0]
        ok = (all(v <= args.alpha for k, v in p["null"].items() if k in ("betting", "eb"))
              and p["null"]["t-test read after every question"] > args.alpha
              and all(v >= 1 - args.alpha for k, v in p["coverage"].items() if k in ("betting", "eb"))
              and p["races"]["betting"]["decided"] == args.seeds
              and p["races"]["betting"]["agree_with_fixed_n"] == args.seeds
              and p["races"]["betting"]["median"] < p["races"]["eb"]["median"])
        print("smoke: ok" if ok else "smoke: FAILED")
        return 0 if ok else 1
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out} ({result['seconds']:.1f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
