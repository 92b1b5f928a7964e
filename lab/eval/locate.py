"""Where a target's context lies in the knowledge base, when its reply does not say.

The span metrics, the span rank metrics and the loss funnel's span stages read a passage's
offsets (:class:`lab.evidence.holds.Passage`'s pieces). A target's context may come with
``source``, ``start`` and ``end`` (the lab's own query engine, a LangChain splitter with
``add_start_index``); otherwise it is looked for, each level tried in turn:

1. ``given``: the reply's offsets, where its source is a document of the knowledge base (named as
   the lab names it, relative to the knowledge base, or by a path ending in that name) and they lie
   inside it;
2. ``exact``: the context's text as a substring, first in its named document, then in every
   document in order;
3. ``tolerant``: the same in the ``tolerant`` fold (case, whitespace runs, quotes, dashes,
   markdown emphasis: what a splitter that joins sentences with one space, or a loader that strips
   markup, changes; :func:`lab.evidence.text.fold_at` maps a match back to exact offsets);

else ``not_located``: the context holds no span (it still counts for the keyword metrics, which
read its text), and the run says how many contexts were not located. A text found at several
places is placed at the first (its twins count as the span's own place in the span rank metrics).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from lab.evidence.text import Folded, fold, fold_at

How = Literal["given", "exact", "tolerant", "not_located"]
LEVELS: tuple[How, ...] = ("given", "exact", "tolerant", "not_located")


@dataclass
class Located:
    source: str | None
    start: int | None
    end: int | None
    how: How


@dataclass
class Locator:
    """The knowledge base's documents (``source -> text``), each folded once, at start-up."""

    documents: dict[str, str]
    _folds: dict[str, Folded] = field(default_factory=dict, init=False, repr=False)
    _found: dict[tuple, Located] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        self._folds = {source: fold_at(text, "tolerant") for source, text in self.documents.items()}

    def source(self, name: str | None) -> str | None:
        """The document a reply's ``source`` names: the lab's own name, or a path ending in it."""
        if not name:
            return None
        if name in self.documents:
            return name
        plain = name.replace("\\", "/")
        hits = [s for s in self.documents if plain.endswith("/" + s) or plain == s]
        return max(hits, key=len) if hits else None

    def locate(self, text: str, source: str | None = None, start: int | None = None, end: int | None = None) -> Located:
        """Where ``text`` lies (see the module's docstring), looked for once per distinct context."""
        key = (text, source, start, end)
        if key not in self._found:
            self._found[key] = self._locate(text, source, start, end)
        return self._found[key]

    def _locate(self, text: str, source: str | None, start: int | None, end: int | None) -> Located:
        named = self.source(source)
        if named is not None and start is not None and end is not None and 0 <= start < end <= len(self.documents[named]):
            return Located(named, start, end, "given")
        if not text.strip():
            return Located(named, None, None, "not_located")
        order = ([named] if named else []) + [s for s in self.documents if s != named]
        for s in order:
            at = self.documents[s].find(text)
            if at >= 0:
                return Located(s, at, at + len(text), "exact")
        needle = fold(text, "tolerant")
        for s in order if needle.strip() else ():
            f = self._folds[s]
            at = f.text.find(needle)
            if at >= 0:
                return Located(s, f.where[at], f.where[at + len(needle) - 1] + 1, "tolerant")
        return Located(named, None, None, "not_located")
