"""Excerpts and the checks on generated questions: pure functions, no model.

- :func:`locate` finds an excerpt an LLM quoted in its document: exactly first, then tolerant
  of whitespace runs, curly quotes, dashes and case, and returns offsets in the original text;
  a quote that is not in the document is ``None`` (the candidate is rejected and counted).
- :func:`derive_keywords` takes the figures, dates and names of a reference answer that the
  excerpts hold and the question does not (a keyword in the question would favour BM25).
- :func:`quotes_own_answer`, :func:`size_problem` and :func:`near_duplicate_pairs` are the
  generator's filters; the audit uses the last two on any eval set.
"""

from __future__ import annotations

import difflib
import re
from typing import Callable, Sequence

import numpy as np

from lab.evidence.states import stated_keywords
from lab.evidence.text import NOT_NAMES, content_words, figures, fold, fold_at

#: Near-duplicate questions: cosine similarity of their embeddings at or above this.
NEAR_DUPLICATE = 0.92
#: A question that repeats this many consecutive words of its excerpt quotes its own answer.
QUOTE_WORDS = 8
MIN_QUESTION_WORDS, MAX_QUESTION_WORDS = 4, 40
MAX_ANSWER_CHARS = 600
#: A copied excerpt with a word or two changed still locates at this difflib similarity.
CLOSE = 0.9

def locate(excerpt: str, text: str) -> tuple[int, int] | None:
    """Where ``excerpt`` is in ``text``: (start, end) offsets of ``text``, or None.

    Exact first; then on both texts folded (whitespace, quotes, dashes, emphasis, case); then a
    close copy (:func:`_close_match`, 90% similar); then both again with markdown and HTML markup
    left out (:func:`_plain`: a link's target, tags, list and heading markers). The span returned
    is the original text's, so ``text[start:end]`` is what the reference stores, never the
    model's wording.
    An excerpt under 12 characters is not located (too short to ground anything).
    """
    excerpt = excerpt.strip().strip('"').strip()
    if len(excerpt) < 12:
        return None
    start = text.find(excerpt)
    if start >= 0:
        return start, start + len(excerpt)
    for folding in (fold_at, _plain):  # _plain leaves markup out: a model copies a link's words, not its target
        hay, where = folding(text)
        needle = folding(excerpt)[0].strip().rstrip(".")
        if len(needle) < 12:
            return None
        k = hay.find(needle)
        found = (k, k + len(needle)) if k >= 0 else _close_match(needle, hay)
        if found is not None:
            return where[found[0]], where[found[1] - 1] + 1
    return None


#: Markdown and HTML markup a model leaves out when it copies a sentence: a link's or an image's
#: target and brackets, HTML tags and comments, heading, quote and list markers at a line's
#: start, table pipes, backslash escapes and underscores of emphasis.
_MARKUP = re.compile(
    r"!?\[(?=[^\]\n]*\]\()"        # the [ (or ![) opening a link or an image
    r"|\]\([^)\s]*(?:\s+\"[^\"]*\")?\)"  # ](target "title") closing it
    r"|<!--.*?-->|</?[A-Za-z][^<>\n]*>"   # HTML comments and tags
    r"|^[ \t]*(?:#{1,6}[ \t]+|>[ \t]?|[-*+][ \t]+|\d{1,3}[.)][ \t]+)"  # a line's heading, quote or list marker
    r"|\|"                              # table pipes
    r"|\\(?=[^\w\s])"                   # a backslash escaping punctuation
    r"|_", re.MULTILINE | re.DOTALL)


def _plain(text: str) -> tuple[str, list[int]]:
    """``text`` folded (:func:`lab.evidence.text.fold_at`) with its markup (:data:`_MARKUP`)
    left out, and each character's offset in ``text``."""
    keep, where, at = [], [], 0
    for m in _MARKUP.finditer(text):
        keep.append(text[at:m.start()])
        where.extend(range(at, m.start()))
        keep.append(" " if m.group().startswith("<") else "")  # a tag parts words; other markup is inside them
        where.extend([m.start()] if keep[-1] else [])
        at = m.end()
    keep.append(text[at:])
    where.extend(range(at, len(text)))
    folded, inner = fold_at("".join(keep))
    return folded, [where[i] for i in inner]


def _close_match(needle: str, hay: str, anchor: int = 24) -> tuple[int, int] | None:
    """A region of ``hay`` that matches ``needle`` to 90% (difflib ratio): found through an
    anchor of ``needle`` (its start, middle or end) that ``hay`` holds verbatim. Catches a copy
    with a word changed ("The contract establishes" for "This agreement establishes"); a
    sentence the model made up has no anchor."""
    best: tuple[float, int, int] | None = None
    n = len(needle)
    if n < 2 * anchor:
        return None
    for at in (0, (n - anchor) // 2, n - anchor):
        piece = needle[at:at + anchor]
        k = hay.find(piece)
        while k >= 0:
            lo = max(0, k - at)
            for end in {min(len(hay), lo + n), min(len(hay), lo + n + n // 20), max(lo + 1, lo + n - n // 20)}:
                ratio = difflib.SequenceMatcher(None, needle, hay[lo:end], autojunk=False).ratio()
                if ratio >= CLOSE and (best is None or ratio > best[0]):
                    best = (ratio, lo, end)
            k = hay.find(piece, k + 1)
    if best is None:
        return None
    lo, end = best[1], best[2]
    while lo > 0 and hay[lo - 1].isalnum():  # whole words at both ends
        lo -= 1
    while end < len(hay) and hay[end].isalnum():
        end += 1
    return lo, end


# -- keywords ---------------------------------------------------------------------------------

_MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"
_PATTERNS = [
    re.compile(rf"\b(?:{_MONTHS})(?: \d{{1,2}},?)? \d{{4}}\b"),  # dates
    re.compile(r"[$€£]\s?\d[\d,]*(?:\.\d+)?(?:\s?(?:million|billion|[MBK]))?"),  # money
    re.compile(r"\b\d[\d,]*(?:\.\d+)?\s?%"),  # percentages
    re.compile(r"\b\d[\d,.]*[- ](?:day|hour|minute|week|month|year|seat|user|percent)s?\b"),  # figures with units
    re.compile(r"\b\d[\d,.]*\d\b|\b\d\b"),  # other figures
    re.compile(r"\b[A-Z][A-Za-z0-9&'-]*(?:\s+(?:of\s+)?[A-Z][A-Za-z0-9&'-]*)*"),  # names
]




def derive_keywords(answer: str, excerpts: Sequence[str], question: str, limit: int = 4,
                    common: Callable[[str], bool] | None = None) -> list[str]:
    """Figures, dates and names from ``answer`` that occur in the excerpts and not in the
    question, and that ``common`` does not call too common (a keyword in most documents makes
    coverage meaningless); a date before its year, at most ``limit``. An answer with none of
    those gives its two longest words of 6+ letters that pass the same checks. "Occur" is read as
    a keyword is matched (:func:`lab.evidence.states.stated_keywords`): a term of the answer's plain
    text that the excerpts hold only with markup ("Python's `Decimal`_") would be found by no retriever."""
    held = " ".join(excerpts)
    asked = fold(question)
    found: list[str] = []
    for pattern in _PATTERNS:
        for m in pattern.finditer(answer):
            term = m.group(0).strip(" ,.")
            words = term.split()
            while words and words[0] in NOT_NAMES:
                words = words[1:]
            term = " ".join(words)
            if len(term) < 2 or term in NOT_NAMES:
                continue
            low = fold(term)
            if (stated_keywords(held, [term])[0] and low not in asked and not any(low in fold(f) for f in found)
                    and not (common is not None and common(low))):
                found.append(term)
    if not found:  # no figure, date or name: the answer's distinctive words the excerpts hold
        words = sorted({w for w in re.findall(r"[A-Za-z][A-Za-z-]{5,}", answer)
                        if stated_keywords(held, [w])[0] and (low := fold(w)) not in asked
                        and not (common is not None and common(low))}, key=lambda w: (-len(w), w))
        found = words[:2]
    return found[:limit]


# -- filters ----------------------------------------------------------------------------------


def quotes_own_answer(question: str, excerpts: Sequence[str], words: int = QUOTE_WORDS) -> bool:
    """The question repeats ``words`` consecutive words of an excerpt (retrieval then only has
    to match the string, which says little of a pipeline)."""
    q = re.findall(r"\w+", fold(question))
    grams = {tuple(q[i:i + words]) for i in range(len(q) - words + 1)}
    for e in excerpts:
        w = re.findall(r"\w+", fold(e))
        if any(tuple(w[i:i + words]) in grams for i in range(len(w) - words + 1)):
            return True
    return False


_VAGUE = re.compile(r"\b(?:this|that|the|these) (?:document|text|excerpt|passage|section|article|file|page)s?\b"
                    r"|\b(?:this|that) (?:contract|agreement|company|product|policy|employee|person|client|team)\b"
                    r"|\b(?:the|which) (?:contract|agreement)s?\b(?! (?:with|between|for|of|signed with) )"
                    r"|\b(?:this|that|the) (?:example|sample|snippet|code block)s?\b|\bthe (?:above|following|below)\b"
                    r"|\b(?:this|the) given\b|\bcode snippet\b|\bin the (?:[\w`'.-]+ )?documentation\b"
                    r"|\bdocuments? [AB]\b|\bdocumentation section\b|\bsection (?:about|on|called|named)\b"
                    r"|\bthe [\w`'.-]+ document\b|\b(?:this|that|the) answers?\b|\bthe product\b(?! (?:that|which|whose|named|called)\b)"
                    r"|\bon the other hand\b"
                    r"|\b(?:this|the new|the latest|the current)(?: major)? (?:release|version)\b(?!\s+v?\d)"
                    r"|\b(?:the|this|that) (?:[\w`'.-]+ )?(?:README|section|chapter|guide|manual|FAQ)(?: file)?"
                    r"(?=\s*[?.,)]|\s+(?:(?:of|in|on)(?!\s+(?:the|a|an|your)\s+(?:[\w.-]+\s+)?(?:file|configuration)\b)|about|for|"
                    r"mentioned|says?|describes?|explains?)\b)"
                    r"|\bsection of\b",
                    re.I)


def vague(question: str) -> bool:
    """The question leans on a document the user does not see ("this contract", "the
    document"), or on a part of the documentation ("the README", "the usage
    section of the documentation"), or on a release its page is about ("this release", "the new
    version of Celery", none named): a user asks about the product, not about where a page says
    it; generic, and often answered by every document alike."""
    return bool(_VAGUE.search(question))


def size_problem(question: str, answer: str) -> str | None:
    """Why an item is trivial or over-long, or None: a question of under 4 or over 40 words, no
    question mark, an empty, yes/no or over-long (600+ characters) answer."""
    n = len(question.split())
    if n < MIN_QUESTION_WORDS:
        return f"question of {n} words"
    if n > MAX_QUESTION_WORDS:
        return f"question of {n} words (over {MAX_QUESTION_WORDS})"
    if "?" not in question:
        return "not a question"
    a = answer.strip().lower().rstrip(".!")
    if not a or a in {"yes", "no", "true", "false"}:
        return "trivial answer"
    if len(answer) > MAX_ANSWER_CHARS:
        return f"answer of {len(answer)} characters (over {MAX_ANSWER_CHARS})"
    return None


#: A span shorter than this (in words) cannot hold a question's answer with its context.
MIN_SPAN_WORDS = 6
#: A document's file name (what a knowledge base is made of), alone or at the end of a path. Data
#: and configuration files (``package.json``, ``config.yaml``, ``.npmrc``) are left alone: in
#: software documentation they are what users ask about.
_FILE = re.compile(r"(?:\b[\w\-]+/)*\b[\w\-]+\.(?:md|markdown|txt|pdf|docx?|html?|rst|ipynb|xlsx?|pptx?|odt)\b", re.I)
_NUMBER = re.compile(r"\d|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|forty|"
                     r"fifty|hundred|thousand|million|billion|half|double|twice|dozen)\b", re.I)
_WHEN = re.compile(rf"\b(?:1[89]|20)\d\d\b|\b(?:{_MONTHS})\b|\b\d+\s*(?:days?|weeks?|months?|years?|hours?|"
                   r"quarters?)\b|\b(?:annual|annually|monthly|weekly|daily|quarterly|yearly)\b", re.I)


def names_a_file(question: str, sources: Sequence[str] = ()) -> str | None:
    """A document's file name or path in the question (``products/carllm.md``, ``report.pdf``,
    or the name of one of ``sources`` without its extension): the user asks about the content,
    never about the file it sits in. ``package.json`` is not one: a data or configuration file
    is a subject of its own."""
    m = _FILE.search(question)
    if m:
        return m.group(0)
    low = question.lower()
    for source in sources:  # "products/carllm" without its extension
        if "/" in source and source.lower().rsplit(".", 1)[0] in low:
            return source
    return None


def short_span(spans: Sequence[str], answer: str, min_words: int = MIN_SPAN_WORDS) -> str | None:
    """Golden spans too short to hold the answer: together under ``min_words`` words, and
    missing a figure the answer states, or holding none of the answer's names and figures.
    "- **Location:** Calgary" holds "Insurellm is in Calgary."; "Five words are too few." holds
    nothing of "It costs $120 a month."."""
    n = sum(len(span.split()) for span in spans)
    if not spans or n >= min_words:
        return None
    text = fold(" ".join(spans))
    stated = figures(answer)
    if missing := [f for f in stated if f not in text]:
        return f"spans of {n} words in all, without {missing[0]!r}"
    words = answer.split()
    names = [w.strip(".,;:!?()'\"*") for w in words[1:] if w[:1].isupper()]
    if not stated and not any(fold(name) in text for name in names if name):
        return f"spans of {n} words in all, holding nothing the answer names"
    return None


def heading_span(spans: Sequence[str]) -> str | None:
    """A golden span that only introduces what follows: a heading (``## Features``) or a line
    ending in a colon ("SafeHaven will receive the complete Homellm Enterprise suite:"). The
    answer is in the lines after it, which the span does not hold."""
    for span in spans:
        text = span.strip().rstrip("*_ ")
        if text.endswith(":") or text.startswith("#"):
            return f"a span that only introduces what follows: {span.strip()[:80]!r}"
    return None


def contradicts_category(category: str, answer: str) -> str | None:
    """Why the answer cannot belong to ``category``: a ``numerical`` answer without a number, a
    ``temporal`` one without a date, year, month or period."""
    if category == "numerical" and not _NUMBER.search(answer):
        return "a numerical question whose answer holds no number"
    if category == "temporal" and not _WHEN.search(answer):
        return "a temporal question whose answer holds no date, year or period"
    return None


#: A figure: digits standing alone (not inside a name such as "Q3" or "S8").
_FIGURE_TOKEN = re.compile(r"(?<![A-Za-z_\d.])\d[\d,]*(?:\.\d+)*(?![A-Za-z_])")


def _figures(text: str) -> set[str]:
    return {f.replace(",", "").rstrip(".") for f in _FIGURE_TOKEN.findall(text)}


def figure_not_in_spans(spans: Sequence[str], answer: str) -> str | None:
    """Why the answer cannot be entailed by its spans, without a model: it states a figure (a
    number, an amount, a version, commas ignored) that no span holds. The local grounding model
    says yes to such answers ("npm recognizes 10 configuration options." from a span with no
    number in it)."""
    held = _figures(" ".join(spans))
    missing = sorted(_figures(answer) - held)
    if missing:
        return f"the answer states {', '.join(missing)}, which its span(s) do not"
    return None


def one_document_answer(category: str, spans: Sequence[str], answer: str) -> str | None:
    """Why a two-document answer (``spanning``, ``comparative``: two spans, one from each
    document) cannot be one: it states nothing that only one of the spans holds, for one of them
    (a content word of the answer, other than a function word, found in that span and not in the
    other). A spanning question answered from one document is a direct fact with a stray span."""
    if category not in ("spanning", "comparative") or len(spans) != 2:
        return None
    said = content_words(answer)
    a, b = (content_words(x) for x in spans)
    for k, (own, other) in enumerate(((a, b), (b, a))):
        if not said & (own - other):
            return f"a {category} answer that uses nothing only its {'first' if k == 0 else 'second'} span holds"
    return None


def near_duplicate_pairs(vectors: np.ndarray, threshold: float = NEAR_DUPLICATE) -> list[tuple[int, int, float]]:
    """Pairs (i, j, similarity), i < j, whose cosine similarity is at least ``threshold``."""
    if len(vectors) < 2:
        return []
    v = np.asarray(vectors, dtype=np.float32)
    v = v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
    sims = v @ v.T
    i, j = np.nonzero(np.triu(sims >= threshold, k=1))
    return [(int(a), int(b), float(sims[a, b])) for a, b in zip(i, j)]


# -- the numbered document of generate-qa-v2 ------------------------------------------------------

#: A line of the numbered document is at most this long (a very long sentence is cut into pieces).
MAX_SENTENCE_CHARS = 400
_SENTENCE_END = re.compile(r"(?P<end>[.!?][\"')\]]*)\s+|\n+")
#: What ends in a full stop without ending a sentence: a list number, a short abbreviation.
_LIST = re.compile(r"(?:[-*]\s*)?(?:\d{1,3}|[a-zA-Z])[.)]")
_ABBREV = re.compile(r"(?<![^\s(])(?:e\.g|i\.e|etc|vs|no|nr|approx|incl|dr|mr|mrs|ms|st)\.$", re.I)


def sentences(text: str, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    """The sentences of ``text[start:end]`` as offsets into ``text``, whitespace trimmed: cut
    after ``.``, ``!`` or ``?`` before a space, and at line ends (a list item, a table row and a
    heading are each a sentence); a piece over :data:`MAX_SENTENCE_CHARS` is cut at spaces."""
    end = len(text) if end is None else end
    out, pos = [], start
    for m in list(_SENTENCE_END.finditer(text, start, end)) + [None]:
        if m is not None and m["end"] and (_LIST.fullmatch(text[pos:m.end("end")].strip()) or _ABBREV.search(
                text[pos:m.end("end")])):
            continue  # "1." opening a list item, "e.g." or "No." ends no sentence
        stop = (m.end("end") if m["end"] else m.start()) if m is not None else end
        a, b = pos, stop
        while a < b and text[a].isspace():
            a += 1
        while b > a and text[b - 1].isspace():
            b -= 1
        while b - a > MAX_SENTENCE_CHARS:
            cut = text.rfind(" ", a, a + MAX_SENTENCE_CHARS)
            cut = cut if cut > a else a + MAX_SENTENCE_CHARS
            out.append((a, cut))
            a = cut + 1
        if b > a:
            out.append((a, b))
        pos = m.end() if m is not None else end
    return out


#: A paraphrased excerpt stands for the region of its window holding at least this share of its
#: content words (and every figure it states): see :func:`nearest_region`.
NEAR_RECALL = 0.8


def nearest_region(excerpt: str, text: str, start: int = 0, end: int | None = None,
                   max_sentences: int = 3) -> tuple[int, int] | None:
    """The region of ``text[start:end]`` (one to ``max_sentences`` consecutive sentences, as
    :func:`sentences` cuts them) that an excerpt :func:`locate` could not find stands for: the
    one holding the largest share of the excerpt's content words, at least :data:`NEAR_RECALL`,
    and every figure the excerpt states; the shortest among equals. None for an excerpt of under
    4 content words, or when no region holds enough.

    A small model asked to copy a sentence often writes the sentence with a neighbour's fact in
    it ("The maximum number of log files to store is 10." for a "Default: 10" line above "The
    maximum number of log files to store."). The span is the document's own text, so it is exact;
    whether it holds the answer is the grounding check's verdict, which follows."""
    want = content_words(excerpt)
    if len(want) < 4:
        return None
    figures = {w for w in want if any(ch.isdigit() for ch in w)}
    spans = sentences(text, start, end)
    words = [content_words(text[a:b]) for a, b in spans]
    best: tuple[tuple[float, int], tuple[int, int]] | None = None
    for i in range(len(spans)):
        got: set[str] = set()
        for j in range(i, min(len(spans), i + max_sentences)):
            got |= words[j]
            share = len(want & got) / len(want)
            if share >= NEAR_RECALL and figures <= got:
                key = (share, -(spans[j][1] - spans[i][0]))
                if best is None or key > best[0]:
                    best = (key, (spans[i][0], spans[j][1]))
    return None if best is None else best[1]


def numbered(text: str, spans: Sequence[tuple[int, int]]) -> str:
    """The sentences one a line, each after its number in brackets: ``[1] First. [2] ...``."""
    return "\n".join(f"[{i}] {' '.join(text[a:b].split())}" for i, (a, b) in enumerate(spans, start=1))
