"""PDF, DOCX and HTML loaders: text, page ranges, and unreadable files skipped and listed."""

from pathlib import Path

import pytest

from lab.config import PageChunker
from lab.rag.chunkers import chunk
from lab.rag.loaders import load_folder
from lab.rag.htmlpages import html_read, html_text
from lab.rag.loaders import PAGE_SEPARATOR, Unreadable, pages_of, read_docx, read_html, read_pdf


def make_pdf(path: Path, pages: list[str]) -> Path:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("Helvetica", size=11)
    for text in pages:
        pdf.add_page()
        for line in text.splitlines():
            pdf.cell(0, 8, line, new_x="LMARGIN", new_y="NEXT")
    pdf.output(str(path))
    return path


def make_docx(path: Path, paragraphs: list[str], table: list[list[str]] | None = None) -> Path:
    import docx

    d = docx.Document()
    for p in paragraphs:
        d.add_paragraph(p)
    if table:
        t = d.add_table(rows=len(table), cols=len(table[0]))
        for r, row in enumerate(table):
            for c, cell in enumerate(row):
                t.cell(r, c).text = cell
    d.save(str(path))
    return path


def test_pdf_pages_and_their_character_ranges(tmp_path):
    pdf = make_pdf(tmp_path / "sheet.pdf", ["Ember 90 kiln", "Costs 8400 euros\nShips in May"])
    text, meta = read_pdf(pdf)
    assert meta["n_pages"] == 2
    (n1, a1, b1), (n2, a2, b2) = meta["pages"]
    assert (n1, n2) == (1, 2) and text[a1:b1] == "Ember 90 kiln"
    assert text[a2:b2] == "Costs 8400 euros\nShips in May" and text[b1:a2] == PAGE_SEPARATOR
    assert pages_of(meta["pages"], a2, a2 + 5) == "2" and pages_of(meta["pages"], 0, b2) == "1-2"
    assert pages_of(meta["pages"], None, None) is None


def test_unreadable_pdfs_say_why(tmp_path):
    from pypdf import PdfWriter

    w = PdfWriter()
    w.add_blank_page(width=100, height=100)
    w.encrypt(user_password="pw")
    with open(tmp_path / "locked.pdf", "wb") as fh:
        w.write(fh)
    with pytest.raises(Unreadable, match="encrypted PDF"):
        read_pdf(tmp_path / "locked.pdf")
    (tmp_path / "junk.pdf").write_bytes(b"not a pdf at all")
    with pytest.raises(Unreadable, match="not a readable PDF"):
        read_pdf(tmp_path / "junk.pdf")
    blank = PdfWriter()
    blank.add_blank_page(width=100, height=100)
    with open(tmp_path / "scan.pdf", "wb") as fh:
        blank.write(fh)
    with pytest.raises(Unreadable, match="no extractable text in 1 page"):
        read_pdf(tmp_path / "scan.pdf")


def test_docx_paragraphs_and_tables(tmp_path):
    path = make_docx(tmp_path / "c.docx", ["Contract with Kettle Creek", "Term: 3 years"], [["Item", "Price"],
                                                                                        ["Ember 90", "8,400"]])
    text, _ = read_docx(path)
    assert text == "Contract with Kettle Creek\nTerm: 3 years\nItem | Price\nEmber 90 | 8,400"
    (tmp_path / "bad.docx").write_bytes(b"PK not really")
    with pytest.raises(Unreadable, match="not a readable DOCX"):
        read_docx(tmp_path / "bad.docx")


def test_html_keeps_visible_text_only():
    text, title = html_text("<html><head><title>About  us</title><style>p {}</style><script>var x = 1;</script>"
                            "</head><body><nav>Home</nav><h1>About</h1><p>We make <b>kilns</b> &amp; ovens.</p>"
                            "<table><tr><td>A</td><td>B</td></tr></table></body></html>")
    assert title == "About us"
    assert text == "Home\n\nAbout\n\nWe make kilns & ovens.\n\n| A | B"
    assert "var x" not in text


def test_an_html_pages_headings_and_pre_elements_are_said_beside_its_text():
    """The text keeps a heading's line and a <pre>'s lines but not what they were: the ranges say it,
    a heading's with its level (a Sphinx page's "¶" link is in its text), a sidebar's link of the
    same words no heading; the text itself (every index key's input) is as before."""
    html = ("<html><body><nav><p>Items</p></nav><h1>Items<a class='headerlink' href='#items'>¶</a></h1>"
            "<p>Scrapy supports several kinds of item.</p><h2>Item <code>Types</code></h2>"
            "<pre>x = 1\ny = 2</pre><p>Dictionaries are items.</p></body></html>")
    text, title, marked = html_read(html)
    assert (text, title) == html_text(html)
    assert text == "Items\n\nItems¶\n\nScrapy supports several kinds of item.\n\nItem Types\n\nx = 1\ny = 2\n\n" \
                   "Dictionaries are items."
    assert [(text[r[0]:r[1]], *r[2:]) for r in marked] == [("Items¶", 1), ("Item Types", 2), ("x = 1\ny = 2",)]


def test_an_html_heading_is_found_where_it_is_not_at_a_sidebar_line_of_its_words():
    """A page whose sidebar lists its sections by their words (Scrapy's "Page not found", "Index"):
    the heading's range is the heading's line, and a <pre> is its own lines, not the same words
    shown earlier."""
    html = ("<html><body><nav><p>Item Types</p><p>x = 1</p></nav><h1>Item Types</h1>"
            "<p>Scrapy supports several kinds of item.</p><pre>x = 1</pre></body></html>")
    text, _, marked = html_read(html)
    assert text == "Item Types\n\nx = 1\n\nItem Types\n\nScrapy supports several kinds of item.\n\nx = 1"
    assert [r[0] for r in marked] == [text.index("\n\nItem Types") + 2, text.rindex("x = 1")]
    assert [(text[r[0]:r[1]], *r[2:]) for r in marked] == [("Item Types", 1), ("x = 1",)]


def test_html_file_without_text_is_unreadable(tmp_path):
    (tmp_path / "e.html").write_text("<html><script>x()</script></html>")
    with pytest.raises(Unreadable, match="no visible text"):
        read_html(tmp_path / "e.html")


def test_a_mixed_folder_loads_and_lists_what_it_skipped(tmp_path):
    kb = tmp_path / "kb"
    (kb / "products").mkdir(parents=True)
    make_pdf(kb / "products" / "ember.pdf", ["Ember 90 kiln", "Costs 8400 euros"])
    make_docx(kb / "contract.docx", ["Signed in 2024"])
    (kb / "about.html").write_text("<p>Founded in 2009</p>")
    (kb / "notes.md").write_text("# Notes\nGhent workshop")
    (kb / "broken.pdf").write_bytes(b"%PDF-1.7 garbage")
    corpus = load_folder(kb, [".md", ".pdf", ".docx", ".html"], 10_000_000, False)
    assert [d.metadata["source"] for d in corpus.documents] == ["about.html", "contract.docx", "notes.md",
                                                               "products/ember.pdf"]
    assert len(corpus.skipped) == 1 and corpus.skipped[0].startswith("broken.pdf: not a readable PDF")
    assert list(corpus.pages) == ["products/ember.pdf"]
    nodes = chunk(corpus, PageChunker(name="page", chunk_size=1000, chunk_overlap=0), None)
    pdf_nodes = [n for n in nodes if n.metadata["source"] == "products/ember.pdf"]
    assert [n.get_content() for n in pdf_nodes] == ["Ember 90 kiln", "Costs 8400 euros"]
    assert [n.metadata["page"] for n in pdf_nodes] == ["1", "2"]
    assert all("page" not in n.metadata for n in nodes if n.metadata["source"] != "products/ember.pdf")
    text = corpus.documents[3].text
    assert all(text[n.start_char_idx:n.end_char_idx] == n.get_content() for n in pdf_nodes)


NOTEBOOK = {
    "nbformat": 4, "nbformat_minor": 5,
    "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
    "cells": [
        {"cell_type": "markdown", "metadata": {}, "source": ["# Kilns\n", "\n", "The Ember 90 fires at 1,280 C.\n"]},
        {"cell_type": "code", "execution_count": 1, "metadata": {}, "source": ["k = Kiln('Ember 90')\n", "k.fire()"],
         "outputs": [{"output_type": "stream", "name": "stdout", "text": ["firing\n"]},
                     {"output_type": "execute_result", "execution_count": 1, "metadata": {},
                      "data": {"text/plain": ["1280"], "image/png": "iVBORw0KGgo="}},
                     {"output_type": "display_data", "metadata": {}, "data": {"image/png": "iVBORw0KGgo="}},
                     {"output_type": "error", "ename": "KilnError", "evalue": "door open", "traceback": ["..."]}]},
        {"cell_type": "code", "execution_count": None, "metadata": {}, "source": "print('```')", "outputs": []},
        {"cell_type": "raw", "metadata": {}, "source": "The kiln needs a service every 300 firings."},
        {"cell_type": "markdown", "metadata": {}, "source": []},
    ],
}
NOTEBOOK_TEXT = ("# Kilns\n\nThe Ember 90 fires at 1,280 C.\n\n"
                 "```python\nk = Kiln('Ember 90')\nk.fire()\n```\n\n```\nfiring\n```\n\n```\n1280\n```\n\n"
                 "```\nKilnError: door open\n```\n\n````python\nprint('```')\n````\n\nThe kiln needs a service every 300 firings.\n")


def test_a_notebook_is_read_as_the_markdown_it_shows(tmp_path):
    """A .ipynb file, and a text file holding one (Sphinx's <name>.ipynb.txt), are read as their
    cells: Markdown as written, code and text outputs fenced, images left out; JSON that is no
    notebook stays a text file, and a broken notebook is skipped with the reason."""
    import json

    from lab.evalsets.extract import candidates

    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "kilns.ipynb").write_bytes(b"\xef\xbb\xbf" + json.dumps(NOTEBOOK, indent=1).encode())  # with a BOM
    (kb / "kilns.ipynb.txt").write_text(json.dumps(NOTEBOOK, indent=1))
    (kb / "settings.txt").write_text('{"cells": 3, "door": "open"}')
    (kb / "broken.ipynb").write_text('{"cells": [')
    (kb / "empty.ipynb").write_text(json.dumps({**NOTEBOOK, "cells": []}))
    corpus = load_folder(kb, [".ipynb", ".txt"], 10_000_000, False)
    texts = {d.metadata["source"]: d.text for d in corpus.documents}
    assert texts == {"kilns.ipynb": NOTEBOOK_TEXT, "kilns.ipynb.txt": NOTEBOOK_TEXT,
                     "settings.txt": '{"cells": 3, "door": "open"}'}
    assert [s.split(" (")[0] for s in corpus.skipped] == [
        "broken.ipynb: not a Jupyter notebook: invalid JSON", "empty.ipynb: no text in the notebook"]
    # the sentences a question can be asked of are the Markdown's and the raw cell's: no code, no output
    found = [NOTEBOOK_TEXT[c.start:c.end] for c in candidates("kilns.ipynb.txt", NOTEBOOK_TEXT)]
    assert found == ["The Ember 90 fires at 1,280 C.", "The kiln needs a service every 300 firings."]
