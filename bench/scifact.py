"""SciFact's index build and full retrieval runs, as ratios over the raw libraries doing the same work.

    .venv/bin/python bench/scifact.py [--beir DIR] [--repeat N] [--out FILE] [--smoke]

On BEIR SciFact (../shared/benchmarks/scifact: 5,183 abstracts, the 300 test queries), each
abstract one chunk as in experiments/scifact-*.yaml:

1. **index build**: the lab (load the imported corpus, chunk, embed with empty caches, write the
   LanceDB table, build its full-text index: ``open_or_build`` + ``ensure_fts``) / the raw
   libraries (``SentenceTransformer.encode`` of the same texts, and a LanceDB table of them with
   the same full-text index built by ``create_fts_index`` called directly);
2. **dense run**: the lab's evaluator stage (``lab.eval.stages.retrieve_stage`` over
   scifact-dense's pipeline: question embeddings, LanceDB search, the qrels metrics) / encode the
   questions + numpy dot-product top 100 + the same metrics (``lab.metrics.qrels``, pure);
3. **BM25 run**: the same stage over scifact-bm25 / LanceDB's full-text search called directly
   (the BM25 the lab uses), top 100, the same metrics.

Each side's nDCG@10 must agree (within 0.002: a near-tie of two scores may order differently in
LanceDB and numpy); the bench exits 1 when it does not. Models load and first imports happen
before timing; each figure is the best of --repeat runs, the sides alternating. Writes
bench/scifact.json (or --out). ``--smoke``: a slice (the first 10 test queries, their documents and
the first 40 others), one run each, nothing written; about a minute, for ``make test``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import unicodedata
import warnings
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("LANCEDB_LOG", "error")
ROOT = Path(__file__).resolve().parents[1]
SCIFACT = ROOT.parent / "shared" / "benchmarks" / "scifact"

import numpy as np

from lab.config import load_experiment, retrieval_only
from lab.evalsets.evalset import document_ids, load_eval_set, qrels_sources
from lab.evalsets.interop import import_set
from lab.metrics.qrels import qrels_scores
from lab.models.embeddings import LabEmbedding, build_embedding
from lab.models.resolve import resolve_hf_model
from lab.progress import setup_logging
from lab.rag.chunkers import chunk
from lab.rag.index import FTS_SETTINGS, ensure_fts, open_or_build
from lab.rag.loaders import load_folder

TOP = 100


def paired(lab_fn, plain_fn, repeat: int):
    """(seconds, result) of the best of ``repeat`` runs of each side, alternating."""
    lab, plain = [], []
    for _ in range(repeat):
        for side, fn in ((lab, lab_fn), (plain, plain_fn)):
            t0 = time.perf_counter()
            out = fn()
            side.append((time.perf_counter() - t0, out))
    return min(lab, key=lambda x: x[0]), min(plain, key=lambda x: x[0])


def slice_of(beir: Path, out: Path, n_queries: int = 10, n_others: int = 40) -> Path:
    """A small BEIR folder: the first ``n_queries`` test queries, their documents and the first
    ``n_others`` documents of the corpus (the same lines, in the corpus's order)."""
    qrels = (beir / "qrels" / "test.tsv").read_text().splitlines()
    queries = list(dict.fromkeys(line.split("\t")[0] for line in qrels[1:]))[:n_queries]
    kept = [line for line in qrels[1:] if line.split("\t")[0] in queries]
    wanted = {line.split("\t")[1] for line in kept}
    corpus = (beir / "corpus.jsonl").read_text().splitlines()
    docs = [line for i, line in enumerate(corpus) if i < n_others or json.loads(line)["_id"] in wanted]
    (out / "qrels").mkdir(parents=True)
    (out / "corpus.jsonl").write_text("\n".join(docs) + "\n")
    (out / "queries.jsonl").write_text("\n".join(line for line in (beir / "queries.jsonl").read_text().splitlines()
                                                 if json.loads(line)["_id"] in queries) + "\n")
    (out / "qrels" / "test.tsv").write_text("\n".join([qrels[0], *kept]) + "\n")
    return out


def fts_terms(text: str) -> str:
    """The question as plain terms, as the lab hands it to LanceDB (its query parser would read
    ``?``, ``:`` or quotes as syntax)."""
    text = unicodedata.normalize("NFC", text)
    return " ".join("".join(ch if ch.isalnum() else " " for ch in text).split())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--beir", type=Path, default=SCIFACT, help="the BEIR SciFact folder")
    ap.add_argument("--repeat", type=int, default=None, help="runs per side, best kept (default 2; --smoke: 1)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "scifact.json")
    ap.add_argument("--smoke", action="store_true", help="a slice of SciFact, checks only, nothing written")
    ap.add_argument("--index-cache", type=Path, default=None,
                    help="time the retrieval runs only, over the SciFact index this cache holds (`lab run "
                         "scifact-bm25` built it there); the plain side reads its document vectors from that index")
    args = ap.parse_args()
    setup_logging(False)
    repeat = args.repeat or (1 if args.smoke else 2)
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        beir = slice_of(args.beir, tmp / "slice") if args.smoke else args.beir
        kb, eval_path = tmp / "kb", tmp / "test.jsonl"
        import_set("beir", beir, eval_path, kb_out=kb, category="scifact")
        return run(kb, eval_path, tmp, repeat, None if args.smoke else args.out, args.index_cache)


def run(kb: Path, eval_path: Path, tmp: Path, repeat: int, out: Path | None, index_cache: Path | None = None) -> int:
    overrides = retrieval_only({"data": {"knowledge_base": str(kb), "eval_set": str(eval_path)},
                                "caches": {"query_embeddings": False}})
    cfgs = {name: load_experiment(f"scifact-{name}", ROOT / "experiments", overrides) for name in ("dense", "bm25")}
    cfg = cfgs["dense"]
    resolved = resolve_hf_model(cfg.embedding.model, "embedding model")
    from sentence_transformers import SentenceTransformer
    import lancedb

    plain_model = SentenceTransformer(resolved.location, device="cpu")
    corpus = load_folder(kb, cfg.loader.extensions, cfg.loader.max_file_bytes, False)
    rows = load_eval_set(eval_path, cfg.data.categories).rows
    nodes = chunk(corpus, cfg.chunker, None)
    texts, sources = [n.get_content() for n in nodes], [n.metadata["source"] for n in nodes]
    ids = document_ids(sources)
    graded = [qrels_sources(r.qrels, ids) for r in rows]
    print(f"corpus: {len(corpus.documents)} documents, {len(texts)} chunks, {len(rows)} questions")
    loaded = LabEmbedding(resolved, None, embed_batch_size=cfg.embedding.batch_size).load()
    bs = cfg.embedding.batch_size
    figures: dict = {"cpu_count": os.cpu_count(), "documents": len(texts), "questions": len(rows)}
    failures: list[str] = []
    builds = iter(range(10**6))

    def lab_embedding():
        emb = build_embedding(cfg.embedding, resolved, None)
        emb.use_loaded(loaded)  # time the work, not the load
        return emb

    # 1. index build ------------------------------------------------------------------------------
    def lab_build():
        root = tmp / f"lab-{next(builds)}"
        handle = open_or_build(corpus, cfg, lab_embedding(), root, show_progress=False)
        ensure_fts(handle, root)
        return handle.n_chunks

    def plain_build(vecs=None):
        if vecs is None:
            vecs = plain_model.encode(texts, batch_size=bs, normalize_embeddings=True)
        db = lancedb.connect(str(tmp / f"plain-{next(builds)}"))
        table = db.create_table("docs", data=[{"id": i, "source": s, "text": t, "vector": v}
                                              for i, (s, t, v) in enumerate(zip(sources, texts, vecs))])
        s = FTS_SETTINGS
        with warnings.catch_warnings():  # "deprecated, use create_index": as the lab calls it (lab.rag.index)
            warnings.simplefilter("ignore")
            table.create_fts_index(s["column"], use_tantivy=False, replace=True, base_tokenizer=s["base_tokenizer"],
                                   language=s["language"], lower_case=s["lower_case"], stem=s["stem"],
                                   remove_stop_words=s["remove_stop_words"], ascii_folding=s["ascii_folding"])
        return vecs, table

    plain_model.encode(texts[:64], batch_size=bs)  # warm-up: first imports and allocations
    if index_cache is None:
        (t_lab, n), (t_plain, (vecs, table)) = paired(lab_build, plain_build, repeat)
        if n != len(texts):
            failures.append(f"index build: the lab's index has {n} chunks, the plain side {len(texts)}")
        figures["index_build"] = {"lab_s": t_lab, "plain_s": t_plain, "ratio": t_lab / t_plain}
        print(f"index build      lab {t_lab:8.2f} s   plain encode+lancedb {t_plain:8.2f} s   ratio {t_lab / t_plain:.3f}")
        lab_root = tmp / "lab-0"
    else:  # the built index's vectors, in the chunks' order, for the plain side too
        handle = open_or_build(corpus, cfg, lab_embedding(), index_cache, show_progress=False)
        if not handle.reused:
            failures.append(f"--index-cache {index_cache}: it held no SciFact index (one was built)")
        rows_ = handle.index.vector_store.table.to_arrow().select(["id", "vector"]).to_pylist()
        by_id = {r["id"]: r["vector"] for r in rows_}
        vecs, table = plain_build(np.asarray([by_id[n.node_id] for n in nodes], dtype=np.float32))
        lab_root = index_cache
        print(f"index reused from {index_cache}: {handle.n_chunks} chunks")

    # 2. and 3. full retrieval runs ---------------------------------------------------------------
    from lab.eval.stages import Timer, retrieve_stage
    from lab.rag.pipeline import open_pipeline, resolve_models

    def scores(ranked: list[list[str]]) -> dict[str, float]:
        per = [qrels_scores(r, g) for r, g in zip(ranked, graded)]
        return {m: float(np.mean([p[m] for p in per])) for m in per[0]}

    def plain_dense():
        q = plain_model.encode([r.question for r in rows], batch_size=bs, normalize_embeddings=True)
        top = np.argsort(-(q @ vecs.T), axis=1)[:, :TOP]
        return scores([[sources[j] for j in idx] for idx in top])

    def plain_bm25():
        return scores([[h["source"] for h in table.search(fts_terms(r.question), query_type="fts").limit(TOP)
                        .select(["source"]).to_list()] for r in rows])

    for name, plain_fn in (("dense", plain_dense), ("bm25", plain_bm25)):
        run_cfg = cfgs[name]
        # on the first timed build's cache: its index is reused (same corpus, chunks and model), not built again
        pipe = open_pipeline(run_cfg, resolve_models(run_cfg, ROOT), ROOT, lab_root, show_progress=False,
                             corpus=corpus)
        pipe.embed_model.use_loaded(loaded)

        def lab_run():
            samples, _, _ = retrieve_stage(run_cfg, rows, pipe, Timer(), False)
            return {m: float(np.mean([s["metrics"][m] for s in samples])) for m in samples[0]["metrics"]
                    if m.startswith("qrels_")}

        lab_run(), plain_fn()  # warm-ups
        (t_l, lab_m), (t_p, plain_m) = paired(lab_run, plain_fn, repeat)
        if abs(lab_m["qrels_ndcg10"] - plain_m["qrels_ndcg10"]) > 0.002:
            failures.append(f"{name} run: nDCG@10 lab {lab_m['qrels_ndcg10']:.4f} != plain {plain_m['qrels_ndcg10']:.4f}")
        figures[f"{name}_run"] = {"lab_s": t_l, "plain_s": t_p, "ratio": t_l / t_p, "lab": lab_m, "plain": plain_m}
        what = "encode+numpy" if name == "dense" else "lancedb fts  "
        print(f"{name + ' run':<16} lab {t_l:8.2f} s   plain {what} {t_p:8.2f} s   ratio {t_l / t_p:.3f}   "
              f"nDCG@10 lab {lab_m['qrels_ndcg10']:.4f} plain {plain_m['qrels_ndcg10']:.4f}   "
              f"R@100 lab {lab_m['qrels_recall100']:.4f} plain {plain_m['qrels_recall100']:.4f}")
    if out is not None:
        out.write_text(json.dumps(figures, indent=2))
        print(f"wrote {out}")
    for f in failures:
        print(f"FAILED {f}", file=sys.stderr)
    if out is None and not failures:
        print("smoke: ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
