"""The figures, dates and names a text states, and how an answer's compare with its reference's:
the rules that decide, without a model, what an answer states of its reference and what it
states instead.

- :func:`facts`: the figures (money, percent, year, other numbers), dates and names of a text,
  none overlapping (the judge's perturbations swap and remove them, :mod:`lab.judge.perturb`);
- :func:`name_role`: a name's rough type (a title, an organisation, other);
- :func:`states_fact`: whether a text states one fact: numbers by value ("$2,500" is "2500",
  "$1.2 million" is "1,200,000"), dates by their words, names by all their words;
- :func:`compare`: an answer's facts against its reference's (:class:`FactCheck`): which of the
  reference's facts it states, which of its own the reference, the question or the context
  holds, and which stand where the reference has another fact of the same kind (a conflict: a
  different figure, date or name);
- :func:`refuses`: an answer that declines to answer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from lab.evidence.text import CITATION, NOT_NAMES, STOP, fold

MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"
#: (kind, pattern), earlier kinds first: a span taken by one is not matched again by a later one.
FACT_PATTERNS = [
    ("date", re.compile(rf"\b(?:{MONTHS})(?: \d{{1,2}},?)? \d{{4}}\b|\b(?:Q[1-4]) \d{{4}}\b")),
    ("money", re.compile(r"[$€£]\s?\d[\d,]*(?:\.\d+)?(?:\s?(?:million|billion|[MBK])\b)?")),
    ("percent", re.compile(r"\b\d[\d,]*(?:\.\d+)?\s?%")),
    ("year", re.compile(r"\b(?:19|20)\d{2}\b")),
    ("figure", re.compile(r"\b\d[\d,]*(?:\.\d+)?\+?")),
    ("name", re.compile(r"\b[A-Z][A-Za-z0-9&'.-]*[A-Za-z0-9](?:\s+(?:of\s+|and\s+|&\s+)?[A-Z][A-Za-z0-9&'-]*[A-Za-z0-9])*")),
]


@dataclass(frozen=True)
class Fact:
    kind: str
    text: str
    start: int
    end: int


def facts(text: str, plain: set[str] = frozenset()) -> list[Fact]:
    """The figures, dates and names in ``text``, in order, none overlapping. A name loses its
    leading function words ("The", "In", ...); a lone function word is no name, nor is a lone
    word opening a sentence that ``plain`` (words seen in lower case) holds."""
    taken: list[tuple[int, int]] = []
    out: list[Fact] = []
    for kind, pattern in FACT_PATTERNS:
        for m in pattern.finditer(text):
            start, end = m.start(), m.end()
            if kind == "name":
                words = m.group(0).split()
                while words and words[0] in NOT_NAMES:
                    start = text.index(words[1], start + len(words[0])) if len(words) > 1 else end
                    words = words[1:]
                if not words:
                    continue
                if len(words) == 1 and _plain_opening(text, start, words[0], plain):
                    continue
            value = re.sub(r"'s$", "", text[start:end].rstrip(".,"))
            end = start + len(value)
            if len(value) < 1 or any(start < b and a < end for a, b in taken):
                continue
            taken.append((start, end))
            out.append(Fact(kind, value, start, end))
    return sorted(out, key=lambda f: f.start)


def _plain_opening(text: str, start: int, word: str, plain: set[str]) -> bool:
    """A lone capitalised word opening a sentence that the texts also use in lower case
    ("Based on ...", "Premiums rose ...") is an ordinary word, not a name."""
    if start and not re.search(r"[.!?:]\s+$", text[max(0, start - 3):start]):
        return False
    return re.sub(r"'s$", "", word).lower() in plain


TITLES = {"engineer", "executive", "manager", "officer", "director", "scientist", "analyst", "designer", "developer",
          "specialist", "lead", "president", "vp", "chief", "representative", "coordinator", "architect", "consultant",
          "administrator", "head", "associate", "assistant", "intern", "accountant", "advisor", "counsel", "cto", "ceo",
          "cfo", "coo", "cro", "founder", "owner", "strategist", "researcher", "technician", "supervisor"}
ORGS = {"inc", "co", "corp", "corporation", "group", "insurance", "solutions", "services", "partners", "holdings",
        "llc", "ltd", "company", "bank", "mutual", "alliance", "plans", "systems", "technologies", "agency",
        "university", "institute", "association", "foundation", "labs", "network", "assurance", "underwriters"}


def name_role(text: str) -> str:
    """A name's rough type, so a title is compared with a title and a firm with a firm."""
    words = {w.strip(".,'").lower() for w in text.split()}
    return "title" if words & TITLES else "org" if words & ORGS else "other"


# ---------------------------------------------------------------------------------------------
# Whether a text states a fact

_SCALE = {"thousand": 1e3, "k": 1e3, "million": 1e6, "m": 1e6, "billion": 1e9, "b": 1e9}
#: A number as the answers write it, with its scale word ("12 million", "$1.2M", "8,400").
_NUMBER = re.compile(r"(?<![\w.])(\d[\d,]*(?:\.\d+)?)(?:\s?(thousand|million|billion|[kmb])\b)?", re.I)
#: A list marker opening a line ("1. ", "2) ").
_LIST_MARK = re.compile(r"^\s*\d{1,2}[.)]\s+", re.M)
#: What a fact is compared with: numbers with numbers, times with times, a name with a name of its role.
_CLASS = {"money": "number", "percent": "number", "figure": "number", "year": "time", "date": "time"}


def numbers(text: str) -> list[float]:
    """The numbers ``text`` writes, each with its scale word applied ("$1.2 million" is 1,200,000);
    passage citations ("[2]") and list markers are not numbers of the text."""
    body = _LIST_MARK.sub(" ", CITATION.sub(" ", text))
    out = []
    for m in _NUMBER.finditer(body):
        try:
            value = float(m.group(1).replace(",", ""))
        except ValueError:
            continue
        out.append(value * _SCALE.get((m.group(2) or "").lower(), 1.0))
    return out


def _name_words(text: str) -> list[str]:
    """A name's words as :func:`states_fact` looks for them: folded, split at anything not a
    letter or digit, function words aside unless the name is nothing else ("US")."""
    words = re.findall(r"[a-z0-9]+", fold(text))
    return [w for w in words if w not in STOP and w != "s"] or words


def states_fact(text: str, fact: Fact) -> bool:
    """Whether ``text`` states ``fact``: a number by value, a date by each of its words (month,
    day, year or quarter), a name by every word of it (function words aside) as a word of the
    text ("Avery Lancaster" in "Lancaster, Avery"; not "Health" in "Healthllm")."""
    if fact.kind in ("money", "percent", "figure", "year"):
        want = numbers(fact.text)
        have = numbers(text)
        return bool(want) and any(abs(w - h) <= 1e-9 * max(1.0, abs(w)) for w in want[:1] for h in have)
    words = set(re.findall(r"[a-z0-9]+", fold(text)))
    if fact.kind == "date":
        return all(w in words for w in re.findall(r"[a-z0-9]+", fold(fact.text.replace(",", ""))))
    def has(name: str) -> bool:
        need = _name_words(name)
        return bool(need) and all(w in words for w in need)

    short = re.fullmatch(r"(.*?)\s*\((.+)\)", fact.text)  # "Insurellm Innovator of the Year (IIOTY)": either
    return has(short.group(1)) or has(short.group(2)) if short else has(fact.text)


# ---------------------------------------------------------------------------------------------
# An answer's facts against its reference's


@dataclass(frozen=True)
class FactCheck:
    """What the rules decide of an answer against its reference answer.

    ``reference``: the reference's open facts (those its question does not give), each with
    whether the answer states it (``stated``). ``held``: the answer's facts that the reference, the
    question or the context holds. ``conflicts``: the answer's other facts that stand where the
    reference has a fact of the same kind (a number, a time, a name of the same role) that the
    answer does not state, each with that reference fact: a different figure, date or name.
    ``extra``: the answer's remaining facts (nothing holds them, nothing conflicts). ``refusal``:
    the answer declines and states none of the reference's facts."""

    reference: tuple[Fact, ...]
    stated: tuple[bool, ...]
    held: tuple[Fact, ...]
    conflicts: tuple[tuple[Fact, Fact], ...]
    extra: tuple[Fact, ...]
    refusal: bool

    @property
    def stated_share(self) -> float | None:
        """The share of the reference's facts the answer states (None: the reference has none)."""
        return sum(self.stated) / len(self.stated) if self.stated else None

    def as_dict(self) -> dict:
        return {"reference": [{"kind": f.kind, "text": f.text, "stated": s} for f, s in zip(self.reference, self.stated)],
                "held": [f.text for f in self.held],
                "conflicts": [{"answer": a.text, "reference": r.text, "kind": a.kind} for a, r in self.conflicts],
                "extra": [f.text for f in self.extra], "refusal": self.refusal}


def _class(fact: Fact) -> str:
    return _CLASS.get(fact.kind) or f"name:{name_role(fact.text)}"


#: Words that open an answer's sentence and name nothing ("Currently, ...", "Based on ...").
OPENERS = frozenset("""according additionally also based certainly currently finally first firstly further furthermore
generally here however moreover no note overall please second secondly so specifically sure then therefore third
thus today typically unfortunately usually yes""".split())


def _opener(text: str, fact: Fact) -> bool:
    """A lone capitalised word opening a sentence of an answer that names nothing: an opener or
    an adverb in -ly."""
    at_start = fact.start == 0 or re.search(r"(?:[.!?:]\s+|\n\s*[-*]?\s*)$", text[max(0, fact.start - 4):fact.start])
    word = fact.text.lower()
    return bool(at_start) and len(fact.text.split()) == 1 and (word in OPENERS or word.endswith("ly"))


#: What joins two names into one: "Innovator of the Year", "Head of Claims", a name and its
#: short form in brackets ("... (IIOTY)").
_JOIN = re.compile(r"\s+(?:of|for|on|in|and|de)\s+(?:the\s+|a\s+)?|\s+\(")


def joined_facts(text: str, plain: set[str] = frozenset()) -> list[Fact]:
    """:func:`facts`, with names joined where one continues another across "of the" and the like,
    or gives its short form in brackets: the judge's unit of a name ("Insurellm Innovator of the
    Year (IIOTY)" is one name, stated by its words or by "IIOTY")."""
    out: list[Fact] = []
    for f in facts(text, plain):
        prev = out[-1] if out else None
        if prev is not None and prev.kind == f.kind == "name" and _JOIN.fullmatch(text[prev.end:f.start]):
            end = f.end + 1 if text[prev.end:f.start].endswith("(") and text[f.end:f.end + 1] == ")" else f.end
            out[-1] = Fact("name", text[prev.start:end], prev.start, end)
        else:
            out.append(f)
    return out


def open_facts(reference: str, question: str, plain: set[str] = frozenset()) -> list[Fact]:
    """The reference's facts (names joined: :func:`joined_facts`) that its question does not
    already give: what an answer adds."""
    return [f for f in joined_facts(reference, plain) if not states_fact(question, f)]


def compare(answer: str, reference: str, question: str, context: str = "") -> FactCheck:
    """The answer's facts against the reference's (see :class:`FactCheck`). Words the texts use in
    lower case are no names when they open a sentence, nor are an answer's openers ("Currently,
    ...", :data:`OPENERS`); citations ("[2]") and list markers are no figures."""
    body = _LIST_MARK.sub(lambda m: " " * len(m.group(0)), CITATION.sub(lambda m: " " * len(m.group(0)), answer))
    plain = {w for t in (answer, reference, question, context)
             for w in re.findall(r"(?<![A-Za-z])[a-z][a-z-]+", t)}
    ref = open_facts(reference, question, plain)
    stated = tuple(states_fact(body, f) for f in ref)
    sources = (reference, question, context)
    held, new = [], []
    for f in joined_facts(body, plain):
        if any(states_fact(s, f) for s in sources if s):
            held.append(f)
        elif not (f.kind == "name" and _opener(body, f)):
            new.append(f)
    missing = [f for f, s in zip(ref, stated) if not s]
    conflicts, extra = [], []
    for f in new:
        partner = next((r for r in missing if _class(r) == _class(f)), None)
        if partner is not None:
            conflicts.append((f, partner))
        else:
            extra.append(f)
    return FactCheck(tuple(ref), stated, tuple(held), tuple(conflicts), tuple(extra),
                     refuses(answer) and not any(stated))


#: Declining to answer: "I don't have enough information", "cannot answer", "is not mentioned in
#: the context".
_REFUSES = re.compile(
    r"\b(?:do not|don't|does not|doesn't|did not|didn't)\s+(?:have|contain|provide|include|give)\s+(?:enough|sufficient|any)"
    r"\s+information\b|\b(?:cannot|can't|can not|am unable to|unable to)\s+(?:answer|determine|find|tell)\b"
    r"|\bno (?:information|mention|details?)\s+(?:about|on|of|regarding)\b"
    r"|\bnot\s+(?:mentioned|provided|specified|stated|given|available|included|found)\s+in\s+the\s+"
    r"(?:provided\s+|given\s+)?(?:context|passages?|documents?|text|information|sources?)\b", re.I)


def refuses(answer: str) -> bool:
    """Whether ``answer`` declines to answer (it may still state something: see
    :attr:`FactCheck.refusal`, which also asks that it states none of the reference's facts)."""
    return _REFUSES.search(answer) is not None
