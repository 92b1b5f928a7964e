"""Equivalent spans: a golden span's text found elsewhere in crafted documents, offsets by hand."""

import pytest

from lab.evalsets.twins import Twins, find_twins, span_pattern, span_twins

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


@pytest.mark.parametrize("text, before, after, hay, hits", [
    ("he founded it", "", "", "She founded it. He founded it.", ["He founded it"]),  # word boundary at the start
    ("ounded it", "f", "", "She founded it.", ["ounded it"]),  # a span that starts mid-word matches mid-word
    ("costs 8,400 euros.", " ", "", "It costs 8,400 euros. It COSTS\t8,400   euros.", ["costs 8,400 euros.",
                                                                                    "COSTS\t8,400   euros."]),
    ("   ", "", "", "anything", None),  # no words: no pattern
])
def test_span_pattern(text, before, after, hay, hits):
    pattern = span_pattern(text, before, after)
    assert (None if pattern is None else [m.group() for m in pattern.finditer(hay)]) == hits


def test_span_twins_once_per_span_and_only_in_the_knowledge_base():
    out = span_twins([SPAN, SPAN, ("gone.md", 0, 5)], DOCS)
    assert list(out) == [SPAN] and out[SPAN].n == 3


def test_a_span_without_twins():
    assert find_twins(("other.md", 0, 16), {"other.md": DOCS["other.md"]}) == Twins([], 0)
