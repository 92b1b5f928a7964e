"""Why the lab's BM25 on SciFact differs from the published figures: the same BM25, written out here,
with each published setting switched on and off one at a time.

    .venv/bin/python scripts/scifact_bm25.py [--beir ../shared/benchmarks/scifact]

The lab's BM25 is LanceDB's full-text index (``lab.rag.index.FTS_SETTINGS``: lower case, English
stemming, English stop words, ASCII folding; Lucene's BM25 with k1 1.2, b 0.75). pyserini's
``bm25-flat`` is Lucene with k1 0.9, b 0.4, title and text in one field, Porter stemming and
Lucene's 33 English stop words; the BEIR paper's is Elasticsearch (k1 1.2, b 0.75, title and text
as two fields). This script scores the 300 test queries (nDCG@10, Recall@100, with the lab's
``lab.metrics.qrels``) with a plain BM25 (Lucene's idf, ``log(1 + (N - df + 0.5) / (df + 0.5))``,
document length in tokens) under each combination of: k1/b (0.9/0.4, 1.2/0.75), Porter stemming
(NLTK's PorterStemmer) on or off, the stop words removed or kept, the title in or out, so the
distance between the lab's figure and each published one is put down to what makes it.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
from collections import Counter
from itertools import product
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lab.metrics.qrels import qrels_scores  # noqa: E402

#: Lucene's EnglishAnalyzer stop words (what pyserini removes).
LUCENE_STOP = set("a an and are as at be but by for if in into is it no not of on or such that the their then there "
                  "these they this to was will with".split())
TOKEN = re.compile(r"[a-z0-9]+")


def load(beir: Path) -> tuple[list[str], list[str], list[str], dict[str, str], dict[str, dict[str, int]]]:
    ids, titles, texts = [], [], []
    for line in (beir / "corpus.jsonl").read_text(encoding="utf-8").splitlines():
        d = json.loads(line)
        ids.append(d["_id"])
        titles.append(d["title"])
        texts.append(d["text"])
    qrels: dict[str, dict[str, int]] = {}
    for line in (beir / "qrels" / "test.tsv").read_text().splitlines()[1:]:
        q, d, s = line.split("\t")
        qrels.setdefault(q, {})[d] = int(s)
    queries = {d["_id"]: d["text"] for d in map(json.loads, (beir / "queries.jsonl").read_text().splitlines())
               if d["_id"] in qrels}
    return ids, titles, texts, queries, qrels


def analyser(stem: bool, stop: bool):
    from nltk.stem import PorterStemmer

    porter, cache = PorterStemmer(), {}

    def tokens(text: str) -> list[str]:
        out = []
        for t in TOKEN.findall(text.lower()):
            if stop and t in LUCENE_STOP:
                continue
            if stem:
                if t not in cache:
                    cache[t] = porter.stem(t)
                t = cache[t]
            out.append(t)
        return out
    return tokens


def bm25_run(docs: list[list[str]], queries: list[list[str]], k1: float, b: float, top: int = 100) -> list[list[int]]:
    n = len(docs)
    lengths = [len(d) for d in docs]
    avg = sum(lengths) / n
    postings: dict[str, list[tuple[int, int]]] = {}
    for i, d in enumerate(docs):
        for term, tf in Counter(d).items():
            postings.setdefault(term, []).append((i, tf))
    out = []
    for q in queries:
        scores: dict[int, float] = {}
        for term in q:  # a repeated query term counts again, as Lucene's BooleanQuery of its clauses does
            plist = postings.get(term)
            if not plist:
                continue
            idf = math.log(1 + (n - len(plist) + 0.5) / (len(plist) + 0.5))
            for i, tf in plist:
                scores[i] = scores.get(i, 0.0) + idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * lengths[i] / avg))
        out.append(sorted(scores, key=lambda i: (-scores[i], i))[:top])
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--beir", type=Path, default=ROOT.parent / "shared" / "benchmarks" / "scifact")
    args = ap.parse_args()
    ids, titles, texts, queries, qrels = load(args.beir)
    qids = list(queries)
    print("| k1, b | stemming | stop words | title | nDCG@10 | R@100 |")
    print("|---|---|---|---|---|---|")
    t0 = time.perf_counter()
    for stem, stop, title in product((True, False), (True, False), (True, False)):
        tok = analyser(stem, stop)
        docs = [tok(f"{t} {x}" if title else x) for t, x in zip(titles, texts)]
        qs = [tok(queries[q]) for q in qids]
        for k1, b in ((0.9, 0.4), (1.2, 0.75)):
            runs = bm25_run(docs, qs, k1, b)
            per = [qrels_scores([ids[i] for i in run], qrels[q]) for run, q in zip(runs, qids)]
            ndcg = sum(p["qrels_ndcg10"] for p in per) / len(per)
            recall = sum(p["qrels_recall100"] for p in per) / len(per)
            print(f"| {k1}, {b} | {'Porter' if stem else 'none'} | {'removed' if stop else 'kept'} | "
                  f"{'in' if title else 'out'} | {ndcg:.4f} | {recall:.4f} |", flush=True)
    print(f"({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
