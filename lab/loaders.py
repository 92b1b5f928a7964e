"""Readers for the document formats a knowledge base may mix: PDF, DOCX and HTML beside
markdown and plain text.

Each reader returns the document's text and extra metadata. A PDF's text is its pages' text
joined by a blank line, and ``pages`` lists each page's ``[start, end)`` character range, so
any chunk maps back to the pages it covers (chunk metadata ``page``: "3" or "3-4"). A file
that cannot be read (corrupt, encrypted without an empty password, no extractable text) raises
:class:`Unreadable`, which the loader turns into a skipped file, listed in the results and the
report, never dropped silently.
"""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path
from typing import Any

PAGE_SEPARATOR = "\n\n"
FORMATS = {".pdf": "pdf", ".docx": "docx", ".html": "html", ".htm": "html"}


class Unreadable(Exception):
    """A document the lab cannot get text out of; the message says why."""


def read_pdf(path: Path) -> tuple[str, dict]:
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(str(path))
        if reader.is_encrypted and not reader.decrypt(""):
            raise Unreadable("encrypted PDF (it needs a password): decrypt it first, e.g. qpdf --decrypt")
        texts = [(page.extract_text() or "").strip() for page in reader.pages]
    except Unreadable:
        raise
    except (PdfReadError, ValueError, KeyError, OSError) as exc:
        raise Unreadable(f"not a readable PDF ({type(exc).__name__}: {exc})") from None
    except Exception as exc:  # pypdf raises many kinds on damaged files
        if "decrypt" in str(exc).lower() or "encrypt" in str(exc).lower():
            raise Unreadable("encrypted PDF (it needs a password): decrypt it first, e.g. qpdf --decrypt") from None
        raise Unreadable(f"not a readable PDF ({type(exc).__name__}: {exc})") from None
    if not any(texts):
        raise Unreadable(f"no extractable text in {len(texts)} page(s): a scanned PDF? OCR it first")
    pages, parts, pos = [], [], 0
    for number, text in enumerate(texts, start=1):
        if parts:
            pos += len(PAGE_SEPARATOR)
        pages.append([number, pos, pos + len(text)])
        parts.append(text)
        pos += len(text)
    return PAGE_SEPARATOR.join(parts), {"pages": pages, "n_pages": len(texts)}


def read_docx(path: Path) -> tuple[str, dict]:
    try:
        import docx
        from docx.opc.exceptions import PackageNotFoundError
    except ImportError:  # pragma: no cover - a declared dependency
        raise Unreadable("python-docx is not installed") from None
    try:
        document = docx.Document(str(path))
    except (PackageNotFoundError, KeyError, ValueError, OSError) as exc:
        raise Unreadable(f"not a readable DOCX ({type(exc).__name__}: {exc})") from None
    except Exception as exc:  # zipfile.BadZipFile and friends
        raise Unreadable(f"not a readable DOCX ({type(exc).__name__}: {exc})") from None
    blocks = [p.text for p in document.paragraphs]
    for table in document.tables:
        for row in table.rows:
            blocks.append(" | ".join(cell.text.strip() for cell in row.cells))
    text = "\n".join(b for b in blocks).strip()
    if not text:
        raise Unreadable("no text in the DOCX")
    return text, {}


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

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        if tag == "title":
            self._in_title = True
        if tag in self.SKIP:
            self.skipping += 1
        elif tag in self.BLOCKS:
            self.parts.append("\n")
        if tag in {"td", "th"}:
            self.parts.append(" | ")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        if tag in self.SKIP:
            self.skipping = max(0, self.skipping - 1)
        elif tag in self.BLOCKS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        if not self.skipping:
            self.parts.append(data)


def html_text(html: str) -> tuple[str, str]:
    """(visible text with block structure as line breaks, the page title)."""
    parser = _TextOfHTML()
    parser.feed(html)
    parser.close()
    lines = [" ".join(line.split()) for line in "".join(parser.parts).splitlines()]
    out, blank = [], False
    for line in lines:
        if line:
            out.append(line)
            blank = False
        elif not blank and out:
            out.append("")
            blank = True
    return "\n".join(out).strip(), " ".join(parser.title.split())


def read_html(path: Path) -> tuple[str, dict]:
    raw = path.read_bytes()
    try:
        html = raw.decode("utf-8")
    except UnicodeDecodeError:
        html = raw.decode("latin-1")
    text, title = html_text(html)
    if not text:
        raise Unreadable("no visible text in the HTML")
    return text, ({"title": title} if title else {})


READERS = {"pdf": read_pdf, "docx": read_docx, "html": read_html}


def read(path: Path) -> tuple[str, dict]:
    return READERS[FORMATS[path.suffix.lower()]](path)


def pages_of(pages: list, start: int | None, end: int | None) -> str | None:
    """The page label ("3" or "3-4") of the characters ``[start, end)`` of a PDF's text."""
    if start is None or end is None or not pages:
        return None
    hit = [n for n, a, b in pages if a < end and start < b]
    if not hit:
        return None
    return str(hit[0]) if hit[0] == hit[-1] else f"{hit[0]}-{hit[-1]}"
