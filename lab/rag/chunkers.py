"""Chunkers: a corpus's documents -> nodes, through LlamaIndex node parsers built from config.

Every chunker is registered in :data:`CHUNKERS` under its config ``name``. Node ids are stable
(``<source>#<n>``) and nodes keep their character offsets in the source; PDF chunks say which
pages they cover. Nodes inherit their document's metadata exclusions (set by the loader), so
metadata stays out of the embedded text unless ``embedding.embed_metadata`` is set.

Contextual chunk headers (``headers:``, :func:`add_headers`): each node gets a ``header``
metadata entry naming its document, which :func:`matched_text` puts before the node's text where
it is matched (the embedded text, the BM25 column); the node's own text, which metrics score and
the answer's context sends, is unchanged. Sentence windows (``sentence_window``): sentences are
the nodes, and :func:`lab.rag.sent.send_windows` turns each into its window, text and offsets, once ranked.
"""

from __future__ import annotations

import re
from collections import deque
from pathlib import PurePosixPath
from typing import Any, Callable, Iterable, Sequence

import numpy as np
from langchain_text_splitters import RecursiveCharacterTextSplitter
from llama_index.core.node_parser import NodeParser, SemanticSplitterNodeParser, SentenceWindowNodeParser
from llama_index.core.node_parser.node_utils import build_nodes_from_splits
from llama_index.core.schema import BaseNode, MetadataMode

from lab.config import (ChunkerConfig, FixedTokenChunker, HeadersConfig, PageChunker, ParentChildChunker,
                        RecursiveCharacterChunker, SemanticChunker, SentenceWindowChunker)
from lab.errors import DataError
from lab.rag.loaders import Corpus, pages_of
from lab.rag.tokens import encoding
from lab.registry import Registry

def stable_id(i: int, doc: BaseNode) -> str:
    return f"{doc.node_id}#{i}"


# ---------------------------------------------------------------------------------------------
# Chunkers

CHUNKERS: Registry[Callable[..., NodeParser]] = Registry("chunker")


class LinearSplitter(RecursiveCharacterTextSplitter):
    """LangChain's recursive character splitter with its merge step in linear time.

    LangChain's ``_merge_splits`` drops the oldest piece of the growing chunk with
    ``current_doc = current_doc[1:]``, a copy of the list per piece dropped. For ordinary text a
    chunk holds a few hundred words and that is cheap; for a long run without spaces (base64, a
    minified file) the splitter falls back to single characters, a chunk holds ``chunk_size`` of
    them, and every character costs a copy of ~``chunk_size`` items: a 4.8 MB line took 402 s.
    This is the same loop over a deque: the same chunks, in time linear in the text.
    """

    def _merge_splits(self, splits: Iterable[str], separator: str) -> list[str]:
        separator_len = self._length_function(separator)
        docs: list[str] = []
        current: deque[str] = deque()
        total = 0
        for d in splits:
            len_ = self._length_function(d)
            if total + len_ + (separator_len if current else 0) > self._chunk_size:
                if current:
                    doc = self._join_docs(list(current), separator)
                    if doc is not None:
                        docs.append(doc)
                    while total > self._chunk_overlap or (
                        total + len_ + (separator_len if current else 0) > self._chunk_size and total > 0
                    ):
                        total -= self._length_function(current[0]) + (separator_len if len(current) > 1 else 0)
                        current.popleft()
            current.append(d)
            total += len_ + (separator_len if len(current) > 1 else 0)
        doc = self._join_docs(list(current), separator)
        if doc is not None:
            docs.append(doc)
        return docs


class RecursiveCharacterNodeParser(NodeParser):
    """LangChain's RecursiveCharacterTextSplitter as a LlamaIndex node parser.

    Sizes are characters (``len``), separators default to ``["\\n\\n", "\\n", " ", ""]``, and
    whitespace is stripped from chunk ends: the same chunks the founding story used.
    """

    chunk_size: int = 1000
    chunk_overlap: int = 200
    separators: list[str] | None = None

    def _parse_nodes(self, nodes: Sequence[BaseNode], show_progress: bool = False, **kw: Any) -> list[BaseNode]:
        splitter = LinearSplitter(chunk_size=self.chunk_size, chunk_overlap=self.chunk_overlap,
                                  separators=self.separators)
        out: list[BaseNode] = []
        for node in nodes:
            splits = splitter.split_text(node.get_content())
            out.extend(build_nodes_from_splits(splits, node, id_func=self.id_func))
        return out


@CHUNKERS.register("recursive_character")
def _recursive(cfg: RecursiveCharacterChunker, embed_model: Any) -> NodeParser:
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
        out: list[BaseNode] = []
        for node in nodes:
            out.extend(build_nodes_from_splits(token_windows(node.get_content(), self.chunk_tokens,
                                                             self.overlap_tokens, self.encoding),
                                               node, id_func=self.id_func))
        return out


def token_windows(text: str, size: int, overlap: int, encoding_name: str = "cl100k_base") -> list[str]:
    """The text of each window of ``size`` tokens, stepping ``size - overlap`` tokens."""
    enc = encoding(encoding_name)
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
def _fixed_token(cfg: FixedTokenChunker, embed_model: Any) -> NodeParser:
    return FixedTokenNodeParser(chunk_tokens=cfg.chunk_tokens, overlap_tokens=cfg.overlap_tokens,
                                encoding=cfg.encoding, id_func=stable_id, include_prev_next_rel=False)


class PageNodeParser(NodeParser):
    """One chunk per PDF page (its exact text); other documents are split by LangChain's
    recursive character splitter (``chunk_size``/``chunk_overlap``)."""

    chunk_size: int = 1000
    chunk_overlap: int = 200
    page_maps: dict = {}

    def _parse_nodes(self, nodes: Sequence[BaseNode], show_progress: bool = False, **kw: Any) -> list[BaseNode]:
        splitter = LinearSplitter(chunk_size=self.chunk_size, chunk_overlap=self.chunk_overlap)
        out: list[BaseNode] = []
        for node in nodes:
            text = node.get_content()
            pages = self.page_maps.get(node.metadata.get("source"))
            splits = [text[a:b] for _, a, b in pages if text[a:b].strip()] if pages else splitter.split_text(text)
            out.extend(build_nodes_from_splits(splits, node, id_func=self.id_func))
        return out


@CHUNKERS.register("page")
def _page(cfg: PageChunker, embed_model: Any) -> NodeParser:
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
def _semantic(cfg: SemanticChunker, embed_model: Any) -> NodeParser:
    return BatchedSemanticSplitter.from_defaults(
        embed_model=embed_model,
        buffer_size=cfg.buffer_size,
        breakpoint_percentile_threshold=cfg.breakpoint_percentile_threshold,
        id_func=stable_id,
        include_prev_next_rel=False,
    )


#: Metadata of a sentence-window or child node: its window's (parent's) text and offsets in the
#: source (sent, scored), and a child's parent id.
WINDOW, WINDOW_START, WINDOW_END, PARENT = "window", "window_start", "window_end", "parent"


class LabSentenceWindowNodeParser(SentenceWindowNodeParser):
    """LlamaIndex's sentence-window parser with an exact window: the source text from the first
    to the last sentence of the window (LlamaIndex joins the sentences with spaces, which changes
    the text and loses its offsets), and the window's offsets in ``window_start``/``window_end``."""

    def build_window_nodes_from_documents(self, documents: Sequence[BaseNode]) -> list[BaseNode]:
        out: list[BaseNode] = []
        for doc in documents:
            nodes = super().build_window_nodes_from_documents([doc])
            text, cursor, spans = doc.get_content(), 0, []
            for node in nodes:  # the splitter's sentences are the source's text, in order
                start = text.find(node.get_content(), cursor)
                if start < 0:  # cannot happen for the splitter's own pieces; keep LlamaIndex's window
                    spans = []
                    break
                spans.append((start, start + len(node.get_content())))
                cursor = start + len(node.get_content())
            for i, node in enumerate(nodes[:len(spans)]):
                a = spans[max(0, i - self.window_size)][0]
                b = spans[min(i + self.window_size, len(nodes) - 1)][1]
                node.metadata.update({WINDOW: text[a:b], WINDOW_START: a, WINDOW_END: b})
                for hidden in (node.excluded_embed_metadata_keys, node.excluded_llm_metadata_keys):
                    hidden.extend(k for k in (WINDOW_START, WINDOW_END) if k not in hidden)
            out.extend(nodes)
        return out


@CHUNKERS.register("sentence_window")
def _sentence_window(cfg: SentenceWindowChunker, embed_model: Any) -> NodeParser:
    return LabSentenceWindowNodeParser.from_defaults(window_size=cfg.window_size, window_metadata_key=WINDOW,
                                                     id_func=stable_id, include_prev_next_rel=False)


class ParentChildNodeParser(NodeParser):
    """Parents cut by the recursive character splitter, each cut again into children; the nodes
    are the children, each carrying its parent's exact text, offsets and id (see
    :class:`lab.config.ParentChildChunker`)."""

    parent_size: int = 2000
    parent_overlap: int = 0
    child_size: int = 400
    child_overlap: int = 0

    def _parse_nodes(self, nodes: Sequence[BaseNode], show_progress: bool = False, **kw: Any) -> list[BaseNode]:
        parents = LinearSplitter(chunk_size=self.parent_size, chunk_overlap=self.parent_overlap)
        children = LinearSplitter(chunk_size=self.child_size, chunk_overlap=self.child_overlap)
        out: list[BaseNode] = []
        for doc in nodes:
            text, cursor = doc.get_content(), 0
            splits: list[str] = []
            owners: list[tuple[str, int, int, int]] = []
            for j, parent in enumerate(parents.split_text(text)):
                start = text.find(parent, cursor)  # parents may overlap: search on from the last start
                start = start if start >= 0 else text.find(parent)
                cursor = start + 1
                for child in children.split_text(parent):
                    splits.append(child)
                    owners.append((parent, start, start + len(parent), j))
            built = build_nodes_from_splits(splits, doc, id_func=self.id_func)
            for node, (parent, a, b, j) in zip(built, owners):
                node.metadata.update({WINDOW: parent, WINDOW_START: a, WINDOW_END: b, PARENT: f"{doc.node_id}#p{j}"})
                for hidden in (node.excluded_embed_metadata_keys, node.excluded_llm_metadata_keys):
                    hidden.extend(k for k in (WINDOW, WINDOW_START, WINDOW_END, PARENT) if k not in hidden)
            out.extend(built)
        return out


@CHUNKERS.register("parent_child")
def _parent_child(cfg: ParentChildChunker, embed_model: Any) -> NodeParser:
    return ParentChildNodeParser(parent_size=cfg.parent_size, parent_overlap=cfg.parent_overlap,
                                 child_size=cfg.child_size, child_overlap=cfg.child_overlap, id_func=stable_id,
                                 include_prev_next_rel=False)


def build_chunker(cfg: ChunkerConfig, embed_model: Any) -> NodeParser:
    return CHUNKERS.get(cfg.name, where="chunker.name")(cfg, embed_model)


_HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t#]*$", re.MULTILINE)


def first_heading(text: str) -> str:
    """The text of a document's first Markdown heading ('' if it has none)."""
    m = _HEADING.search(text)
    return m.group(1).strip() if m else ""


def header_text(metadata: dict, title: str, cfg: HeadersConfig, summary: str = "") -> str:
    """The header of a chunk: ``cfg.fields`` of its document joined by ``cfg.separator``; empty
    parts, and parts equal (ignoring case) to an earlier one, are left out; the document's
    ``summary``, where it is among the fields, goes on a line of its own."""
    parts = {"doc_type": metadata.get("doc_type", ""),
             "name": PurePosixPath(metadata.get("file_name", "")).stem,
             "title": title, "summary": ""}
    kept: list[str] = []
    for name in cfg.fields:
        part = " ".join(parts[name].split())
        if part and part.casefold() not in {k.casefold() for k in kept}:
            kept.append(part)
    line = cfg.separator.join(kept)
    summary = " ".join(summary.split()) if "summary" in cfg.fields else ""
    return "\n".join(p for p in (line, summary) if p)


def add_headers(nodes: Sequence[BaseNode], documents: Sequence[BaseNode], cfg: HeadersConfig,
                summaries: dict[str, str] | None = None) -> None:
    """Give each node its document's header (``metadata["header"]``), kept out of the text models
    read through LlamaIndex (embed and LLM modes): :func:`matched_text` places it instead.
    ``summaries`` (``{source: summary}``, :mod:`lab.rag.summaries`) fill the summary field."""
    titles = {d.metadata.get("source"): first_heading(d.get_content()) for d in documents}
    summaries = summaries or {}
    for node in nodes:
        source = node.metadata.get("source")
        node.metadata["header"] = header_text(node.metadata, titles.get(source, ""), cfg,
                                              summaries.get(source, ""))
        for hidden in (node.excluded_embed_metadata_keys, node.excluded_llm_metadata_keys):
            if "header" not in hidden:
                hidden.append("header")


def matched_text(node: BaseNode, mode: MetadataMode = MetadataMode.EMBED) -> str:
    """The text a node is matched by: its header (if any) over its content in ``mode``
    (``EMBED`` for the embedding, ``NONE`` for the BM25 column)."""
    header = node.metadata.get("header")
    body = node.get_content(metadata_mode=mode)
    return f"{header}\n\n{body}" if header else body


def chunk(corpus: Corpus, cfg: ChunkerConfig, embed_model: Any, show_progress: bool = False,
          headers: HeadersConfig | None = None, summaries: dict[str, str] | None = None) -> list[BaseNode]:
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
    if headers is not None:
        add_headers(nodes, corpus.documents, headers, summaries)
    return nodes
