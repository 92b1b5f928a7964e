"""The gold evidence's one home: each fold level, the word rule, figures and citations, and the
holds rule for spans, keywords and quotes, on hand-made texts with the expected values by hand."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from lab.evidence.holds import HOLD, Evidence, Passage, first_holding, holds, place_share
from lab.evidence.states import states_text, stated_keywords, unsupported_terms, words_not_in_spans
from lab.evidence.text import STOP, citations, content_words, figures, fold, fold_at, without_citations, words

LAB = Path(__file__).resolve().parents[2] / "lab"


def test_each_fold_level_by_hand():
    text = "The  \u201cEmber\u201d\u00a090 \u2014 **8,400** `EUR`"
    assert fold(text, "case") == "the  \u201cember\u201d\u00a090 \u2014 **8,400** `eur`"
    assert fold(text, "tolerant") == 'the "ember" 90 - 8,400 eur'
    assert fold(text, "words") == "the \u201cember\u201d 90 \u2014 **8,400** `eur`"  # NBSP separates words
    assert fold("I g n o r e it", "screen") == "Ignore it"
    # "case" composes a combining accent (whole-string NFC); "tolerant" folds one character at a time
    assert fold("Cre\u0300me", "case") == "cr\u00e8me"
    assert fold("Cre\u0300me", "tolerant") == "cre\u0300me"


def test_fold_at_maps_every_character_back():
    f = fold_at("A  *b*\n`C`", "tolerant")
    assert f.text == "a b c" and f.where == [0, 1, 4, 6, 8]
    w = fold_at("  Two\n\nWORDS", "words")
    assert w.text == "two words" and [w.where[i] for i in (0, 4, 8)] == [2, 7, 11]
    with pytest.raises(ValueError):
        fold_at("x", "case")


def test_words_content_words_and_figures():
    assert words("Don\u2019t pay 8,400 EUR for v2.1, e-mail us.") == ["don't", "pay", "8,400", "eur", "for", "v2.1",
                                                                     "e-mail", "us"]
    assert content_words("The kiln opened in 2014, and a Q was asked.") == {"kiln", "opened", "2014", "asked"}
    assert figures("From 1,200 to 3.5 in 2019.") == ["1,200", "3.5", "2019"]


def test_one_citation_grammar():
    assert citations("As [2] and [1, 3] say, and [4;5] and [ 6 ].") == [2, 1, 3, 4, 5]
    assert without_citations("It costs 90 [2; 3].") == "It costs 90  ."


def test_a_span_is_held_at_half_of_one_of_its_places():
    span = Evidence.span(("a.md", 100, 200), [("b.md", 0, 100)])
    assert place_share([("a.md", 40, 150)], ("a.md", 100, 200)) == 0.5
    assert holds(Passage(pieces=(("a.md", 40, 150),)), span)  # exactly HOLD
    assert not holds(Passage(pieces=(("a.md", 40, 149),)), span)
    assert holds(Passage(pieces=(("b.md", 0, 60),)), span)  # a twin
    assert holds(Passage(pieces=(("a.md", 100, 130), ("a.md", 170, 200))), span)  # a merged passage: 60 of 100
    assert not holds(Passage(text="the span's very text", pieces=()), span)  # offsets unknown: no span held
    assert HOLD == 0.5


def test_keywords_and_quotes_are_held_by_their_folds():
    kw = Evidence.keyword("Cr\u00e8me")
    assert holds(Passage("creme CRE\u0300ME"), kw)  # NFC, case
    assert not holds(Passage("cr eme"), kw)
    quote = Evidence.quote("The  Ember \u201890\u2019")
    assert holds(Passage("Yes: the ember '90' ships."), quote)  # whitespace, quotes, case
    assert not holds(Passage("anything"), Evidence.quote(""))  # an empty quote is held by nothing
    assert first_holding([Passage("no"), Passage("the ember '90'"), Passage("The Ember '90'")], quote) == 2
    assert first_holding([Passage("no")], quote) is None


def test_what_an_answer_states():
    assert stated_keywords("It is in BOISE.", ["Boise", "Idaho"]) == [True, False]
    assert states_text("The kilns opened in Ghent in 2014.", "opened its Ghent workshop in 2014")  # 3 of 4
    assert not states_text("It is a kiln maker.", "opened its Ghent workshop in 2014")
    sent = "The Ember 90 costs 8,400 euros."
    assert unsupported_terms("It costs 8400 euros [1; 2], says Marco Feltri in 2019.", sent, 10) == \
        ["2019", "Marco Feltri"]
    assert unsupported_terms("Marco and Anna Feltri said 1, 2, 3.", "", 2) == ["1", "2"]
    why = words_not_in_spans(["The Ember 90 costs 8,400 euros."], "It is sold for 9,100 euros by Feltri.",
                             "What does the Ember 90 cost?")
    assert why == "only 1 of the answer's 4 own words are in its span(s)"  # sold, 9,100, euros, feltri


def _word_lists(tree: ast.AST) -> list[set[str]]:
    """The word sets a module builds: ``{"The", "A", ...}`` literals and ``"a an ...".split()``."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Set) and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
            out.append({e.value for e in node.elts})
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "split" \
                and isinstance(node.func.value, ast.Constant) and isinstance(node.func.value.value, str):
            out.append(set(node.func.value.value.split()))
    return out


def test_one_home_for_the_text_rules():
    """The folds, the stop list, the citation and figure patterns are defined in lab/evidence
    alone: no other module defines a folding function, compiles a citation or figure pattern or
    keeps a list of function words."""
    found: dict[str, list[str]] = {"fold": [], "stop": [], "citation": [], "figure": []}
    for path in sorted(LAB.rglob("*.py")):
        rel = path.relative_to(LAB).as_posix()
        if rel.startswith("evidence/"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and re.search(r"(^|_)fold(ed)?(_|$)", node.name):
                found["fold"].append(f"{rel}:{node.name}")
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                if "\\[\\d+" in node.value or "\\[(\\d+" in node.value:
                    found["citation"].append(rel)
                if node.value == "\\d[\\d,.]*\\d|\\d":
                    found["figure"].append(rel)
        for listed in _word_lists(tree):
            if len(listed) >= 10 and sum(w.lower() in STOP for w in listed) >= 0.6 * len(listed):
                found["stop"].append(rel)
    # the Jaccard reranker's vocabulary is part of a component's definition (its scores are the
    # system under test, so a shared list would change every keyword-rerank run), and the
    # injection scan's English detector (a sentence of English holds some of its words) is no stop list
    assert found["stop"] == ["metrics/injection.py", "rag/postprocess.py"], found["stop"]
    assert found == {"fold": [], "stop": found["stop"], "citation": [], "figure": []}, found
