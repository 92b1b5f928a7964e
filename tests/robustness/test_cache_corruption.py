"""Damaged caches fail loudly instead of lying: a copy of a healthy cache (the fixture knowledge
base's index and embeddings) is damaged one way per test, then opened and searched as a run does.
Every damage is either set aside (``NAME.corrupt-<time>``, with a warning naming both paths) and
made again from what is intact, the results then equal to the healthy cache's, or stops with the
lab's error (exit 2), the path and the fix; no score that is not finite is returned.

The matrix of damages and what each gives is docs/robustness-caches.md."""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from llama_index.core.schema import QueryBundle

from lab.caches import CallCache, SemanticQueryCache, VectorCache
from lab.config import load_experiment
from lab.errors import CacheError, LabError
from lab.models.embeddings import build_embedding
from lab.models.resolve import resolve_hf_model
from lab.rag.index import index_key, open_or_build
from lab.rag.loaders import load_folder
from lab.rag.retrievers import build_retriever

FIX = Path(__file__).resolve().parents[1] / "fixtures"
QUESTIONS = [json.loads(line)["question"] for line in (FIX / "eval.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def cfg():
    return load_experiment("small-retrieval", FIX / "experiments")


@pytest.fixture(scope="module")
def corpus(cfg):
    return load_folder(FIX / "kb", cfg.loader.extensions, cfg.loader.max_file_bytes, False)


@pytest.fixture(scope="module")
def model(minilm):
    """The packaged model's weights, loaded once for the module and handed to each embedding."""
    return minilm._load()


def close(store: VectorCache, items: dict | None = None) -> None:
    """Write ``items``, then close the store's connection: SQLite folds its WAL into the file, so
    the file on disk holds every row (as after a run has exited)."""
    if items:
        store.put_many(items)
    conn = getattr(store._local, "conn", None)
    if conn is not None:
        conn.close()
        del store._local.conn


def embedding(cfg, cache: Path, model):
    emb = build_embedding(cfg.embedding, resolve_hf_model(cfg.embedding.model, "embedding model"), cache)
    emb._model = model  # loaded once (see the fixture): a test times the cache, not the load
    return emb


def search(cfg, corpus, cache: Path, model) -> tuple:
    """Open (or build) the index in ``cache`` and search it with every fixture question: the
    handle, the embedding (its counters) and [(chunk id, score rounded), ...] per question."""
    emb = embedding(cfg, cache, model)
    handle = open_or_build(corpus, cfg, emb, cache, show_progress=False)
    retriever = build_retriever(cfg.retriever, handle.index, emb)
    vecs = emb.encode(QUESTIONS, emb.query_prefix)
    hits = retriever.retrieve_many([QueryBundle(query_str=q, embedding=v.tolist()) for q, v in zip(QUESTIONS, vecs)])
    return handle, emb, [[(n.node.node_id, round(n.score, 5)) for n in r] for r in hits]


@pytest.fixture(scope="module")
def healthy(tmp_path_factory, cfg, corpus, model):
    """A healthy cache, its index key and its results."""
    cache = tmp_path_factory.mktemp("healthy") / "cache"
    handle, emb, results = search(cfg, corpus, cache, model)
    close(emb._cache)
    assert not (cache / "embeddings.sqlite-wal").exists()
    assert not handle.reused and all(np.isfinite(s) for r in results for _, s in r)
    return {"cache": cache, "key": handle.key, "results": results, "n_chunks": handle.n_chunks}


@pytest.fixture
def cache(tmp_path, healthy) -> Path:
    """A copy of the healthy cache, to damage."""
    dst = tmp_path / "cache"
    shutil.copytree(healthy["cache"], dst)
    return dst


def index_dir(cache: Path, healthy) -> Path:
    return cache / "indexes" / healthy["key"]


def data_file(cache: Path, healthy) -> Path:
    (f,) = (index_dir(cache, healthy) / "lancedb" / "chunks.lance" / "data").glob("*.lance")
    return f


def xor(path: Path, start: int, end: int, mask: int = 0x5A) -> None:
    data = bytearray(path.read_bytes())
    for i in range(start, end):
        data[i] ^= mask
    path.write_bytes(bytes(data))


def vector_bytes(cache: Path, healthy) -> tuple[int, int]:
    """Where the table's vectors lie in its data file (from the first row's bytes to the last's)."""
    import lancedb

    table = lancedb.connect(str(index_dir(cache, healthy) / "lancedb")).open_table("chunks")
    vecs = np.asarray(table.to_arrow().column("vector").to_pylist(), dtype=np.float32)
    data = data_file(cache, healthy).read_bytes()
    start = data.find(vecs[0].tobytes())
    assert start >= 0 and data.find(vecs[-1].tobytes()) == start + vecs[0].nbytes * (len(vecs) - 1)
    return start, start + vecs.nbytes


def set_aside(parent: Path, name: str) -> list[Path]:
    return sorted(parent.glob(f"{name}.corrupt-*"))


def warnings_of(caplog) -> str:
    return "\n".join(r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING)


# -- the index (LanceDB table and manifest) ---------------------------------------------------


def test_a_healthy_cache_is_reused_silently_and_unchanged(cache, healthy, cfg, corpus, model, caplog):
    before = sorted(str(p.relative_to(cache)) for p in cache.rglob("*"))
    with caplog.at_level(logging.WARNING):
        handle, emb, results = search(cfg, corpus, cache, model)
    assert handle.reused and emb.counters["computed"] == 0 and handle.key == healthy["key"]
    assert results == healthy["results"]
    assert warnings_of(caplog) == ""
    after = sorted(str(p.relative_to(cache)) for p in cache.rglob("*") if not p.name.endswith(("-wal", "-shm")))
    assert after == [p for p in before if not p.endswith(("-wal", "-shm"))]


def xor_vectors(cache, healthy):
    """The finding: every vector's bytes XORed; LanceDB reads them without complaint (before
    the checks, every score was -inf and the run's MRR 0.4167 instead of 0.875, with rc 0)."""
    xor(data_file(cache, healthy), *vector_bytes(cache, healthy))


def xor_pages(cache, healthy):
    f = data_file(cache, healthy)
    xor(f, f.stat().st_size // 4, f.stat().st_size * 3 // 4)


def truncate(cache, healthy):
    f = data_file(cache, healthy)
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])


def garble_version(cache, healthy):
    for m in (index_dir(cache, healthy) / "lancedb" / "chunks.lance" / "_versions").glob("*.manifest"):
        m.write_bytes(os.urandom(64) + m.read_bytes()[64:])


def garble_manifest(cache, healthy):
    m = index_dir(cache, healthy) / "manifest.json"
    m.write_bytes(b"\x87\x00" + m.read_bytes()[2:])


def manifest_miscounts(cache, healthy):
    m = index_dir(cache, healthy) / "manifest.json"
    m.write_text(json.dumps({**json.loads(m.read_text()), "n_chunks": healthy["n_chunks"] + 5}))


@pytest.mark.parametrize("damage,says", [
    (xor_vectors, "not finite or not of unit length"),
    (xor_pages, "it cannot be read: RuntimeError: lance error: Encountered corrupt file"),
    (truncate, "it cannot be read"),
    (lambda c, h: data_file(c, h).unlink(), "it cannot be read: RuntimeError: lance error: Not found"),
    (garble_version, "it cannot be read"),
    (lambda c, h: shutil.rmtree(index_dir(c, h) / "lancedb" / "chunks.lance" / "_versions"),
     "Table 'chunks' was not found"),
    (garble_manifest, "it cannot be read: UnicodeDecodeError"),
    (lambda c, h: (index_dir(c, h) / "manifest.json").write_text("{\"n_chunks\": 7,"), "JSONDecodeError"),
    (manifest_miscounts, "rows where its manifest says"),
], ids=["vectors-xored", "pages-xored", "data-truncated", "data-removed", "version-garbled", "versions-removed",
        "manifest-not-utf8", "manifest-not-json", "manifest-miscounts"])
def test_a_damaged_index_is_set_aside_and_built_again_from_the_embedding_cache(
        cache, healthy, cfg, corpus, model, caplog, damage, says):
    damage(cache, healthy)
    with caplog.at_level(logging.WARNING):
        handle, emb, results = search(cfg, corpus, cache, model)
    assert not handle.reused and handle.embedded == 0  # every vector came from the embedding cache
    assert results == healthy["results"]
    (aside,) = set_aside(cache / "indexes", healthy["key"])
    text = warnings_of(caplog)
    assert f"the index {index_dir(cache, healthy)} is damaged (" in text and says in text
    assert f"moved aside to {aside}" in text
    again, _, _ = search(cfg, corpus, cache, model)
    assert again.reused  # the rebuilt table passes the checks


def test_damage_the_sample_misses_stops_the_search_with_the_fix(cache, healthy, cfg, corpus, model, monkeypatch):
    """A table larger than the sample read at open: damage in rows it did not read is found by the
    search, whose distances cannot be those of unit vectors. The run stops (exit 2) rather than
    score with them, the table is moved aside, and the next run builds it again."""
    import lab.rag.store as store

    monkeypatch.setattr(store, "SAMPLE_ROWS", 1)  # row 0 only
    start, end = vector_bytes(cache, healthy)
    xor(data_file(cache, healthy), start + (end - start) // healthy["n_chunks"], end)  # every row but the first
    emb = embedding(cfg, cache, model)
    handle = open_or_build(corpus, cfg, emb, cache, show_progress=False)
    assert handle.reused
    retriever = build_retriever(cfg.retriever, handle.index, emb)
    bundles = [QueryBundle(query_str=q, embedding=v.tolist()) for q, v in zip(QUESTIONS, emb.encode(QUESTIONS, ""))]
    with pytest.raises(CacheError) as exc:
        retriever.retrieve_many(bundles)
    (aside,) = set_aside(cache / "indexes", healthy["key"])
    assert exc.value.exit_code == 2
    assert str(exc.value).startswith(f"the index {index_dir(cache, healthy)} is damaged: a search gave chunk ")
    assert f"moved aside to {aside}" in str(exc.value)
    assert "fix: run the command again: the index is built again" in str(exc.value)
    with pytest.raises(CacheError):  # the single-question path checks too
        retriever.retrieve(bundles[0])
    again, emb2, results = search(cfg, corpus, cache, model)
    assert not again.reused and again.embedded == 0 and results == healthy["results"]


def test_a_search_that_lance_cannot_run_on_a_damaged_table_stops_with_the_fix(
        cache, healthy, cfg, corpus, model, monkeypatch):
    """The data file goes after the table was opened and checked: LanceDB's error is not shown
    bare; the whole table is read, found unreadable, and moved aside."""
    emb = embedding(cfg, cache, model)
    handle = open_or_build(corpus, cfg, emb, cache, show_progress=False)
    retriever = build_retriever(cfg.retriever, handle.index, emb)
    data_file(cache, healthy).unlink()
    with pytest.raises(CacheError, match="is damaged: it cannot be read: .*Not found"):
        retriever.retrieve(QueryBundle(query_str=QUESTIONS[0], embedding=emb.encode(QUESTIONS[:1], "")[0].tolist()))
    assert set_aside(cache / "indexes", healthy["key"])


def test_a_bm25_search_on_a_damaged_table_stops_with_the_fix(tmp_path, healthy, corpus, model):
    from lab.rag.index import ensure_fts

    bm25 = load_experiment("small-bm25", FIX / "experiments")
    cache = tmp_path / "cache"
    shutil.copytree(healthy["cache"], cache)
    emb = embedding(bm25, cache, model)
    handle = open_or_build(corpus, bm25, emb, cache, show_progress=False)
    ensure_fts(handle, cache)
    retriever = build_retriever(bm25.retriever, handle.index, emb)
    assert retriever.retrieve(QUESTIONS[0])
    data_file(cache, healthy).unlink()
    with pytest.raises(CacheError, match=f"the index {index_dir(cache, healthy)} is damaged: it cannot be read"):
        retriever.retrieve(QUESTIONS[0])


def test_an_index_that_cannot_be_moved_aside_is_an_error_with_the_fix(cache, healthy, cfg, corpus, model,
                                                                        monkeypatch):
    import lab.caches as caches

    garble_manifest(cache, healthy)

    def refuse(src, dst):
        raise PermissionError(13, "Permission denied", str(src))

    monkeypatch.setattr(caches.os, "replace", refuse)
    with pytest.raises(CacheError) as exc:
        open_or_build(corpus, cfg, embedding(cfg, cache, model), cache, show_progress=False)
    assert exc.value.exit_code == 2
    assert f"{index_dir(cache, healthy)} is damaged (it cannot be read: UnicodeDecodeError" in str(exc.value)
    assert "cannot be moved aside: Permission denied" in str(exc.value)
    assert f"fix: delete {index_dir(cache, healthy)}: it is a cache" in str(exc.value)


def test_a_score_that_is_not_finite_never_reaches_the_metrics():
    from lab.rag.postprocess import score_float

    assert score_float(np.float32(0.25)) == 0.25 and score_float(None) is None
    for bad in (float("-inf"), float("nan"), np.float32("inf")):
        with pytest.raises(CacheError, match="a retrieval score is .*: an index or a score cache is damaged"):
            score_float(bad)


# -- the embedding cache (embeddings.sqlite) --------------------------------------------------


def without_index(cache: Path) -> None:
    shutil.rmtree(cache / "indexes")


def truncate_db(cache):
    db = cache / "embeddings.sqlite"
    db.write_bytes(db.read_bytes()[: db.stat().st_size // 2])


def garble_header(cache):
    db = cache / "embeddings.sqlite"
    db.write_bytes(os.urandom(100) + db.read_bytes()[100:])


@pytest.mark.parametrize("damage,says", [
    (truncate_db, "database disk image is malformed"),
    (garble_header, "file is not a database"),
], ids=["truncated", "header-garbled"])
@pytest.mark.parametrize("index", ["reused", "built"])
def test_a_damaged_embedding_cache_is_set_aside_and_made_again(cache, healthy, cfg, corpus, model, caplog,
                                                               damage, says, index):
    if index == "built":
        without_index(cache)
    damage(cache)
    with caplog.at_level(logging.WARNING):
        handle, emb, results = search(cfg, corpus, cache, model)
    assert results == healthy["results"]
    (aside,) = set_aside(cache, "embeddings.sqlite")
    text = warnings_of(caplog)
    assert f"{cache / 'embeddings.sqlite'} is damaged ({says}): moved aside to {aside}" in text
    assert handle.reused == (index == "reused")
    kept = int(re.search(r"; (\d+) entries kept from it", text).group(1))
    assert emb.counters["computed"] > 0
    with sqlite3.connect(cache / "embeddings.sqlite") as conn:  # made again: what was kept, and what was computed
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert conn.execute("SELECT count(*) FROM vectors").fetchone()[0] == kept + emb.counters["computed"]


def rewrite_blobs(cache: Path, fn) -> int:
    with sqlite3.connect(cache / "embeddings.sqlite") as conn:
        rows = conn.execute("SELECT key, vec FROM vectors ORDER BY key").fetchall()
        conn.executemany("UPDATE vectors SET vec = ? WHERE key = ?", [(fn(i, v), k) for i, (k, v) in enumerate(rows)])
    conn.close()
    return len(rows)


def random_finite(i: int, blob: bytes) -> bytes:
    """Random bytes of the right length, made finite (no NaN): values no model gives."""
    return np.nan_to_num(np.frombuffer(os.urandom(len(blob)), dtype=np.float32), posinf=1.0, neginf=1.0,
                         nan=1.0).tobytes()


@pytest.mark.parametrize("fn", [
    lambda i, blob: os.urandom(len(blob)),  # the right length, random: NaN and huge values
    random_finite,  # the right length, finite, not of unit length
    lambda i, blob: os.urandom(len(blob) - 4 * (1 + i % 5)),  # shorter, by 1 to 5 values
    lambda i, blob: blob[:-3],  # not a whole number of float32 values
    lambda i, blob: blob[: len(blob) // 2] if i % 2 else blob,  # half of them cut in half
], ids=["random", "finite-not-unit", "shorter", "odd-length", "half-cut"])
@pytest.mark.parametrize("index", ["reused", "built"])
def test_damaged_vectors_are_computed_again_and_replaced(cache, healthy, cfg, corpus, model, caplog, fn, index):
    if index == "built":
        without_index(cache)
    rewrite_blobs(cache, fn)
    with caplog.at_level(logging.WARNING):
        handle, emb, results = search(cfg, corpus, cache, model)
    assert results == healthy["results"]
    assert emb.counters["computed"] > 0 and "damaged" in warnings_of(caplog)
    assert str(cache / "embeddings.sqlite") in warnings_of(caplog)
    # replaced: the next pass finds every vector whole
    _, again, results2 = search(cfg, corpus, cache, model)
    assert again.counters["computed"] == 0 and results2 == healthy["results"]


def test_salvage_keeps_the_rows_that_can_be_read(tmp_path, caplog):
    """A truncated file of 3,000 vectors: the new file holds the rows before the damage, exactly."""
    path = tmp_path / "embeddings.sqlite"
    rng = np.random.default_rng(3)
    vecs = {f"k{i:05d}": rng.standard_normal(64).astype(np.float32) for i in range(3000)}
    close(VectorCache(path), vecs)
    path.write_bytes(path.read_bytes()[: path.stat().st_size * 6 // 10])
    with caplog.at_level(logging.WARNING):
        store = VectorCache(path)
        got = store.get_many(list(vecs))
    assert 0 < len(got) < len(vecs)
    assert all(np.array_equal(v, vecs[k]) for k, v in got.items())
    assert f"{len(got)} entries kept from it" in warnings_of(caplog)
    assert len(set_aside(tmp_path, "embeddings.sqlite")) == 1


def test_a_cache_file_that_cannot_be_moved_aside_is_an_error_with_the_fix(tmp_path, monkeypatch):
    import lab.caches as caches

    path = tmp_path / "embeddings.sqlite"
    path.write_bytes(os.urandom(8192))

    def refuse(src, dst):
        raise PermissionError(13, "Permission denied", str(src))

    monkeypatch.setattr(caches.os, "replace", refuse)
    with pytest.raises(LabError) as exc:
        VectorCache(path)
    assert exc.value.exit_code == 2
    assert str(exc.value) == (f"{path} is damaged (file is not a database) and cannot be moved aside: Permission "
                              f"denied\n  fix: delete {path}: it is a cache, and what it held is computed again")


def test_damage_that_opening_does_not_see_is_set_aside_at_the_first_read(tmp_path, caplog):
    """Every page garbled but the first (the schema): the file opens; the first read finds it."""
    path = tmp_path / "embeddings.sqlite"
    close(VectorCache(path), {f"k{i}": np.ones(4, dtype=np.float32) / 2 for i in range(2000)})
    data = bytearray(path.read_bytes())
    data[4096:] = os.urandom(len(data) - 4096)
    path.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING):
        store = VectorCache(path)
        assert warnings_of(caplog) == ""
        got = store.get_many([f"k{i}" for i in range(2000)])
    assert got == {} and set_aside(tmp_path, "embeddings.sqlite")
    assert "is damaged (database disk image is malformed)" in warnings_of(caplog)
    store.put_many({"k1": np.ones(4, dtype=np.float32) / 2})
    assert list(store.get_many(["k1"])) == ["k1"]


def test_an_llm_response_that_is_not_json_is_asked_again(tmp_path, caplog):
    store = CallCache(tmp_path / "llm.sqlite")
    store.put("a", {"text": "fine"})
    with sqlite3.connect(tmp_path / "llm.sqlite") as conn:
        conn.execute("UPDATE calls SET body = ? WHERE key = 'a'", ('{"text": "fi',))
    conn.close()
    with caplog.at_level(logging.WARNING):
        assert store.get("a") is None
    assert "the entry a is damaged (not JSON)" in warnings_of(caplog)
    store.put("a", {"text": "fine"})
    assert store.get("a") == {"text": "fine"}


def test_semantic_cache_entries_that_are_damaged_are_left_out(tmp_path, caplog):
    """A vector of another length, hits that are not JSON, a score that is not finite: each such
    entry is left out (the question is retrieved again), the others serve as before."""
    path = tmp_path / "semantic.sqlite"
    unit = np.eye(8, dtype=np.float32)
    SemanticQueryCache(path, "s", 0.9).put_many([(f"q{i}", unit[i], [["n", 0.5]]) for i in range(5)])
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE entries SET vec = ? WHERE question = 'q1'", (unit[1][:5].tobytes(),))
        conn.execute("UPDATE entries SET hits = ? WHERE question = 'q2'", ("[[",))
        conn.execute("UPDATE entries SET hits = ? WHERE question = 'q4'", ('[["n", NaN]]',))
    conn.close()
    with caplog.at_level(logging.WARNING):
        cache = SemanticQueryCache(path, "s", 0.9)
    assert "3 damaged entries are left out" in warnings_of(caplog)
    assert cache.lookup(unit[0])["question"] == "q0" and cache.lookup(unit[3])["question"] == "q3"
    assert cache.lookup(unit[1]) is None and cache.lookup(unit[2]) is None and cache.lookup(unit[4]) is None


def test_the_index_key_is_unchanged(cfg, corpus, model, healthy):
    emb = embedding(cfg, healthy["cache"], model)
    assert index_key(corpus.content_hash, cfg.chunker, cfg.embedding, emb.fingerprint) == healthy["key"]


@pytest.mark.slow
def test_the_finding_end_to_end(project, tmp_path):
    """The finding as reported, through ``lab run``: the vector bytes of the table's data file
    XORed gave rc 0, "index reused", every score -inf and MRR 0.4167 instead of 0.875, silently;
    then the embedding cache's header garbled gave a traceback. Now both runs warn, name the
    damaged path and where it went, and equal the healthy run."""
    from runs import lab, latest, load

    def run() -> tuple:
        p = lab(project, "run", "small-retrieval", "--no-progress")
        assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr[-3000:]
        results, samples = load(latest(project, "small-retrieval"))
        return p.stderr, results, [[c["score"] for c in s["retrieved"]] for s in samples]

    _, healthy_results, healthy_scores = run()
    cache = project / "cache"
    (key,) = [d.name for d in (cache / "indexes").iterdir() if d.is_dir()]
    found = {"cache": cache, "key": key}
    xor(data_file(cache, found), *vector_bytes(cache, found))
    err, results, scores = run()
    assert f"the index {cache / 'indexes' / key} is damaged (the vector of chunk " in err
    assert results["index"]["reused"] is False and results["index"]["texts_embedded"] == 0
    assert results["metrics"]["overall"]["mrr"] == healthy_results["metrics"]["overall"]["mrr"]
    assert scores == healthy_scores and all(np.isfinite(s) for q in scores for s in q)

    garble_header(cache)
    err, results, scores = run()
    assert f"{cache / 'embeddings.sqlite'} is damaged (file is not a database): moved aside to " in err
    assert results["metrics"]["overall"]["mrr"] == healthy_results["metrics"]["overall"]["mrr"]
    assert scores == healthy_scores
