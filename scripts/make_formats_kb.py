"""Write knowledge-base-formats/: our knowledge base with its documents in the formats a real
one mixes, for the loaders' experiment (formats-mixed) and tests.

products/ become PDFs (one page per ~45 lines, so long sheets span pages), contracts/ DOCX,
company/ HTML (with a nav bar, a script and a style block the loader must drop), employees/ stay
markdown. broken/ holds an encrypted PDF and a corrupt one, which a run must skip and list.
The output is committed; rerun this only to regenerate it (needs fpdf2, python-docx, pypdf and
the DejaVu fonts: Debian's fonts-dejavu-core).

    .venv/bin/python scripts/make_formats_kb.py
"""

from __future__ import annotations

import html
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "knowledge-base"
DST = ROOT / "knowledge-base-formats"
FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
LINES_PER_PAGE = 45


def to_pdf(text: str, out: Path) -> None:
    from fpdf import FPDF

    pdf = FPDF(format="A4")
    pdf.set_auto_page_break(False)
    pdf.add_font("DejaVu", fname=FONT)
    pdf.set_font("DejaVu", size=9)
    lines = text.splitlines() or [""]
    for start in range(0, len(lines), LINES_PER_PAGE):
        pdf.add_page()
        for line in lines[start:start + LINES_PER_PAGE]:
            pdf.multi_cell(0, 5, line or " ", new_x="LMARGIN", new_y="NEXT")
    pdf.set_creation_date(__import__("datetime").datetime(2026, 1, 1))
    pdf.output(str(out))


def to_docx(text: str, out: Path) -> None:
    import docx

    d = docx.Document()
    for line in text.splitlines():
        if line.startswith("#"):
            d.add_heading(line.lstrip("#").strip(), level=min(line.count("#", 0, 4), 3))
        elif line.strip():
            d.add_paragraph(line)
    d.core_properties.created = __import__("datetime").datetime(2026, 1, 1)
    d.save(str(out))


def to_html(text: str, title: str, out: Path) -> None:
    body = []
    for line in text.splitlines():
        if line.startswith("#"):
            level = min(len(line) - len(line.lstrip("#")), 6)
            body.append(f"<h{level}>{html.escape(line.lstrip('#').strip())}</h{level}>")
        elif line.strip():
            body.append(f"<p>{html.escape(line)}</p>")
    out.write_text(
        "<!doctype html><html><head><meta charset='utf-8'><title>" + html.escape(title) + "</title>"
        "<style>body { font-family: sans-serif }</style><script>var tracking = 'not text';</script></head>"
        "<body><nav><a href='/'>Home</a></nav><main>\n" + "\n".join(body) + "\n</main></body></html>\n",
        encoding="utf-8")


def broken(folder: Path) -> None:
    from pypdf import PdfWriter

    folder.mkdir(parents=True, exist_ok=True)
    w = PdfWriter()
    w.add_blank_page(width=200, height=200)
    w.encrypt(user_password="secret", owner_password="secret")
    with open(folder / "encrypted.pdf", "wb") as fh:
        w.write(fh)
    (folder / "corrupt.pdf").write_bytes(b"%PDF-1.7\n this is not a PDF body \n%%EOF\n")


def main() -> None:
    if DST.exists():
        shutil.rmtree(DST)
    for path in sorted(SRC.rglob("*.md")):
        rel = path.relative_to(SRC)
        text = path.read_text(encoding="utf-8")
        top = rel.parts[0]
        out = DST / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        if top == "products":
            to_pdf(text, out.with_suffix(".pdf"))
        elif top == "contracts":
            to_docx(text, out.with_suffix(".docx"))
        elif top == "company":
            to_html(text, path.stem, out.with_suffix(".html"))
        else:
            shutil.copy(path, out)
    broken(DST / "broken")
    print(f"wrote {sum(1 for _ in DST.rglob('*') if _.is_file())} files under {DST}")


if __name__ == "__main__":
    main()
