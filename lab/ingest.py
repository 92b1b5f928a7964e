"""Ingest: a folder of documents -> LlamaIndex Documents -> nodes (chunks).

Documents carry ``source`` (path relative to the knowledge base) and ``doc_type`` (its top-level
folder). Chunkers are LlamaIndex node parsers built from config through :data:`CHUNKERS`; node
ids are stable (``<source>#<n>``) and nodes keep their character offsets in the source.
Metadata stays out of the embedded text unless ``embedding.embed_metadata`` is set.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
from llama_index.core.node_parser import NodeParser, SemanticSplitterNodeParser
from llama_index.core.schema import BaseNode, Document

from lab.errors import DataError
from lab.registry import Registry

log = logging.getLogger(__name__)

METADATA_KEYS = ("source", "doc_type", "file_name")


@dataclass
class Corpus:
    root: Path
    documents: list[Document]
    skipped: list[str] = field(default_factory=list)  # "path: why"
    pages: dict[str, list] = field(default_factory=dict)  # PDF source -> [[page, start, end], ...]

    @property
    def content_hash(self) -> str:
        """sha256 over (source, text) of every document, in order."""
        h = hashlib.sha256()
        for doc in self.documents:
            h.update(doc.metadata["source"].encode() + b"\x00" + doc.text.encode() + b"\x00")
        return h.hexdigest()

    @property
    def n_chars(self) -> int:
        return sum(len(d.text) for d in self.documents)


def load_folder(root: Path, extensions: Sequence[str], max_file_bytes: int, embed_metadata: bool) -> Corpus:
    """Load every file under ``root`` with one of ``extensions``, sorted by path."""
    if not root.exists():
        raise DataError(f"knowledge base {root} does not exist", hint="check data.knowledge_base or KB=")
    if not root.is_dir():
        raise DataError(f"knowledge base {root} is not a folder", hint="point data.knowledge_base at a folder")
    exts = {e.lower() for e in extensions}
    paths = sorted(p for p in root.rglob("*") if p.is_file() and p.suffix.lower() in exts)
    if not paths:
        raise DataError(
            f"knowledge base {root} has no files ending in {', '.join(sorted(exts))}",
            hint="add documents, or set loader.extensions",
        )
    from lab.loaders import FORMATS, Unreadable, read

    documents, skipped, pages = [], [], {}
    for path in paths:
        rel = path.relative_to(root).as_posix()
        size = path.stat().st_size
        if size > max_file_bytes:
            raise DataError(
                f"{path}: {size:,} bytes is over the limit of {max_file_bytes:,}",
                hint="split the file, or raise loader.max_file_bytes in the config",
            )
        extra: dict = {}
        if path.suffix.lower() in FORMATS:
            try:
                text, extra = read(path)
            except Unreadable as exc:
                skipped.append(f"{rel}: {exc}")
                log.warning("skipping %s: %s", path, exc)
                continue
            if "pages" in extra:
                pages[rel] = extra.pop("pages")
            documents.append(_document(rel, path, text, embed_metadata))
            continue
        raw = path.read_bytes()
        nul = raw.find(b"\x00")
        if nul >= 0:
            raise DataError(
                f"{path}: binary content in a text file (NUL byte at offset {nul})",
                hint="remove the file, or give it the extension of its real format",
            )
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = raw[: exc.start].count(b"\n") + 1
            raise DataError(
                f"{path} line {line}: not UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start})",
                hint="re-save the file as UTF-8 (e.g. iconv -f latin1 -t utf-8)",
            ) from None
        if not text.strip():
            skipped.append(f"{rel}: empty")
            log.warning("skipping empty file %s", path)
            continue
        documents.append(_document(rel, path, text, embed_metadata))
    if not documents:
        raise DataError(f"knowledge base {root}: no file has text ({len(skipped)} skipped: {'; '.join(skipped[:3])})",
                        hint="add documents with text")
    return Corpus(root=root, documents=documents, skipped=skipped, pages=pages)


def _document(rel: str, path: Path, text: str, embed_metadata: bool) -> Document:
    parts = rel.split("/")
    metadata = {"source": rel, "doc_type": parts[0] if len(parts) > 1 else "", "file_name": path.name}
    return Document(
        text=text,
        id_=rel,
        metadata=metadata,
        excluded_embed_metadata_keys=[] if embed_metadata else list(METADATA_KEYS) + ["page"],
        excluded_llm_metadata_keys=[],
    )


def stable_id(i: int, doc: BaseNode) -> str:
    return f"{doc.node_id}#{i}"


# ---------------------------------------------------------------------------------------------
# Chunkers

CHUNKERS: Registry[Callable[..., NodeParser]] = Registry("chunker")


class RecursiveCharacterNodeParser(NodeParser):
    """LangChain's RecursiveCharacterTextSplitter as a LlamaIndex node parser.

    Sizes are characters (``len``), separators default to ``["\\n\\n", "\\n", " ", ""]``, and
    whitespace is stripped from chunk ends: the same chunks the founding story used.
    """

    chunk_size: int = 1000
    chunk_overlap: int = 200
    separators: list[str] | None = None

    def _parse_nodes(self, nodes: Sequence[BaseNode], show_progress: bool = False, **kw: Any) -> list[BaseNode]:
        from langchain_text_splitters import RecursiveCharacterTextSplitter
        from llama_index.core.node_parser.node_utils import build_nodes_from_splits

        splitter = RecursiveCharacterTextSplitter(
            chunk_size=self.chunk_size, chunk_overlap=self.chunk_overlap, separators=self.separators
        )
        out: list[BaseNode] = []
        for node in nodes:
            splits = splitter.split_text(node.get_content())
            out.extend(build_nodes_from_splits(splits, node, id_func=self.id_func))
        return out


@CHUNKERS.register("recursive_character")
def _recursive(cfg: Any, embed_model: Any) -> NodeParser:
    return RecursiveCharacterNodeParser(
        chunk_size=cfg.chunk_size,
        chunk_overlap=cfg.chunk_overlap,
        separators=cfg.separators,
        id_func=stable_id,
        include_prev_next_rel=False,
    )


class FixedTokenNodeParser(NodeParser):
    """Windows of ``chunk_tokens`` tokens (tiktoken, offline), each starting ``chunk_tokens -
    overlap_tokens`` tokens after the last; a chunk is the exact source text its tokens cover,
    so its character offsets are exact."""

    chunk_tokens: int = 600
    overlap_tokens: int = 90
    encoding: str = "cl100k_base"

    def _parse_nodes(self, nodes: Sequence[BaseNode], show_progress: bool = False, **kw: Any) -> list[BaseNode]:
        from llama_index.core.node_parser.node_utils import build_nodes_from_splits

        out: list[BaseNode] = []
        for node in nodes:
            out.extend(build_nodes_from_splits(token_windows(node.get_content(), self.chunk_tokens,
                                                             self.overlap_tokens, self.encoding),
                                               node, id_func=self.id_func))
        return out


def token_windows(text: str, size: int, overlap: int, encoding: str = "cl100k_base") -> list[str]:
    """The text of each window of ``size`` tokens, stepping ``size - overlap`` tokens."""
    from lab.context import _encoding

    enc = _encoding(encoding)
    tokens = enc.encode(text)
    if not tokens:
        return []
    decoded, starts = enc.decode_with_offsets(tokens)
    if decoded != text:  # cannot happen for valid UTF-8; keep offsets honest if it ever does
        raise DataError("tiktoken did not round-trip a document's text", hint="report this document")
    bounds = list(starts) + [len(text)]
    step = size - overlap
    out = []
    for a in range(0, len(tokens), step):
        b = min(a + size, len(tokens))
        piece = text[bounds[a]:bounds[b]]
        if piece.strip():
            out.append(piece)
        if b == len(tokens):
            break
    return out


@CHUNKERS.register("fixed_token")
def _fixed_token(cfg: Any, embed_model: Any) -> NodeParser:
    return FixedTokenNodeParser(chunk_tokens=cfg.chunk_tokens, overlap_tokens=cfg.overlap_tokens,
                                encoding=cfg.encoding, id_func=stable_id, include_prev_next_rel=False)


class PageNodeParser(NodeParser):
    """One chunk per PDF page (its exact text); other documents are split by LangChain's
    recursive character splitter (``chunk_size``/``chunk_overlap``)."""

    chunk_size: int = 1000
    chunk_overlap: int = 200
    page_maps: dict = {}

    def _parse_nodes(self, nodes: Sequence[BaseNode], show_progress: bool = False, **kw: Any) -> list[BaseNode]:
        from langchain_text_splitters import RecursiveCharacterTextSplitter
        from llama_index.core.node_parser.node_utils import build_nodes_from_splits

        splitter = RecursiveCharacterTextSplitter(chunk_size=self.chunk_size, chunk_overlap=self.chunk_overlap)
        out: list[BaseNode] = []
        for node in nodes:
            text = node.get_content()
            pages = self.page_maps.get(node.metadata.get("source"))
            splits = [text[a:b] for _, a, b in pages if text[a:b].strip()] if pages else splitter.split_text(text)
            out.extend(build_nodes_from_splits(splits, node, id_func=self.id_func))
        return out


@CHUNKERS.register("page")
def _page(cfg: Any, embed_model: Any) -> NodeParser:
    return PageNodeParser(chunk_size=cfg.chunk_size, chunk_overlap=cfg.chunk_overlap, id_func=stable_id,
                          include_prev_next_rel=False)


class BatchedSemanticSplitter(SemanticSplitterNodeParser):
    """SemanticSplitterNodeParser that embeds the sentence groups of all documents at once.

    The stock parser calls the embedding model once per document with small batches, so most of
    its time goes to per-call overhead and padding. This one gathers every document's sentence
    groups, embeds them in one call (sorted by length, large batches, cached by content), then
    places breakpoints per document exactly as the stock parser does.
    """

    def _parse_nodes(self, nodes: Sequence[BaseNode], show_progress: bool = False, **kw: Any) -> list[BaseNode]:
        from llama_index.core.node_parser.node_utils import build_nodes_from_splits

        groups = []
        for node in nodes:
            groups.append(self._build_sentence_groups(self.sentence_splitter(node.get_content())))
        texts = [s["combined_sentence"] for g in groups for s in g]
        vectors = self._embed_all(texts, show_progress)
        out: list[BaseNode] = []
        pos = 0
        for node, sentences in zip(nodes, groups):
            vecs = vectors[pos : pos + len(sentences)].astype(np.float64)
            pos += len(sentences)
            # 1 - cosine of consecutive groups (vectors are unit length).
            distances = list(1.0 - np.sum(vecs[:-1] * vecs[1:], axis=1)) if len(sentences) > 1 else []
            chunks = self._build_node_chunks(sentences, [float(d) for d in distances])
            out.extend(build_nodes_from_splits(chunks, node, id_func=self.id_func))
        return out

    def _embed_all(self, texts: list[str], show_progress: bool) -> np.ndarray:
        encode = getattr(self.embed_model, "encode", None)
        if encode is not None:  # the lab's embedding: one batched, cached call
            return encode(texts, self.embed_model.passage_prefix, show_progress=show_progress)
        vecs = np.asarray(self.embed_model.get_text_embedding_batch(texts), dtype=np.float32)
        return vecs / np.linalg.norm(vecs, axis=1, keepdims=True)


@CHUNKERS.register("semantic")
def _semantic(cfg: Any, embed_model: Any) -> NodeParser:
    return BatchedSemanticSplitter.from_defaults(
        embed_model=embed_model,
        buffer_size=cfg.buffer_size,
        breakpoint_percentile_threshold=cfg.breakpoint_percentile_threshold,
        id_func=stable_id,
        include_prev_next_rel=False,
    )


def build_chunker(cfg: Any, embed_model: Any) -> NodeParser:
    return CHUNKERS.get(cfg.name, where="chunker.name")(cfg, embed_model)


def chunk(corpus: Corpus, cfg: Any, embed_model: Any, show_progress: bool = False) -> list[BaseNode]:
    from lab.loaders import pages_of

    parser = build_chunker(cfg, embed_model)
    if isinstance(parser, PageNodeParser):
        parser.page_maps = corpus.pages
    # nodes inherit their document's excluded_embed_metadata_keys (set by load_folder)
    nodes = parser.get_nodes_from_documents(corpus.documents, show_progress=show_progress)
    for node in nodes:  # PDF chunks say which pages they come from
        page_map = corpus.pages.get(node.metadata.get("source"))
        if page_map:
            label = pages_of(page_map, node.start_char_idx, node.end_char_idx)
            if label:
                node.metadata["page"] = label
    return nodes
