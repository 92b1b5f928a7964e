"""A documentation set's change logs, by their headings and titles (the sections and pages that
say what changed in one release), by their folder ("whatsnew/", "releases/") and by their entries'
form (an issue list's lines): sentences ``lab generate`` does not ask about
(:mod:`lab.evalsets.extract`)."""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Protocol, Sequence

from lab.evalsets.standalone import plain


class Block(Protocol):
    """What is read of a :class:`lab.evalsets.extract.Block`."""

    start: int
    end: int
    kind: str
    heading: str


#: A heading that names a release ("Version 5.2.1 — 2020-07-23", "2.11.1 (2018-05-05)", "v4.8",
#: "Psycopg 3.1.7", "[23.1.0](https://...) - 2023-04-06", "What's new in Celery 4.3 (rhubarb)",
#: "Change history for Celery 2.4", "4.3.0 RC2", "0.13 Series", "8.x Series", "pytest-7.2.1", "py.test
#: 2.0.1: bug fixes"): a version, after a name or none, then nothing, a date or a parenthesis, and a summary
#: after a colon or none. A numbered section ("1.2 Installing", "Step 1.2") is none.
_VERSION_HEADING = re.compile(
    r"^(?:(?:version|release|(?:changes|change\s+history|release\s+notes)\s+(?:in|for)|what'?s\s+new\s+in)\s+"
    r"(?:version\s+|[a-z][\w.-]*\s+)?"
    r"|(?!(?:step|part|chapter|section|appendix|figure|table|lesson|exercise)\b)[a-z][\w.-]*?(?:\s+|-(?=v?\d)))?v?\d+(?:\.(?:\d+|x\b))+"
    r"(?:[-.]?(?:a|b|c|rc|alpha|beta|dev|post)\d*|\s(?:rc|alpha|beta)\s?\d+)?(?:\s+series)?"
    r"(?:\s*[-\u2013\u2014:,/]?\s*(?:\d{4}[-/.]\d{1,2}[-/.]\d{1,2}|\d{1,2}\s+[A-Z][a-z]+\.?\s+\d{4}"
    r"|[A-Z][a-z]+\.?\s+\d{1,2},?\s+\d{4}|\([^()]*\)))?(?::\s.*)?$", re.I)
#: A heading that names a change log or a part of one ("Changelog", "Release notes", "Earlier
#: History"): in a change log, a section of it like a release's.
_LOG_HEADING = re.compile(r"^(?:(?:earlier|older|previous|past)\s+)?(?:history|change\s*log|change\s+history|changes|"
                          r"release\s+notes|releases|news|what'?s\s+new)$", re.I)
#: A change log's entry by its form, wherever it is: an issue's or a pull request's number, then a
#: colon and its title (":ghpull:`7106`: Changed the display order ...", "`347 <https://github.com/
#: o/r/issues/347>`_: Make ip.reset() work ...", "#1234: Fix ..."): what changed, not what is.
_ISSUE_ENTRY = re.compile(r"^\W*(?::(?:gh)?(?:issue|pull|pr|bug):`[^`]+`|`#?\d+\s*<[^>]*/(?:issues|pull)/\d+/?>`_{1,2}"
                          r"|#\d+)\s*:\s")
#: A folder of release notes by its name ("whatsnew/", "releases/", "release_notes/", "announce/",
#: "changelog/", "history/"): each page in it is one release's notes or its announcement. "news/"
#: and "changes/" are left alone: seen in no documentation set, and a company's news is no change log.
_RELEASE_FOLDER = re.compile(r"^(?:what'?s[-_ ]?new|releases?|release[-_ ]?notes|announce(?:ments?)?|change[-_ ]?logs?"
                             r"|history)$", re.I)
#: A page of one release by its own name (the file's, or its folder's where a site builder writes
#: ``NAME/index.html``): "3.6-announcement", "kickstarter-announcement", "whatsnew-5.2",
#: "changelog-4.4", "release-7.1.0" (Django REST framework's announcements are titled "Django REST
#: framework 3.6", a name of three words no heading rule takes: docs/own-documents.md#drf).
_RELEASE_PAGE = re.compile(r"^(?:v?\d+(?:\.\d+)+[-_ ]?(?:announcement|release[-_ ]?notes|notes|changes|changelog)"
                           r"|[\w.-]*[-_]announcements?|(?:release|whats[-_]?new|changes|changelog)[-_]?v?\d+(?:\.\d+)*)$",
                           re.I)
#: What a document's file name ends with, taken off before :data:`_RELEASE_PAGE` reads it.
_SUFFIXES = (".rst.txt", ".md.txt", ".ipynb.txt", ".txt", ".html", ".htm", ".rst", ".md", ".ipynb")
#: A change log has at least this many version headings, unless its title is one.
CHANGE_LOG_VERSIONS = 2


def _heading_style(text: str, block: Block) -> tuple:
    """What marks a heading's level: the number of ``#`` (Markdown), or the underline's character
    and whether an overline goes with it (reStructuredText, whose levels are the styles' order of
    first appearance), or the level an HTML page's heading has (``<h2>``: 2)."""
    if block.level:
        return ("h", block.level)
    lines = text[block.start:block.end].splitlines()
    first = lines[0].strip() if lines else ""
    if first.startswith("#") and len(lines) == 1:
        return ("#", len(first) - len(first.lstrip("#")))
    return (lines[-1].strip()[:1], len(lines) == 3)


def change_log(text: str, cut: Sequence[Block]) -> list[tuple[int, int]]:
    """The ``[start, end)`` ranges of ``text`` (cut into ``cut``, its
    :func:`lab.evalsets.extract.blocks`) that are a change log: each section headed by a
    release (:data:`_VERSION_HEADING`) or named as a change log or a part of one
    (:data:`_LOG_HEADING`: "Earlier History"), its subsections included ("Bug fixes" under
    "2.7.0 (2016-04-19)"), in a document with at least :data:`CHANGE_LOG_VERSIONS` release headings
    or whose title (its first heading) is one of them or names a change log (not "History"
    alone): a page of one release's notes ("What's new in Tornado 2.4" over "Sep 4, 2012",
    "What's new in Celery 4.3 (rhubarb)"). A change log's sentences say what changed in one release
    ("Fixed a crash when ..."), and asked as what the product does their answers are wrong
    (docs/own-documents.md#change-logs, docs/own-documents.md#release-pages)."""
    heads = [b for b in cut if b.kind == "heading"]
    titles = [plain(b.heading) for b in heads]
    versions = [bool(_VERSION_HEADING.match(t)) for t in titles]
    logs = [v or bool(_LOG_HEADING.match(t)) for t, v in zip(titles, versions)]  # a release's or a log's section
    titled = bool(heads) and (versions[0] or logs[0] and titles[0].lower() != "history")
    if sum(versions) < CHANGE_LOG_VERSIONS and not titled:
        return []  # a page titled "History" alone may be a feature's (cmd2's command history)
    levels: dict[tuple, int] = {}
    out: list[tuple[int, int]] = []
    open_at: tuple[int, int] | None = None  # (start, level) of the change log's open stretch
    for b, in_log in zip(heads, logs):
        style = _heading_style(text, b)
        level = style[1] if style[0] in ("#", "h") else levels.setdefault(style, len(levels) + 1)
        if open_at is not None and level <= open_at[1] and not in_log:
            out.append((open_at[0], b.start))
            open_at = None
        if in_log and (open_at is None or level <= open_at[1]):
            open_at = (b.start, level) if open_at is None else (open_at[0], level)
    if open_at is not None:
        out.append((open_at[0], len(text)))
    return out


def issue_entry(sentence: str) -> bool:
    """The sentence is a change log's entry by its form (:data:`_ISSUE_ENTRY`): an issue list
    ("Issues closed in the 0.11 development cycle") whatever its page is titled."""
    return bool(_ISSUE_ENTRY.match(sentence))


def release_folder(source: str) -> bool:
    """The document lies in a folder of release notes (:data:`_RELEASE_FOLDER`), at any depth of
    its path under the knowledge base: a page there is a change log whole, whatever its title
    ("Migrating Widgets to IPython 3" in IPython's ``whatsnew/``, pytest's sprint announcement);
    or its name, or its folder's, says it is one release's page (:data:`_RELEASE_PAGE`:
    ``community/3.6-announcement/index.html``)."""
    parts = PurePosixPath(source.replace("\\", "/")).parts
    if not parts:
        return False
    name = next((parts[-1][:-len(s)] for s in _SUFFIXES if parts[-1].lower().endswith(s)), parts[-1])
    return any(_RELEASE_FOLDER.match(part) for part in parts[:-1]) or \
        any(_RELEASE_PAGE.match(part) for part in (*parts[:-1], name))
