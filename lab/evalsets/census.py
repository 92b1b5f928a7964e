"""What the sentence rules make of a knowledge base as a whole: every document's candidates less
the pages' template (a footer or a sidebar repeated on most pages), and the census ``lab
generate`` reports: characters per kind of block, prose sentences, candidates, and the sentences
left out by reason (:mod:`lab.evalsets.extract` reads one document at a time)."""

from __future__ import annotations

from collections import Counter
from typing import Sequence

from lab.evalsets.extract import Block, Candidate, blocks, candidates, left_out_count

#: A sentence on more than this share of the documents, and on at least :data:`TEMPLATE_MIN` of
#: them, is the pages' template (:func:`all_candidates`).
TEMPLATE_SHARE = 0.5
TEMPLATE_MIN = 5


def all_candidates(docs: dict[str, str], cut: dict[str, Sequence[Block]],
                   left_out: dict[str, dict] | None = None) -> dict[str, list[Candidate]]:
    """Every document's :func:`candidates` (``cut``: its :func:`blocks`) less the pages' template: a
    sentence on more than :data:`TEMPLATE_SHARE` of the documents, and on at least
    :data:`TEMPLATE_MIN`, is a footer or a sidebar ("Built with Sphinx using a theme provided by Read
    the Docs." on 125 of Scrapy's 126 HTML pages), counted as "the pages' template"."""
    found = {s: candidates(s, docs[s], cut[s], left_out) for s in sorted(docs)}
    seen = Counter(k for mine in found.values() for k in {" ".join(c.text.split()) for c in mine})
    template = {k for k, n in seen.items() if n >= TEMPLATE_MIN and n > TEMPLATE_SHARE * len(docs)}
    for source, mine in found.items():
        found[source] = [c for c in mine if " ".join(c.text.split()) not in template]
        for c in (c for c in mine if " ".join(c.text.split()) in template):
            left_out_count(left_out, "the pages' template", source, c.text)
    return found


def census(docs: dict[str, str], cut: dict[str, Sequence[Block]], found: dict[str, list[Candidate]],
           left_out: dict[str, dict]) -> dict:
    """What the rules made of a knowledge base's text: characters per block kind (``code``,
    ``transcript``, ``table``, ``prose``, ...: :func:`kinds`), its prose sentences, how many are
    candidates, and the others by :func:`why_not`'s reason with their first examples, so a user
    can see what a rule leaves out of their documents, and the documents holding no candidate
    (no question can be about them). ``cut``: each document's :func:`blocks`;
    ``found`` and ``left_out``: what :func:`candidates` gave and counted for each."""
    chars: dict[str, int] = {}
    for source in sorted(docs):
        for kind, n in kinds(docs[source], source, cut[source]).items():
            chars[kind] = chars.get(kind, 0) + n
    n_found = sum(len(v) for v in found.values())
    return {"characters_by_kind": dict(sorted(chars.items())),
            "prose_sentences": n_found + sum(e["n"] for e in left_out.values()), "candidates": n_found,
            "documents_without_candidates": [s for s in sorted(docs) if not found[s]],
            "left_out": dict(sorted(left_out.items(), key=lambda kv: (-kv[1]["n"], kv[0])))}


def kinds(text: str, source: str = "", cut: Sequence[Block] | None = None) -> dict[str, int]:
    """Characters of ``text`` per block kind: how much of a document is prose; ``cut``: its
    :func:`blocks`, when the caller has them already."""
    out: dict[str, int] = {}
    for b in blocks(text, source) if cut is None else cut:
        out[b.kind] = out.get(b.kind, 0) + b.end - b.start
    return out
