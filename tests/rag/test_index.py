from pathlib import Path

import pytest

from lab.config import load_experiment
from lab.models.embeddings import build_embedding
from lab.rag.index import index_key, index_passages, open_or_build
from lab.rag.loaders import load_folder
from lab.models.resolve import resolve_hf_model

FIX = Path(__file__).parents[1] / "fixtures"


def setup(name, cache):
    cfg = load_experiment(name, FIX / "experiments")
    emb = build_embedding(cfg.embedding, resolve_hf_model(cfg.embedding.model, "e"), cache)
    corpus = load_folder(FIX / "kb", cfg.loader.extensions, cfg.loader.max_file_bytes, False)
    return cfg, emb, corpus


def table_rows(handle) -> list[dict]:
    """Every row of the index's table, vectors included, read from its folder."""
    import lancedb

    return lancedb.connect(str(handle.path / "lancedb")).open_table("chunks").to_arrow().to_pylist()


def test_build_then_reuse_without_embedding(tmp_path):
    cfg, emb, corpus = setup("small", tmp_path)
    first = open_or_build(corpus, cfg, emb, tmp_path, show_progress=False)
    assert not first.reused and first.embedded == first.n_chunks > 4
    rows = table_rows(first)
    assert len(rows) == first.n_chunks and len(rows[0]["vector"]) == 384
    # the one reader of its passages: ids, documents, texts and places, in table order
    passages = index_passages(first)
    assert [p.id for p in passages] == [r["id"] for r in rows] and [p.text for p in passages] == [r["text"] for r in rows]
    assert all(len(p.pieces) == 1 and p.pieces[0][0] == p.source for p in passages)
    about = [p for p in passages if p.source == "company/about.md"]
    text = (FIX / "kb" / "company" / "about.md").read_text(encoding="utf-8")
    assert about and all(text[p.pieces[0][1]:p.pieces[0][2]] == p.text for p in about)
    assert (tmp_path / "indexes" / first.key / "lancedb" / "chunks.lance").is_dir()

    cfg2, emb2, corpus2 = setup("small-llm-rerank", tmp_path)  # same chunker + model, other retriever
    second = open_or_build(corpus2, cfg2, emb2, tmp_path, show_progress=False)
    assert second.reused and second.key == first.key and second.embedded == 0
    assert emb2.counters == {"computed": 0, "cached": 0}
    hits = second.index.as_retriever(similarity_top_k=2, embed_model=emb2).retrieve("Who founded Brightwater?")
    assert hits[0].node.metadata["source"] == "company/about.md"


def test_key_depends_on_corpus_chunker_and_model(tmp_path):
    cfg, emb, corpus = setup("small", tmp_path)
    sem = load_experiment("small-semantic", FIX / "experiments")
    base = index_key(corpus.content_hash, cfg.chunker, cfg.embedding, emb.fingerprint)
    assert base != index_key(corpus.content_hash, sem.chunker, cfg.embedding, emb.fingerprint)
    assert base != index_key("other", cfg.chunker, cfg.embedding, emb.fingerprint)
    assert base != index_key(corpus.content_hash, cfg.chunker, cfg.embedding, "other-model")
    bigger_batch = cfg.embedding.model_copy(update={"batch_size": 7})
    assert base == index_key(corpus.content_hash, cfg.chunker, bigger_batch, emb.fingerprint)


def test_interrupted_build_leaves_no_table_and_is_rebuilt(tmp_path, monkeypatch):
    cfg, emb, corpus = setup("small", tmp_path)
    import lab.rag.index as index_mod

    def crash(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(index_mod.os, "replace", crash)
    with pytest.raises(KeyboardInterrupt):
        open_or_build(corpus, cfg, emb, tmp_path, show_progress=False)
    monkeypatch.undo()
    key = index_key(corpus.content_hash, cfg.chunker, cfg.embedding, emb.fingerprint)
    assert not (tmp_path / "indexes" / key).exists()  # nothing half-written in place
    again = open_or_build(corpus, cfg, emb, tmp_path, show_progress=False)
    assert not again.reused and again.embedded == 0  # vectors came from the embedding cache
    assert not list((tmp_path / "indexes").glob(".*tmp*"))  # the debris was cleaned
    assert len(table_rows(again)) == again.n_chunks


def test_batched_retrieval_equals_the_llamaindex_path(tmp_path):
    from llama_index.core.schema import QueryBundle

    from lab.rag.retrievers import build_retriever

    cfg, emb, corpus = setup("small", tmp_path)
    handle = open_or_build(corpus, cfg, emb, tmp_path, show_progress=False)
    retriever = build_retriever(cfg.retriever, handle.index, emb)
    questions = ["Who founded Brightwater?", "Ember 90 price", "Ghent workshop", "warranty"]
    vecs = emb.encode(questions, "")
    bundles = [QueryBundle(query_str=q, embedding=v.tolist()) for q, v in zip(questions, vecs)]
    many = retriever.retrieve_many(bundles)
    single = [retriever.retrieve(b) for b in bundles]
    assert [[n.node.node_id for n in r] for r in many] == [[n.node.node_id for n in r] for r in single]
    for r_many, r_single in zip(many, single):
        assert [n.score for n in r_many] == pytest.approx([n.score for n in r_single])
        assert all(len(r) == 3 for r in (r_many, r_single))
    # scores are cosine similarities of the unit vectors
    import numpy as np

    top = many[0][0]
    chunk_vec = np.array(emb.encode([top.node.get_content()], "")[0])
    assert top.score == pytest.approx(float(chunk_vec @ vecs[0]), abs=1e-4)


def test_e5_style_prefixes_change_the_index_key_and_the_vectors(minilm):
    cfg = load_experiment("small", FIX / "experiments")
    plain = index_key("c", cfg.chunker, cfg.embedding, "m")
    prefixed = cfg.embedding.model_copy(update={"passage_prefix": "passage: "})
    assert index_key("c", cfg.chunker, prefixed, "m") != plain
    queried = cfg.embedding.model_copy(update={"query_prefix": "query: "})
    assert index_key("c", cfg.chunker, queried, "m") == plain  # queries do not touch the table
    a, b = minilm.encode(["Ember 90 price"], ""), minilm.encode(["Ember 90 price"], "query: ")
    assert float(a[0] @ b[0]) < 0.999  # the prefix is embedded with the text
