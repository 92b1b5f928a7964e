"""The fact-bearing sentences of a knowledge base, chosen by rule: what ``lab generate``'s
extractive mode asks questions about (:mod:`lab.evalsets.generate`).

A document is cut into blocks (:func:`blocks`) by its markup, Markdown, reStructuredText or the
text of an HTML page alike:

- ``code``: a fenced (```` ``` ````, ``~~~``) or indented block, a reStructuredText literal block
  (after a paragraph ending in ``::``, or under ``.. code-block::``, ``.. code::``,
  ``.. sourcecode::``), a ``<pre>`` element (in an HTML page's text, where the tags are gone, the
  ranges the loader found them at: ``literal``);
- ``transcript``: a code block, or a run of lines, where a line starts with a shell prompt
  (``$``, ``#``, ``>``, ``PS>``, ``>>>``): a console session and its output ("restoring
  <Snapshot of ...> at 2015-05-08 21:40:19"), whose timestamps and counts are the example's, not
  facts of the product;
- ``table``: grid and simple tables (a simple table's rows up to its closing border), pipe
  tables, option lists (lines that start with a flag,
  ``--target DIR  ...``) and a MyST definition list's descriptions (``: Goes a step further ...``,
  whose subject is the term above);
- ``heading``: a Markdown ``#`` line, a reStructuredText title with its under- (and over-)line;
- ``comment``: a reStructuredText comment or target (``..`` not followed by a directive's ``::``),
  an HTML comment (``<!-- ... -->``, as Markdown sources carry a generator's note), a MyST
  directive's colon fence (``:::{note}``, ``:::``: its body is read as what it is), a footnote's
  definition (``[^win]: ...``);
- ``prose``: everything else, list items and admonitions (``.. note::``) included.

Only prose is read for sentences (:func:`prose_sentences`): lines joined across hard wraps, cut
after ``.``, ``!`` or ``?`` before a capital, a digit or markup (an abbreviation ends nothing).
A sentence is a *candidate* (:func:`candidates`) when it can stand alone as the answer to a
question (:func:`lab.evalsets.standalone.why_not`): 6 to 45 words, ending in a full stop, not opening with a word that points elsewhere
("It", "This", "For example", ...) nor leaning on other text inside ("these keys", "to enable
this", "for details"), not a walkthrough's step, the authors' news, a caption without a verb, or
a mention of some things none named, and stating a fact: a figure, a term in code markup, an option,
a name, or a rule ("must", "default", "only", ...). Its category follows from what it states
(a period or date: ``temporal``; another figure: ``numerical``; else ``direct_fact``). No
sentence of a change log is a candidate (:func:`lab.evalsets.releases.change_log`), nor of a page in
a folder of release notes (:func:`lab.evalsets.releases.release_folder`), nor an issue list's entry
(:func:`lab.evalsets.releases.issue_entry`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Iterator, Sequence

from lab.evalsets.releases import change_log, issue_entry, release_folder
from lab.evalsets.standalone import CODE_TERM, plain, why_not
from lab.evidence.text import fold


_FENCE = re.compile(r"^\s*(```|~~~)")
_CODE_DIRECTIVE = re.compile(r"^\s*\.\.\s+(?:code-block|code|sourcecode|literalinclude|highlight|parsed-literal)::", re.I)
_DIRECTIVE = re.compile(r"^\s*\.\.\s+[\w:-]+::")
_ADMONITION = re.compile(r"^\s*\.\.\s+(?:note|warning|tip|important|caution|attention|hint|danger|error|seealso|"
                         r"admonition|versionadded|versionchanged|deprecated)::", re.I)
_COMMENT = re.compile(r"^\s*\.\.(?:\s|$)")
_UNDERLINE = re.compile(r"^\s*([=\-~^\"'`#*+_:.])\1{2,}\s*$")
_MD_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+\S")
_TABLE = re.compile(r"^\s*(?:\+[-=+]{2,}|\|.*\||=+(?:\s+=+)+\s*$)")
#: A reStructuredText simple table's border ("=====  ======"): its rows, header and body, are
#: the table's up to the border that closes it.
_SIMPLE_BORDER = re.compile(r"^\s*=+(?:\s+=+)+\s*$")
_SIMPLE_ROWS = 400
_OPTION = re.compile(r"^\s*(?:``)?(?:-\w|--[\w-]+)(?:[ =][^\s]+)?(?:,\s*--?[\w-]+(?:[ =][^\s]+)?)*(?:\s{2,}|\t|$)")
_PROMPT = re.compile(r"^\s*(?:\$|#|>|PS[^>\n]*>|>>>|[A-Za-z]:\\[^>\n]*>)\s+\S")
_PRE_OPEN, _PRE_CLOSE = re.compile(r"<pre\b", re.I), re.compile(r"</pre>", re.I)
_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d{1,3}[.)]|#\.)\s+")
#: MyST Markdown: a directive's colon fence (":::{note}" opening, ":::" closing), a footnote's
#: definition ("[^win]: Requires ..."), a definition list's description (": Goes a step further
#: ...", its subject the term on the line above).
_COLON_FENCE = re.compile(r"^\s*:{3,}")
_FOOTNOTE = re.compile(r"^\s*\[\^[^\]]+\]:")
_DEFINITION = re.compile(r"^\s*:\s+\S")

_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]*_`]*\s+(?=[A-Z0-9`\"'(*\[_<{:-])")
_BACKTICKS = re.compile(r"`+")
_ABBREV = re.compile(r"(?<![^\s(])(?:e\.g|i\.e|etc|vs|no|nr|approx|incl|dr|mr|mrs|ms|st|cf|resp|esp|fig|ver)\.$", re.I)
#: A number standing alone ("14 copies", "1,300", "2.5"), not part of a name ("AES-256", "v2").
_NUMBER = re.compile(r"(?<![\w.-])\d[\d,.]*(?![\w-])")
_PERIOD = re.compile(r"\b\d{1,2}:\d\d\b|\b(?:1[89]|20)\d\d\b|\b(?:January|February|March|April|May|June|July|August|September|"
                     r"October|November|December)\b|\b\d+\s*(?:ms|milliseconds?|seconds?|minutes?|hours?|days?|weeks?|"
                     r"months?|years?)\b")  # case kept: "you may" is no month
@dataclass(frozen=True)
class Block:
    """A run of a document's lines and what they are (see the module's docstring), under the
    nearest heading above it."""

    start: int
    end: int
    kind: str
    heading: str
    level: int = 0  # a heading's level where the page's markup gives it (an HTML page's <h1> to <h6>)


@dataclass(frozen=True)
class Candidate:
    """A sentence a question can be asked about: its place, its section, and the category its
    content suggests."""

    source: str
    start: int
    end: int
    text: str
    heading: str
    category: str


def _lines(text: str) -> list[tuple[int, int, str]]:
    out, pos = [], 0
    for line in text.splitlines(keepends=True):
        out.append((pos, pos + len(line), line.rstrip("\r\n")))
        pos += len(line)
    return out


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t")) if line.strip() else 10 ** 6


def _flavour(source: str) -> str:
    name = PurePosixPath(source).name.lower()
    return "rst" if name.endswith((".rst", ".rst.txt", ".rest")) else "md"


def blocks(text: str, source: str = "", literal: Sequence[Sequence[int]] = ()) -> list[Block]:
    """``text`` cut into blocks by its markup (the module's docstring); ``source``, the file's
    name, says whether an indented block is code (Markdown) or a quotation (reStructuredText);
    ``literal``: ``[start, end)`` ranges known to be literal blocks though the text does not say
    so, and ``[start, end, level]`` ranges known to be headings (an HTML page's ``<pre>`` elements
    and ``<h1>`` to ``<h6>``, :attr:`lab.rag.loaders.Corpus.literal`; a heading's "¶" link left out)."""
    rst = _flavour(source) == "rst"
    lines = _lines(text)
    out: list[Block] = []
    heading = ""
    i = 0
    marked = sorted((r[0], r[1]) for r in literal if len(r) == 2)
    titled = {r[0]: r[2] for r in literal if len(r) > 2}  # a heading's start: its level

    def add(a: int, b: int, kind: str) -> None:
        if b > a:
            start, end = lines[a][0], lines[b - 1][1]
            out.append(Block(start, end, kind, heading))

    def indented_run(k: int, base: int) -> int:
        """The line after the indented block starting at or after line ``k`` (blank lines inside)."""
        while k < len(lines) and not lines[k][2].strip():
            k += 1
        while k < len(lines) and (not lines[k][2].strip() or _indent(lines[k][2]) > base):
            k += 1
        return k

    def _simple_table_end(k: int) -> int | None:
        """The line after the reStructuredText simple table whose top border is line ``k``: its
        rows run to a border followed by a blank line (or the end); None when no border closes
        it within :data:`_SIMPLE_ROWS` lines."""
        for j in range(k + 1, min(len(lines), k + _SIMPLE_ROWS)):
            if _SIMPLE_BORDER.match(lines[j][2]) and (j + 1 == len(lines) or not lines[j + 1][2].strip()):
                return j + 1
        return None

    def code_kind(a: int, b: int) -> str:
        return "transcript" if any(_PROMPT.match(lines[k][2]) for k in range(a, b)) else "code"

    while i < len(lines):
        line = lines[i][2]
        stripped = line.strip()
        if not stripped:
            i += 1
            continue
        while marked and marked[0][1] <= lines[i][0]:
            marked.pop(0)
        if marked and marked[0][0] < lines[i][1]:  # a line of a known literal block: up to its end
            k = i
            while k < len(lines) and lines[k][0] < marked[0][1]:
                k += 1
            add(i, k, code_kind(i, k))
            i = k
            continue
        if lines[i][0] in titled:  # an HTML page's heading
            heading = stripped.rstrip("¶").strip()
            out.append(Block(lines[i][0], lines[i][1], "heading", heading, titled[lines[i][0]]))
            i += 1
            continue
        nxt = lines[i + 1][2] if i + 1 < len(lines) else ""
        # headings: "# Title", and a title under- (and over-)lined
        if _MD_HEADING.match(line) and not rst:
            heading = stripped.lstrip("#").strip()
            add(i, i + 1, "heading")
            i += 1
            continue
        if _UNDERLINE.match(line) and i + 2 < len(lines) and _UNDERLINE.match(lines[i + 2][2]) and lines[i + 1][2].strip():
            heading = lines[i + 1][2].strip()
            add(i, i + 3, "heading")
            i += 3
            continue
        if nxt and _UNDERLINE.match(nxt) and len(nxt.strip()) >= max(3, len(stripped) - 2) and not _UNDERLINE.match(line):
            heading = stripped
            add(i, i + 2, "heading")
            i += 2
            continue
        if stripped.startswith("<!--"):  # an HTML comment (Markdown's, a page's): up to its "-->"
            k = i
            while k < len(lines) and "-->" not in lines[k][2]:
                k += 1
            k = min(k + 1, len(lines))
            add(i, k, "comment")
            i = k
            continue
        fence = _FENCE.match(line)
        if fence or _PRE_OPEN.search(line):  # up to its closing fence, or </pre> (on its own line or this one)
            k = i + 1 if fence else i
            while k < len(lines) and not (lines[k][2].strip().startswith(fence.group(1)) if fence
                                          else _PRE_CLOSE.search(lines[k][2])):
                k += 1
            k = min(k + 1, len(lines))
            add(i, k, code_kind(i, k))
            i = k
            continue
        if _CODE_DIRECTIVE.match(line):
            k = indented_run(i + 1, _indent(line))
            add(i, k, code_kind(i, k))
            i = k
            continue
        if (m := _DIRECTIVE.match(line)) is not None:
            k = indented_run(i + 1, _indent(line))
            if _ADMONITION.match(line):  # its body, on its line and indented under it, is read as a text of its own
                body = lines[i][0] + m.end() + len(line[m.end():]) - len(line[m.end():].lstrip())
                if lines[k - 1][1] > body:
                    if rst:  # a code block, a target or a directive inside it is what it is
                        out.extend(Block(body + b.start, body + b.end, b.kind, heading)
                                   for b in blocks(text[body:lines[k - 1][1]], source))
                    else:
                        out.append(Block(body, lines[k - 1][1], "prose", heading))
            else:  # an image, a table, a table of contents: no sentence of its own
                add(i, k, "comment")
            i = k
            continue
        if _COMMENT.match(line):
            k = indented_run(i + 1, _indent(line))
            add(i, k, "comment")
            i = k
            continue
        if _SIMPLE_BORDER.match(line) and (end := _simple_table_end(i)) is not None:
            add(i, end, "table")
            i = end
            continue
        if _TABLE.match(line) or _OPTION.match(line):
            k = i
            while k < len(lines) and lines[k][2].strip() and (_TABLE.match(lines[k][2]) or _OPTION.match(lines[k][2])
                                                             or _indent(lines[k][2]) > _indent(line)):
                k += 1
            add(i, max(k, i + 1), "table")
            i = max(k, i + 1)
            continue
        if not rst and _COLON_FENCE.match(line):  # the fence alone: its body is read as what it is
            add(i, i + 1, "comment")
            i += 1
            continue
        if not rst and ((footnote := _FOOTNOTE.match(line)) or _DEFINITION.match(line)):  # up to a blank or unindented line
            k = i + 1
            while k < len(lines) and lines[k][2].strip() and _indent(lines[k][2]) > _indent(line):
                k += 1
            add(i, k, "comment" if footnote else "table")
            i = k
            continue
        if _PROMPT.match(line) and (not rst or not stripped.startswith("#")):
            k = i
            while k < len(lines) and lines[k][2].strip():
                k += 1
            add(i, k, "transcript")
            i = k
            continue
        if not rst and _indent(line) >= 4 and (i == 0 or not lines[i - 1][2].strip()) and not _LIST_ITEM.match(line):
            k = indented_run(i, 3)
            add(i, k, code_kind(i, k))
            i = k
            continue
        # a paragraph (or a list item): up to a blank line, a new list item or a line that opens a block
        k = i + 1
        while k < len(lines):
            s = lines[k][2]
            if not s.strip() or _LIST_ITEM.match(s) or _FENCE.match(s) or _TABLE.match(s) or _UNDERLINE.match(s) \
                    or (k + 1 < len(lines) and _UNDERLINE.match(lines[k + 1][2]) and s.strip()) or _PROMPT.match(s) \
                    or (not rst and (_COLON_FENCE.match(s) or _FOOTNOTE.match(s) or _DEFINITION.match(s))):
                break
            k += 1
        add(i, k, "prose")
        if stripped.endswith("::") or lines[k - 1][2].rstrip().endswith("::"):  # a literal block follows
            j = indented_run(k, _indent(lines[i][2]))
            if j > k:
                add(k, j, code_kind(k, j))
            k = max(k, j)
        i = k
    return out


def prose_sentences(text: str, block: Block) -> Iterator[tuple[int, int]]:
    """The sentences of a prose block as offsets into ``text``: hard-wrapped lines read as one,
    list markers left out, whitespace trimmed."""
    a = block.start
    body = text[block.start:block.end]
    m = _LIST_ITEM.match(body)
    if m:
        a += m.end()
    pos = a
    for cut in list(_SENTENCE_END.finditer(text, a, block.end)) + [None]:
        stop = cut.start() if cut is not None else block.end
        piece = text[pos:stop]
        if cut is not None and (_ABBREV.search(text[pos:stop].rstrip("\"')]"))
                                or len(_BACKTICKS.findall(text, pos, stop)) % 2):  # inside inline code: ":sql:`COPY ... TO`"
            continue
        s, e = pos, stop
        while s < e and text[s].isspace():
            s += 1
        while e > s and text[e - 1].isspace():
            e -= 1
        if e > s and piece.strip():
            yield s, e
        pos = cut.end() if cut is not None else block.end


def document_sentences(text: str, cut: Sequence[Block]) -> list[tuple[int, int]]:
    """A document's prose sentences in order, from its blocks ``cut``: the sentences a candidate
    is drawn from, and its passage (the sentences around it) as ``lab generate`` and ``lab audit
    --check`` read it."""
    return [(a, b) for block in cut if block.kind == "prose" for a, b in prose_sentences(text, block)]


def _category(sentence: str) -> str:
    if _PERIOD.search(sentence):
        return "temporal"
    plain = CODE_TERM.sub(" ", sentence)
    return "numerical" if _NUMBER.search(plain) else "direct_fact"


#: A folder or a file named for examples or a tutorial: "wiki-example.txt", "tutorials/",
#: "json_tutorial.md", "examples/advanced/".
_EXAMPLE_PAGE = re.compile(r"(?:^|[-_. ])(?:examples?|tutorials?)(?:$|[-_. ])", re.I)


def example_page(source: str) -> bool:
    """The document is an example's or a tutorial's page by its path (a folder or its file's stem,
    :data:`_EXAMPLE_PAGE`): its sentences are tried after every other page's by the coverage rule
    (:func:`lab.evalsets.questions.coverage_order`), since a question read from one asks about the
    example's own app more often than about the product (docs/own-documents.md#example-pages)."""
    path = PurePosixPath(source.replace("\\", "/"))
    return any(_EXAMPLE_PAGE.search(part) for part in (*path.parts[:-1], path.stem.split(".")[0]))


#: Sentences left out, per reason, that :func:`candidates` keeps as examples.
LEFT_OUT_EXAMPLES = 3
#: A title, then a dash or a colon and what its section holds: where the title is one of the
#: document's headings, a table of contents' entry ("Using the Beaker Cache Backend - Includes
#: arguments understood by Beaker."), a link to a section, no answer (docs/own-documents.md#mako).
_ENTRY = re.compile(r"^(.{3,80}?)\s+[-–—:]\s+[A-Z]")


def candidates(source: str, text: str, cut: Sequence[Block] | None = None,
               left_out: dict[str, dict] | None = None) -> list[Candidate]:
    """Every candidate sentence of a document, in document order (the module's docstring);
    ``cut``: its :func:`blocks`, when the caller has them already; ``left_out``: where each prose
    sentence that is no candidate is counted under :func:`why_not`'s reason (``{"n", "examples"}``,
    the first :data:`LEFT_OUT_EXAMPLES` of each), or "a change log" (:func:`change_log`, a page in
    a :func:`release_folder`), for :func:`lab.evalsets.census.census`."""
    out = []
    cut = blocks(text, source) if cut is None else cut
    logs = [(0, len(text))] if release_folder(source) else change_log(text, cut)
    titles = {fold(b.heading, "words") for b in cut if b.kind == "heading"}
    for block in cut:
        if block.kind != "prose":
            continue
        for a, b in prose_sentences(text, block):
            sentence = text[a:b]
            why = "a change log" if any(s <= a < e for s, e in logs) or issue_entry(sentence) else why_not(sentence)
            if why is None and (entry := _ENTRY.match(plain(sentence))) and fold(entry.group(1), "words") in titles:
                why = "points elsewhere"
            if why is None:
                out.append(Candidate(source, a, b, sentence, block.heading, _category(sentence)))
            else:
                left_out_count(left_out, why, source, sentence)
    return out


def left_out_count(left_out: dict[str, dict] | None, why: str, source: str, sentence: str) -> None:
    """Count ``sentence`` of ``source``, no candidate, under ``why`` in ``left_out`` (None: nothing),
    keeping the first :data:`LEFT_OUT_EXAMPLES` of each reason for the census."""
    if left_out is not None:
        entry = left_out.setdefault(why, {"n": 0, "examples": []})
        entry["n"] += 1
        if len(entry["examples"]) < LEFT_OUT_EXAMPLES:
            entry["examples"].append({"source": source, "sentence": " ".join(sentence.split())[:200]})


def in_example(text: str, source: str, start: int, end: int, literal: Sequence[Sequence[int]] = ()) -> str | None:
    """The kind of block (``code``, ``transcript``, ``table``) a span lies mostly in, or None
    when it lies in prose: a question about an example's output asks about the example.
    ``literal``: as for :func:`blocks`."""
    for b in blocks(text, source, literal):
        if b.kind in ("code", "transcript", "table") and min(end, b.end) - max(start, b.start) > (end - start) / 2:
            return b.kind
    return None
