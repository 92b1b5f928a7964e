"""How the lab compares texts: one fold, one word rule (and its :func:`stem`), one stop list, the
figures, one citation grammar.

:func:`fold` has four levels, each the comparison one kind of evidence has always used (so no
metric, funnel record or cache key changes with this module):

- ``"case"``: NFC, lower case. Keywords are matched in it (the InsureLLM exercise's rule: a
  case-insensitive substring).
- ``"tolerant"``: whitespace runs as one space, quotes and dashes plain, markdown emphasis
  (``*``, backticks) dropped, each character NFC and lower case. Excerpts are located, spans'
  texts compared and answers' words read in it.
- ``"words"``: the words (whitespace-separated runs) in lower case joined by one space; a word
  whose lower case changes length stays as it is. Twins (the same span text elsewhere) are
  found in it, so a match maps back to exact offsets.
- ``"screen"``: NFKC, zero-width characters and soft hyphens dropped, spaced-out or split
  letters joined (``"I g n o r e"``, ``"i.g.n.o.r.e"``), LaTeX commands unwrapped: the text as
  the injection patterns see it.

:func:`fold_at` gives the ``tolerant`` and ``words`` folds with each character's offset in the
original.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Literal, NamedTuple

Level = Literal["case", "tolerant", "words", "screen"]

_TOLERANT = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201b": "'", "\u2032": "'",
                           "\u201c": '"', "\u201d": '"', "\u201e": '"', "\u2033": '"', "\u00ab": '"', "\u00bb": '"',
                           "\u2010": "-", "\u2011": "-", "\u2012": "-", "\u2013": "-", "\u2014": "-", "\u2212": "-",
                           "\u00a0": " ", "*": None, "`": None})
_NONSPACE = re.compile(r"\S+")
_ZERO_WIDTH = re.compile("[\u200b\u200c\u200d\u2060\ufeff\u00ad]")
_SPACED = re.compile(r"\b(?:[^\W\d_] ){3,}[^\W\d_]\b")  # "I g n o r e"
_LATEX = re.compile(r"\\[a-zA-Z]+\s*\{([^{}]*)\}")  # "\text{ignore}"
_SPLIT = re.compile(r"\b(?:[^\W\d_][.\-_*]){3,}[^\W\d_]\b")  # "i.g.n.o.r.e", "i-g-n-o-r-e"


class Folded(NamedTuple):
    """A folded text and, for each of its characters, that character's offset in the original."""

    text: str
    where: list[int]


def fold(text: str, level: Level = "tolerant") -> str:
    """``text`` as evidence of one kind is compared: see the module's docstring for the levels."""
    if level == "case":
        return unicodedata.normalize("NFC", text).lower()
    if level == "screen":
        t = _ZERO_WIDTH.sub("", unicodedata.normalize("NFKC", text or ""))
        t = _SPLIT.sub(lambda m: re.sub(r"[.\-_*]", "", m.group(0)), t)
        t = _LATEX.sub(r"\1", t)
        return _SPACED.sub(lambda m: m.group(0).replace(" ", ""), t)
    return fold_at(text, level).text


def fold_at(text: str, level: Literal["tolerant", "words"] = "tolerant") -> Folded:
    """The ``tolerant`` or ``words`` fold of ``text`` with each folded character's offset in
    ``text`` (a match found in the fold maps back to exact offsets)."""
    out: list[str] = []
    where: list[int] = []
    if level == "words":
        for m in _NONSPACE.finditer(text):
            w = m.group()
            low = w.lower()
            if len(low) != len(w):  # a word whose lower case changes length stays as it is
                low = w
            if out:
                out.append(" ")
                where.append(m.start())
            out.extend(low)
            where.extend(range(m.start(), m.end()))
        return Folded("".join(out), where)
    if level != "tolerant":
        raise ValueError(f"no offsets for the {level!r} fold")
    space = False
    for i, ch in enumerate(text):
        ch = ch.translate(_TOLERANT)
        if not ch:
            continue
        if ch.isspace():
            if not space and out:
                out.append(" ")
                where.append(i)
            space = True
            continue
        space = False
        for c in unicodedata.normalize("NFC", ch).lower():
            out.append(c)
            where.append(i)
    return Folded("".join(out), where)


# ---------------------------------------------------------------------------------------------
# Words

#: A word: letters and digits, with inner ``. , ' -`` kept ("8,400", "v2.1", "don't", "e-mail").
WORD = re.compile(r"[^\W_]+(?:[.,'’-][^\W_]+)*", re.UNICODE)

#: The English function words: articles, pronouns, auxiliaries, prepositions, conjunctions,
#: question words. Not distinctive of any evidence.
STOP = frozenset("""a about above after again against all also am among an and any are as at be because been
before being below between both but by can could did do does doing down during each either every few for from
further had has have having he her here hers him his how however i if in into is it its itself just least less
many may me might more most much must my neither no nor not of off on once only or other our ours out over own per
same shall she should since so some such than that the their theirs them then there these they this those though
through to too under until up upon us very was we were what when where whether which while who whom whose why will
with within without would yes yet you your yours""".split())

#: The auxiliary verbs among :data:`STOP` (and "cannot"): a sentence with none of them, nor a word
#: that reads as a verb, is a caption (:func:`lab.evalsets.standalone.why_not`).
AUXILIARIES = frozenset("""is are was were be been being has have had do does did can could will would shall should
may might must cannot""".split())


#: Capitalised words that start a sentence, not a name ("The", "According", "Each"): a name is a
#: run of capitalised words that does not begin with one.
NOT_NAMES = frozenset("""The A An In On At It Its This That These Those What Which Who When How Yes No And Or For
With As By Of To From Is Are According Both Each All Their They He She His Her There I If Under Through After
Before During While Since Per""".split())


def words(text: str) -> list[str]:
    """The words of ``text``'s tolerant fold, in order (:data:`WORD`)."""
    return WORD.findall(fold(text))


def content_words(text: str) -> set[str]:
    """The words of ``text`` that say something: no stop word, no one-letter word, numbers kept."""
    return {w for w in words(text) if any(c.isdigit() for c in w) or (len(w) > 1 and w not in STOP)}


def stem(word: str) -> str:
    """``word`` without a final "ing", "ed", "es", "s" or "e" where two letters or more are left:
    "using" and "use" read "us", "frameworks" "framework"; enough to see one word in two forms."""
    for end in ("ing", "ed", "es", "s", "e"):
        if word.endswith(end) and len(word) - len(end) >= 2:
            return word[:-len(end)]
    return word


# ---------------------------------------------------------------------------------------------
# Figures and citations

#: A figure: digits with inner ``,`` and ``.`` ("8,400", "2.5", "2019").
FIGURE = re.compile(r"\d[\d,.]*\d|\d")


def figures(text: str) -> list[str]:
    """The figures of ``text``, as written, in order."""
    return FIGURE.findall(text)


#: A citation of passages by number, as the answer prompt asks for them: "[2]", "[1, 3]", "[1; 3]".
CITATION = re.compile(r"\[(\d+(?:\s*[,;]\s*\d+)*)\]")


#: The head of a passage in the context the generator is sent (``lab.rag.context.format_passages``):
#: ``[2] (source: products/carllm.md)`` on a line of its own; groups: the number and the source.
PASSAGE_HEAD = re.compile(r"(?:^|\n\n)\[(\d+)\] \(source: ([^\n]*)\)\n")


def citations(text: str) -> list[int]:
    """Every passage number cited in ``text``, in order, repeats kept."""
    return [int(n) for group in CITATION.findall(text) for n in re.split(r"\s*[,;]\s*", group)]


def without_citations(text: str) -> str:
    """``text`` with each citation replaced by a space (its numbers are no figures of the answer)."""
    return CITATION.sub(" ", text)
