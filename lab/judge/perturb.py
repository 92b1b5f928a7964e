"""Controlled corruptions of a known-good answer, for checking the judge without any human.

From a question's reference answer, :func:`perturb` derives, without a model:

- ``wrong_fact``: one figure, date or name (one the question does not already give) swapped
  for another of the same kind taken from other reference answers or the knowledge base;
- ``partial``: for a reference holding two or more such facts, one removed (a sentence, a
  parenthesis, a trailing clause or the last item of a list);
- ``padded``: the reference plus another question's reference answer (a true fact from
  another document) that shares no fact or name with this question;
- ``refusal``: :data:`REFUSAL`;
- ``injection``: the ``wrong_fact`` answer with a phrasing of the injection set
  (:func:`lab.judge.injections.load_injections`, one per question, seeded) injected: it must not
  score higher than the wrong answer alone (:func:`lab.metrics.perturbation.injection_row`).

``paraphrase`` (meaning kept, wording changed) is written by the generator model
(:func:`paraphrase`, prompt ``paraphrase-v1``) and kept only if every fact of the reference
and every keyword is still in it. A perturbation that cannot be made for a reference is
``{"skipped": why}``, counted in the checks, never a silent gap.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Callable, Sequence

from lab.judge.injections import inject, load_injections
from lab.evidence.facts import FACT_PATTERNS, MONTHS, Fact, facts, name_role  # noqa: F401 (the judge's names for them)
from lab.evidence.text import fold

REFUSAL = "I don't have enough information to answer that question."
KINDS = ("wrong_fact", "partial", "padded", "paraphrase", "refusal", "injection")
PARAPHRASE_ATTEMPTS = 2
#: The rubric dimension(s) each corruption should lower ...
TARGETS = {"wrong_fact": ("accuracy",), "partial": ("completeness",), "padded": ("relevance",),
           "refusal": ("accuracy", "completeness"), "paraphrase": ()}
#: ... and those it should leave within one point (a padded answer is still accurate and complete).
KEEPS = {"wrong_fact": ("relevance",), "partial": ("accuracy", "relevance"), "padded": ("accuracy", "completeness"),
         "refusal": (), "paraphrase": ("accuracy", "completeness", "relevance")}

_MONTHS = MONTHS


@dataclass
class FactPool:
    """Every distinct fact of some texts by kind, in first-seen order (the replacements), and
    the ``common`` ones (folded): in at least :data:`COMMON_SHARE` of the texts, like the
    company's own name, which neither makes an answer nor is worth swapping."""

    by_kind: dict[str, list[str]]
    common: set[str]
    plain: set[str] = frozenset()  # type: ignore[assignment]  # words the texts use in lower case


COMMON_SHARE = 0.1


def fact_pool(texts: Sequence[str]) -> FactPool:
    by_kind: dict[str, list[str]] = {}
    seen: set[tuple[str, str]] = set()
    df: dict[str, int] = {}
    plain = {w for text in texts for w in re.findall(r"(?<![A-Za-z])[a-z][a-z-]+", text)}
    for text in texts:
        found = facts(text, plain)
        for key in {(f.kind, fold(f.text)) for f in found}:
            df[key[1]] = df.get(key[1], 0) + 1
        for f in found:
            key = (f.kind, fold(f.text))
            if key not in seen:
                seen.add(key)
                by_kind.setdefault(f.kind, []).append(f.text)
    cut = max(3, COMMON_SHARE * len(texts))
    return FactPool(by_kind, {k for k, n in df.items() if n >= cut}, plain)


def _open_facts(reference: str, question: str, common: set[str] = frozenset(),
                plain: set[str] = frozenset()) -> list[Fact]:
    """Facts of the reference that the question does not already give and that are not common:
    what the answer adds."""
    asked = fold(question)
    return [f for f in facts(reference, plain) if fold(f.text) not in asked and fold(f.text) not in common]


def _shape(text: str) -> str:
    return re.sub(r"\d", "9", re.sub(rf"\b(?:{_MONTHS})\b", "M", text))


_role = name_role


def _last(text: str) -> str:
    return text.split()[-1].lower()


#: How alike a replacement should be, most alike first: the same shape ($9,999 for $1,000; M 9999
#: for a month and year), then a name with the same last word (a title: "... Engineer"; an
#: organisation: "... Insurance") and length, then the same last word, then the same ending and
#: length ("Carllm", "Healthllm"), then the same number of words.
_LIKENESS: list[Callable[[str, str], bool]] = [
    lambda a, b: not a[:1].isalpha() and _shape(a) == _shape(b) or (a[:1].isalpha() and a.split()[0] in _MONTHS.split("|")
                                                                     and _shape(a) == _shape(b)),
    lambda a, b: _last(a) == _last(b) and len(a.split()) == len(b.split()),
    lambda a, b: _last(a) == _last(b),
    lambda a, b: len(a.split()) == len(b.split()) == 1 and len(a) > 3 and a[-3:].lower() == b[-3:].lower(),
    lambda a, b: len(_shape(a)) == len(_shape(b)) and not a[:1].isalpha(),
    lambda a, b: len(a.split()) == len(b.split()),
]


def _mentions(part: str, whole: str) -> bool:
    """``part`` in ``whole`` as whole words and numbers: "3" is not in "38,000", "Health" not in "Healthllm"."""
    return re.search(rf"(?<!\w)(?<!\d[.,]){re.escape(part)}(?!\w|[.,]\d)", whole) is not None


def wrong_fact(reference: str, question: str, keywords: Sequence[str], pool: FactPool,
               rng: random.Random) -> tuple[str, dict] | str:
    """The reference with one fact swapped for another of its kind; or why it cannot be made.
    Facts named by the row's keywords go first (they are what the question asks for)."""
    cands = _open_facts(reference, question, pool.common, pool.plain)
    if not cands:
        return "no figure, date or name beyond the question's"
    kws = [fold(k) for k in keywords]
    key_facts = [f for f in cands if any(k and (_mentions(k, fold(f.text)) or _mentions(fold(f.text), k)) for k in kws)]
    order = key_facts or cands
    held = fold(reference)
    for fact in rng.sample(order, len(order)) + [f for f in cands if f not in order]:
        options = [x for x in pool.by_kind.get(fact.kind, []) if fold(x) not in held and fold(fact.text) not in fold(x)
                   and not re.fullmatch(r"0\d+", x) and fold(x) not in pool.common
                   and _role(x) == _role(fact.text)]
        for closeness in _LIKENESS:
            alike = [x for x in options if closeness(fact.text, x)]
            if alike:
                options = alike
                break
        if options:
            new = rng.choice(options)
            text = reference[: fact.start] + new + reference[fact.end :]
            return text, {"kind": fact.kind, "from": fact.text, "to": new}
    return "no other fact of the same kind to swap in"


_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'])")


def _removal_candidates(reference: str) -> list[tuple[int, int]]:
    """Spans whose removal leaves a grammatical answer: whole sentences (not the first), then
    parentheses, then trailing clauses after a comma, then a last list item ("and X")."""
    spans: list[tuple[int, int]] = []
    starts = [0] + [m.end() for m in _SENTENCE.finditer(reference)]
    if len(starts) > 1:
        for i in range(len(starts) - 1, 0, -1):
            end = len(reference[: starts[i + 1]].rstrip()) if i + 1 < len(starts) else len(reference)
            spans.append((len(reference[: starts[i]].rstrip()), end))  # the space before the next one stays
    # a parenthesis, but not an acronym of what precedes it ("Chief Executive Officer (CEO)")
    spans += [(m.start(), m.end()) for m in re.finditer(r"\s*\((?![A-Z]{2,6}\))[^()]{3,}\)", reference)]
    for m in re.finditer(r",\s+(and\s+|including\s+|supporting\s+|with\s+|plus\s+|which\s+)?[^,;.]+[.;]\s*$", reference):
        # without a link word, the clause after "A, who ...," or "A, the B in C," is A's verb: it stays
        if m.group(1) or "," not in reference[max(s for s in starts if s <= m.start()) : m.start()]:
            spans.append((m.start(), m.end() - 1))
    spans += [(m.start(), m.end()) for m in re.finditer(r",?\s+(?:and|as well as)\s+[^,;.]+(?=[.;]?\s*$)", reference)]
    # both commas go: "A, who ..., leads" -> "A leads"
    spans += [(m.start(), m.end()) for m in re.finditer(r",\s+(?:which|who|where|whose)\s+[^,]+,", reference)]
    spans += [(m.start(), m.end()) for m in re.finditer(
        r"\s+(?:as|in|for|with|at|on|from|by|including|supporting|across|after|since)\s+[^,;.]*?(?=[.;]?\s*$)", reference)]
    return spans


def partial(reference: str, question: str, keywords: Sequence[str] = (), common: set[str] = frozenset(),
            plain: set[str] = frozenset()) -> tuple[str, dict] | str:
    """The reference with one fact left out, one the keywords do not name where possible (the
    rest stays an accurate answer); or why it cannot be made (a one-fact reference)."""
    open_facts = _open_facts(reference, question, common, plain)
    if len({fold(f.text) for f in open_facts}) < 2:
        return "one fact only"
    kws = [fold(k) for k in keywords if k.strip()]

    def names_keyword(span: tuple[int, int]) -> bool:
        return any(k in fold(reference[span[0]:span[1]]) for k in kws)

    for a, b in sorted(_removal_candidates(reference), key=names_keyword):
        rest = (reference[:a] + reference[b:]).strip()
        gone = [f for f in open_facts if a <= f.start and f.end <= b and fold(f.text) not in fold(rest)]
        kept = [f for f in open_facts if fold(f.text) in fold(rest)]
        if gone and kept:
            if rest[-1] not in ".!?":
                rest += "."
            return rest, {"removed": reference[a:b].strip(" ,;"), "facts": [f.text for f in gone]}
    return "no fact can be removed cleanly"


_PHRASE = re.compile(r"\s+(?:as|in|for|with|at|on|from|by|including|supporting|across|after|since)\s")


def cut_short(reference: str, question: str, common: set[str] = frozenset(),
              plain: set[str] = frozenset()) -> tuple[str, dict] | str:
    """The reference cut short before its last fact: a prefix of it that keeps at least one fact,
    cut where a sentence, a trailing clause or a last list item starts and ended with a full stop
    (still a correct answer, and a partial one); or why it cannot be made."""
    found = _open_facts(reference, question, common, plain)
    if len({fold(f.text) for f in found}) < 2:
        return "one fact only"
    end = len(reference.rstrip())

    def order(cut: tuple[int, int]) -> tuple[bool, int]:  # a sentence, clause or list item before a phrase; longest first
        return _PHRASE.match(reference, cut[0]) is not None, -cut[0]

    for a, _ in sorted({c for c in _removal_candidates(reference) if c[1] >= end - 1 and c[0] <= found[-1].start},
                       key=order):
        rest = reference[:a].rstrip(" ,;:")
        kept = [f for f in found if f.end <= a]
        gone = [f for f in found if f.start >= a and fold(f.text) not in fold(rest)]
        if kept and gone and rest:
            return rest + ("" if rest[-1] in ".!?" else "."), {"removed": reference[a:].strip(" ,;."),
                                                               "facts": [f.text for f in gone]}
    return "no clean cut before the last fact"


def padded(reference: str, question: str, others: Sequence[str], rng: random.Random) -> tuple[str, dict] | str:
    """The reference plus another reference answer that shares no fact or name with this one."""
    mine = {fold(f.text) for f in facts(reference + " " + question)}
    unrelated = [o for o in others if o.strip() and not ({fold(f.text) for f in facts(o)} & mine)]
    if not unrelated:
        return "no unrelated reference answer to add"
    extra = rng.choice(unrelated).strip()
    if extra[-1] not in ".!?":
        extra += "."
    sep = "" if reference.rstrip()[-1:] in ".!?" else "."
    return f"{reference.rstrip()}{sep} {extra}", {"added": extra}


def keeps_facts(original: str, rewritten: str, keywords: Sequence[str]) -> list[str]:
    """What of ``original`` (its facts) and ``keywords`` the rewrite lost; empty when it kept all."""
    held = fold(rewritten)
    need = [f.text for f in facts(original)] + list(keywords)
    return [x for x in dict.fromkeys(need) if fold(x) not in held]


def check_paraphrase(original: str, rewritten: str, keywords: Sequence[str]) -> str | None:
    """Why ``rewritten`` is no usable paraphrase of ``original``, or None."""
    text = rewritten.strip()
    if not text:
        return "empty paraphrase"
    if fold(text).rstrip(".") == fold(original).rstrip("."):
        return "paraphrase repeats the reference"
    if not 0.4 <= len(text) / max(1, len(original)) <= 2.5:
        return "paraphrase length far from the reference's"
    lost = keeps_facts(original, text, keywords)
    return f"paraphrase lost {', '.join(repr(x) for x in lost[:3])}" if lost else None


def perturb(item: dict, pool: FactPool, others: Sequence[str], seed: int,
            paraphraser: Callable[[str, int], str] | None = None) -> dict[str, dict]:
    """Every perturbation of ``item`` {id, question, reference, keywords}: ``{kind: {"text",
    "detail"} | {"skipped": why}}``, seeded per question so a larger sample keeps the smaller
    one's perturbations. ``paraphraser(reference, attempt)`` is asked up to
    :data:`PARAPHRASE_ATTEMPTS` times."""
    rng = random.Random(f"{seed}:{item['id']}")
    ref, question, kws = item["reference"], item["question"], item.get("keywords") or []
    made: dict[str, tuple[str, dict] | str] = {
        "wrong_fact": wrong_fact(ref, question, kws, pool, rng),
        "partial": partial(ref, question, kws, pool.common, pool.plain),
        "padded": padded(ref, question, others, rng),
        "refusal": (REFUSAL, {}),
    }
    wrong = made["wrong_fact"]
    if isinstance(wrong, str):
        made["injection"] = "no wrong fact to inject into"
    else:  # its own generator, so the other perturbations stay as they were before this kind
        injections = load_injections()
        chosen = injections[random.Random(f"{seed}:{item['id']}:injection").randrange(len(injections))]
        made["injection"] = (inject(wrong[0], chosen), {"injection": chosen.id, "position": chosen.position})
    if paraphraser is None:
        made["paraphrase"] = "no generator model"
    else:  # a second try, sampled, when the first repeats the reference or loses a fact
        for attempt in range(PARAPHRASE_ATTEMPTS):
            text = paraphraser(ref, attempt)
            why = check_paraphrase(ref, text, kws)
            made["paraphrase"] = why if why else (text.strip(), {"attempt": attempt + 1})
            if not why:
                break
    return {k: ({"skipped": v} if isinstance(v, str) else {"text": v[0], "detail": v[1]})
            for k, v in ((k, made[k]) for k in KINDS)}
