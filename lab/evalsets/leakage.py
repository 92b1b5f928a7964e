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
#: A span shorter than this (folded characters) is too short to say two questions share it.
MIN_SPAN_CHARS = 24

@dataclass(frozen=True)
class Overlap:
    """One training question that is, or answers from the span of, an eval question."""

    eval_line: int
    eval_question: str
    train_origin: str
    train_question: str
    why: str  # "same question" | "near-duplicate (Jaccard 0.86)" | "same golden span"


def jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a | b else 0.0


def overlaps(train: Sequence[dict], eval_rows: Sequence[tuple[int, str, Sequence[str]]]) -> list[Overlap]:
    """The leakage guard: each eval row ``(line, question, golden span texts)`` against the
    training questions (records: ``text``, ``span``, ``origin``). Same question folded, a
    near-duplicate (word Jaccard >= :data:`NEAR`), or the same golden span (equal folded, or one
    holding the other, both at least :data:`MIN_SPAN_CHARS`)."""
    by_text = {fold(t["text"]): t for t in train}
    train_words = [(set(words(t["text"])), t) for t in train]
    spans = [(t["span"], t) for t in train if len(t.get("span") or "") >= MIN_SPAN_CHARS]
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
        for ref in refs:
            r = fold(ref)
            if len(r) < MIN_SPAN_CHARS:
                continue
            shared = next((t for s, t in spans if s == r or s in r or r in s), None)
            if shared is not None:
                out.append(Overlap(line, question, shared["origin"], shared["text"], "same golden span"))
                break
    return out
