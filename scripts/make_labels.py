"""Write eval_sets/company-turn13-labels.csv: for each question with golden spans, the chunks of
turn13's chunking (recursive character, 1000/200) that hold at least half of a span's
characters. Labels for classic recall@k / MRR@k (experiment `labelled`); other chunkers make
other chunk ids, so they need their own labels.

    .venv/bin/python scripts/make_labels.py
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    import sys

    from lab.config import load_experiment
    from lab.rag.chunkers import chunk
    from lab.rag.loaders import load_folder

    cfg = load_experiment("turn13", ROOT / "experiments")
    corpus = load_folder(ROOT / cfg.data.knowledge_base, cfg.loader.extensions, cfg.loader.max_file_bytes, False)
    nodes = chunk(corpus, cfg.chunker, None)
    by_source: dict[str, list] = {}
    for n in nodes:
        by_source.setdefault(n.metadata["source"], []).append(n)
    out = ROOT / "eval_sets" / "company-turn13-labels.csv"
    n_rows = 0
    with open(out, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["query_id", "relevant_ids"])
        for line in (ROOT / cfg.data.eval_set).read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            ids = []
            for ref in row.get("references") or []:
                a, b = ref["start_index"], ref["end_index"]
                for n in by_source.get(ref["source"], []):
                    shared = min(b, n.end_char_idx) - max(a, n.start_char_idx)
                    if shared * 2 >= b - a and n.node_id not in ids:
                        ids.append(n.node_id)
            if ids:
                w.writerow([row["id"], ";".join(ids)])
                n_rows += 1
    print(f"wrote {n_rows} labelled questions to {out}")


if __name__ == "__main__":
    main()
