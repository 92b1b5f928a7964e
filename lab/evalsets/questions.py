"""``lab generate``'s extractive mode (the default): questions about the knowledge base's own
fact-bearing sentences, each checked by rules that do not ask the model.

1. **The sentences**, by rule (:mod:`lab.evalsets.extract`): prose only (code, console
   transcripts, example output and option tables are left out in Markdown, reStructuredText and
   HTML alike), sentences that stand alone and state a fact. Each is a row's golden span, exactly,
   and its text (markup taken off) the row's reference answer; its category follows from what it
   states.
2. **The order**, by the coverage rule: the next document is the one with the fewest candidates
   per character of prose so far (weighted fair queuing), and a document's sections are visited
   in turn, so every document and section has its share of the candidates at any moment; the
   pages of examples and tutorials (by their path) come after all the others.
3. **The question**: one short call (prompt ``generate-q-v2``: the sentence, its document's
   title and its section's heading, no neighbouring text: a sentence is chosen to stand alone),
   the reply held to ``{"question": ...}`` by a grammar and stopped at its first ``?``.
4. **The checks**, cheapest first, each counted in the sidecar: a question addressed to a model
   (``injection``), a size, a vague or file-naming question (once its closing words that say
   where it was read are taken off, "... in the documentation?", when what is left names a
   thing: ``where_read_taken_off``), one that copies its answer
   (``quotes_answer``) or holds all of it (``restates``), one whose kind its answer does not
   have or that its sentence only mentions (``answer_type``: :mod:`lab.evalsets.asks`), one that
   does not find its own sentence (``round_trip``: :class:`RoundTrip`), one that a neighbouring
   sentence answers better (``local_round_trip``: :meth:`RoundTrip.local_ranks`, ``lab
   generate``'s default), and near-duplicates of an accepted question.

No model verdict is asked: the local model's yes/no did not separate good rows from bad
(docs/own-documents.md); the round trip and the answer type are the checks, and a person's
review (``lab serve``'s queue) the last word.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from lab.evalsets import answercheck
from lab.evalsets.asks import _GENERIC, _TERM, answer_type, asks_elsewhere, restates, without_where_read
from lab.evalsets.excerpts import NEAR_DUPLICATE, derive_keywords, names_a_file, quotes_own_answer, size_problem, vague
from lab.evalsets.census import all_candidates, census
from lab.evalsets.extract import Block, Candidate, blocks, document_sentences, example_page
from lab.evalsets.pacing import Pace, interruptible, tally
from lab.evalsets.standalone import plain
from lab.evidence.text import content_words, fold
from lab.metrics.injection import suspect_reasons
from lab.models.llm import LabLLM, LLMCallError
from lab.prompts import load_prompt
from lab.progress import Ticker

PROMPT = "generate-q-v2"
#: The round trip: a question must place its own sentence among this many of the knowledge
#: base's prose sentences, by words or by meaning (:class:`RoundTrip`).
ROUND_TRIP_K = 10
#: The local round trip: a question must rank its own sentence first among the prose sentences
#: within this many of it in its document (:meth:`RoundTrip.local_ranks`).
LOCAL_WINDOW = 2
#: Candidates tried at most per question wanted (``--max-candidates``'s default: about a quarter
#: of the candidates is accepted on documentation the lab does not ship).
CANDIDATES_PER_QUESTION = 4
#: A keyword in more than this share of the documents is not one (it would be found anywhere).
COMMON_SHARE = 0.3
REASONS = ("malformed", "injection", "size", "vague", "names_file", "quotes_answer", "asks_elsewhere", "answer_type",
           "restates", "round_trip", "near_duplicate")
_SCHEMA = {"type": "object", "properties": {"question": {"type": "string", "maxLength": 200}},
           "required": ["question"], "additionalProperties": False}


def clean(sentence: str) -> str:
    """A sentence as a reference answer: :func:`lab.evalsets.standalone.plain`."""
    return plain(sentence)


# ---------------------------------------------------------------------------------------------
# The round trip


@dataclass
class RoundTrip:
    """Every prose sentence of the knowledge base, to rank against a question: by words (the
    question's content words, each weighted by its inverse document frequency over the
    sentences) and by meaning (the packaged bi-encoder's cosine). A question passes when its own
    sentence (or the same text elsewhere) ranks within :data:`ROUND_TRIP_K` by either.

    Why both, and why sentences: a check by one retriever would keep the questions that retriever
    finds and so favour the configs built like it (BM25 over words, or dense over meaning). Taking
    the better of the two rejects only a question that neither family can link to its answer (a
    question about something else, or one too vague to have an answer), and sentences are a unit
    no config indexes. The sidecar counts the questions each ranker alone let through."""

    texts: list[str]
    embed: Callable[[list[str]], np.ndarray]
    k: int = ROUND_TRIP_K
    _words: list[set[str]] = field(init=False)
    _idf: dict[str, float] = field(init=False)
    _vectors: np.ndarray | None = field(init=False, default=None)
    _same: dict[str, list[int]] = field(init=False)

    def __post_init__(self) -> None:
        self._words = [content_words(t) for t in self.texts]
        df = Counter(w for ws in self._words for w in ws)
        n = len(self.texts)
        self._idf = {w: math.log((n + 1) / (c + 0.5)) for w, c in df.items()}
        self._same = {}
        for i, t in enumerate(self.texts):
            self._same.setdefault(fold(t), []).append(i)

    def vectors(self) -> np.ndarray:
        if self._vectors is None:
            self._vectors = np.asarray(self.embed(self.texts))
        return self._vectors

    def local_ranks(self, question: str, at: int, qvec: np.ndarray, window: int = LOCAL_WINDOW,
                    bounds: tuple[int, int] | None = None) -> tuple[int, int]:
        """The rank of sentence ``at`` among itself and those within ``window`` of it inside ``bounds``
        (``[first, end)``: its document's), by words (content words shared with ``question``) and by
        meaning: a question its neighbour answers better ranks it below that neighbour. Its rivals are
        in any chunk that holds it: no retriever is favoured (docs/own-documents.md#local-round-trip)."""
        near = self.window(at, window, bounds)
        q = content_words(question)
        shared = np.array([len(q & self._words[i]) for i in near])
        sims = self.vectors()[near] @ qvec
        own = near.index(at)
        return int((shared > shared[own]).sum()) + 1, int((sims > sims[own]).sum()) + 1

    def window(self, at: int, window: int, bounds: tuple[int, int] | None = None) -> list[int]:
        """Sentence ``at`` and those within ``window`` of it inside ``bounds`` (``[first, end)``), in order."""
        first, end = bounds if bounds is not None else (0, len(self.texts))
        return list(range(max(first, at - window), min(end, at + window + 1)))

    def ranks(self, question: str, sentence: str, qvec: np.ndarray) -> tuple[int | None, int | None]:
        """The rank of ``sentence`` (its best copy) among the sentences for ``question``: by words
        (None when it shares no content word) and by meaning."""
        mine = self._same.get(fold(sentence), [])
        if not mine:
            return None, None
        q = content_words(question)
        lex = np.array([sum(self._idf.get(w, 0.0) for w in q & ws) for ws in self._words])
        best = max(lex[i] for i in mine)
        by_words = int((lex > best).sum()) + 1 if best > 0 else None
        sims = self.vectors() @ qvec
        by_meaning = int((sims > max(sims[i] for i in mine)).sum()) + 1
        return by_words, by_meaning


# ---------------------------------------------------------------------------------------------
# The order of the candidates


def coverage_order(docs: dict[str, str], seed: int, cut: dict[str, list[Block]] | None = None,
                   found: dict[str, list[Candidate]] | None = None) -> Iterator[Candidate]:
    """The candidates of every document in the coverage rule's order (the module's docstring):
    documents by weighted fair queuing on their prose characters, sections in turn within one, the
    sentences of a section in a seeded order; an example's or a tutorial's page
    (:func:`lab.evalsets.extract.example_page`) after all the others. ``cut`` and ``found``: each
    document's blocks and candidates, when the caller has them already."""
    cut = cut if cut is not None else {s: blocks(docs[s], s) for s in docs}
    found = found if found is not None else all_candidates(docs, cut)
    queues: dict[str, list[list[Candidate]]] = {}
    prose: dict[str, int] = {}
    for source in sorted(docs):
        mine = found[source]
        if not mine:
            continue
        sections: dict[str, list[Candidate]] = {}
        for c in mine:
            sections.setdefault(c.heading, []).append(c)
        for items in sections.values():
            items.sort(key=lambda c: hashlib.sha256(f"{seed}\x00{c.source}\x00{c.start}".encode()).hexdigest())
        queues[source] = list(sections.values())
        prose[source] = sum(b.end - b.start for b in cut[source] if b.kind == "prose")
    last = {s: example_page(s) for s in queues}
    served: Counter = Counter()
    turn: Counter = Counter()
    while queues:
        source = min(queues, key=lambda s: (last[s], (served[s] + 0.5) / max(1, prose[s]), s))
        sections = queues[source]
        k = turn[source] % len(sections)
        yield sections[k].pop(0)
        served[source] += 1
        if not sections[k]:
            sections.pop(k)
        else:
            turn[source] += 1
        if not sections:
            del queues[source]


# ---------------------------------------------------------------------------------------------
# The loop


@dataclass
class Extracted:
    rows: list[dict]
    stats: dict


def extractive(docs: dict[str, str], llm: LabLLM, embed: Callable[[list[str]], np.ndarray], n: int, seed: int,
               max_candidates: int | None = None, show_progress: bool = False,
               on_row: Callable[[dict], None] | None = None, deadline: float | None = None,
               round_trip_k: int = ROUND_TRIP_K, literal: dict[str, list] | None = None,
               checker: LabLLM | None = None, local_window: int | None = None) -> Extracted:
    """Up to ``n`` rows (see the module's docstring). ``on_row`` is called with each row as it is
    accepted (``lab generate`` writes it at once); the loop stops at ``deadline`` (a
    ``time.monotonic()`` value) or on Ctrl-C, keeping what it accepted (``stats["stopped"]``).
    ``literal``: the HTML pages' ``<pre>`` ranges (:attr:`lab.rag.loaders.Corpus.literal`).
    ``checker``: ask it for each question's answer from the passage (its sentence among those within
    :data:`LOCAL_WINDOW`: :mod:`lab.evalsets.answercheck`) and reject the question its reply fails
    (``answer_check``); None: no such call. ``local_window``: reject
    the question that does not rank its own sentence first, by words and by meaning, among the
    sentences within that many of it (``local_round_trip``: :meth:`RoundTrip.local_ranks`); None:
    no such check."""
    t0 = time.perf_counter()
    prompt = load_prompt(PROMPT)
    order = sorted(docs)
    folded = [fold(docs[s]) for s in order]
    cut = {s: blocks(docs[s], s, (literal or {}).get(s, ())) for s in order}  # each document parsed once, for the pool and the candidates
    left_out: dict[str, dict] = {}  # the prose sentences no candidate, by reason: the census
    found = all_candidates(docs, cut, left_out)
    pool = [(s, a, b) for s in order for a, b in document_sentences(docs[s], cut[s])]
    pool_texts = [docs[s][a:b] for s, a, b in pool]
    at = {(s, a): i for i, (s, a, _) in enumerate(pool)}  # a candidate's place among the sentences
    bounds: dict[str, tuple[int, int]] = {}  # each document's sentences, [first, end)
    for i, (s, _, _) in enumerate(pool):
        bounds[s] = (bounds.get(s, (i, i))[0], i + 1)
    trip = RoundTrip(pool_texts, embed, round_trip_k)

    def common(term: str) -> bool:
        return sum(term in t for t in folded) > max(2, COMMON_SHARE * len(folded))

    budget = max_candidates or CANDIDATES_PER_QUESTION * n
    rows: list[dict] = []
    vectors: list[np.ndarray] = []
    rejected: dict[str, list[dict]] = {r: [] for r in REASONS + (("local_round_trip",) if local_window else ())
                                       + (("answer_check",) if checker else ())}
    asked = load_prompt(answercheck.PASSAGE_PROMPT) if checker else None
    tried = 0
    mended: list[dict] = []  # accepted rows whose question lost the words saying where it was read
    only = Counter()  # questions each ranker alone let through the round trip
    stopped = None
    sections: set[tuple[str, str]] = set()  # (document, section) of the accepted rows
    head = prompt.head("title")
    pace = Pace()
    with Ticker("generate", n, show_progress, unit="questions") as ticker, interruptible() as halt:
        for c in coverage_order(docs, seed, cut, found):
            if len(rows) >= n or tried >= budget:
                break
            if deadline is not None and time.monotonic() >= deadline:
                stopped = "time limit"
                break
            tried += 1
            began = time.perf_counter()
            reason, detail, question, as_asked = _one(llm, prompt, head, c, seed)
            pace.add(time.perf_counter() - began)
            sentence = clean(c.text)
            qvec = None
            if reason is None:
                qvec = np.asarray(embed([question]))[0]
                by_words, by_meaning = trip.ranks(question, c.text, qvec)
                fine = [x is not None and x <= trip.k for x in (by_words, by_meaning)]
                if not any(fine):
                    reason, detail = "round_trip", (f"its sentence ranks {by_words or 'nowhere'} by words and "
                                                    f"{by_meaning} by meaning among {len(pool_texts)} sentences")
                elif not all(fine):
                    only["words" if fine[0] else "meaning"] += 1
                if reason is None and local_window:
                    near = trip.local_ranks(question, at[(c.source, c.start)], qvec, local_window, bounds[c.source])
                    if near != (1, 1):
                        reason, detail = "local_round_trip", (f"its sentence ranks {near[0]} by words and {near[1]} "
                                                              f"by meaning among the sentences within {local_window}")
            if reason is None and vectors:
                sims = [float(qvec @ v) for v in vectors]
                if max(sims) >= NEAR_DUPLICATE:
                    reason, detail = "near_duplicate", f"cosine {max(sims):.3f} to an accepted question"
            if reason is None and checker is not None:  # the passage: its sentence among those within LOCAL_WINDOW
                i = at[(c.source, c.start)]
                near = trip.window(i, LOCAL_WINDOW, bounds[c.source])
                before, after = [clean(pool_texts[j]) for j in near if j < i], [clean(pool_texts[j]) for j in near if j > i]
                if (why := answercheck.check(checker, asked, question, sentence, seed, before, after)) is not None:
                    reason, detail = "answer_check", why
            if reason is not None:
                rejected[reason].append({"category": c.category, "sources": [c.source], "detail": detail,
                                         "question": question, "answer": sentence})
                ticker.note(tally(tried, rejected))
                ticker.expect(pace.left(n - len(rows), len(rows), tried, budget - tried))
                continue
            vectors.append(qvec)
            row = {"id": f"g{len(rows) + 1:04d}", "question": question, "reference_answer": sentence,
                   "category": c.category,
                   "references": [{"source": c.source, "content": c.text, "start_index": c.start,
                                   "end_index": c.end}]}
            keywords = derive_keywords(sentence, [c.text], question, common=common)
            if keywords:
                row["keywords"] = keywords
            rows.append(row)
            if as_asked is not None:  # its closing "... in the documentation" taken off
                mended.append({"id": row["id"], "asked": as_asked})
            sections.add((c.source, c.heading))
            if on_row is not None:
                on_row(row)
            ticker.note(tally(tried, rejected))
            ticker.expect(pace.left(n - len(rows), len(rows), tried, budget - tried))
            ticker.update()
    stopped = "interrupted" if halt else stopped
    seconds = time.perf_counter() - t0
    per_doc = Counter(r["references"][0]["source"] for r in rows)
    stats = {
        "mode": "extractive", "n_requested": n, "n_accepted": len(rows), "seed": seed, "candidates": tried,
        "candidate_sentences": sum(len(v) for v in found.values()),
        "sentences": census(docs, cut, found, left_out),
        "acceptance_rate": round(len(rows) / max(1, tried), 4),
        "rejected": {r: {"n": len(v), "examples": v[:3]} for r, v in rejected.items()},
        "where_read_taken_off": {"n": len(mended), "rows": mended},
        **({"local_round_trip": {"window": local_window}} if local_window else {}),
        "round_trip": {"k": trip.k, "sentences": len(pool_texts), "passed_by_words_only": only["words"],
                       "passed_by_meaning_only": only["meaning"]},
        "by_category": dict(Counter(r["category"] for r in rows)),
        "by_document": {s: per_doc.get(s, 0) for s in order},
        "documents_without_questions": [s for s in order if not per_doc.get(s)],
        "sections_with_questions": len(sections),
        "prompts": {PROMPT: prompt.sha256, **({asked.version: asked.sha256} if asked else {})},
        "coverage_rule": "weighted fair queuing on documents' prose characters, sections in turn, "
                         "example and tutorial pages last",
        "seconds": round(seconds, 1),
        "seconds_per_accepted": round(seconds / len(rows), 2) if rows else None,
        "usage": {"generation": llm.usage.as_dict(), "check": checker.usage.as_dict() if checker else None},
        "stopped": stopped, "complete": stopped is None,
    }
    return Extracted(rows, stats)


_URL_CUT = re.compile(r"://\S*\?$")


#: The question call's settings besides its prompt, in its cache key (:func:`question_cached`).
_ASK = {"max_tokens": 70, "stop": ["?"]}


def _title(source: str) -> str:
    """The document's title the writer is shown: its file name without the extensions of a page's source."""
    return re.sub(r"(\.rst|\.ipynb)?\.(txt|md|markdown|html?|rst|ipynb)$", "", source.rsplit("/", 1)[-1])


def _messages(prompt, c: Candidate) -> list[dict]:
    title = _title(c.source)
    return prompt.messages(title=title, heading=c.heading or title, sentence=clean(c.text))


def question_cached(llm: LabLLM, prompt, c: Candidate, seed: int) -> bool:
    """Whether ``c``'s question call is in ``llm``'s cache (``lab generate``'s estimate counts those out)."""
    return llm.cached(_messages(prompt, c), prompt.version, _SCHEMA, 0.0, seed, **_ASK)


def _one(llm: LabLLM, prompt, head: int, c: Candidate, seed: int) -> tuple[str | None, str, str | None, str | None]:
    """(reason rejected or None, detail, the question, the question as asked when it lost its
    closing words saying where it was read, else None) for one candidate."""
    sentence, title = clean(c.text), _title(c.source)
    try:
        # a small model goes on asking: its first question is the one asked for, and the reply
        # stops at its question mark (the same question as the whole reply's first, in fewer steps)
        out = llm.chat(_messages(prompt, c), prompt.version, schema=_SCHEMA, temperature=0.0, seed=seed, head=head,
                       **_ASK)
        question = " ".join(str(_asked(out.text)).split())
    except (LLMCallError, ValueError, KeyError, TypeError) as exc:
        return "malformed", f"{type(exc).__name__}: {str(exc)[:160]}", None, None
    if "?" in question:
        question = question[:question.index("?") + 1]
    if _URL_CUT.search(question):  # the reply stopped at a query string's "?": "... the URL http://host/doc?"
        return "malformed", "cut at a URL's '?'", question, None
    if suspect := suspect_reasons(question=question, reference=sentence):  # as the model wrote it
        return "injection", "; ".join(suspect), question, None
    mended = without_where_read(question)  # "What does X do in the grammar.md file?"
    reason, detail = _rules(mended or question, sentence, c, title)
    return reason, detail, mended or question, question if mended else None


def _rules(question: str, sentence: str, c: Candidate, title: str) -> tuple[str | None, str]:
    """(reason rejected or None, detail): the checks of a question, past the injection screen,
    that need no model."""
    if not question.endswith("?"):
        return "malformed", "not a question"
    if (why := size_problem(question, sentence)) is not None:
        return "size", why
    if vague(question):
        return "vague", "the question leans on a document it does not name"
    if (name := names_a_file(question, [c.source])) is not None:
        return "names_file", f"the question names a file or path: {name}"
    if _GENERIC.search(question) and not _TERM.search(question):
        return "vague", "the question names no command, option or thing: it leans on the text it came from"
    if quotes_own_answer(question, [sentence]):
        return "quotes_answer", "the question repeats 8+ words of its answer"
    if (why := restates(question, sentence)) is not None:
        return "restates", why
    if (term := asks_elsewhere(question, sentence, c.heading, title)) is not None:
        return "asks_elsewhere", f"the question names {term!r}, which its answer does not"
    if (why := answer_type(question, c.text)) is not None:  # as written: its markup marks its names
        return "answer_type", why
    return None, ""


_OPENED = re.compile(r'\s*\{\s*"question"\s*:\s*"')


def _asked(text: str) -> str:
    """The question of a reply held to :data:`_SCHEMA`: the whole JSON object, or one stopped at
    the question's first ``?`` (the stop string is left out of the text), given back with it."""
    try:
        return json.loads(text)["question"]
    except ValueError:
        opened = _OPENED.match(text)
        if opened is None:
            raise
        return json.loads('"' + text[opened.end():] + '"') + "?"
