"""Training questions for ``lab tune``, and what keeps them honest: pure functions, no model.

- :func:`pseudo_queries`: questions made without any LLM: a sentence or a heading taken from its
  chunk, under its document's title, is the query, the chunk (or, by inverse cloze, the chunk
  without it) the positive passage.
- :func:`span_questions`: an eval set's rows with golden spans (``lab generate`` writes them):
  the question, and as positives every chunk holding the span's text (a repeated paragraph has
  several).
- :func:`mine_negatives`: hard negatives from a question's dense and BM25 candidates, taken in
  turn from each list, skipping every chunk that holds the question's span, up to a cap.
- :func:`fingerprint`: the training set's content hash, written into the model card.

Text is compared folded (:func:`lab.evidence.text.fold`: whitespace, quotes, dashes,
emphasis and case), as the span metrics compare it.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from dataclasses import asdict, dataclass, field, replace
from pathlib import PurePosixPath
from typing import Callable, Iterable, Sequence

from lab.evalsets.leakage import MIN_SPAN_CHARS
from lab.evidence.holds import Passage
from lab.evidence.text import fold

#: A pseudo-query has this many words at least, and at most.
MIN_WORDS, MAX_WORDS = 5, 40

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(*\[])")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$")
_LIST = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")


@dataclass
class TrainQuestion:
    """One training question: its text, the ids of the passages that answer it, the span it was
    made from (folded), where it came from ("pseudo" or "file:line") and, for pseudo-queries, the
    positive passage's text without the query (the inverse cloze)."""

    text: str
    positives: tuple[str, ...]
    span: str
    origin: str
    kind: str  # "pseudo" | "generated"
    positive_text: str | None = None
    negatives: list[str] = field(default_factory=list)
    source: str = ""  # a pseudo-query's document: its sentence elsewhere, under another title, is a negative
    places: tuple[tuple[str, int, int], ...] = ()  # a generated row's golden spans (source, start, end): the dev runs'

    def record(self) -> dict:
        return {k: v for k, v in asdict(self).items() if k not in ("positive_text", "negatives", "source", "places")}


def candidate_sentences(text: str) -> list[str]:
    """The sentences and headings of a chunk that can stand as a query: a heading of two words or
    more, or a sentence of :data:`MIN_WORDS` to :data:`MAX_WORDS` words; list markers and emphasis
    stripped; table rows and code left out."""
    out: list[str] = []
    for line in text.splitlines():
        if "|" in line or line.strip().startswith(("```", "<", "    ")):
            continue
        heading = _HEADING.match(line)
        if heading:
            title = heading.group(1).strip("*_ ").strip()
            if len(title.split()) >= 2:
                out.append(title)
            continue
        line = _LIST.sub("", line).strip()
        for sentence in _SENTENCE_END.split(line):
            sentence = sentence.strip().replace("**", "")
            n = len(sentence.split())
            if MIN_WORDS <= n <= MAX_WORDS and sum(c.isalpha() for c in sentence) >= 0.5 * len(sentence):
                out.append(sentence)
    return out


def title_of(source: str) -> str:
    """A document's name as a question says it: its file name without the extension, ``_`` and
    ``-`` as spaces ("employees/Alex Chen.md": "Alex Chen")."""
    return re.sub(r"[_-]+", " ", PurePosixPath(source).stem).strip()


def pseudo_queries(passages: Sequence[Passage], n: int, seed: int, cloze: float = 0.0) -> list[TrainQuestion]:
    """``n`` questions made from the chunks, no LLM: passages in a seeded order, one sentence or
    heading from each per round. A query names its document, as a user's question names what it is
    about: the document's title (:func:`title_of`) goes first unless the sentence holds it already
    ("Alex Chen: 2022: $210,000 base salary"). With probability ``cloze`` the positive is the
    passage without the sentence (the inverse cloze task), else the passage whole. A query found in
    more than one document (boilerplate under the same title) is skipped: it has no single answer."""
    if n <= 0 or not passages:
        return []
    documents_of: dict[str, set[str]] = {}
    per_passage: list[tuple[Passage, list[tuple[str, str]]]] = []
    for p in passages:
        title = title_of(p.source)
        queries = []
        for sentence in candidate_sentences(p.text):
            named = not title or fold(title) in fold(sentence)
            queries.append((sentence, sentence if named else f"{title}: {sentence}"))
            documents_of.setdefault(fold(queries[-1][1]), set()).add(p.source)
        if queries:
            per_passage.append((p, queries))
    rng = random.Random(seed)
    order = list(range(len(per_passage)))
    rng.shuffle(order)
    picks = {i: rng.sample(range(len(per_passage[i][1])), len(per_passage[i][1])) for i in order}
    removal = random.Random(seed + 1)  # its own stream: the questions do not depend on cloze
    out: list[TrainQuestion] = []
    taken: set[str] = set()
    for round_ in range(max((len(s) for _, s in per_passage), default=0)):
        for i in order:
            passage, queries = per_passage[i]
            if round_ >= len(queries):
                continue
            sentence, query = queries[picks[i][round_]]
            key = fold(query)
            if key in taken or len(documents_of[key]) > 1:
                continue
            taken.add(key)
            rest = None
            if removal.random() < cloze and sentence in passage.text:
                rest = re.sub(r"[ \t]{2,}", " ", passage.text.replace(sentence, " ", 1)).strip()
                if len(rest) < 20:  # nothing left to match against: the passage whole
                    rest = None
            out.append(TrainQuestion(query, (passage.id,), fold(sentence), f"pseudo:{passage.id}", "pseudo",
                                     rest, source=passage.source))
            if len(out) == n:
                return out
    return out


def holding(span: str, passages: Sequence[Passage], folded: dict[str, str]) -> tuple[str, ...]:
    """Ids of the passages whose folded text holds ``span`` (folded)."""
    return tuple(p.id for p in passages if span and span in folded[p.id])


def span_questions(rows: Iterable[tuple[str, dict]], passages: Sequence[Passage]
                   ) -> tuple[list[TrainQuestion], dict[str, int]]:
    """Training questions from eval-set rows ``(origin, row)``: a row with ``references`` gives
    its question with every passage holding a reference's text as a positive. A reference split
    across two chunks falls back to its longest sentence. Returns the questions and the counts of
    rows left out, by reason."""
    folded = {p.id: fold(p.text) for p in passages}
    out: list[TrainQuestion] = []
    skipped: dict[str, int] = {}
    for origin, row in rows:
        refs = [r.get("content") or "" for r in row.get("references") or []]
        if not refs:
            skipped["no golden span"] = skipped.get("no golden span", 0) + 1
            continue
        positives: list[str] = []
        spans: list[str] = []
        for ref in refs:
            span = fold(ref)
            found = holding(span, passages, folded)
            if not found:
                longest = max(candidate_sentences(ref) or [ref], key=len)
                if len(fold(longest)) >= MIN_SPAN_CHARS:
                    found = holding(fold(longest), passages, folded)
            positives += [f for f in found if f not in positives]
            spans.append(span)
        if not positives:
            skipped["span in no chunk"] = skipped.get("span in no chunk", 0) + 1
            continue
        places = tuple((r["source"], r["start_index"], r["end_index"]) for r in row.get("references") or []
                       if r.get("source") and isinstance(r.get("start_index"), int) and isinstance(r.get("end_index"), int))
        out.append(TrainQuestion(row["question"], tuple(positives), " ".join(spans), origin, "generated",
                                 places=places))
    return out, skipped


def mine_negatives(question: TrainQuestion, dense: Sequence[str], sparse: Sequence[str],
                   passages: dict[str, Passage], folded: dict[str, str], cap: int) -> list[str]:
    """Up to ``cap`` hard negatives: the dense and BM25 candidates in turn (dense first), each
    once, skipping the positives and any passage that holds the question's span or the question
    itself (an overlapping chunk repeats its neighbour's sentences: it is not wrong). A pseudo-query
    names its document: its sentence in another document (a template's line) is a negative."""
    out: list[str] = []
    query = fold(question.text)
    for pair in _interleave(dense, sparse):
        if len(out) >= cap:
            break
        if pair in out or pair in question.positives or pair not in passages:
            continue
        text = folded[pair]
        elsewhere = question.source and passages[pair].source != question.source
        if (question.span and question.span in text and not elsewhere) or (question.kind == "pseudo" and query in text):
            continue
        out.append(pair)
    return out


def in_view(question: TrainQuestion, folded: dict[str, str], tokens: Callable[[str], int],
            max_length: int) -> TrainQuestion | None:
    """``question`` with only the positives in which its span ends inside what a cross-encoder of
    ``max_length`` tokens reads of the pair (``[CLS] query [SEP] passage [SEP]``, the passage cut
    at the end), or None when no positive is left; ``folded``: each passage's folded text, ``tokens``
    counts a text's tokens. A positive not holding the span whole (a row of several spans) is kept,
    unjudged. A positive whose sentence lies past the cut is a pair labelled relevant on text that
    does not hold the answer: in InsureLLM's, our own and the formats set's turn18 chunks, 23%,
    39% and 35% of the pseudo-queries at 256 tokens (docs/tuning.md). An inverse-cloze positive
    (the sentence taken out) is kept as it is, and so is a positive whose span is the whole passage:
    document-level gold (a BEIR import's qrels) says the passage is relevant, not where it says so,
    and judged by its end it would leave out every passage longer than the cut."""
    if question.positive_text is not None:
        return question
    room = max_length - 3 - tokens(question.text)
    kept = []
    for pid in question.positives:
        at = folded[pid].find(question.span)
        if (at < 0  # not found whole: kept, unjudged
                or folded[pid] == question.span  # the whole passage: document-level gold
                or tokens(folded[pid][:at + len(question.span)]) <= room):
            kept.append(pid)
    if not kept:
        return None
    return replace(question, positives=tuple(kept))  # a copy: the caller's question is left as it was


def _interleave(a: Sequence[str], b: Sequence[str]) -> Iterable[str]:
    for i in range(max(len(a), len(b))):
        if i < len(a):
            yield a[i]
        if i < len(b):
            yield b[i]


def fingerprint(questions: Sequence[TrainQuestion], passages: Sequence[Passage]) -> str:
    """Content hash of a training set: every question with its positives and negatives, in order,
    and the passages they name."""
    h = hashlib.sha256()
    named: set[str] = set()
    for q in questions:
        h.update(json.dumps([q.text, q.positives, q.negatives, q.positive_text], ensure_ascii=False).encode())
        named.update(q.positives)
        named.update(q.negatives)
    for p in passages:
        if p.id in named:
            h.update(f"\x00{p.id}\x00{p.text}".encode())
    return h.hexdigest()[:16]
