"""Loading a knowledge base: a folder of documents -> a :class:`Corpus` of LlamaIndex Documents.

Documents carry ``source`` (path relative to the knowledge base) and ``doc_type`` (its top-level
folder). Markdown and plain text are read as UTF-8; PDF, DOCX, HTML (:mod:`lab.rag.htmlpages`) and
Jupyter notebooks (also a notebook's JSON in a text file, :mod:`lab.rag.notebooks`) through the
readers below.

Each reader returns the document's text and extra metadata. A PDF's text is its pages' text
joined by a blank line, and ``pages`` lists each page's ``[start, end)`` character range, so
any chunk maps back to the pages it covers (chunk metadata ``page``: "3" or "3-4"). A file
that cannot be read (corrupt, encrypted without an empty password, no extractable text) raises
:class:`Unreadable`, which the loader turns into a skipped file, listed in the results and the
report, never dropped silently.
"""

from __future__ import annotations

import hashlib
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from llama_index.core.schema import Document

from lab.errors import DataError
from lab.rag.htmlpages import html_read
from lab.rag.notebooks import as_notebook, read_notebook

log = logging.getLogger(__name__)

PAGE_SEPARATOR = "\n\n"
FORMATS = {".pdf": "pdf", ".docx": "docx", ".html": "html", ".htm": "html", ".ipynb": "ipynb"}


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


def read_html(path: Path) -> tuple[str, dict]:
    raw = path.read_bytes()
    try:
        html = raw.decode("utf-8")
    except UnicodeDecodeError:
        html = raw.decode("latin-1")
    text, title, literal = html_read(html)
    if not text:
        raise Unreadable("no visible text in the HTML")
    return text, ({"title": title} if title else {}) | ({"literal": literal} if literal else {})


def read_ipynb(path: Path) -> tuple[str, dict]:
    """A Jupyter notebook as the Markdown it shows (:mod:`lab.rag.notebooks`)."""
    try:
        return read_notebook(path.read_bytes()), {}
    except ValueError as exc:
        raise Unreadable(str(exc)) from None


READERS = {"pdf": read_pdf, "docx": read_docx, "html": read_html, "ipynb": read_ipynb}


def read(path: Path) -> tuple[str, dict]:
    return READERS[FORMATS[path.suffix.lower()]](path)


def pages_of(pages: list, start: int | None, end: int | None) -> str | None:
    """The page label ("3" or "3-4") of the characters ``[start, end)`` of a PDF's text."""
    if start is None or end is None or not (hit := [n for n, a, b in pages if a < end and start < b]):
        return None
    return str(hit[0]) if hit[0] == hit[-1] else f"{hit[0]}-{hit[-1]}"


# ---------------------------------------------------------------------------------------------
# The folder

METADATA_KEYS = ("source", "doc_type", "file_name")


@dataclass
class Corpus:
    root: Path
    documents: list[Document]
    skipped: list[str] = field(default_factory=list)  # "path: why"
    pages: dict[str, list] = field(default_factory=dict)  # PDF source -> [[page, start, end], ...]
    #: HTML source -> [[start, end], ...] of its ``<pre>`` elements and [[start, end, level], ...] of its
    #: headings in the text (in no key: :mod:`lab.rag.htmlpages`)
    literal: dict[str, list] = field(default_factory=dict)

    @property
    def content_hash(self) -> str:
        """sha256 over (source, text) of every document, in order."""
        h = hashlib.sha256()
        for doc in self.documents:
            h.update(doc.metadata["source"].encode() + b"\x00" + doc.text.encode() + b"\x00")
        return h.hexdigest()

    @property
    def n_chars(self) -> int:
        return sum(len(d.text) for d in self.documents)


#: Folders deeper than this under the knowledge base are an error (a runaway tree, not documents).
MAX_DEPTH = 64


def walk(root: Path, extensions: set[str], include_hidden: bool = False) -> tuple[list[Path], list[str]]:
    """The files under ``root`` with one of ``extensions``, sorted by path, and what was skipped.

    One rule for files and folders alike: a name starting with a dot is hidden and skipped unless
    ``include_hidden``; a symbolic link is followed only when it resolves inside ``root`` (a link
    to ``/etc/hostname`` or to another project is skipped); a link to a folder inside ``root`` is
    skipped too (that folder is loaded where it is), and so are broken links and link loops. Every
    skip is returned as ``"path: why"``, for the results and the report's banner.
    """
    real_root = root.resolve()
    files: list[Path] = []
    skipped: list[str] = []

    def visit(folder: Path, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise DataError(f"knowledge base {root}: {folder} is nested more than {MAX_DEPTH} folders deep",
                            hint="flatten the folder tree, or point data.knowledge_base at a shallower folder")
        for entry in sorted(folder.iterdir(), key=lambda p: p.name):
            rel = printable_name(entry.relative_to(root).as_posix())  # what is said of it: always text
            if entry.name.startswith(".") and not include_hidden:
                kind = "folder" if entry.is_dir() else "file"
                skipped.append(f"{rel}: hidden {kind} (set loader.include_hidden: true to load it)")
                continue
            if entry.is_symlink():
                try:
                    target = entry.resolve(strict=True)
                except (OSError, RuntimeError):
                    skipped.append(f"{rel}: broken symbolic link or link loop")
                    continue
                if not target.is_relative_to(real_root):
                    skipped.append(f"{rel}: symbolic link to {target}, outside the knowledge base")
                    continue
                if target.is_dir():
                    where = target.relative_to(real_root).as_posix() or "."
                    skipped.append(f"{rel}: link to a folder of the knowledge base, loaded as {where}")
                    continue
            if entry.is_dir():
                visit(entry, depth + 1)
            elif entry.is_file() and entry.suffix.lower() in extensions:
                if not utf8_name(entry.relative_to(root).as_posix()):  # a Latin-1 name on a UTF-8 system
                    raise DataError(f"knowledge base {root}: the name '{rel}' is not UTF-8 (Latin-1?): a document's "
                                    "name is its source in every run file, and must be text",
                                    hint=f"rename it in UTF-8 (e.g. convmv -f latin1 -t utf8 --notest -r '{root}', "
                                         "or mv), or move it out of the knowledge base")
                files.append(entry)

    visit(root, 1)
    return sorted(files), skipped


def utf8_name(name: str) -> bool:
    """Whether a file name read from the file system is text: on a UTF-8 system, bytes that are not
    UTF-8 come back as lone surrogates (Python's ``surrogateescape``), which no file can hold."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def printable_name(name: str) -> str:
    """A file name as it can be printed: its undecodable bytes as ``\xe9``."""
    return os.fsencode(name).decode("utf-8", "backslashreplace")


def _looks_utf16(raw: bytes) -> bool:
    """A UTF-16 byte-order mark, or NULs in every other byte of the head (UTF-16 without one)."""
    if raw[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return True
    head = raw[:2000]
    return len(head) >= 4 and (head[1::2].count(0) > 0.8 * len(head[1::2]) or head[0::2].count(0) > 0.8 * len(head[0::2]))


def load_folder(root: Path, extensions: Sequence[str], max_file_bytes: int, embed_metadata: bool,
                include_hidden: bool = False) -> Corpus:
    """Load every file :func:`walk` finds under ``root``, sorted by path.

    Text files are read as UTF-8; a byte-order mark at the start is dropped (it is not text, and
    kept it would shift every character offset, and so every golden span, by one).
    """
    if not root.exists():
        raise DataError(f"knowledge base {root} does not exist",
                        hint="check the path given with --kb (make: KB=) or the config's data.knowledge_base")
    if not root.is_dir():
        raise DataError(f"knowledge base {root} is not a folder", hint="point data.knowledge_base at a folder")
    exts = {e.lower() for e in extensions}
    paths, skipped = walk(root, exts, include_hidden)
    for line in skipped:
        log.warning("skipping %s", line)
    if not paths:
        raise DataError(
            f"knowledge base {root} has no files ending in {', '.join(sorted(exts))}",
            hint="add documents, or set loader.extensions",
        )
    documents, pages, literal = [], {}, {}
    for path in paths:
        rel = path.relative_to(root).as_posix()
        size = path.stat().st_size
        if size > max_file_bytes:
            raise DataError(
                f"{path}: {size:,} bytes is over the limit of {max_file_bytes:,}",
                hint="split the file, or raise loader.max_file_bytes in the config",
            )
        extra: dict = {}
        if path.suffix.lower() in FORMATS:
            try:
                text, extra = read(path)
            except Unreadable as exc:
                skipped.append(f"{rel}: {exc}")
                log.warning("skipping %s: %s", path, exc)
                continue
            if "pages" in extra:
                pages[rel] = extra.pop("pages")
            if "literal" in extra:
                literal[rel] = extra.pop("literal")
            documents.append(_document(rel, path, text, embed_metadata))
            continue
        raw = path.read_bytes()
        nul = raw.find(b"\x00")
        if nul >= 0 and _looks_utf16(raw):
            raise DataError(
                f"{path}: UTF-16 text (the lab reads text files as UTF-8)",
                hint=f"convert it: iconv -f UTF-16 -t UTF-8 '{path}' > converted.md, and replace the file",
            )
        if nul >= 0:
            raise DataError(
                f"{path}: binary content in a text file (NUL byte at offset {nul})",
                hint="remove the file, or give it the extension of its real format",
            )
        try:
            text = raw.decode("utf-8").removeprefix("\ufeff")  # a byte-order mark is not text
        except UnicodeDecodeError as exc:
            line = raw[: exc.start].count(b"\n") + 1
            raise DataError(
                f"{path} line {line}: not UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start})",
                hint="re-save the file as UTF-8 (e.g. iconv -f latin1 -t utf-8)",
            ) from None
        if (shown := as_notebook(text)) is not None:  # a notebook's JSON saved as text: Sphinx's <name>.ipynb.txt
            text = shown
        if not text.strip():
            skipped.append(f"{rel}: empty")
            log.warning("skipping empty file %s", path)
            continue
        documents.append(_document(rel, path, text, embed_metadata))
    if not documents:
        raise DataError(f"knowledge base {root}: no file has text ({len(skipped)} skipped: {'; '.join(skipped[:3])})",
                        hint="add documents with text")
    return Corpus(root=root, documents=documents, skipped=skipped, pages=pages, literal=literal)


def _document(rel: str, path: Path, text: str, embed_metadata: bool) -> Document:
    parts = rel.split("/")
    metadata = {"source": rel, "doc_type": parts[0] if len(parts) > 1 else "", "file_name": path.name}
    return Document(
        text=text,
        id_=rel,
        metadata=metadata,
        excluded_embed_metadata_keys=[] if embed_metadata else list(METADATA_KEYS) + ["page"],
        excluded_llm_metadata_keys=[],
    )
