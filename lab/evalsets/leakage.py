"""The leakage guard of tuned models: which training questions are, or answer from the golden span
of, an eval question. A model tuned on its own test questions scores well for the wrong reason:
``lab run`` refuses such a pairing (``--allow-overlap`` overrides), and ``lab tune --holdout``
leaves such questions out before training. Pure functions; text compared folded
(:func:`lab.evidence.text.fold`; words by :func:`lab.evidence.text.words`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from lab.evidence.text import fold, words

#: Training and eval questions this alike (Jaccard of their word sets) are the same question.
NEAR = 0.8
#: A span shorter than this (folded characters) is too short to say that one holding the other is
#: the same evidence ("2014" is in many passages); shorter spans count when equal.
MIN_SPAN_CHARS = 24
#: A question of this many words or more, found whole (its words in order) in another, is that
#: question asked with a few more words.
MIN_CONTAINED_WORDS = 4

@dataclass(frozen=True)
class Overlap:
    """One training question that is, or answers from the span of, an eval question."""

    eval_line: int
    eval_question: str
    train_origin: str
    train_question: str
    why: str  # "same question" | "near-duplicate (Jaccard 0.86)" | "contains the eval question" | "same golden span"


def jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a | b else 0.0


def contains(longer: Sequence[str], shorter: Sequence[str]) -> bool:
    """Whether the words ``shorter`` (at least :data:`MIN_CONTAINED_WORDS`) occur in ``longer``,
    together and in order."""
    n = len(shorter)
    return n >= MIN_CONTAINED_WORDS and any(list(longer[i:i + n]) == list(shorter) for i in range(len(longer) - n + 1))


def overlaps(train: Sequence[dict], eval_rows: Sequence[tuple[int, str, Sequence[str]]]) -> list[Overlap]:
    """The leakage guard: each eval row ``(line, question, golden span texts)`` against the
    training questions (records: ``text``, ``span``, ``origin``). Same question folded, a
    near-duplicate (word Jaccard >= :data:`NEAR`), a training question holding the eval question
    whole with a few more words (:func:`contains`), or the same golden span: equal folded, at any length (the row's own
    span, a price or a name of a few characters included), or one holding the other, both at
    least :data:`MIN_SPAN_CHARS`."""
    by_text = {fold(t["text"]): t for t in train}
    train_words = [(set(words(t["text"])), t) for t in train]
    train_seqs = [(words(t["text"]), t) for t in train]
    spans = [(t["span"], t) for t in train if len(t.get("span") or "") >= MIN_SPAN_CHARS]
    equal: dict[str, dict] = {}
    for t in train:
        if t.get("span"):
            equal.setdefault(t["span"], t)
    out: list[Overlap] = []
    for line, question, refs in eval_rows:
        hit = by_text.get(fold(question))
        if hit is not None:
            out.append(Overlap(line, question, hit["origin"], hit["text"], "same question"))
            continue
        q = set(words(question))
        best = max(((jaccard(q, w), t) for w, t in train_words), key=lambda x: x[0], default=(0.0, None))
        if best[1] is not None and best[0] >= NEAR:
            out.append(Overlap(line, question, best[1]["origin"], best[1]["text"],
                               f"near-duplicate (Jaccard {best[0]:.2f})"))
            continue
        seq = words(question)
        inside = next((t for w, t in train_seqs if contains(w, seq)), None)
        if inside is not None:
            out.append(Overlap(line, question, inside["origin"], inside["text"], "contains the eval question"))
            continue
        folded = [fold(ref) for ref in refs]
        # a training row made from this row has its spans, folded, joined by a space (lab.tune.pairs)
        shared = equal.get(" ".join(folded)) if any(folded) else None
        for r in folded:
            if shared is not None:
                break
            if not r:
                continue
            shared = equal.get(r) or (next((t for s, t in spans if s in r or r in s), None)
                                      if len(r) >= MIN_SPAN_CHARS else None)
        if shared is not None:
            out.append(Overlap(line, question, shared["origin"], shared["text"], "same golden span"))
    return out
