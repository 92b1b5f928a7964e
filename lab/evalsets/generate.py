"""``lab generate``: an eval set written by an LLM from a folder of documents, grounded in
verbatim excerpts, with every rejection counted.

How a question is made (one LLM call, then checks, cheapest first):

1. A *task*: a category and a window of a document (two documents for ``spanning`` and
   ``comparative``). The model copies an excerpt word for word and writes the question it
   answers and a reference answer (prompts ``generate-qa-v1``, ``generate-qa2-v1``; JSON under
   a grammar). By default (``excerpt="held"``) the grammar allows only the window's sentences,
   one or two in a row (:func:`choices`), so the excerpt's offsets are exact.
2. A freely copied excerpt (``excerpt="copied"``) is located in its document
   (:func:`lab.evalsets.excerpts.locate`: exact, then tolerant). One that is not there, a
   paraphrase, stands for the region of its window that holds 80% of its content words and
   every figure it states (:func:`lab.evalsets.excerpts.nearest_region`; counted as
   ``near_excerpts``); with no such region the candidate is rejected. A one-document answer
   whose own words its excerpt does not hold (half or more:
   :func:`lab.evidence.states.words_not_in_spans`) takes as its span the region of its window
   that states it, found the same way from the answer (``moved_spans``): the model often holds
   one sentence and answers from its neighbour. The excerpts become the row's ``references``
   spans (the document's own text), so span metrics work on any knowledge base.
3. Filters, each counted with examples: a question or reference answer holding text addressed
   to an evaluator or model (``injection``: an instruction, a verdict, a role marker;
   :func:`lab.metrics.injection.scan`), trivial or over-long items, vague questions ("this
   contract", "the document"), questions that name a file or path (``names_file``), spans too
   short to hold an answer (under 6 words, ``short_span``), spans that only introduce what follows
   (a heading, a line ending in a colon: ``heading_span``), answers their category contradicts
   (a ``numerical`` answer with no number, a ``temporal`` one with no date or period, a
   ``spanning`` or ``comparative`` one using only one of its two spans: ``category``),
   questions that quote their own excerpt, near-duplicates of an accepted question (embedding
   cosine >= 0.92), an answer stating a figure no excerpt holds or with under half of its own
   words in its excerpts (``unsupported``, without a model:
   :func:`lab.evalsets.excerpts.figure_not_in_spans`,
   :func:`~lab.evidence.states.words_not_in_spans`), and the two verdicts of
   :mod:`lab.evalsets.grounding`: an answer with a fact the excerpts do not state
   (``unsupported``) or that does not give what the question asks (``not_answering``).
4. Keywords: the figures, dates and names of the answer that the excerpts hold, the question
   does not, and at most 30% of the documents do (:func:`lab.evalsets.excerpts.derive_keywords`).

**Coverage rule.** Each category draws documents by weighted fair queuing on their size in
characters: the next document is the one with the fewest candidates per character so far, so
after any number of candidates every document has had its share of them, within one, and so
has every folder; a document has several windows, visited in turn. ``numerical`` and
``temporal`` tasks use only windows holding a figure or a date. The second document of a
two-document task is an embedding neighbour of the first (its k-th nearest on the k-th visit).

Each candidate goes to the open category with the fewest candidates tried for its share of
``n`` (``mix``), so a category whose candidates keep failing gets its share of the budget, not
all of it; categories fill until each has its share or has tried its share of ``max_candidates``
(``capped_categories``: a category the documents do not suit stops there, instead of taking
what the filled categories left). Every call is cached like all model calls, so an interrupted run (Ctrl-C, kill -9)
resumes in seconds on the next run, and the same seed and model give the same set.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from lab.evalsets.excerpts import (NEAR_DUPLICATE, contradicts_category, derive_keywords, locate,
                                   figure_not_in_spans, heading_span, names_a_file, nearest_region, numbered,
                                   one_document_answer, quotes_own_answer, sentences, short_span, size_problem, vague)
from lab.evalsets import grounding
from lab.evidence.states import words_not_in_spans
from lab.evidence.text import fold
from lab.evalsets.pacing import interruptible as _interruptible
from lab.evalsets.pacing import tally
from lab.evalsets.tasks import (EXCERPT_MODES, WINDOW_CHARS, _cite_schema, _cited,
                                _held_schema, _schema, choices, windows)
from lab.metrics.injection import suspect_reasons
from lab.errors import LabError
from lab.models.llm import LabLLM, LLMCallError
from lab.prompts import Prompt, load_prompt
from lab.progress import Ticker

PROMPTS = ("generate-qa-v1", "generate-qa2-v1")
#: The prompts that cite the excerpt by sentence number instead of copying it (``excerpt: cited``).
CITE_PROMPTS = ("generate-qa-v2", "generate-qa2-v2")
TASKS = {
    "direct_fact": "write a question about one specific fact stated in the document (a name, place, product "
                   "feature, rule or responsibility).",
    "numerical": "write a question whose answer is a number stated in the document (an amount, price, "
                 "percentage, count, limit or size).",
    "temporal": "write a question whose answer is a date, year or period stated in the document (when "
                "something happened, started, ends or how long it lasts).",
    "relationship": "write a question about how two things named in the document are related (who leads "
                    "whom, which client uses which product, who worked on what, what belongs to what).",
    "spanning": "write one question that needs a fact from document A and a fact from document B.",
    "comparative": "write one question that compares something in document A with something in document B "
                   "(which is larger, earlier, cheaper, longer, ...).",
}
TWO_DOCUMENTS = ("spanning", "comparative")
#: The default mix, close to InsureLLM's human-written set (its 7% "holistic" questions are left
#: out: they ask about the whole collection, which no excerpt grounds).
MIX = {"direct_fact": 0.45, "temporal": 0.13, "numerical": 0.10, "relationship": 0.10, "spanning": 0.14,
       "comparative": 0.08}
_FIGURE = re.compile(r"\d")
_DATE = re.compile(r"\b(1[89]|20)\d\d\b")
_WANTS = {"numerical": _FIGURE, "temporal": _DATE}
REASONS = ("malformed", "injection", "excerpt_not_found", "size", "vague", "names_file", "short_span", "heading_span",
           "category",
           "quotes_answer", "near_duplicate", "unsupported", "not_answering", "check_failed")
#: A keyword in more than this share of the documents is not one (it would be found anywhere).
COMMON_SHARE = 0.3


@dataclass
class Options:
    n: int = 150
    seed: int = 0
    mix: dict[str, float] = field(default_factory=lambda: dict(MIX))
    window_chars: int = WINDOW_CHARS
    max_candidates: int | None = None  # default 3 n
    near_threshold: float = NEAR_DUPLICATE
    #: how the model gives its excerpt (:data:`EXCERPT_MODES`): ``held`` (the default), copied
    #: under a grammar that allows only the window's sentences, one or two in a row, never a
    #: heading, so every excerpt is found, exactly; ``copied``, written freely and then located
    #: (``generate-qa-v1``'s first form); ``cited`` by sentence number (``generate-qa-v2``).
    #: Measured in docs/own-documents.md.
    excerpt: str = "held"

    def __post_init__(self) -> None:
        if self.excerpt not in EXCERPT_MODES:
            raise ValueError(f"excerpt mode {self.excerpt!r} is not one of {', '.join(EXCERPT_MODES)}")

    def quotas(self) -> dict[str, int]:
        """``n`` split by ``mix`` (largest remainder)."""
        total = sum(self.mix.values())
        raw = {c: self.n * w / total for c, w in self.mix.items() if w > 0}
        out = {c: int(v) for c, v in raw.items()}
        for c in sorted(raw, key=lambda c: out[c] - raw[c])[: self.n - sum(out.values())]:
            out[c] += 1
        return out


class Planner:
    """The tasks of each category, in the coverage rule's order (module docstring)."""

    def __init__(self, docs: dict[str, str], doc_vectors: np.ndarray | None, seed: int, window_chars: int):
        self.docs = docs
        self.sources = sorted(docs, key=lambda s: hashlib.sha256(f"{seed}\x00{s}".encode()).hexdigest())
        self.windows = {s: windows(docs[s], window_chars) for s in self.sources}
        self.halves = {s: windows(docs[s], window_chars // 2) for s in self.sources}
        self.served: dict[str, Counter] = {}
        self.neighbours: dict[str, list[str]] = {}
        if doc_vectors is not None and len(self.sources) > 1:
            order = sorted(docs)
            sims = doc_vectors @ doc_vectors.T
            for i, s in enumerate(order):
                self.neighbours[s] = [order[j] for j in np.argsort(-sims[i], kind="stable") if j != i]

    def _eligible(self, source: str, category: str, half: bool = False) -> list[tuple[int, int]]:
        wins = (self.halves if half else self.windows)[source]
        want = _WANTS.get(category)
        return [w for w in wins if want is None or want.search(self.docs[source][w[0]:w[1]])]

    def next(self, category: str) -> dict | None:
        served = self.served.setdefault(category, Counter())
        two = category in TWO_DOCUMENTS
        pool = [s for s in self.sources if self._eligible(s, category, two) and (not two or self.neighbours.get(s))]
        if not pool:
            return None
        source = min(pool, key=lambda s: ((served[s] + 0.5) / len(self.docs[s]), self.sources.index(s)))
        visit = served[source]
        served[source] += 1
        wins = self._eligible(source, category, two)
        offset = int(hashlib.sha256(category.encode()).hexdigest(), 16) % len(wins)
        first = wins[(visit + offset) % len(wins)]
        if not two:
            return {"category": category, "parts": [(source, first)]}
        partner = self.neighbours[source][visit % len(self.neighbours[source])]
        words = set(re.findall(r"[A-Z][a-z]+|\d+", self.docs[source][first[0]:first[1]]))
        second = max(self.halves[partner] or [(0, len(self.docs[partner]))],
                     key=lambda w: len(words & set(re.findall(r"[A-Z][a-z]+|\d+", self.docs[partner][w[0]:w[1]]))))
        return {"category": category, "parts": [(source, first), (partner, second)]}


class NothingAccepted(LabError):
    """No candidate passed the checks (the model could not copy excerpts, say): exit 1."""

    exit_code = 1


@dataclass
class Outcome:
    rows: list[dict]
    stats: dict


def _ask(llm: LabLLM, prompts: dict[str, Prompt], task: dict, docs: dict[str, str], seed: int,
         mode: str = "held") -> dict:
    """The model's item for ``task``: ``question``, ``answer`` and the excerpt(s) as text; in
    modes ``held`` and ``cited``, also ``where``: each excerpt's offsets in its document, exact
    by construction. Every prompt's steps and task come before its documents: that head is
    evaluated once per task and model (``LabLLM.chat``'s ``head``)."""
    parts = task["parts"]
    first = "source" if len(parts) == 1 else "source_a"
    if mode == "cited":
        spans = [sentences(docs[s], a, b) for s, (a, b) in parts]
        if any(not sp for sp in spans):
            raise ValueError("a window without a sentence")
        texts = [numbered(docs[s], sp) for (s, _), sp in zip(parts, spans)]
        if len(parts) == 1:
            prompt = prompts["generate-qa-v2"]
            messages = prompt.messages(task=TASKS[task["category"]], source=parts[0][0], text=texts[0])
        else:
            prompt = prompts["generate-qa2-v2"]
            messages = prompt.messages(task=TASKS[task["category"]], source_a=parts[0][0], text_a=texts[0],
                                       source_b=parts[1][0], text_b=texts[1])
        out = llm.chat(messages, prompt.version, schema=_cite_schema([len(sp) for sp in spans]), temperature=0.0,
                       seed=seed, max_tokens=240, head=prompt.head(first, task=TASKS[task["category"]]))
        item = json.loads(out.text)
        cited = [item.pop("sentences")] if len(parts) == 1 else [[item.pop("sentence_a")], [item.pop("sentence_b")]]
        where = [_cited(c, sp) for c, sp in zip(cited, spans)]
        item["where"] = where
        keys = ["excerpt"] if len(parts) == 1 else ["excerpt_a", "excerpt_b"]
        for key, (s, _), (a, b) in zip(keys, parts, where):
            item[key] = docs[s][a:b]
        return item
    text = {s: docs[s][a:b] for s, (a, b) in parts}
    if len(parts) == 1:
        (src, _), = parts
        prompt = prompts["generate-qa-v1"]
        messages = prompt.messages(task=TASKS[task["category"]], source=src, text=text[src].strip())
    else:
        (sa, _), (sb, _) = parts
        prompt = prompts["generate-qa2-v1"]
        messages = prompt.messages(task=TASKS[task["category"]], source_a=sa, text_a=text[sa].strip(),
                                   source_b=sb, text_b=text[sb].strip())
    head = prompt.head(first, task=TASKS[task["category"]])
    if mode == "copied":
        out = llm.chat(messages, prompt.version, schema=_schema(len(parts) == 2), temperature=0.0, seed=seed,
                       max_tokens=400, head=head)
        return json.loads(out.text)
    options = [choices(docs[s], w, pairs=len(parts) == 1) for s, w in parts]
    if not all(options):
        raise ValueError("a window without a sentence to copy")
    out = llm.chat(messages, prompt.version, schema=_held_schema(options), temperature=0.0, seed=seed,
                   max_tokens=400, head=head)
    item = json.loads(out.text)
    keys = ["excerpt"] if len(parts) == 1 else ["excerpt_a", "excerpt_b"]
    item["where"] = [o[item[k]] for k, o in zip(keys, options)]  # KeyError: not one of them (malformed)
    return item


def _ref(source: str, text: str, where: tuple[int, int], **marks: bool) -> dict:
    """A reference span: the document's own text at ``where``; ``marks`` (``near``, ``moved``)
    are counted by :func:`generate` and taken off before the row is written."""
    return {"source": source, "content": text[where[0]:where[1]], "start_index": where[0], "end_index": where[1],
            **marks}


def _check(task: dict, item: dict, docs: dict[str, str]) -> tuple[str | None, str, list[dict]]:
    """(reason rejected or None, detail, references) for the model's item."""
    suspect = suspect_reasons(question=item["question"], reference=item["answer"])
    if suspect:  # a document that speaks to an evaluator must not reach the judge through a row
        return "injection", "; ".join(suspect), []
    excerpts = [item["excerpt"]] if "excerpt" in item else [item["excerpt_a"], item["excerpt_b"]]
    refs = []
    for k, ((source, window), excerpt) in enumerate(zip(task["parts"], excerpts)):
        where, near = item["where"][k] if "where" in item else locate(excerpt, docs[source]), False
        if where is None and "where" not in item:  # a paraphrase: the window's region it stands for
            where, near = nearest_region(excerpt, docs[source], *window), True
        if where is None:
            return "excerpt_not_found", f"{source}: {excerpt[:120]!r}", []
        refs.append(_ref(source, docs[source], where, **({"near": True} if near else {})))
    spans = [r["content"] for r in refs]
    uncovered = words_not_in_spans(spans, item["answer"], item["question"])
    if len(refs) == 1 and uncovered is not None:
        # the answer says what its excerpt does not: the window's sentences that state it (80% of
        # its content words and every figure) are its span; with none, the rule below rejects it
        (source, window), = task["parts"]
        if (region := nearest_region(item["answer"], docs[source], *window)) is not None:
            refs = [_ref(source, docs[source], region, moved=True)]
            spans = [refs[0]["content"]]
            uncovered = words_not_in_spans(spans, item["answer"], item["question"])
    if (why := size_problem(item["question"], item["answer"])) is not None:
        return "size", why, refs
    if vague(item["question"]):
        return "vague", "the question leans on a document it does not name", refs
    if (name := names_a_file(item["question"], [s for s, _ in task["parts"]])) is not None:
        return "names_file", f"the question names a file or path: {name}", refs
    if (why := short_span(spans, item["answer"])) is not None:
        return "short_span", why, refs
    if (why := heading_span(spans)) is not None:
        return "heading_span", why, refs
    if (why := contradicts_category(task["category"], item["answer"])) is not None:
        return "category", why, refs
    if (why := one_document_answer(task["category"], spans, item["answer"])) is not None:
        return "category", why, refs
    if (why := figure_not_in_spans(spans, item["answer"])) is not None:
        return "unsupported", why, refs
    if uncovered is not None:
        return "unsupported", uncovered, refs
    if quotes_own_answer(item["question"], spans):
        return "quotes_answer", "the question repeats 8+ words of its excerpt", refs
    return None, "", refs


def generate(docs: dict[str, str], llm: LabLLM, judge: LabLLM, embed: Callable[[list[str]], np.ndarray],
             opts: Options, show_progress: bool = False, on_row: Callable[[dict], None] | None = None,
             deadline: float | None = None) -> Outcome:
    """The eval set's rows and the sidecar's statistics (see the module docstring); ``on_row`` and
    ``deadline`` as in :func:`lab.evalsets.questions.extractive` (rows in the order accepted)."""
    t0 = time.perf_counter()
    names = CITE_PROMPTS if opts.excerpt == "cited" else PROMPTS
    prompts = {p: load_prompt(p) for p in names}
    support_prompt = grounding.load()
    order = sorted(docs)
    texts = [fold(docs[s]) for s in order]

    def common(term: str) -> bool:
        return sum(term in t for t in texts) > max(2, COMMON_SHARE * len(texts))

    doc_vectors = embed([docs[s][:2000] for s in order]) if len(order) > 1 else None
    planner = Planner(docs, doc_vectors, opts.seed, opts.window_chars)
    quotas = opts.quotas()
    budget = opts.max_candidates or 3 * opts.n
    accepted: dict[str, list[dict]] = {c: [] for c in quotas}
    vectors: list[np.ndarray] = []
    rejected: dict[str, list[dict]] = {r: [] for r in REASONS}
    tried: Counter = Counter()
    exhausted: set[str] = set()
    # no category takes more than its share of the budget: one whose candidates keep failing stops
    # there instead of taking what the filled categories left (measured: 30 candidates on npm's
    # documents for no temporal question)
    caps = {c: -(-budget * q // opts.n) for c, q in quotas.items()}
    capped: set[str] = set()
    near: list[str] = []  # accepted questions whose excerpt was a paraphrase (nearest_region)
    moved: list[str] = []  # accepted questions whose span is where the window states the answer
    rows: list[dict] = []
    stopped = None
    with Ticker("generate", opts.n, show_progress, unit="questions") as ticker, _interruptible() as halt:
        while sum(tried.values()) < budget and not halt:
            if deadline is not None and time.monotonic() >= deadline:
                stopped = "time limit"
                break
            capped |= {c for c in quotas if len(accepted[c]) < quotas[c] and tried[c] >= caps[c]}
            open_cats = [c for c in quotas if len(accepted[c]) < quotas[c] and c not in exhausted | capped]
            if not open_cats:
                break
            # the open category with the fewest candidates for its share: one whose candidates keep
            # failing gets its share of the budget, not all of it
            category = min(open_cats, key=lambda c: (tried[c] / quotas[c], list(quotas).index(c)))
            task = planner.next(category)
            if task is None:
                exhausted.add(category)
                continue
            tried[category] += 1
            try:
                item = _ask(llm, prompts, task, docs, opts.seed, opts.excerpt)
                reason, detail, refs = _check(task, item, docs)
            except (LLMCallError, ValueError, KeyError, TypeError) as exc:
                item, reason, detail, refs = {}, "malformed", f"{type(exc).__name__}: {str(exc)[:160]}", []
            if reason is None:
                vec = embed([item["question"]])[0]
                sims = [float(vec @ v) for v in vectors]
                if sims and max(sims) >= opts.near_threshold:
                    reason, detail = "near_duplicate", f"cosine {max(sims):.3f} to an accepted question"
            if reason is None:
                v = grounding.verdict(judge, support_prompt, item["question"], item["answer"],
                                      [r["content"] for r in refs])
                if v is None:
                    reason, detail = "check_failed", "the check's call failed"
                elif not v.ok:
                    reason, detail = v.reason, v.why
            sources = [s for s, _ in task["parts"]]
            if reason is not None:
                rejected[reason].append({"category": category, "sources": sources, "detail": detail,
                                         "question": item.get("question"), "answer": item.get("answer")})
                ticker.note(tally(sum(tried.values()), rejected))
                continue
            vectors.append(vec)
            if any(r.pop("near", False) for r in refs):
                near.append(item.get("question"))
            if any(r.pop("moved", False) for r in refs):
                moved.append(item.get("question"))
            keywords = derive_keywords(item["answer"], [r["content"] for r in refs], item["question"], common=common)
            row = {"id": f"g{len(rows) + 1:04d}", "question": item["question"].strip(),
                   "reference_answer": item["answer"].strip(), "category": category, "references": refs}
            if keywords:
                row["keywords"] = keywords
            accepted[category].append(row)
            rows.append(row)
            if on_row is not None:
                on_row(row)
            ticker.note(tally(sum(tried.values()), rejected))
            ticker.update()
    stopped = "interrupted" if halt else stopped
    capped |= {c for c in quotas if len(accepted[c]) < quotas[c] and tried[c] >= caps[c]}
    seconds = time.perf_counter() - t0
    per_doc = Counter(ref["source"] for r in rows for ref in r["references"])
    usage = {"generation": llm.usage.as_dict(), "check": judge.usage.as_dict() if judge is not llm else None}
    stats = {
        "n_requested": opts.n, "n_accepted": len(rows), "seed": opts.seed, "mix": opts.mix, "quotas": quotas,
        "candidates": sum(tried.values()), "candidates_by_category": dict(tried),
        "acceptance_rate": round(len(rows) / max(1, sum(tried.values())), 4),
        "rejected": {r: {"n": len(v), "examples": v[:3]} for r, v in rejected.items()},
        "near_excerpts": {"n": len(near), "examples": near[:3]},
        "moved_spans": {"n": len(moved), "examples": moved[:3]},
        "near_duplicate_threshold": opts.near_threshold,
        "by_category": {c: len(accepted[c]) for c in quotas},
        "exhausted_categories": sorted(exhausted),
        "capped_categories": sorted(capped),  # short of their quota after their share of the budget
        "by_document": {s: per_doc.get(s, 0) for s in order},
        "documents_without_questions": [s for s in order if not per_doc.get(s)],
        "by_folder": dict(sorted(Counter(s.split("/")[0] if "/" in s else "." for s in per_doc.elements()).items())),
        "prompts": {p: prompts[p].sha256 for p in names} | {support_prompt.version: support_prompt.sha256},
        "window_chars": opts.window_chars, "coverage_rule": "weighted fair queuing on document characters",
        "seconds": round(seconds, 1),
        "seconds_per_accepted": round(seconds / len(rows), 2) if rows else None,
        "usage": usage, "stopped": stopped, "complete": stopped is None,
    }
    return Outcome(rows, stats)
