"""A target's reply to one question as the run's sample: its contexts located in the knowledge
base (:mod:`lab.eval.locate`) and scored by the pipeline's own metric functions, its answer as
an answer record, its loss funnel over the stages the target lets the lab see.

A target shows its final contexts, and its first stage only where the reply has ``candidates``;
its chunks and its context budget are never seen. Its funnel therefore has ``kb``, then
``first_stage`` and ``second_stage`` (with candidates) or ``retrieval`` (without: where before the
final list is not observed), then the answer's stages; the others are recorded as not observed,
never guessed. A failed call is a sample with ``target.status: failed``, its error, and no
metric value (n/a, not 0).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Sequence

from llama_index.core.schema import NodeWithScore, TextNode

from lab.config import ExperimentConfig
from lab.eval.funnel import SPAN_TEXT_CHARS, candidates_record
from lab.eval.locate import Locator
from lab.eval.records import retrieved_record
from lab.eval.stages import _places, _reference
from lab.evalsets.evalset import EvalRow
from lab.evalsets.twins import Twins
from lab.evidence.holds import Evidence, Passage, first_holding
from lab.evidence.text import fold
from lab.metrics.funnel import RETRIEVAL
from lab.metrics.injection import scan
from lab.metrics.labels import label_scores
from lab.metrics.retrieval import KEYWORD_METRICS, question_scores
from lab.metrics.spans import span_rank_scores, span_scores
from lab.rag.context import Context, Passage as SentPassage, format_passages
from lab.rag.generation import is_refusal, parse_citations
from lab.rag.sent import passage_spans, sent_spans
from lab.runfiles import FunnelRecord, Sample
from lab.targets.calls import Asked

def nodes(qid: str, items: Sequence[dict], locator: Locator, tag: str, counts: dict[str, int]) -> list[NodeWithScore]:
    """A reply's contexts (or candidates) as LlamaIndex nodes with offsets where located; ``counts``
    adds one per context to its locating level."""
    out = []
    for i, item in enumerate(items, start=1):
        loc = locator.locate(item["text"], item.get("source"), item.get("start"), item.get("end"))
        counts[loc.how] = counts.get(loc.how, 0) + 1
        node = TextNode(text=item["text"], id_=item.get("id") or f"{qid}#{tag}{i}",
                        metadata={"source": loc.source or item.get("source"), "located": loc.how,
                                  **{k: item[k] for k in ("page", "doc_type") if k in item}},
                        start_char_idx=loc.start, end_char_idx=loc.end)
        out.append(NodeWithScore(node=node, score=item.get("score")))
    return out


def scores_of(cfg: ExperimentConfig, row: EvalRow, final: Sequence[NodeWithScore], documents: dict[str, str],
              twins: dict[tuple, Twins], labels: dict | None) -> tuple[dict, dict, list[dict] | None, int | None]:
    """The retrieval metrics of the final contexts, as :func:`lab.eval.stages.retrieve_stage`
    computes them: (scores, keyword ranks, references, span chars)."""
    texts = [n.node.get_content() for n in final]
    if row.keywords:
        scores = question_scores(row.keywords, texts, cfg.metrics.k)
    else:
        scores = {name: None for name in KEYWORD_METRICS} | {"keyword_ranks": {}}
    ranks = scores.pop("keyword_ranks")
    scores["context_chars"] = sum(len(t) for t in texts)
    refs = [(r.source, r.start_index, r.end_index) for r in (row.references or []) if r.source in documents]
    references, span_chars = None, None
    if refs:
        spans = span_scores(sent_spans(final, texts), refs)
        span_chars = spans.pop("span_chars")
        scores.update(spans)
        ranked = span_rank_scores(passage_spans(final), [[ref, *_places(twins, ref)] for ref in refs], cfg.metrics.k)
        span_ranks = list(zip(ranked.pop("span_ranks"), ranked.pop("span_twin")))
        scores.update(ranked)
        references = [_reference(ref, twins.get(ref), rank, twin) for ref, (rank, twin) in zip(refs, span_ranks)]
    if labels is not None and row.id in labels:
        scores.update(label_scores(labels[row.id], [n.node.node_id for n in final], cfg.metrics.k))
    return scores, ranks, references, span_chars


def funnel_side(row: EvalRow, candidates: Sequence[NodeWithScore] | None, final: Sequence[NodeWithScore],
                documents: dict[str, str], twins: dict[tuple, Twins]) -> FunnelRecord:
    """The retrieval side of a target's funnel: each piece of gold evidence in the knowledge base,
    among the candidates (where the reply has them) and among the final contexts."""
    seen = ["kb", "first_stage", "second_stage"] if candidates is not None else ["kb", RETRIEVAL]
    items: list[dict] = []
    refs = [(r.source, r.start_index, r.end_index, r.content) for r in row.references or []]
    if refs:
        final_p = [Passage(pieces=tuple(p)) for p in passage_spans(final)]
        cand_p = [Passage(pieces=tuple(p)) for p in passage_spans(candidates)] if candidates is not None else None
        for source, start, end, content in refs:
            text = documents.get(source)
            in_kb = text is not None and 0 <= start < end <= len(text)
            found = twins.get((source, start, end))
            evidence = Evidence.span((source, start, end), found.places if found is not None else ())
            item = _item(in_kb, evidence, cand_p, final_p, {"kind": "span", "source": source, "start": start, "end": end})
            if not row.keywords:
                item["text"] = (content or "")[:SPAN_TEXT_CHARS]
            items.append(item)
    elif row.keywords:
        final_t = [Passage(n.node.get_content()) for n in final]
        cand_t = [Passage(n.node.get_content()) for n in candidates] if candidates is not None else None
        folded = [fold(t, "case") for t in documents.values()]
        for kw in row.keywords:
            in_kb = any(fold(kw, "case") in t for t in folded)
            items.append(_item(in_kb, Evidence.keyword(kw), cand_t, final_t, {"kind": "keyword", "keyword": kw}))
    if not items:
        return {"lost_at": None, "seen": seen, "items": []}
    out: FunnelRecord = {"lost_at": None, "seen": seen, "items": items}
    if candidates is not None:
        out["n_candidates"] = len(candidates)
    return out


def _item(in_kb: bool, evidence: Evidence, cands: list[Passage] | None, final: list[Passage], base: dict) -> dict:
    cand = first_holding(cands, evidence) if in_kb and cands is not None else None
    rank = first_holding(final, evidence) if in_kb else None
    if not in_kb:
        lost = "kb"
    elif rank is not None:
        lost = None
    elif cands is None:
        lost = RETRIEVAL
    else:
        lost = "first_stage" if cand is None else "second_stage"
    return {**base, "candidate_rank": cand, "rank": rank, "lost_at": lost}


def target_sample(cfg: ExperimentConfig, row: EvalRow, asked: Asked, locator: Locator, twins: dict[tuple, Twins],
                  labels: dict | None, counts: dict[str, int]) -> Sample:
    """One question's sample; ``counts`` adds its contexts to the locating levels."""
    base: dict[str, Any] = {"id": row.id, "question": row.question, "category": row.category,
                            "keywords": row.keywords or [], "reference_answer": row.reference_answer}
    status: dict[str, Any] = {"status": "ok" if asked.reply is not None else "failed", "cached": asked.cached,
                              "seconds": None if asked.seconds is None else round(asked.seconds, 6)}
    if asked.reply is None:
        status["error"] = asked.error
        s = Sample(**base, keyword_ranks={}, retrieved=[], first_stage=None, candidates=[],
                   metrics={name: None for name in KEYWORD_METRICS} | {"context_chars": None},
                   timings={"target_s": status["seconds"], "rerank_s": None}, funnel={"lost_at": None, "seen": [], "items": []})
        s["target"] = status
        if cfg.target.answers:
            s["answer"] = {"status": "failed", "error": asked.error, "text": "", "citations": [], "cited_sources": [],
                           "refused": False, "prompt_tokens": 0, "completion_tokens": 0, "seconds": 0.0,
                           "cached": asked.cached, "finish_reason": None}
        return s
    reply = asked.reply
    final = nodes(row.id, reply["contexts"], locator, "c", counts)
    candidates = nodes(row.id, reply["candidates"], locator, "k", {}) if reply.get("candidates") is not None else None
    scores, ranks, references, span_chars = scores_of(cfg, row, final, locator.documents, twins, labels)
    pool = candidates if candidates is not None else final
    cand_rank = {n.node.get_content(): (i, n.score) for i, n in reversed(list(enumerate(pool, start=1)))}
    s = Sample(**base, keyword_ranks=ranks, metrics=scores,
               retrieved=[retrieved_record(i, n, cand_rank.get(n.node.get_content(), (i, n.score)))
                          for i, n in enumerate(final, start=1)],
               first_stage=[{"id": n.node.node_id, "score": n.score} for n in candidates] if candidates is not None else None,
               timings={"target_s": status["seconds"], "rerank_s": None}, candidates=candidates_record(pool),
               funnel=funnel_side(row, candidates, final, locator.documents, twins))
    if references is not None:
        s["references"] = references
        s["span_chars"] = span_chars
    flags = [{"rank": i, "why": list(why)} for i, n in enumerate(final, start=1) if (why := _scan(n.node.get_content()))]
    status["located"] = [n.node.metadata["located"] for n in final]
    if flags:  # the injection scan on what the target sent its model
        status["context_flags"] = flags
    if reply.get("usage"):
        status["usage"] = reply["usage"]
    s["target"] = status
    if cfg.target.answers:
        s.update(answer_records(reply, final, asked))
    return s


@lru_cache(maxsize=4096)
def _scan(text: str) -> tuple[str, ...]:
    """The injection scan of a context (:func:`lab.metrics.injection.scan`, a document's: no
    ``claim`` kind), once per distinct text: a run's questions often share passages."""
    return tuple(scan(text, claims=False))


def answer_records(reply: dict, final: Sequence[NodeWithScore], asked: Asked) -> dict:
    """The sample's ``context`` (what the target says it gave its model) and ``answer``."""
    passages = [SentPassage(n.node.node_id, n.node.metadata.get("source"), n.node.get_content()) for n in final]
    ctx = Context("target", passages, format_passages(passages), n_candidates=len(final))
    text = (reply.get("answer") or "").strip()
    cites = parse_citations(text, len(passages))
    usage = reply.get("usage") or {}
    answer = {"status": "ok", "text": text, "citations": cites,
              "cited_sources": list(dict.fromkeys(passages[n - 1].source for n in cites)), "refused": is_refusal(text),
              "prompt_tokens": usage.get("prompt_tokens"), "completion_tokens": usage.get("completion_tokens"),
              "seconds": asked.seconds, "cached": asked.cached, "finish_reason": None}
    if not passages:
        answer["no_context"] = True
    return {"context": ctx.as_record(), "answer": answer}


def not_observed(samples: Sequence[Sample]) -> list[str]:
    """The funnel's stages no question of a target run lets the lab see: chunking and the budget
    always, the first and second stage apart where no reply had candidates."""
    seen = {x for s in samples for x in (s.get("funnel") or {}).get("seen", [])}
    split = ["first_stage", "second_stage"] if "first_stage" not in seen else []
    return ["chunking", *split, "budget"]
