"""The loss funnel: for each question, the first stage of the pipeline that lost its gold evidence.

A question's gold evidence is its golden spans where it has any (exact offsets), else its
keywords (matched as the keyword metrics match them: NFC, case-insensitive substring). Whether a
chunk, a candidate or a passage holds a piece is :func:`lab.evidence.holds.holds`, the rule of the
retrieval metrics. Each piece of evidence is followed through the stages:

1. ``kb``: the knowledge base holds it (the span's document is loaded and the offsets lie inside
   it; the keyword occurs in some document);
2. ``chunking``: some chunk of the index holds it (a span: one chunk covers at least half of it
   at one of its places; a keyword: some chunk's text contains it, so a keyword cut across two
   chunks is lost here);
3. ``first_stage``: a chunk holding it is among the retriever's candidates, to their configured
   depth (dense or BM25: its list; hybrid: both lists, before the fusion keeps its top k);
4. ``second_stage``: a passage holding it survives the fusion's cut, reranking, the guardrail and
   the filters (the final list, what the retrieval metrics score);
5. ``budget``: a passage holding it is sent to the model whole enough to hold it (the context
   builder's budget can drop or cut passages);
6. ``generation``: the answer states the evidence: every gold keyword (or, for a row with spans
   and no keywords, at least half of each span's content words,
   :func:`lab.evidence.states.states_text`); where
   the ``claims`` judge graded the answer, every reference fact it found stated (P(stated) >= 0.5)
   instead: no keyword matching, no extra model call;
7. ``judge``: the judge agrees with the evidence: an answer that states it all graded below 3 on
   accuracy, or one that states none of it graded 4 or more, is a judge loss.

A question is lost at the first stage where any of its evidence is lost (the pieces are kept
apart in the record, so "one of two spans lost at chunking" shows); one that keeps everything
through the last stage the run has is ``kept``. A stage the run does not have (no answers in a
retrieval-only run, no judge) is not *seen*: its questions stop at the last seen stage.

Runs written before the funnel have no per-question record: :func:`question_funnel` derives what
their files show (the final list, the sent context, the answer, the judgement) and reports the
stages before the final list as one, ``retrieval``, which it cannot split.

Everything here is pure: the run computes the reach of each piece of evidence
(:mod:`lab.eval.funnel`), these functions name stages, summarise and compare.
"""

from __future__ import annotations

from typing import Iterable, Mapping, Sequence

from lab.evidence.states import stated_keywords, states_text, unsupported_terms
from lab.evidence.text import fold
from lab.runfiles import FunnelRecord

#: The stages in pipeline order; a question lost at none of them is ``kept``.
STAGES = ("kb", "chunking", "first_stage", "second_stage", "budget", "generation", "judge")
KEPT = "kept"
#: Old runs: the stages before the final list, which their files cannot tell apart.
RETRIEVAL = "retrieval"
#: The stages a run that recorded everything before the final list can see.
RETRIEVAL_STAGES = STAGES[:4]
LABELS = {"kb": "not in the knowledge base", "chunking": "chunking", "first_stage": "first stage",
          "second_stage": "second stage", "budget": "context budget", "generation": "generation",
          "judge": "judge", RETRIEVAL: "retrieval (stage not recorded)", KEPT: "kept"}
ORDER = {s: i for i, s in enumerate((*RETRIEVAL_STAGES, RETRIEVAL, *STAGES[4:], KEPT))}

#: Accuracy below this for an answer stating all the evidence: the judge lost it.
WRONG_BELOW = 3
#: Accuracy at or above this for an answer stating none of it: the judge lost it too.
RIGHT_AT = 4
#: Candidates recorded per question (the first stage's list, cut here to bound the run files).
MAX_CANDIDATES = 100
#: Unsupported answer terms recorded per question.
MAX_UNSUPPORTED = 10
#: Characters of the answer kept as evidence of the generation and judge verdicts.
EXCERPT_CHARS = 200
#: The claims judge's facts recorded per question, and characters of each.
MAX_CLAIMS, CLAIM_CHARS = 10, 200

def first_lost(reach: Iterable[str | None]) -> str | None:
    """The earliest stage among pieces' losses (None: none lost)."""
    lost = [r for r in reach if r is not None]
    return min(lost, key=ORDER.__getitem__) if lost else None


def piece_loss(in_kb: bool, chunk: str | None, candidate_rank: int | None, rank: int | None,
               sent: int | None, budget_seen: bool) -> str | None:
    """Where one piece of evidence was lost before the answer (None: sent, or the final list when
    no context was built). ``chunk``: a chunk of the index holding it; ``candidate_rank`` and
    ``rank``: the first candidate and final passage holding it; ``sent``: the sent passage holding
    it (its number)."""
    if not in_kb:
        return "kb"
    if chunk is None:
        return "chunking"
    if candidate_rank is None:
        return "first_stage"
    if rank is None:
        return "second_stage"
    if budget_seen and sent is None:
        return "budget"
    return None


def answer_loss(stated: float | None, accuracy: float | None) -> str | None:
    """The answer side's verdict for evidence that reached the model: ``stated`` the share of the
    gold the answer states (None: no answer), ``accuracy`` the judge's score (None: not judged)."""
    if stated is None:
        return None
    if stated >= 1.0:
        return "judge" if accuracy is not None and accuracy < WRONG_BELOW else None
    if stated <= 0.0 and accuracy is not None and accuracy >= RIGHT_AT:
        return "judge"
    return "generation"


def utilisation(answer: str, keywords: Sequence[str], sent_text: str) -> float | None:
    """The share of the gold keywords present in the sent context that the answer states (None:
    none was sent)."""
    sent = fold(sent_text, "case")
    present = [k for k in keywords if fold(k, "case") in sent]
    if not present:
        return None
    return sum(stated_keywords(answer, present)) / len(present)


def excerpt(answer: str, keywords: Sequence[str] = ()) -> str:
    """Up to :data:`EXCERPT_CHARS` of the answer, around the first gold keyword it states."""
    a = fold(answer, "case")
    at = min((a.find(fold(k, "case")) for k in keywords if fold(k, "case") in a), default=0)
    start = max(0, at - EXCERPT_CHARS // 4)
    text = answer[start:start + EXCERPT_CHARS]
    return ("…" if start else "") + text + ("…" if start + EXCERPT_CHARS < len(answer) else "")


# ---------------------------------------------------------------------------------------------
# A question's funnel, from its record (new runs) or from what old run files show


def seen_stages(sample: Mapping) -> list[str]:
    """The stages a question's record lets the funnel see, in order."""
    rec = sample.get("funnel")
    if isinstance(rec, Mapping) and isinstance(rec.get("seen"), list):
        return list(rec["seen"])
    seen = [RETRIEVAL]
    if sample.get("context") is not None:
        seen.append("budget")
    if sample.get("answer") is not None:
        seen.append("generation")
    if sample.get("judgement") is not None:
        seen.append("judge")
    return seen


def _claims(sample: Mapping) -> list[dict]:
    """The claims judge's facts with their P(stated), where the question was judged by it."""
    j = sample.get("judgement")
    facts = j.get("claims") if isinstance(j, Mapping) and j.get("status") == "ok" else None
    if not isinstance(facts, list):
        return []
    return [c for c in facts if isinstance(c, Mapping) and isinstance(c.get("stated"), (int, float))
            and isinstance(c.get("fact"), str)]


def _accuracy(sample: Mapping) -> float | None:
    j = sample.get("judgement")
    if not isinstance(j, Mapping) or j.get("status") != "ok" or j.get("suspect"):
        return None
    acc = j.get("accuracy")
    return acc if isinstance(acc, (int, float)) else None


def question_funnel(sample: Mapping) -> dict | None:
    """``{lost_at, seen, items}`` of one question (None: it has no gold evidence, no span and no
    keyword). A new run's record is returned as written; an old run's is derived from its files."""
    rec = sample.get("funnel")
    if isinstance(rec, Mapping) and rec.get("lost_at"):
        return dict(rec)
    if isinstance(rec, Mapping) and "lost_at" in rec:  # recorded: no evidence
        return None
    refs = [r for r in sample.get("references") or [] if isinstance(r, Mapping)]
    keywords = list(sample.get("keywords") or [])
    if not refs and not keywords:
        return None
    seen = seen_stages(sample)
    ctx = sample.get("context")
    sent_ids = {p.get("id") for p in ctx.get("passages", [])} if isinstance(ctx, Mapping) else None
    sent_text = ctx.get("text", "") if isinstance(ctx, Mapping) else ""
    retrieved = {r.get("rank"): r for r in sample.get("retrieved") or []}
    items = []
    if refs:
        for r in refs:
            rank = r.get("rank")
            lost = RETRIEVAL if rank is None else None
            if lost is None and sent_ids is not None and retrieved.get(rank, {}).get("id") not in sent_ids:
                lost = "budget"
            items.append({"kind": "span", "source": r.get("source"), "start": r.get("start"), "end": r.get("end"),
                          "rank": rank, "lost_at": lost})
    else:
        ranks = sample.get("keyword_ranks") or {}
        for k in keywords:
            rank = ranks.get(k)
            lost = RETRIEVAL if rank is None else None
            if lost is None and sent_ids is not None and fold(k, "case") not in fold(sent_text, "case"):
                lost = "budget"
            items.append({"kind": "keyword", "keyword": k, "rank": rank, "lost_at": lost})
    return finish({"lost_at": None, "seen": seen, "items": items, "derived": True}, sample)


def finish(record: FunnelRecord, sample: Mapping) -> FunnelRecord:
    """A question's funnel record completed with the answer side, its diagnostics and its verdict
    (``lost_at``), as a new record (``record`` is left as it is). The generation and judge stages
    are seen only where the answer's statement of the gold can be checked (keywords, or the spans'
    texts)."""
    rec: FunnelRecord = {**record, "seen": list(record["seen"]), "items": [dict(i) for i in record["items"]]}
    lost = first_lost(i.get("lost_at") for i in rec["items"])
    answer = sample.get("answer")
    text = answer.get("text") if isinstance(answer, Mapping) and answer.get("status", "ok") != "failed" else None
    keywords = list(sample.get("keywords") or [])
    claims = _claims(sample)
    if text is not None and "generation" in rec["seen"]:
        if claims:  # the claims judge's P(stated) of each reference fact, instead of keyword matching
            flags = [c["stated"] >= 0.5 for c in claims]
            rec["stated_by"] = "claims"
            rec["claims"] = [{"fact": c["fact"][:CLAIM_CHARS], "stated": round(c["stated"], 4)}
                             for c in claims[:MAX_CLAIMS]]
        elif keywords:
            flags = stated_keywords(text, keywords)
            for item in rec["items"]:
                if item["kind"] == "keyword":
                    item["stated"] = flags[keywords.index(item["keyword"])]
        elif rec["items"] and all("text" in i for i in rec["items"]):
            flags = [states_text(text, i["text"]) for i in rec["items"]]
            for item, flag in zip(rec["items"], flags):
                item["stated"] = flag
        else:
            flags = []
        if flags:
            rec["stated"] = round(sum(flags) / len(flags), 4)
            rec["answer_excerpt"] = excerpt(text, keywords)
            if lost is None:
                lost = answer_loss(rec["stated"], _accuracy(sample) if "judge" in rec["seen"] else None)
        else:  # nothing to check the answer against: the answer side is not seen for this question
            rec["seen"] = [x for x in rec["seen"] if x not in ("generation", "judge")]
        ctx = sample.get("context")
        sent_text = ctx.get("text", "") if isinstance(ctx, Mapping) else ""
        rec["diagnostics"] = {
            "utilisation": utilisation(text, keywords, sent_text) if keywords else None,
            "unsupported": unsupported_terms(text, sent_text, MAX_UNSUPPORTED) if sent_text else [],
            "refused_with_gold": bool(answer.get("refused")) and first_lost(i.get("lost_at") for i in rec["items"]) is None,
        }
    if "judge" in rec["seen"] and _accuracy(sample) is not None:
        rec["accuracy"] = _accuracy(sample)
    rec["lost_at"] = lost or KEPT
    return rec


# ---------------------------------------------------------------------------------------------
# A run's funnel, and two runs' movers


def summarise(samples: Sequence[Mapping], categories: Sequence[str] | None = None) -> dict:
    """``results.json``'s ``funnel``: the stages seen, and per stage the questions lost there
    (overall and per category), the questions kept, and the answer-side diagnostics."""
    verdicts = [(s, question_funnel(s)) for s in samples]
    with_gold = [(s, f) for s, f in verdicts if f is not None]
    seen: list[str] = []
    for _, f in with_gold:
        seen += [x for x in f["seen"] if x not in seen]
    stages = [x for x in (*RETRIEVAL_STAGES, RETRIEVAL, *STAGES[4:]) if x in seen]

    def counts(rows: list) -> dict:
        lost = {x: 0 for x in stages}
        kept = 0
        for _, f in rows:
            if f["lost_at"] == KEPT:
                kept += 1
            else:
                lost[f["lost_at"]] = lost.get(f["lost_at"], 0) + 1
        return {"n": len(rows), "lost": lost, "kept": kept}

    cats = list(categories) if categories else sorted({s["category"] for s, _ in with_gold})
    out = {"stages": stages, "n": len(with_gold), "n_without_gold": len(verdicts) - len(with_gold),
           "overall": counts(with_gold),
           "by_category": {c: counts([x for x in with_gold if x[0]["category"] == c]) for c in cats
                           if any(x[0]["category"] == c for x in with_gold)},
           "derived": any(f.get("derived") for _, f in with_gold)}
    diag = [f.get("diagnostics") for _, f in with_gold if f.get("diagnostics")]
    if diag:
        util = [d["utilisation"] for d in diag if d.get("utilisation") is not None]
        out["diagnostics"] = {
            "n": len(diag),
            "utilisation_mean": round(sum(util) / len(util), 4) if util else None,
            "n_unsupported": sum(1 for d in diag if d.get("unsupported")),
            "n_refused_with_gold": sum(1 for d in diag if d.get("refused_with_gold")),
        }
    judged = [(f, s) for s, f in with_gold if f.get("stated") is not None and "judge" in f["seen"]]
    if judged:
        out["judge_vs_evidence"] = judge_vs_evidence([f for f, _ in judged], [s for _, s in judged])
    return out


def judge_vs_evidence(funnels: Sequence[Mapping], samples: Sequence[Mapping]) -> dict:
    """How often an answer stating all its gold is graded below ``WRONG_BELOW`` on accuracy, and how
    often one stating none of it is graded ``>= RIGHT_AT``."""
    all_, none_ = [], []
    for f, s in zip(funnels, samples):
        acc = _accuracy(s)
        if acc is None:
            continue
        if f["stated"] >= 1.0:
            all_.append(acc)
        elif f["stated"] <= 0.0:
            none_.append(acc)
    return {"n_states_all": len(all_), "states_all_graded_wrong": sum(1 for a in all_ if a < WRONG_BELOW),
            "n_states_none": len(none_), "states_none_graded_right": sum(1 for a in none_ if a >= RIGHT_AT)}


def survived(lost_at: str, stage: str) -> bool:
    """Whether a question lost at ``lost_at`` got past ``stage``."""
    return lost_at == KEPT or ORDER[lost_at] > ORDER[stage]


def movers(a: Mapping[str, str], b: Mapping[str, str]) -> dict:
    """Per stage, questions (ids) ``recovered`` (A lost them there, B carried them past it) and
    ``newly_lost`` (B lost them there, A carried them past it), over the questions both have;
    ``a``/``b``: question id -> the stage it was lost at (or ``kept``)."""
    ids = [q for q in a if q in b]
    out: dict = {}
    for stage in (*RETRIEVAL_STAGES, RETRIEVAL, *STAGES[4:]):
        rec = [q for q in ids if a[q] == stage and survived(b[q], stage)]
        new = [q for q in ids if b[q] == stage and survived(a[q], stage)]
        if rec or new:
            out[stage] = {"recovered": rec, "newly_lost": new}
    return out


def lost_at_by_id(samples: Sequence[Mapping]) -> dict[str, str]:
    """question id -> the stage it was lost at, or ``kept`` (questions with gold evidence only)."""
    out = {}
    for s in samples:
        f = question_funnel(s)
        if f is not None:
            out[s["id"]] = f["lost_at"]
    return out


def comparable(a: Mapping[str, str], b: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """Two runs' verdicts on one scale: where either run cannot split the stages before the final
    list, both are reported as ``retrieval`` there."""
    coarse = any(v == RETRIEVAL for v in (*a.values(), *b.values()))
    if not coarse:
        return dict(a), dict(b)
    fold = lambda v: RETRIEVAL if v in RETRIEVAL_STAGES else v  # noqa: E731
    return {q: fold(v) for q, v in a.items()}, {q: fold(v) for q, v in b.items()}


def survival_values(lost: Mapping[str, str], stage: str) -> dict[str, float]:
    """question id -> 1.0 when it got past ``stage``, else 0.0: the per-question values a paired
    test of one stage's share compares."""
    return {q: 1.0 if survived(v, stage) else 0.0 for q, v in lost.items()}
