"""What leaves the second stage, once ranked: each sentence window or child chunk as its window
or parent (:func:`send_windows`), a document's chunks as one passage (:func:`merge_by_document`),
each chunk under its header's line (:func:`send_headers`); and what each sent passage covers of
its source (:func:`sent_spans`; passage by passage, :func:`passage_spans`), for the span metrics.
The answer's context, the metrics and the context size all read what these return."""

from __future__ import annotations

from typing import Any, Sequence

from llama_index.core.schema import NodeWithScore

from lab.config import HeadersConfig
from lab.rag.chunkers import PARENT, WINDOW, WINDOW_END, WINDOW_START
from lab.rag.retrievers import hide_from_models


def send_windows(nodes: Sequence[Any]) -> list[Any]:
    """Small-to-big, at the end of the second stage: each sentence-window or child node's text
    becomes its window or parent (LlamaIndex's ``MetadataReplacementPostProcessor``) and its offsets
    the window's, so that the answer's context, the metrics and the context size all read what is
    sent; children of one parent send it once, at the best child's rank. Other nodes pass."""
    from llama_index.core.postprocessor import MetadataReplacementPostProcessor

    out = MetadataReplacementPostProcessor(target_metadata_key=WINDOW).postprocess_nodes(list(nodes))
    sent, seen = [], set()
    for n in out:
        meta = n.node.metadata
        if WINDOW_START in meta:
            n.node.start_char_idx, n.node.end_char_idx = meta[WINDOW_START], meta[WINDOW_END]
        if PARENT in meta:
            if meta[PARENT] in seen:
                continue
            seen.add(meta[PARENT])
        sent.append(n)
    return sent


def sent_header(header: str, cfg: HeadersConfig) -> str:
    """What of a chunk's header is sent with it (``headers.send``): its line, without the
    summary, which a model wrote. A header of one line is the line, except where summary is the
    only field (a header's line is empty only when every part is: never with ``name``)."""
    if "summary" not in cfg.fields:
        return header
    if cfg.fields == ["summary"]:
        return ""
    return header.split("\n", 1)[0]


def send_headers(nodes: Sequence[Any], cfg: HeadersConfig) -> list[Any]:
    """``headers.send``, at the end of the second stage: each node leaves as a copy whose text is
    its header's line over its own text (offsets unchanged: the line is in no source), so the
    answer's context, the keyword metrics and the context size read it."""
    out = []
    for n in nodes:
        line = sent_header(n.node.metadata.get("header", ""), cfg)
        if not line:
            out.append(n)
            continue
        node = n.node.model_copy()
        node.set_content(f"{line}\n\n{n.node.get_content()}")
        out.append(NodeWithScore(node=node, score=n.score))
    return out


#: Metadata of a merged passage: the ``[start, end]`` source offsets of its pieces, for span metrics.
PARTS = "lab_parts"


def merge_by_document(nodes: Sequence[NodeWithScore], joiner: str = "\n\n") -> list[NodeWithScore]:
    """``merge: {by: document}``: the chunks of one document leave as one passage, at its best
    chunk's rank, with that chunk's id and score. Its pieces are the chunks in document order;
    a chunk that overlaps or touches the piece before it (by offsets, where its text spans them
    exactly) extends it without repeating the shared characters; others start a new piece, after
    ``joiner``. The passage's offsets run from its first piece's start to its last piece's end,
    and ``metadata[PARTS]`` holds each piece's, so span metrics count what was sent. A document
    with one chunk passes unchanged; the retrieved nodes are left as they were (copies leave)."""
    groups: dict[str, list[NodeWithScore]] = {}
    for n in nodes:
        groups.setdefault(str(n.node.metadata.get("source", n.node.node_id)), []).append(n)
    out = []
    for group in groups.values():
        best = group[0]
        if len(group) == 1:
            out.append(best)
            continue
        exact = [(n.node.start_char_idx, n.node.end_char_idx, n.node.get_content()) for n in group]
        located = all(s is not None and e is not None and e - s == len(t) for s, e, t in exact)
        if located:
            exact.sort(key=lambda p: p[0])
        pieces: list[list] = []  # [start, end, text]
        for start, end, text in exact:
            last = pieces[-1] if pieces else None
            if located and last is not None and start <= last[1]:
                if end > last[1]:
                    last[2] += text[last[1] - start:]
                    last[1] = end
                continue
            pieces.append([start, end, text])
        node = best.node.model_copy()
        node.metadata = {**best.node.metadata, PARTS: [[p[0], p[1]] for p in pieces] if located else None}
        node.excluded_llm_metadata_keys = list(best.node.excluded_llm_metadata_keys)
        node.excluded_embed_metadata_keys = list(best.node.excluded_embed_metadata_keys)
        hide_from_models(node, PARTS)
        node.set_content(joiner.join(p[2] for p in pieces))
        node.start_char_idx = pieces[0][0] if located else None
        node.end_char_idx = pieces[-1][1] if located else None
        out.append(NodeWithScore(node=node, score=best.score))
    return out


def sent_spans(nodes: Sequence[NodeWithScore], texts: Sequence[str]) -> list[tuple]:
    """``(source, start, end, length)`` of what each sent node covers in its source, for span
    metrics: a merged passage's pieces one by one, other nodes' offsets (``length``, their text's,
    counts where offsets are unknown)."""
    out = []
    for n, t in zip(nodes, texts):
        source = n.node.metadata.get("source")
        parts = n.node.metadata.get(PARTS)
        if parts:
            out += [(source, s, e, e - s) for s, e in parts]
        else:
            out.append((source, n.node.start_char_idx, n.node.end_char_idx, len(t)))
    return out


def passage_spans(nodes: Sequence[NodeWithScore]) -> list[list[tuple[str, int, int]]]:
    """Passage by passage, the ``(source, start, end)`` pieces each sent node covers in its
    source, for the span rank metrics: a merged passage's pieces, another node's offsets; a node
    whose offsets are unknown covers nothing."""
    out = []
    for n in nodes:
        source = n.node.metadata.get("source")
        parts = n.node.metadata.get(PARTS) or [(n.node.start_char_idx, n.node.end_char_idx)]
        out.append([(source, s, e) for s, e in parts if s is not None and e is not None])
    return out
