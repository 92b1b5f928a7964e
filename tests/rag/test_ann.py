"""ANN indexes (index.ann): config keys, index keys, the build, search settings and recall."""

from pathlib import Path

import numpy as np
import pytest

from lab.config import AnnConfig, load_experiment
from lab.errors import ConfigError
from lab.models.embeddings import build_embedding
from lab.models.resolve import resolve_hf_model
from lab.rag import ann
from lab.rag.index import index_key, open_or_build
from lab.rag.loaders import load_folder
from runs import lab, latest, load

FIX = Path(__file__).parents[1] / "fixtures"
EMBEDDING = {"model": "sentence-transformers/all-MiniLM-L6-v2"}


def setup(cache, **index):
    cfg = load_experiment("small-retrieval", FIX / "experiments", {"index": index} if index else None)
    emb = build_embedding(cfg.embedding, resolve_hf_model(cfg.embedding.model, "e"), cache)
    corpus = load_folder(FIX / "kb", cfg.loader.extensions, cfg.loader.max_file_bytes, False)
    return cfg, emb, corpus


def test_config_keys_and_defaults():
    a = AnnConfig()
    assert (a.kind, a.min_rows, a.nprobes, a.refine_factor, a.num_bits) == ("auto", 25_000, 20, None, 8)
    with pytest.raises(ValueError):
        AnnConfig(kind="ivf_annoy")
    with pytest.raises(ValueError):
        AnnConfig(nprobes=0)
    with pytest.raises(ValueError):
        AnnConfig(nprobe=5)  # a misspelt key is an error, not a silent default
    with pytest.raises(ValueError, match="at least 10 x refine_factor"):
        AnnConfig(kind="ivf_hnsw_sq", ef=50, refine_factor=10)  # LanceDB's rule, said before any work


def test_a_table_without_ann_keeps_its_key():
    cfg = load_experiment("small-retrieval", FIX / "experiments")
    # the key of every table built before index.ann existed: the section's absence must not move it
    assert index_key("c", cfg.chunker, cfg.embedding, "m") == index_key("c", cfg.chunker, cfg.embedding, "m", None)
    assert index_key("c", cfg.chunker, cfg.embedding, "m") == "8fbfe52857c86c0d5634"


def test_build_parameters_change_the_key_and_search_settings_do_not():
    cfg = load_experiment("small-retrieval", FIX / "experiments")
    key = lambda **kw: index_key("c", cfg.chunker, cfg.embedding, "m", AnnConfig(**kw))  # noqa: E731
    plain = index_key("c", cfg.chunker, cfg.embedding, "m")
    base = key(kind="ivf_pq", num_partitions=16)
    assert base != plain
    assert base != key(kind="ivf_pq", num_partitions=32)
    assert base != key(kind="ivf_pq", num_partitions=16, num_sub_vectors=48)
    assert base != key(kind="ivf_hnsw_sq", num_partitions=16)
    assert base == key(kind="ivf_pq", num_partitions=16, nprobes=80, refine_factor=10)
    assert key(kind="ivf_flat") == key(kind="ivf_flat", m=8)  # HNSW's m means nothing to IVF_FLAT
    assert key(kind="auto", min_rows=10) != key(kind="auto", min_rows=20)


def test_recall_at_by_hand():
    exact = [["a", "b", "c"], ["d", "e", "f"]]
    approx = [["a", "c", "x"], ["y", "z", "d"]]
    assert ann.recall_at(approx, exact, 1) == pytest.approx((1 + 0) / 2)
    assert ann.recall_at(approx, exact, 3) == pytest.approx((2 / 3 + 1 / 3) / 2)


def test_checks_name_the_fix():
    assert "divide the embedding size 384" in ann.check(AnnConfig(kind="ivf_pq", num_sub_vectors=50), 384, 1000)
    assert "num_bits 4" in ann.check(AnnConfig(kind="ivf_pq"), 384, 100)
    assert "exceeds the table's 10 rows" in ann.check(AnnConfig(kind="ivf_flat", num_partitions=64), 384, 10)
    assert ann.check(AnnConfig(kind="auto"), 384, 10) is None  # under min_rows: exact search, nothing to build
    assert "set refine_factor" in ann.advice(AnnConfig(kind="ivf_pq"), 10_000)
    assert ann.advice(AnnConfig(kind="ivf_pq", refine_factor=40), 10_000) is None
    assert ann.advice(AnnConfig(kind="auto"), 10**6) is None  # auto builds IVF_FLAT: exact distances
    assert ann.kind_for(AnnConfig(kind="auto"), 25_000) == "ivf_flat" and ann.kind_for(AnnConfig(), 24_999) is None


def test_ivf_flat_index_is_built_recorded_and_searched(tmp_path, minilm):
    cfg, emb, corpus = setup(tmp_path, ann={"kind": "ivf_flat", "num_partitions": 4, "nprobes": 1})
    handle = open_or_build(corpus, cfg, emb, tmp_path, show_progress=False)
    built = handle.manifest["ann"]
    assert built["kind"] == "ivf_flat" and built["rows"] == handle.n_chunks
    assert built["params"] == {"kind": "ivf_flat", "num_partitions": 4}
    store = handle.index.vector_store
    assert store.ann_query == {"nprobes": 1, "refine_factor": None, "ef": None}
    indices = store.table.list_indices()
    assert [i.index_type for i in indices] == ["IvfFlat"]
    # every partition probed: the IVF_FLAT index returns exactly what exhaustive search returns
    vectors = emb.encode(["Who founded Brightwater?", "What does the product cost?"], emb.query_prefix)
    full = ann.recall(store.table, vectors, {"nprobes": 4}, handle.n_chunks, 3)
    assert full["recall_at"] == {str(k): 1.0 for k in (1, 3, 5, 10) if k <= handle.n_chunks}
    assert full["n_queries"] == 2 and full["ms_per_query"]["ann"] > 0


def test_a_pq_index_on_a_tiny_table_is_a_config_error_before_anything_is_written(tmp_path, minilm):
    cfg, emb, corpus = setup(tmp_path, ann={"kind": "ivf_pq"})
    with pytest.raises(ConfigError, match="num_bits 4"):
        open_or_build(corpus, cfg, emb, tmp_path, show_progress=False)
    assert not [p for p in (tmp_path / "indexes").iterdir() if p.is_dir()]


def test_auto_under_min_rows_searches_exactly_and_says_why(tmp_path, minilm):
    cfg, emb, corpus = setup(tmp_path, ann={"kind": "auto"})
    handle = open_or_build(corpus, cfg, emb, tmp_path, show_progress=False)
    assert handle.manifest["ann"]["kind"] is None and "under index.ann.min_rows 25000" in handle.manifest["ann"]["why"]
    assert handle.index.vector_store.ann_query is None and handle.index.vector_store.table.list_indices() == []


@pytest.mark.slow
def test_a_run_over_an_ann_index_reports_its_recall(project):
    (project / "experiments" / "small-ann.yaml").write_text(
        "extends: small-retrieval\nchunker:\n  chunk_size: 80\n  chunk_overlap: 0\n"
        "index:\n  ann:\n    kind: ivf_flat\n    num_partitions: 4\n    nprobes: 1\n")
    done = lab(project, "run", "small-ann", "--no-progress")
    assert done.returncode == 0, done.stderr
    results, _ = load(latest(project, "small-ann"))
    got = results["ann"]
    assert results["index"]["n_chunks"] >= 20
    assert got["kind"] == "ivf_flat" and got["search"]["nprobes"] == 1
    assert got["n_queries"] == results["sample"]["n_questions"]
    assert set(got["recall_at"]) == {"1", "3", "5", "10"} and all(0 <= v <= 1 for v in got["recall_at"].values())
    assert got["recall_at"]["10"] < 1.0  # one partition of four: some true neighbours are missed
    assert "ann_recall_s" in results["timings"]
    html = (latest(project, "small-ann") / "report.html").read_text()
    assert "ANN recall@10" in html
    # all four partitions probed: recall 1.0, and the same table (search settings are not in the key)
    (project / "experiments" / "small-ann4.yaml").write_text("extends: small-ann\nindex:\n  ann:\n    nprobes: 4\n")
    done = lab(project, "run", "small-ann4", "--no-progress")
    assert done.returncode == 0, done.stderr
    again, _ = load(latest(project, "small-ann4"))
    assert again["index"]["key"] == results["index"]["key"] and again["index"]["reused"]
    assert set(again["ann"]["recall_at"].values()) == {1.0}


def test_the_cache_accepts_a_path_or_a_file_uri_and_refuses_object_stores(tmp_path, monkeypatch):
    from lab.errors import LabError
    from lab.paths import cache_dir, cache_location, cache_root

    assert cache_location(f"file://{tmp_path}/c%20d") == tmp_path / "c d"
    assert cache_location(f"file://localhost{tmp_path}") == tmp_path
    assert cache_location("~/x") == Path.home() / "x"
    assert cache_root(f"file://{tmp_path}/made") == tmp_path / "made" and (tmp_path / "made").is_dir()
    monkeypatch.setenv("LAB_CACHE", f"file://{tmp_path}/env")
    assert cache_dir() == tmp_path / "env"
    for uri in ("s3://bucket/lab", "gs://b/lab", "az://c/lab", "db://team-db"):
        with pytest.raises(LabError, match="local or mounted folder"):
            cache_location(uri)
    with pytest.raises(LabError, match="not host 'nas'"):
        cache_location("file://nas/share")


@pytest.mark.slow
def test_a_run_with_a_file_uri_cache_and_an_object_store_cache(project):
    done = lab(project, "run", "small-retrieval", "--no-progress", "--cache", f"file://{project}/uri-cache")
    assert done.returncode == 0, done.stderr
    results, _ = load(latest(project, "small-retrieval"))
    assert results["index"]["path"].startswith(f"{project}/uri-cache/indexes/")
    assert (project / "uri-cache" / "embeddings.sqlite").is_file()
    done = lab(project, "run", "small-retrieval", "--no-progress", "--cache", "s3://team-bucket/lab")
    assert done.returncode == 2 and "local or mounted folder" in done.stderr and "Traceback" not in done.stderr
