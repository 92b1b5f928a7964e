"""Index: one LanceDB table per (corpus content, chunker config, embedding model), on disk.

Layout under the cache: ``indexes/<key>/lancedb`` (the table ``chunks``) and
``indexes/<key>/manifest.json``. A build writes into a temporary folder and renames it into
place when complete, under a file lock, so an interrupted build leaves no half-written table
and two runs asking for the same key build it once. A second experiment with the same key opens
the table without chunking or embedding anything.

A reused table is checked cheaply (its manifest, then :func:`lab.rag.store.table_damage`: its row
count against the manifest's, a sample of rows); a damaged one is moved aside as
``<key>.corrupt-<time>``, with a warning, and built again (its embeddings come from the cache).
Searches check their distances too (:mod:`lab.rag.store`).
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence

from llama_index.core import VectorStoreIndex
from llama_index.core.schema import MetadataMode
from llama_index.core.vector_stores.utils import node_to_metadata_dict
from llama_index.vector_stores.lancedb import LanceDBVectorStore

from lab import faults
from lab.caches import cache_fault, set_aside
from lab.config import AnnConfig, ChunkerConfig, EmbeddingConfig, ExperimentConfig, HeadersConfig
from lab.errors import ConfigError
from lab.evidence.holds import Passage
from lab.progress import Ticker
from lab.rag import ann as ann_index
from lab.rag.chunkers import chunk, matched_text
from lab.rag.loaders import Corpus
from lab.rag.store import LabLanceDBVectorStore, first_line, locked, table_damage
from lab.rag.summaries import DocumentSummarizer

log = logging.getLogger(__name__)

TABLE = "chunks"
MANIFEST = "manifest.json"


class _BuildStore(LanceDBVectorStore):
    """The store a build appends to: LlamaIndex's ``add``, except that the ``text`` column (the
    one the BM25 index reads) holds what the node is matched by, its contextual header included
    (:func:`lab.rag.chunkers.matched_text`); without headers that is the node's text, as before.
    The node itself (``metadata``) keeps its own text."""

    def add(self, nodes: list, **add_kwargs: Any) -> list[str]:
        if not nodes:
            return []
        data = [{"id": n.node_id, self.doc_id_key: n.ref_doc_id, self.vector_column_name: n.get_embedding(),
                 self.text_key: matched_text(n, MetadataMode.NONE),
                 "metadata": node_to_metadata_dict(n, remove_text=False, flat_metadata=self.flat_metadata)}
                for n in nodes]
        if self._table is None:
            self._table = self._connection.create_table(self._table_name, data, mode=self.mode)
        else:
            self._table.add(data)
        self._fts_index_ready = False
        return [n.node_id for n in nodes]


def index_key(corpus_hash: str, chunker_cfg: ChunkerConfig, embedding_cfg: EmbeddingConfig,
              embed_fingerprint: str, ann: AnnConfig | None = None, headers: HeadersConfig | None = None,
              summary_model: str | None = None) -> str:
    """sha256 of everything that changes the table's rows, and of an ANN index's build parameters
    where there is one; contextual headers and the ANN index are left out where not configured, so
    tables without them keep their keys. Headers with document summaries hold the summary
    model's fingerprint (``summary_model``). Batch sizes and ANN search settings are left out."""
    body = {
        "corpus": corpus_hash,
        "chunker": chunker_cfg.model_dump(mode="json"),
        "embedding": {
            "model": embed_fingerprint,
            "embed_metadata": embedding_cfg.embed_metadata,
            "passage_prefix": embedding_cfg.passage_prefix,
        },
    }
    if ann is not None:
        body["ann"] = ann_index.build_params(ann)
    if headers is not None:
        body["headers"] = headers.key_body()
        if headers.summary is not None:
            body["headers"]["summary"]["model"] = summary_model
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:20]


@dataclass
class IndexHandle:
    key: str
    path: Path
    index: VectorStoreIndex
    reused: bool
    manifest: dict
    timings: dict = field(default_factory=dict)
    embedded: int = 0  # texts embedded by this process while building

    @property
    def n_chunks(self) -> int:
        return int(self.manifest["n_chunks"])


def _ann_config(cfg: ExperimentConfig) -> AnnConfig | None:
    return cfg.index.ann if cfg.index is not None else None


def _open(path: Path, embed_model: Any, manifest: dict, ann: AnnConfig | None) -> VectorStoreIndex:
    store = LabLanceDBVectorStore(uri=str(path / "lancedb"), table_name=TABLE, mode="overwrite")
    if store._table is None:  # LlamaIndex opens a missing table as "not created yet"
        raise ValueError(f"table {TABLE!r} was not found")
    if ann is not None and (manifest.get("ann") or {}).get("kind"):
        store._ann_query = ann_index.query_params(ann)
    st = os.stat(path)
    store._rows, store._folder_id = int(manifest["n_chunks"]), (st.st_dev, st.st_ino)
    return VectorStoreIndex.from_vector_store(store, embed_model=embed_model)


def open_or_build(
    corpus: Corpus,
    cfg: ExperimentConfig,
    embed_model: Any,
    cache_root: Path,
    show_progress: bool = True,
    summarizer: DocumentSummarizer | None = None,
) -> IndexHandle:
    """Open the table for this (corpus, chunker, embedding), building it first if needed;
    headers with document summaries need ``summarizer`` (:mod:`lab.rag.summaries`), whose model
    is called only while building."""
    summary = cfg.headers.summary if cfg.headers is not None else None
    if summary is not None and summarizer is None:
        raise ConfigError(f"{cfg.name}: headers.summary needs its LLM to build the index",
                          hint="open the index through lab.rag.pipeline.open_pipeline, which builds it")
    key = index_key(corpus.content_hash, cfg.chunker, cfg.embedding, embed_model.fingerprint, _ann_config(cfg),
                    cfg.headers, summarizer.fingerprint if summary is not None else None)
    root = cache_root / "indexes"
    final = root / key
    _remove_orphans(root)
    with locked(root / f"{key}.lock"):
        if (final / MANIFEST).is_file():
            reused = _reuse(key, final, embed_model, _ann_config(cfg))
            if reused is not None:
                return reused
        if final.exists():  # a folder without a manifest is debris from an older layout
            shutil.rmtree(final)
        for debris in root.glob(f".{key}.tmp-*"):
            shutil.rmtree(debris, ignore_errors=True)
        return _build(corpus, cfg, embed_model, key, final, show_progress, summarizer)


def _reuse(key: str, final: Path, embed_model: Any, ann: AnnConfig | None) -> IndexHandle | None:
    """The built table, after :func:`table_damage`'s checks; a damaged one is moved aside, with a
    warning, and None returned (the caller builds it again)."""
    try:
        manifest = json.loads((final / MANIFEST).read_text())
        if not isinstance(manifest, dict) or not isinstance(manifest.get("n_chunks"), int):
            raise ValueError("no n_chunks")
        index = _open(final, embed_model, manifest, ann)
        problem = table_damage(index.vector_store.table, manifest["n_chunks"])
    except Exception as exc:
        if _refused(exc):
            raise cache_fault(final, exc) from None
        problem = f"it cannot be read: {first_line(exc)}"
    if problem is None:
        log.info("reusing index %s (%d chunks)", key, manifest["n_chunks"])
        return IndexHandle(key, final, index, True, manifest)
    aside = set_aside(final, problem)
    log.warning("the index %s is damaged (%s): moved aside to %s and built again, its embeddings read from the "
                "cache (delete %s when no longer wanted)", final, problem, aside, aside)
    return None


def _refused(exc: BaseException) -> bool:
    """A disk that refuses (permissions, read-only): the cache's fault, not damage to the table."""
    if isinstance(exc, OSError) and exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return True
    return any(w in str(exc).lower() for w in ("permission denied", "read-only file system"))


#: Text per streamed group of documents: chunked, embedded and appended to the table before the
#: next group is read, so a build holds one group's nodes and vectors, whatever the corpus size.
GROUP_CHARS = 2_000_000


def document_groups(documents: Sequence[Any], group_chars: int = GROUP_CHARS) -> Iterator[list]:
    """Consecutive documents, cut into groups of about ``group_chars`` characters (a larger
    document is a group of its own); chunk ids are per document, so grouping changes no id."""
    group: list = []
    size = 0
    for doc in documents:
        if group and size + len(doc.text) > group_chars:
            yield group
            group, size = [], 0
        group.append(doc)
        size += len(doc.text)
    if group:
        yield group


def _remove_orphans(root: Path) -> None:
    """Remove the build folders of processes that died without cleaning up (SIGKILL, a power cut):
    ``.<key>.tmp-<pid>`` whose process is gone. A live build's folder is left alone."""
    for debris in root.glob(".*.tmp-*"):
        try:
            os.kill(int(debris.name.rsplit("-", 1)[1]), 0)
        except (ValueError, ProcessLookupError):
            shutil.rmtree(debris, ignore_errors=True)
        except PermissionError:  # another user's live process
            pass


def _build(corpus: Corpus, cfg: ExperimentConfig, embed_model: Any, key: str, final: Path, show_progress: bool,
           summarizer: DocumentSummarizer | None = None) -> IndexHandle:
    """Stream the corpus into a new table: each group of documents is chunked, embedded (through
    the content cache) and appended before the next is read; then the ANN index, if any, and the
    manifest; then the rename into place."""
    before = embed_model.counters["computed"]
    ann = _ann_config(cfg)
    timings = {"chunk_s": 0.0, "embed_s": 0.0, "write_s": 0.0}
    tmp = final.parent / f".{key}.tmp-{os.getpid()}"
    stats = {"n": 0, "chars": 0, "during_chunking": 0, "dim": 0}
    try:
        store = _BuildStore(uri=str(tmp / "lancedb"), table_name=TABLE, mode="overwrite")
        with Ticker("index", corpus.n_chars, show_progress, unit="chars") as ticker:
            for group in document_groups(corpus.documents, GROUP_CHARS):
                _append(group, corpus, cfg, embed_model, store, timings, stats, show_progress, summarizer)
                ticker.update(sum(len(d.text) for d in group))
        problem = ann_index.check(ann, stats["dim"], stats["n"]) if ann else None
        if problem:
            raise ConfigError(f"{cfg.name}: {problem}",
                              hint="the embeddings are cached: a corrected config re-embeds nothing")
        if ann and (warning := ann_index.advice(ann, stats["n"])):
            log.warning(warning)
        built = None
        if ann is not None:  # recorded only where configured: manifests without it read as before
            built = ann_index.create(store.table, ann, stats["n"]) or {
                "kind": None, "params": ann_index.build_params(ann), "rows": stats["n"],
                "why": f"{stats['n']} rows, under index.ann.min_rows {ann.min_rows}: exact search"}
        t0 = time.perf_counter()
        manifest = _write_manifest(tmp, stats, corpus, cfg, embed_model, key, built)
        faults.point("index.before_rename")
        os.replace(tmp, final)
    except BaseException as exc:  # Ctrl-C, SIGTERM, a full disk: leave no half-written table behind
        shutil.rmtree(tmp, ignore_errors=True)
        if _disk_fault(exc):
            raise cache_fault(final.parent, exc) from None
        raise
    timings["write_s"] += time.perf_counter() - t0
    if manifest.get("ann"):
        timings["ann_build_s"] = manifest["ann"].get("build_s", 0.0)
    embedded = embed_model.counters["computed"] - before
    log.info(
        "built index %s: %d chunks (%d texts embedded, %d of them while chunking)",
        key, stats["n"], embedded, stats["during_chunking"],
    )
    return IndexHandle(key, final, _open(final, embed_model, manifest, ann), False, manifest, timings, embedded)


def _append(group: list, corpus: Corpus, cfg: ExperimentConfig, embed_model: Any, store: LanceDBVectorStore,
            timings: dict, stats: dict, show_progress: bool, summarizer: DocumentSummarizer | None = None
            ) -> None:
    """Summarise (where headers hold summaries), chunk, embed and append one group of documents
    (a group's summaries and embedding show their own progress: a bar on a terminal, as the
    build's does, log lines elsewhere)."""
    summaries = None
    if cfg.headers is not None and cfg.headers.summary is not None and summarizer is not None:
        ts = time.perf_counter()
        summaries = summarizer.summaries(group, show_progress)
        timings["summary_s"] = timings.get("summary_s", 0.0) + time.perf_counter() - ts
    t0 = time.perf_counter()
    before = embed_model.counters["computed"]
    nodes = chunk(Corpus(root=corpus.root, documents=group, pages=corpus.pages), cfg.chunker, embed_model,
                  headers=cfg.headers, summaries=summaries)
    stats["during_chunking"] += embed_model.counters["computed"] - before
    t1 = time.perf_counter()
    t2 = t1
    if nodes:
        vectors = embed_model.encode([matched_text(n) for n in nodes],
                                     embed_model.passage_prefix, show_progress=show_progress)
        for node, vec in zip(nodes, vectors):
            node.embedding = vec.tolist()
        stats["dim"] = int(vectors.shape[1])
        t2 = time.perf_counter()
        store.add(nodes)
    stats["n"] += len(nodes)
    stats["chars"] += sum(len(n.get_content()) for n in nodes)
    timings["chunk_s"] += t1 - t0
    timings["embed_s"] += t2 - t1
    timings["write_s"] += time.perf_counter() - t2


def _write_manifest(tmp: Path, stats: dict, corpus: Corpus, cfg: ExperimentConfig, embed_model: Any, key: str,
                    ann: dict | None) -> dict:
    n = stats["n"]
    manifest = {
        "key": key,
        "n_chunks": n,
        "n_documents": len(corpus.documents),
        "corpus_hash": corpus.content_hash,
        "chunker": cfg.chunker.model_dump(mode="json"),
        "embedding_model": embed_model.fingerprint,
        "embed_metadata": cfg.embedding.embed_metadata,
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "chunk_chars_mean": stats["chars"] / max(n, 1),
    }
    if ann is not None:
        manifest["ann"] = ann
    if cfg.headers is not None:
        manifest["headers"] = cfg.headers.key_body()
    (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2))
    return manifest


def _disk_fault(exc: BaseException) -> bool:
    """An OSError, or Lance's own error about the disk (it wraps ENOSPC and EROFS in its text)."""
    text = str(exc).lower()
    return isinstance(exc, OSError) or (isinstance(exc, Exception) and any(
        w in text for w in ("no space left", "read-only file system", "disk quota", "permission denied")))


#: The full-text index's settings; a change rebuilds it on next use.
FTS_SETTINGS = {"column": "text", "base_tokenizer": "simple", "language": "English", "lower_case": True,
                "stem": True, "remove_stop_words": True, "ascii_folding": True, "version": 1}


def ensure_fts(handle: IndexHandle, cache_root: Path) -> bool:
    """Give the table LanceDB's full-text (BM25) index, once: under the index's lock, so two
    runs build it once; the manifest records it only after LanceDB has committed the index
    (an interrupted build leaves the manifest without it, and the next run builds it again).
    Returns True when this call built it."""
    if handle.manifest.get("fts") == FTS_SETTINGS:
        return False
    import warnings

    with locked(cache_root / "indexes" / f"{handle.key}.lock"):
        manifest = json.loads((handle.path / MANIFEST).read_text())
        if manifest.get("fts") != FTS_SETTINGS:
            s = FTS_SETTINGS
            tmp = handle.path / f".{MANIFEST}.tmp-{os.getpid()}"
            try:
                with warnings.catch_warnings():  # "deprecated, use create_index": the sync table's
                    warnings.simplefilter("ignore")  # create_index takes vector indexes only
                    handle.index.vector_store.table.create_fts_index(
                        s["column"], use_tantivy=False, replace=True, base_tokenizer=s["base_tokenizer"],
                        language=s["language"], lower_case=s["lower_case"], stem=s["stem"],
                        remove_stop_words=s["remove_stop_words"], ascii_folding=s["ascii_folding"])
                manifest["fts"] = FTS_SETTINGS
                tmp.write_text(json.dumps(manifest, indent=2))
                os.replace(tmp, handle.path / MANIFEST)
            except Exception as exc:  # the manifest still says "no BM25 index": the next run builds it
                tmp.unlink(missing_ok=True)
                if _disk_fault(exc):
                    raise cache_fault(handle.path, exc) from None
                raise
            log.info("built the full-text (BM25) index of %s", handle.key)
            built = True
        else:
            built = False
    handle.manifest = manifest
    return built


def index_passages(handle: IndexHandle) -> list[Passage]:
    """Every chunk of the index as a :class:`~lab.evidence.holds.Passage` (its id, document,
    text, and its place in the document where the offsets are known), in table order: the one
    reader of an index's passages (the loss funnel's chunking stage, the labels' chunk ids,
    ``lab tune``'s passages)."""
    rows = handle.index.vector_store.table.to_arrow().select(["id", "text", "metadata"]).to_pylist()
    out = []
    for row in rows:
        meta = row.get("metadata") or {}
        if isinstance(meta, str):
            meta = json.loads(meta or "{}")
        start = end = None
        try:
            node = json.loads(meta.get("_node_content") or "{}")
            start, end = node.get("start_char_idx"), node.get("end_char_idx")
        except ValueError:
            pass
        source = meta.get("source")
        place = ((source, start, end),) if source is not None and start is not None and end is not None else ()
        out.append(Passage(text=row.get("text") or "", pieces=place, id=row["id"], source=str(source or "")))
    return out
