"""An HTML page as the lab reads it: its visible text, block elements as line breaks and
``<script>``, ``<style>`` and the like left out, with its title, and beside the text (in no key:
the text is what every index key is made from) where its ``<pre>`` elements and its headings are.

The text keeps a literal block's lines and a heading's line but not what they were, so the
ranges say it: ``[start, end]`` for a ``<pre>`` element, ``[start, end, level]`` for a heading
(``<h1>`` to ``<h6>``), read by :func:`lab.evalsets.extract.blocks` as code and as headings, as it
reads a Markdown or reStructuredText page's markup. Without the headings a page's sections were
one, its questions were asked without their section, and a change log written as HTML (Scrapy's
``news.html``: "Scrapy 1.0.7 (2017-03-03)") was no change log (docs/own-documents.md#scrapy).
Each is looked for from where it begins in the text, not at the first line of its words: a
sidebar shows a page's title and sections before its body (docs/own-documents.md#mako).
"""

from __future__ import annotations

import bisect
from html.parser import HTMLParser
from typing import Any

HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}


class _TextOfHTML(HTMLParser):
    BLOCKS = {"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "section", "article", "table",
              "ul", "ol", "header", "footer", "blockquote", "pre", "hr", "nav", "main", "aside"}
    SKIP = {"script", "style", "noscript", "template", "head"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.skipping = 0
        self.title = ""
        self._in_title = False
        self.length = 0  # the characters in parts
        # where each <pre> element, and each heading, begins in "".join(parts), and its data
        self.pre: list[tuple[int, list[str]]] = []
        self._in_pre = 0
        self.heads: list[tuple[int, int, list[str]]] = []  # each heading's level, where it begins, and data
        self._in_head = False

    def _part(self, text: str) -> None:
        self.parts.append(text)
        self.length += len(text)

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        if tag == "title":
            self._in_title = True
        if tag in self.SKIP:
            self.skipping += 1
        elif tag in self.BLOCKS:
            self._part("\n")
        if tag in {"td", "th"}:
            self._part(" | ")
        if tag == "pre" and not self.skipping:
            self._in_pre += 1
            if self._in_pre == 1:
                self.pre.append((self.length, []))
        if tag in HEADINGS and not self.skipping and not self._in_pre:
            self.heads.append((HEADINGS[tag], self.length, []))
            self._in_head = True

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        if tag in self.SKIP:
            self.skipping = max(0, self.skipping - 1)
        elif tag in self.BLOCKS:
            self._part("\n")
        if tag == "pre":
            self._in_pre = max(0, self._in_pre - 1)
        if tag in HEADINGS:
            self._in_head = False

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        if not self.skipping:
            self._part(data)
            if self._in_pre:
                self.pre[-1][1].append(data)
            elif self._in_head:
                self.heads[-1][2].append(data)


def html_text(html: str) -> tuple[str, str]:
    """(visible text with block structure as line breaks, the page title)."""
    text, title, _ = html_read(html)
    return text, title


def html_read(html: str) -> tuple[str, str, list[list[int]]]:
    """(the visible text, the page title, the ``<pre>`` elements' and headings' ranges in the text)."""
    parser = _TextOfHTML()
    parser.feed(html)
    parser.close()
    raw = "".join(parser.parts)
    out = _normalised(raw)
    pre = _ranges(out, [data for _, data in parser.pre], _lines_at(raw, [at for at, _ in parser.pre]))
    heads = _ranges(out, [data for _, _, data in parser.heads], _lines_at(raw, [at for _, at, _ in parser.heads]),
                    one_line=True)
    marked = pre + [[*r, level] for r, (level, _, _) in zip(heads, parser.heads) if r is not None]
    return "\n".join(out).strip(), " ".join(parser.title.split()), sorted(marked)


def _normalised(text: str) -> list[str]:
    """Lines with their whitespace runs made one space, runs of blank lines made one."""
    out, blank = [], False
    for line in (" ".join(line.split()) for line in text.splitlines()):
        if line:
            out.append(line)
            blank = False
        elif not blank and out:
            out.append("")
            blank = True
    return out


def _lines_at(raw: str, offsets: list[int]) -> list[int]:
    """For each offset in ``raw`` (where an element begins), the line of :func:`_normalised`'s lines
    from which to look for it: the line of the first character at or after it that is no whitespace.
    So an element is looked for where it is, not at an earlier line of the same words (a sidebar's
    entry for a heading, a table of contents)."""
    firsts, n, blank, pos = [], 0, False, 0  # (raw offset after a line, its normalised line) of non-blank lines
    for line in raw.splitlines(keepends=True):
        pos += len(line)
        if line.split():
            firsts.append((pos, n))
            n, blank = n + 1, False
        elif not blank and n:
            n, blank = n + 1, True
    ends = [end for end, _ in firsts]
    return [firsts[i][1] if (i := bisect.bisect_right(ends, at)) < len(firsts) else n for at in offsets]


def _ranges(out: list[str], elements: list[list[str]], lines: list[int], one_line: bool = False) -> list:
    """Each element's ``[start, end)`` in the text made of ``out`` (its lines found in order from its
    line in ``lines``, blank lines between them skipped; the first line of ``out`` is at offset 0).
    ``one_line`` (headings): an element of one line, and a range, or None where it is not found, for
    every element."""
    starts, pos = [], 0
    for line in out:
        starts.append(pos)
        pos += len(line) + 1
    ranges: list = []
    for data, cursor in zip(elements, lines):
        want = [line for line in _normalised("".join(data)) if line]
        if not want or (one_line and len(want) > 1):
            if one_line:
                ranges.append(None)
            continue
        found = None
        for j in range(cursor, len(out)):
            if out[j] != want[0]:
                continue
            k, matched = j, 0
            while k < len(out) and matched < len(want):
                if out[k] == want[matched]:
                    matched += 1
                elif out[k]:
                    break
                k += 1
            if matched == len(want):
                found = [starts[j], starts[k - 1] + len(out[k - 1])]
                break
        if found is not None or one_line:
            ranges.append(found)
    return ranges
