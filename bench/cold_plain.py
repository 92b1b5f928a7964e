"""The plain side of ``bench/cold.py``: a retrieval-only evaluation written straight on the libraries.

    python bench/cold_plain.py --kb DIR --eval FILE --out FILE [--chunk-tokens 250] [--top-k 5] [--batch-size 32]

Reads the knowledge base's .md/.txt files, cuts fixed-token windows with tiktoken (the same windows
as the lab's ``fixed_token`` chunker), encodes chunks and questions with sentence-transformers,
searches by numpy dot product and scores each question with the lab's keyword metrics (pure
functions over strings). Writes the mean metrics and the per-question MRRs as JSON, so the bench
can check that both sides computed the same thing. No cache, no index, no report: the least a
script can do and still answer the same question.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
from pathlib import Path

T0 = time.perf_counter()
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
ROOT = Path(__file__).resolve().parents[1]
# tiktoken's encodings come from llama-index-core's copy (no download); found without importing it
_core = importlib.util.find_spec("llama_index.core")
os.environ.setdefault("TIKTOKEN_CACHE_DIR", os.path.join(os.path.dirname(_core.origin), "_static", "tiktoken_cache"))

import numpy as np
import tiktoken
from sentence_transformers import SentenceTransformer

from lab.metrics.retrieval import question_scores


def windows(text: str, enc, size: int, overlap: int) -> list[str]:
    tokens = enc.encode(text)
    if not tokens:
        return []
    _, starts = enc.decode_with_offsets(tokens)
    bounds = list(starts) + [len(text)]
    out, step = [], size - overlap
    for a in range(0, len(tokens), step):
        b = min(a + size, len(tokens))
        if text[bounds[a]:bounds[b]].strip():
            out.append(text[bounds[a]:bounds[b]])
        if b == len(tokens):
            break
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kb", type=Path, required=True)
    ap.add_argument("--eval", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--model", required=True, help="the embedding model's folder")
    ap.add_argument("--chunk-tokens", type=int, default=250)
    ap.add_argument("--overlap-tokens", type=int, default=0)
    ap.add_argument("--top-k", type=int, default=5)
    ap.add_argument("--metrics-k", type=int, default=10)
    ap.add_argument("--batch-size", type=int, default=32)
    args = ap.parse_args()
    t_import = time.perf_counter() - T0
    enc = tiktoken.get_encoding("cl100k_base")
    texts = []
    for path in sorted(p for p in args.kb.rglob("*") if p.suffix in (".md", ".txt") and p.is_file()):
        texts.extend(windows(path.read_text(encoding="utf-8"), enc, args.chunk_tokens, args.overlap_tokens))
    rows = [json.loads(line) for line in args.eval.read_text(encoding="utf-8").splitlines() if line.strip()]
    model = SentenceTransformer(args.model, device="cpu")
    t_encode = time.perf_counter()
    vecs = model.encode(texts, batch_size=args.batch_size, normalize_embeddings=True)
    q = model.encode([r["question"] for r in rows], batch_size=args.batch_size, normalize_embeddings=True)
    t_encode = time.perf_counter() - t_encode
    top = np.argsort(-(q @ vecs.T), axis=1)[:, :args.top_k]
    scores = [question_scores(r.get("keywords") or [], [texts[j] for j in idx], args.metrics_k)
              for r, idx in zip(rows, top)]
    out = {"n_chunks": len(texts), "n_questions": len(rows),
           "mrr": [s["mrr"] for s in scores],
           "mean": {m: float(np.mean([s[m] for s in scores])) for m in ("mrr", "ndcg", "coverage")},
           "import_s": t_import, "encode_s": t_encode, "total_s": time.perf_counter() - T0}
    args.out.write_text(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
