"""The loss funnel at run time: follow each question's gold evidence through the run's stages
and record where it went (the stages and the verdict: :mod:`lab.metrics.funnel`).

The run calls :func:`retrieval_side` for each question after retrieval (the knowledge base, the
index's chunks, the retriever's candidates, the final list), :func:`sent_side` after the context
is built, and :func:`lab.metrics.funnel.finish` once answers and judgements are in. What the
verdicts read is recorded in the question's ``funnel`` (chunk ids, ranks, the sent passage, the
answer excerpt) and ``candidates`` (the first stage's list, ids, ranks and scores, cut at
:data:`~lab.metrics.funnel.MAX_CANDIDATES`).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any, Sequence

from llama_index.core.schema import NodeWithScore

from lab.evalsets.evalset import EvalRow
from lab.evidence.holds import Evidence, Passage, first_holding, holds
from lab.evidence.text import fold
from lab.metrics.funnel import MAX_CANDIDATES, RETRIEVAL_STAGES, piece_loss
from lab.rag.postprocess import score_float
from lab.rag.sent import passage_spans
from lab.runfiles import FunnelItem, FunnelRecord

Span = tuple[str, int, int]
#: Characters of a span's text kept in the record of a row without keywords (the answer is checked
#: against it, :func:`lab.evidence.states.states_text`).
SPAN_TEXT_CHARS = 600


class _Haystack:
    """Many texts, folded and joined, searched at once: which text first holds a keyword (the rule
    of :func:`lab.evidence.holds.holds`, for every chunk of an index in one ``str.find``)."""

    def __init__(self, texts: Sequence[str]) -> None:
        parts = [fold(t, "case") for t in texts]
        self.starts, pos = [], 0
        for t in parts:
            self.starts.append(pos)
            pos += len(t) + 1
        self.text = "\x00".join(parts)

    def first(self, needle: str) -> int | None:
        at = self.text.find(fold(needle, "case"))
        return None if at < 0 or not needle else bisect.bisect_right(self.starts, at) - 1

    def count(self, needle: str) -> int:
        """How many of the texts contain ``needle``."""
        needle = fold(needle, "case")
        found, at = set(), self.text.find(needle) if needle else -1
        while at >= 0:
            i = bisect.bisect_right(self.starts, at) - 1
            found.add(i)
            nxt = self.starts[i + 1] if i + 1 < len(self.starts) else len(self.text)
            at = self.text.find(needle, nxt)
        return len(found)


@dataclass
class FunnelView:
    """What the first two stages read: the loaded documents and every chunk of the index."""

    documents: dict[str, str]
    chunks: list[Passage]  # every chunk of the index, in table order (lab.rag.index.index_passages)
    _docs: _Haystack = field(init=False)
    _chunks: _Haystack = field(init=False)
    _by_source: dict[str, list[tuple[str, int, int]]] = field(init=False)

    def __post_init__(self) -> None:
        self._docs = _Haystack(list(self.documents.values()))
        self._chunks = _Haystack([c.text for c in self.chunks])
        self._by_source = {}
        for c in self.chunks:
            for source, start, end in c.pieces:
                self._by_source.setdefault(source, []).append((c.id, start, end))

    def keyword_in_kb(self, keyword: str) -> bool:
        return self._docs.first(keyword) is not None

    def keyword_chunk(self, keyword: str) -> str | None:
        i = self._chunks.first(keyword)
        return None if i is None else self.chunks[i].id

    def keyword_chunks(self, keyword: str) -> int:
        """How many chunks contain the keyword."""
        return self._chunks.count(keyword)

    def span_in_kb(self, span: Span) -> bool:
        text = self.documents.get(span[0])
        return text is not None and 0 <= span[1] < span[2] <= len(text)

    def span_chunk(self, places: Sequence[Span]) -> str | None:
        """A chunk holding the span at one of its places (the first place any chunk holds)."""
        for source, start, end in places:
            one = Evidence.span((source, start, end))
            for cid, a, b in self._by_source.get(source, []):
                if a < end and b > start and holds(Passage(pieces=((source, a, b),)), one):
                    return cid
        return None


def _first_holding(passages: Sequence[Sequence[Span]], places: Sequence[Span]) -> int | None:
    return first_holding([Passage(pieces=tuple(p)) for p in passages], Evidence.span(places[0], places[1:]))


def candidates_record(first: Sequence[NodeWithScore]) -> list[dict]:
    """The first stage's list as recorded: ids, ranks and scores, cut at MAX_CANDIDATES."""
    return [{"id": n.node.node_id, "rank": i, "score": score_float(n.score)}
            for i, n in enumerate(first[:MAX_CANDIDATES], start=1)]


def retrieval_side(row: EvalRow, first: Sequence[NodeWithScore], final: Sequence[NodeWithScore],
                   view: FunnelView, twins: dict[tuple, Any]) -> FunnelRecord:
    """A question's funnel record after retrieval: each piece of gold evidence (its spans, else its
    keywords) with the chunk, the first candidate and the final passage holding it, and where it was
    lost so far. ``lost_at`` is set by :func:`lab.metrics.funnel.finish`; a row with no evidence
    records ``lost_at: None``."""
    items: list[FunnelItem] = []
    refs = [(r.source, r.start_index, r.end_index, r.content) for r in row.references or []]
    if refs:
        first_p, final_p = passage_spans(first), passage_spans(final)
        for source, start, end, content in refs:
            ref = (source, start, end)
            found = twins.get(ref)
            places = [ref, *(found.places if found is not None else [])]
            in_kb = view.span_in_kb(ref)
            chunk = view.span_chunk(places) if in_kb else None
            cand = _first_holding(first_p, places) if chunk else None
            rank = _first_holding(final_p, places) if cand else None
            item = {"kind": "span", "source": source, "start": start, "end": end, "chunk": chunk,
                    "candidate_rank": cand, "rank": rank, "lost_at": piece_loss(in_kb, chunk, cand, rank, None, False)}
            if not row.keywords:
                item["text"] = (content or "")[:SPAN_TEXT_CHARS]
            items.append(item)
    elif row.keywords:
        first_t = [Passage(n.node.get_content()) for n in first]
        final_t = [Passage(n.node.get_content()) for n in final]
        for kw in row.keywords:
            in_kb = view.keyword_in_kb(kw)
            chunk = view.keyword_chunk(kw) if in_kb else None
            cand = first_holding(first_t, Evidence.keyword(kw)) if chunk else None
            rank = first_holding(final_t, Evidence.keyword(kw)) if cand else None
            items.append({"kind": "keyword", "keyword": kw, "chunk": chunk,
                          "n_chunks": view.keyword_chunks(kw) if chunk else 0, "candidate_rank": cand, "rank": rank,
                          "lost_at": piece_loss(in_kb, chunk, cand, rank, None, False)})
    if not items:
        return {"lost_at": None, "seen": list(RETRIEVAL_STAGES), "items": []}
    return {"lost_at": None, "seen": list(RETRIEVAL_STAGES), "items": items, "n_candidates": len(first)}


def _sent_pieces(node: NodeWithScore, sent_chars: int, truncated: bool) -> list[Span]:
    """What of a final node was sent: its pieces, cut to the sent characters when the budget cut it."""
    pieces = passage_spans([node])[0]
    if not truncated:
        return pieces
    out, left = [], sent_chars
    for source, start, end in pieces:
        if left <= 0:
            break
        out.append((source, start, min(end, start + left)))
        left -= end - start
    return out


def sent_side(record: FunnelRecord, final: Sequence[NodeWithScore], ctx: Any, suppressed: bool = False
              ) -> FunnelRecord:
    """After the context is built, a new record: which sent passage holds each piece still in the
    running, and what the budget removed; a piece the final list held and the context does not is
    lost at the budget (at the second stage when the guardrail suppressed the context)."""
    rec: FunnelRecord = {**record, "seen": [*record["seen"], "budget"], "items": [dict(i) for i in record["items"]],
                         "budget": {"dropped": list(ctx.dropped),
                                    "truncated": [p.node_id for p in ctx.passages if p.truncated]}}
    by_id = {n.node.node_id: n for n in final}
    passages = [(i, p, by_id.get(p.node_id)) for i, p in enumerate(ctx.passages, start=1)]
    for item in rec["items"]:
        if item["lost_at"] is not None:
            continue
        if item["kind"] == "span":
            ref = (item["source"], item["start"], item["end"])
            sent = next((i for i, p, node in passages if node is not None
                         and holds(Passage(pieces=tuple(_sent_pieces(node, len(p.text), p.truncated))),
                                   Evidence.span(ref))), None)
            if sent is None:  # a twin sent instead of the span's own place holds it as well
                sent = next((i for i, p, node in passages if node is not None and item["rank"] is not None
                             and final[item["rank"] - 1].node.node_id == p.node_id and not p.truncated), None)
        else:
            kw = Evidence.keyword(item["keyword"])
            sent = next((i for i, p, _ in passages if holds(Passage(p.text), kw)), None)
        item["sent"] = sent
        if sent is None:
            item["lost_at"] = "second_stage" if suppressed else "budget"
    return rec
