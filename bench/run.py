"""Speed of the lab as ratios over the raw libraries doing the same work.

    .venv/bin/python bench/run.py [--kb DIR] [--eval FILE] [--repeat N] [--skip-semantic] [--smoke]

1. index build: lab (chunk + embed + LanceDB write, empty caches) / plain
   ``SentenceTransformer.encode`` of the same chunk texts;
2. retrieval eval: lab (embed questions + LlamaIndex retriever over LanceDB + metrics: the
   evaluator's own ``lab.eval.stages.retrieve_stage`` over a ``lab.rag.pipeline.Pipeline``) / plain
   encode + numpy dot-product top-k + the same metrics; both must give the same MRR;
3. semantic splitter: LlamaIndex's stock SemanticSplitterNodeParser with HuggingFaceEmbedding
   (its defaults) / the lab's batched splitter; both must give the same chunks.

Models are loaded, the pipeline built and first imports done before timing starts on both sides;
each figure is the best of --repeat runs, the two sides alternating so that drift in machine
speed hits both. Defaults to the InsureLLM benchmark beside the project (76 documents, 150
questions) with turn13 (turn18 for the semantic splitter); writes bench/last.json.

``--smoke``: the test fixture (tests/fixtures: 4 documents, 6 questions, its small-retrieval and
small-semantic configs), one run each, nothing written; seconds, not minutes. Either mode exits
1 when a check fails (MRRs differ, chunks differ, the lab's index has another chunk count).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("LANCEDB_LOG", "error")  # before lancedb loads: no "No existing dataset" warnings
ROOT = Path(__file__).resolve().parents[1]

import numpy as np

from lab.progress import setup_logging
from lab.config import load_experiment, retrieval_only
from lab.evalsets.evalset import load_eval_set
from lab.metrics.retrieval import question_scores
from lab.models.embeddings import LabEmbedding, build_embedding
from lab.models.resolve import resolve_hf_model
from lab.rag.chunkers import chunk
from lab.rag.index import open_or_build
from lab.rag.loaders import load_folder

INSURELLM = ROOT.parent / "shared" / "benchmarks" / "insurellm"
FIXTURES = ROOT / "tests" / "fixtures"


def best(fn, repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def paired(lab_fn, plain_fn, repeat: int) -> tuple[tuple[float, object], tuple[float, object]]:
    """Best of ``repeat`` for each side, alternating lab and plain so drift hits both."""
    lab, plain = [], []
    for _ in range(repeat):
        lab.append(best(lab_fn, 1))
        plain.append(best(plain_fn, 1))
    return min(lab, key=lambda x: x[0]), min(plain, key=lambda x: x[0])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kb", type=Path, default=None, help="knowledge base (default: InsureLLM; --smoke: the fixture)")
    ap.add_argument("--eval", type=Path, default=None, help="eval set (default: InsureLLM; --smoke: the fixture)")
    ap.add_argument("--repeat", type=int, default=None, help="runs per side, best kept (default 3; --smoke: 1)")
    ap.add_argument("--skip-semantic", action="store_true", help="skip the (slow) stock semantic splitter")
    ap.add_argument("--smoke", action="store_true",
                    help="tiny run on the test fixture: checks only, writes nothing (a few seconds)")
    args = ap.parse_args()
    setup_logging(False)  # the CLI's logging: expected library warnings filtered, lab lines kept
    if args.smoke:
        experiments, base, semantic = FIXTURES / "experiments", "small-retrieval", "small-semantic"
        kb, eval_path = args.kb or FIXTURES / "kb", args.eval or FIXTURES / "eval.jsonl"
        repeat = args.repeat or 1
    else:
        experiments, base, semantic = ROOT / "experiments", "turn13", "turn18"
        kb, eval_path = args.kb or INSURELLM / "knowledge-base", args.eval or INSURELLM / "tests.jsonl"
        repeat = args.repeat or 3

    # retrieval only (no generator or judge to resolve); query embeddings never served from a
    # cache, so every timed retrieval computes them, as an evaluator's first run does
    overrides = retrieval_only({"data": {"knowledge_base": str(kb.resolve()), "eval_set": str(eval_path.resolve())},
                                "caches": {"query_embeddings": False}})
    cfg = load_experiment(base, experiments, overrides)
    resolved = resolve_hf_model(cfg.embedding.model, "embedding model")
    from sentence_transformers import SentenceTransformer

    plain_model = SentenceTransformer(resolved.location, device="cpu")
    corpus = load_folder(kb, cfg.loader.extensions, cfg.loader.max_file_bytes, False)
    rows = load_eval_set(eval_path, cfg.data.categories).rows
    texts = [n.get_content() for n in chunk(corpus, cfg.chunker, None)]
    print(f"corpus: {len(corpus.documents)} documents, {len(texts)} {base} chunks, {len(rows)} questions")
    figures: dict = {}
    failures: list[str] = []
    loaded = LabEmbedding(resolved, None, embed_batch_size=cfg.embedding.batch_size).load()

    def lab_embedding(embedding_cfg=cfg.embedding) -> LabEmbedding:
        """A cache-less lab embedding sharing one loaded model: time the work, not the load."""
        emb = build_embedding(embedding_cfg, resolved, None)
        emb.use_loaded(loaded)
        return emb

    # 1. index build ------------------------------------------------------------------------------
    def plain_encode():
        return plain_model.encode(texts, batch_size=cfg.embedding.batch_size, normalize_embeddings=True)

    def lab_build():
        with tempfile.TemporaryDirectory() as tmp:
            return open_or_build(corpus, cfg, lab_embedding(), Path(tmp), show_progress=False).n_chunks

    plain_encode()  # warm-ups: first imports and allocations count on neither side
    lab_build()
    (t_lab, n), (t_plain, _) = paired(lab_build, plain_encode, repeat)
    if n != len(texts):
        failures.append(f"index build: the lab's index has {n} chunks, the plain chunker {len(texts)}")
    figures["index_build"] = {"lab_s": t_lab, "plain_encode_s": t_plain, "ratio": t_lab / t_plain}
    print(f"index build      lab {t_lab:7.2f} s   plain encode {t_plain:7.2f} s   ratio {t_lab / t_plain:.3f}")

    # 2. retrieval eval ---------------------------------------------------------------------------
    from lab.eval.stages import Timer, retrieve_stage
    from lab.rag.pipeline import open_pipeline, resolve_models

    with tempfile.TemporaryDirectory() as tmp:
        # the evaluator's pipeline (retriever, chain), built here on an empty cache, outside timing
        pipe = open_pipeline(cfg, resolve_models(cfg, ROOT), ROOT, Path(tmp), show_progress=False, corpus=corpus)
        chunk_vecs = plain_encode()
        k = cfg.retriever.top_k

        def plain_eval():
            q = plain_model.encode([r.question for r in rows], batch_size=cfg.embedding.batch_size,
                                   normalize_embeddings=True)
            top = np.argsort(-(q @ chunk_vecs.T), axis=1)[:, :k]
            return [question_scores(r.keywords, [texts[j] for j in idx], cfg.metrics.k)["mrr"]
                    for r, idx in zip(rows, top)]

        def lab_eval():
            samples, _, counters = retrieve_stage(cfg, rows, pipe, Timer(), False)
            if counters["query_embeddings_computed"] != len(rows):  # a cache would time nothing
                raise RuntimeError(f"the lab computed {counters['query_embeddings_computed']} of {len(rows)} "
                                   "question embeddings: the timed retrieval must compute them all")
            return [s["metrics"]["mrr"] for s in samples]

        plain_eval()  # warm-ups (the pipeline's embedding model loads here)
        lab_eval()
        (t_lab_eval, lab_mrr), (t_plain_eval, plain_mrr) = paired(lab_eval, plain_eval, repeat)
    if lab_mrr != plain_mrr:
        differ = sum(a != b for a, b in zip(lab_mrr, plain_mrr))
        failures.append(f"retrieval eval: MRR lab {np.mean(lab_mrr):.4f} != plain {np.mean(plain_mrr):.4f} "
                        f"({differ} of {len(rows)} questions differ)")
    figures["retrieval_eval"] = {"lab_s": t_lab_eval, "plain_s": t_plain_eval, "ratio": t_lab_eval / t_plain_eval,
                                 "lab_mrr": float(np.mean(lab_mrr)), "plain_mrr": float(np.mean(plain_mrr))}
    print(f"retrieval eval   lab {t_lab_eval:7.2f} s   plain encode+numpy {t_plain_eval:7.2f} s   "
          f"ratio {t_lab_eval / t_plain_eval:.3f}   MRR lab {np.mean(lab_mrr):.4f} plain {np.mean(plain_mrr):.4f}")

    # 3. semantic splitter ------------------------------------------------------------------------
    if not args.skip_semantic:
        from llama_index.core.node_parser import SemanticSplitterNodeParser
        from llama_index.embeddings.huggingface import HuggingFaceEmbedding

        sem_cfg = load_experiment(semantic, experiments, overrides)
        sem = sem_cfg.chunker
        hf = HuggingFaceEmbedding(model_name=resolved.location, device="cpu")
        stock = SemanticSplitterNodeParser.from_defaults(
            embed_model=hf, buffer_size=sem.buffer_size,
            breakpoint_percentile_threshold=sem.breakpoint_percentile_threshold)
        t_stock, stock_nodes = best(lambda: stock.get_nodes_from_documents(corpus.documents), 1)

        def ours():
            return chunk(corpus, sem, lab_embedding(sem_cfg.embedding))

        t_ours, our_nodes = best(ours, 1)
        same = [n.get_content() for n in stock_nodes] == [n.get_content() for n in our_nodes]
        if not same:
            failures.append(f"semantic split: {len(stock_nodes)} stock chunks and {len(our_nodes)} lab chunks, "
                            "not the same texts")
        n_groups = sum(len(stock.sentence_splitter(d.text)) for d in corpus.documents)
        figures["semantic_splitter"] = {"stock_s": t_stock, "lab_s": t_ours, "speedup": t_stock / t_ours,
                                        "same_chunks": same, "sentence_groups": n_groups,
                                        "stock_batch_size": hf.embed_batch_size}
        print(f"semantic split   stock {t_stock:7.2f} s   lab {t_ours:7.2f} s   speedup {t_stock / t_ours:.1f}x   "
              f"same chunks: {same} ({len(our_nodes)} chunks from {n_groups} sentence groups)")
    if not args.smoke:
        out = ROOT / "bench" / "last.json"
        out.write_text(json.dumps({"cpu_count": os.cpu_count(), **figures}, indent=2))
        print(f"wrote {out.relative_to(ROOT)}")
    for f in failures:
        print(f"FAILED {f}", file=sys.stderr)
    if args.smoke and not failures:
        print("smoke: ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
