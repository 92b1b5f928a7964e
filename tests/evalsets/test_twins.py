"""Equivalent spans: a golden span's text found elsewhere in crafted documents, offsets by hand."""

import pytest

from lab.evalsets.twins import Twins, find_twins, occurrences, span_twins
from lab.evidence.text import Folded, fold_at

PARA = "The --save-exact option pins the exact version."
DOCS = {
    "install.md": "# Install\n\n" + PARA + "\n",  # the span: chars 11-58
    "config.md": "Options\n" + PARA.replace(" the exact", "\n  THE exact") + " More.",  # another line break, case
    "update.md": "intro. " + PARA + " And " + PARA,  # twice
    "other.md": "The --save-exact option pins the exact versions.",  # "versions.": other text, no twin
}
SPAN = ("install.md", 11, 11 + len(PARA))


def test_twins_by_hand():
    assert DOCS["install.md"][11:58] == PARA
    found = find_twins(SPAN, DOCS)
    # config.md: "Options\n" is 8 chars; its copy is 2 chars longer (a newline and two spaces for one
    # space); update.md: at 7 and at 7 + 47 + 5 = 59
    assert found == Twins([("config.md", 8, 8 + 49), ("update.md", 7, 54), ("update.md", 59, 106)], 3)
    assert DOCS["config.md"][8:57] == "The --save-exact option pins\n  THE exact version."


def test_the_limit_keeps_the_count():
    assert find_twins(SPAN, DOCS, limit=1) == Twins([("config.md", 8, 57)], 3)


@pytest.mark.parametrize("text, lead, trail, hay, hits", [
    ("he founded it", True, True, "She founded it. He founded it.", ["He founded it"]),  # a word boundary at the start
    ("ounded it", False, True, "She founded it.", ["ounded it"]),  # a span that starts mid-word matches mid-word
    ("costs 8,400 euros.", True, True, "It costs 8,400 euros. It COSTS\t8,400   euros.", ["costs 8,400 euros.",
                                                                                     "COSTS\t8,400   euros."]),
    ("8,400 euro", True, True, "8,400 euros", []),  # a word boundary at the end
    ("8,400 euro", True, False, "8,400 euros", ["8,400 euro"]),  # ... unless the span itself ends mid-word
    ("a a", True, True, "a a a a", ["a a", "a a"]),  # not overlapping, leftmost first
    ("   ", True, True, "anything", []),  # no words
])
def test_occurrences(text, lead, trail, hay, hits):
    assert [hay[a:b] for a, b in occurrences(text, hay, lead=lead, trail=trail)] == hits


def test_fold_keeps_each_words_offsets():
    f = fold_at("  Two\n\nWORDS here", "words")
    assert f == Folded("two words here", [2, 3, 4, 7, 7, 8, 9, 10, 11, 13, 13, 14, 15, 16])


def test_span_twins_once_per_span_and_only_in_the_knowledge_base():
    out = span_twins([SPAN, SPAN, ("gone.md", 0, 5)], DOCS)
    assert list(out) == [SPAN] and out[SPAN].n == 3


def test_a_span_without_twins():
    assert find_twins(("other.md", 0, 16), {"other.md": DOCS["other.md"]}) == Twins([], 0)


def test_the_boundaries_are_the_spans_own():
    docs = {"a.md": "She founded it. Xfounded it", "b.md": "He founded it, founded itself"}
    # "founded it" at 4-14 of a.md starts after a space and ends before ".": whole words only
    assert find_twins(("a.md", 4, 14), docs) == Twins([("b.md", 3, 13)], 1)
    # "ounded it" (5-14) starts mid-word: the twins may too ("Xfounded", b.md's "founded" twice);
    # it ends at a word boundary, so "itself" is not one
    assert find_twins(("a.md", 5, 14), docs) == Twins([("a.md", 18, 27), ("b.md", 4, 13)], 2)
    # a span with the whitespace before it (3-14): anchored at its first word, as without it
    assert find_twins(("a.md", 3, 14), docs) == find_twins(("a.md", 4, 14), docs)
