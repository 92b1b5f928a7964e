"""PDF, DOCX and HTML loaders: text, page ranges, and unreadable files skipped and listed."""

from pathlib import Path

import pytest

from lab.config import PageChunker
from lab.rag.chunkers import chunk
from lab.rag.loaders import load_folder
from lab.rag.loaders import PAGE_SEPARATOR, Unreadable, html_text, pages_of, read_docx, read_html, read_pdf


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
