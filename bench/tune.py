"""Training and reranking speed of ``lab tune``, against sentence-transformers called directly.

    .venv/bin/python bench/tune.py [--kb DIR] [--index turn18] [--pseudo 300] [--steps 20] [--smoke]

On the same training pairs (the lab's: pseudo-queries from the knowledge base's chunks with
hard negatives mined from its index), for each target (reranker: CrossEncoderTrainer with BCE;
embedding: SentenceTransformerTrainer with MultipleNegativesRankingLoss):

- the lab's trainer (:func:`lab.tune.train.build_trainer`: progress callback, checkpoints) and the
  raw trainer built here from the library's documented arguments, the same steps, seed and
  batch: seconds, pairs per second, and the ratio lab / raw (goal: at most 1.1);
- reranking the top 50 of a question: the cross-encoder's ``predict`` at batch sizes 8, 16, 32
  and 50 (the fastest is chosen), then LlamaIndex's ``SentenceTransformerRerank`` (what a config
  runs) at that batch against the raw ``predict``: milliseconds per question and the ratio.

Both sides train with the same seed, so their final losses must be equal; the bench checks it.
``--smoke``: the test fixture, 3 steps, batch 4, for ``make test``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # before the models' libraries load
ROOT = Path(__file__).resolve().parents[1]

from lab.progress import Ticker, setup_logging
from lab.tune.data import prepare
from lab.tune.options import TuneOptions
from lab.tune.train import _progress_callback, base_location, build_model, build_trainer, pairs_dataset


def raw_trainer(target: str, model, columns: dict, hyper: dict, out: Path):
    """The library's trainer as its docs set it up, nothing of the lab's."""
    from datasets import Dataset

    dataset = Dataset.from_dict(columns)
    common = dict(output_dir=str(out), num_train_epochs=1, per_device_train_batch_size=hyper["batch_size"],
                  learning_rate=hyper["lr"], warmup_steps=hyper["warmup_ratio"], seed=hyper["seed"],
                  data_seed=hyper["seed"], save_strategy="no", report_to=[], use_cpu=True, dataloader_num_workers=0,
                  disable_tqdm=True, max_steps=hyper["max_steps"], logging_steps=max(1, hyper["max_steps"] // 2))
    if target == "reranker":
        import torch
        from sentence_transformers.cross_encoder import CrossEncoderTrainer, CrossEncoderTrainingArguments
        from sentence_transformers.cross_encoder.losses import BinaryCrossEntropyLoss

        loss = BinaryCrossEntropyLoss(model, pos_weight=torch.tensor(float(hyper["negatives"] + hyper["random_negatives"])))
        args = CrossEncoderTrainingArguments(**common, learning_rate_mapping={r"(pooler|classifier)\.": hyper["head_lr"]})
        return CrossEncoderTrainer(model=model, args=args, train_dataset=dataset, loss=loss)
    from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
    from sentence_transformers.sentence_transformer.training_args import BatchSamplers

    args = SentenceTransformerTrainingArguments(**common, batch_sampler=BatchSamplers.NO_DUPLICATES)
    return SentenceTransformerTrainer(model=model, args=args, train_dataset=dataset,
                                      loss=MultipleNegativesRankingLoss(model))


def time_training(target: str, prep, hyper: dict, work: Path) -> tuple[float, float, float, float, int]:
    """(lab s, raw s, lab final loss, raw final loss, pairs) for ``hyper['max_steps']`` steps."""
    by_id = {p.id: p for p in prep.passages}
    columns = pairs_dataset(prep.train, by_id, hyper["loss"])
    pairs = hyper["max_steps"] * hyper["batch_size"]
    out = {}
    for side in ("raw", "lab", "raw2", "lab2"):  # alternated twice: a warm machine for both
        folder = work / side
        model = build_model(target, base_location(), work, hyper["max_length"], hyper["seed"])
        if side.startswith("lab"):
            with Ticker("bench", hyper["max_steps"], False, unit="steps") as ticker:
                trainer = build_trainer(target, model, columns, {**hyper, "epochs": 1}, folder, 10**6,
                                        [_progress_callback(ticker, [])])
                t0 = time.perf_counter()
                result = trainer.train()
        else:
            trainer = raw_trainer(target, model, columns, hyper, folder)
            t0 = time.perf_counter()
            result = trainer.train()
        out[side] = (time.perf_counter() - t0, float(result.training_loss))
        shutil.rmtree(folder, ignore_errors=True)
    lab_s = min(out["lab"][0], out["lab2"][0])
    raw_s = min(out["raw"][0], out["raw2"][0])
    return lab_s, raw_s, out["lab"][1], out["raw"][1], pairs


def time_reranking(model_dir: Path, prep, k: int, repeats: int) -> tuple[int, float, float]:
    """(chosen batch, lab ms/question, raw ms/question): top-k reranking of a few dev questions."""
    from llama_index.core.postprocessor import SentenceTransformerRerank
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
    from sentence_transformers.cross_encoder import CrossEncoder

    by_id = {p.id: p for p in prep.passages}
    questions = (prep.dev or prep.train)[:repeats]
    ids = [p.id for p in prep.passages][:k]
    raw = CrossEncoder(str(model_dir), device="cpu")
    best = None
    for batch in (8, 16, 32, 50):
        t0 = time.perf_counter()
        for q in questions:
            raw.predict([(q.text, by_id[i].text) for i in ids], batch_size=batch, show_progress_bar=False)
        ms = (time.perf_counter() - t0) * 1000 / len(questions)
        if best is None or ms < best[1]:
            best = (batch, ms)
    batch = best[0]
    lab = SentenceTransformerRerank(model=str(model_dir), top_n=3, device="cpu")
    lab._model.predict = _with_batch(lab._model.predict, batch)
    lab_times, raw_times = [], []
    for _ in range(2):  # alternated: neither side gets the warmer machine
        t0 = time.perf_counter()
        for q in questions:
            nodes = [NodeWithScore(node=TextNode(text=by_id[i].text, id_=i), score=0.0) for i in ids]
            lab.postprocess_nodes(nodes, query_bundle=QueryBundle(q.text))
        lab_times.append((time.perf_counter() - t0) * 1000 / len(questions))
        t0 = time.perf_counter()
        for q in questions:
            raw.predict([(q.text, by_id[i].text) for i in ids], batch_size=batch, show_progress_bar=False)
        raw_times.append((time.perf_counter() - t0) * 1000 / len(questions))
    lab_ms, raw_ms = min(lab_times), min(raw_times)
    return batch, lab_ms, raw_ms


def _with_batch(predict, batch: int):
    def call(pairs, **kw):
        kw.setdefault("batch_size", batch)
        kw.setdefault("show_progress_bar", False)
        return predict(pairs, **kw)
    return call


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kb", default=str(ROOT.parent / "shared" / "benchmarks" / "insurellm" / "knowledge-base"))
    ap.add_argument("--index", default="turn18", help="the experiment whose chunks are the passages")
    ap.add_argument("--pseudo", type=int, default=300)
    ap.add_argument("--steps", type=int, default=20, help="training steps timed per side")
    ap.add_argument("--k", type=int, default=50, help="candidates reranked per question")
    ap.add_argument("--smoke", action="store_true", help="the test fixture, 3 steps: for make test")
    args = ap.parse_args()
    setup_logging(False)
    experiments = ROOT / "experiments"
    batch = {"reranker": 16, "embedding": 32}
    max_length = 256
    if args.smoke:
        args.kb, args.index, args.pseudo, args.steps, args.k = str(ROOT / "tests/fixtures/kb"), "small-retrieval", 12, 3, 6
        experiments = ROOT / "tests/fixtures/experiments"
        batch, max_length = {"reranker": 4, "embedding": 4}, 64
    with tempfile.TemporaryDirectory(prefix="bench-tune-") as tmp:
        work = Path(tmp)
        os.environ.setdefault("LAB_CACHE", str(work / "cache")) if args.smoke else None
        opts = TuneOptions(target="reranker", out="bench", kb=args.kb, index=args.index, pseudo=args.pseudo,
                           show_progress=False, experiments_dir=experiments)
        prep = prepare(opts)
        print(f"corpus: {len(prep.passages)} passages of {args.index}, {len(prep.train)} training questions, "
              f"{prep.counts['negatives']} hard negatives")
        model_dir = None
        for target in ("reranker", "embedding"):
            hyper = {**TuneOptions(target=target, out="bench").hyper(), "batch_size": batch[target],
                     "max_length": max_length, "max_steps": args.steps, "epochs": 1}
            lab_s, raw_s, lab_loss, raw_loss, pairs = time_training(target, prep, hyper, work)
            print(f"train {target:<9} lab {lab_s:8.2f} s  raw {raw_s:8.2f} s  ratio {lab_s / raw_s:.3f}  "
                  f"{pairs / lab_s:.1f} pairs/s  loss lab {lab_loss:.6f} raw {raw_loss:.6f}")
            assert abs(lab_loss - raw_loss) < 1e-6, "the lab's trainer and the raw one trained differently"
            if target == "reranker":
                model_dir = work / "reranker"
                build_model("reranker", base_location(), work, max_length, 0).save_pretrained(str(model_dir))
        chosen, lab_ms, raw_ms = time_reranking(model_dir, prep, min(args.k, len(prep.passages)),
                                                3 if args.smoke else 10)
        print(f"rerank top {min(args.k, len(prep.passages))}  batch {chosen}  lab {lab_ms:.1f} ms/question  "
              f"raw {raw_ms:.1f} ms/question  ratio {lab_ms / raw_ms:.3f}")
    if args.smoke:
        print("smoke: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
