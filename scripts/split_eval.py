"""Write the dev/held-out split of an eval set that `lab sweep` and `lab optimize` use.

    python scripts/split_eval.py --eval ../shared/benchmarks/insurellm/tests.jsonl --out reports/_designs/split

Stratified by category and seeded (``lab.eval.holdout.split_rows``: the same halves a sweep of
these questions with the same --dev-fraction and --seed makes), written as ``dev.jsonl`` and
``held-out.jsonl``; pick a design on the first (``lab run NAME --eval DIR/dev.jsonl``), report it
on the second.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lab.errors import LabError  # noqa: E402
from lab.eval.evalset import load_eval_set  # noqa: E402
from lab.eval.holdout import DEV_FRACTION, SEED, split_rows  # noqa: E402
from lab.paths import write_atomic  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--eval", type=Path, required=True, help="the eval set (JSONL)")
    ap.add_argument("--out", type=Path, required=True, help="folder for dev.jsonl and held-out.jsonl")
    ap.add_argument("--dev-fraction", type=float, default=DEV_FRACTION, help=f"default {DEV_FRACTION}")
    ap.add_argument("--seed", type=int, default=SEED, help=f"default {SEED}")
    args = ap.parse_args()
    try:
        rows = load_eval_set(args.eval, None).rows
        dev, held = split_rows(rows, args.dev_fraction, args.seed)
    except LabError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    args.out.mkdir(parents=True, exist_ok=True)
    for half, part in (("dev", dev), ("held-out", held)):
        write_atomic(args.out / f"{half}.jsonl", "".join(r.model_dump_json(exclude_none=True) + "\n" for r in part))
    print(f"{len(dev)} dev and {len(held)} held-out questions in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
