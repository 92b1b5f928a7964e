"""``lab audit``: the findings on a crafted bad eval set (every finding's exact rows and numbers),
the detectable difference against hand arithmetic, and both views of the findings.

The knowledge base is four documents; the set is ten rows, each planted with one fault:

====  ==========================================================================
q01   fine (keyword 2015 in company/about.md)
q02   exact duplicate of q01 (case and whitespace differ)
q03   fine; q04 its near duplicate (hand-made vectors, cosine 0.96)
q05   span at wrong offsets; its content is at 15-61 of products/cropwing.md
q06   span naming a document the knowledge base lacks; content in employees/sunita.md
q07   keyword "Cropwing S8 Heavy" in the question
q08   keyword "Harrowfield", in all four documents
q09   keyword "1,200 drones", in no document (and a <script> in the question)
q10   no keywords, one span; the fake support check says no for it
====  ==========================================================================
"""

from __future__ import annotations

import copy
import json
import math
from html.parser import HTMLParser

import numpy as np
import pytest

from lab.evalsets.audit import audit_eval_set, detectable_difference
from lab.evalsets.evalset import load_eval_set
from lab.report.audit import audit_lines, checked_lines, render_audit

ABOUT = "Harrowfield Aerial was founded in 2015 in Boise. In 2019 it raised a Series B round led by Prairie Capital."
HISTORY = "Harrowfield opened a second site in Fargo."
CROPWING = "Product sheet. The Cropwing S8 Heavy carries a 40 litre tank. Harrowfield sells it with the Care Plus plan."
SUNITA = "Sunita Rao is the Corporate Controller at Harrowfield."
DOCS = {"company/about.md": ABOUT, "company/history.md": HISTORY, "products/cropwing.md": CROPWING,
        "employees/sunita.md": SUNITA}
TANK = "The Cropwing S8 Heavy carries a 40 litre tank."  # at 15 in CROPWING ("Product sheet. " is 15 chars)
ROLE = "Sunita Rao is the Corporate Controller"  # at 0 in SUNITA, 38 chars
SCRIPT_Q = "How many drones were sold in 2023 <script>alert(1)</script>?"


def _row(id_: str, question: str, category: str, keywords: list[str] | None = None, refs: list | None = None) -> dict:
    row = {"id": id_, "question": question, "reference_answer": f"The answer to {id_}.", "category": category}
    if keywords is not None:
        row["keywords"] = keywords
    if refs is not None:
        row["references"] = [{"source": s, "content": c, "start_index": a, "end_index": b} for s, c, a, b in refs]
    return row


ROWS = [
    _row("q01", "When was Harrowfield Aerial founded?", "direct_fact", ["2015"]),
    _row("q02", "  when was HARROWFIELD   aerial founded? ", "direct_fact", ["2015"]),
    _row("q03", "Who led the Series B round?", "relationship", ["Prairie Capital"]),
    _row("q04", "Which investor led the Series B?", "relationship", ["Prairie Capital"]),
    _row("q05", "How big is the tank on the Cropwing S8 Heavy?", "numerical", ["40 litre"],
         [("products/cropwing.md", TANK, 0, len(TANK))]),
    _row("q06", "What is Sunita Rao's role?", "people", ["Corporate Controller"],
         [("employees/sunita-rao.md", ROLE, 0, len(ROLE))]),
    _row("q07", "Which plan does Harrowfield sell with the Cropwing S8 Heavy?", "relationship",
         ["Care Plus", "Cropwing S8 Heavy"]),
    _row("q08", "Which company employs Sunita Rao?", "people", ["Harrowfield"],
         [("employees/sunita.md", SUNITA, 0, len(SUNITA))]),
    _row("q09", SCRIPT_Q, "numerical", ["1,200 drones"]),
    _row("q10", "Who is the Corporate Controller?", "people", None, [("employees/sunita.md", SUNITA, 0, len(SUNITA))]),
]

# the rows with spans answer from them (the generator's rules doubt an answer its spans do not hold)
for _r, _answer in zip([ROWS[i] for i in (4, 5, 7, 9)], ["It carries a 40 litre tank.", "Corporate Controller.",
                                                          "Harrowfield.", "Sunita Rao."]):
    _r["reference_answer"] = _answer

# q01 and q02 share a vector (an exact pair is not listed again as near); q03 . q04 = 0.96 (both unit
# length: 0.96^2 + 0.28^2 = 1); every other question has an axis of its own.
VECTORS = {"q01": [1, 0, 0], "q02": [1, 0, 0], "q03": [0, 1, 0], "q04": [0, 0.96, 0.28]}

# direct_fact MRR 1, .5, 0, .5 and relationship 1, 1; one question with MRR n/a, not in the set
SAMPLES = [{"id": i, "category": c, "metrics": {"mrr": m}} for i, c, m in [
    ("q01", "direct_fact", 1.0), ("q02", "direct_fact", 0.5), ("q03", "direct_fact", 0.0),
    ("q04", "direct_fact", 0.5), ("q05", "relationship", 1.0), ("q07", "relationship", 1.0), ("zz", "people", None)]]
Z = 1.959964 + 0.841621  # z_0.975 + z_0.80


def write_set(tmp_path, rows: list[dict]):
    path = tmp_path / "set.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return load_eval_set(path, None).rows


@pytest.fixture
def findings(tmp_path):
    rows = write_set(tmp_path, ROWS)
    by_question = {r.question: r.id for r in rows}
    calls: list[tuple[str, list[str]]] = []

    def embed(questions: list[str]) -> np.ndarray:
        assert questions == [r.question for r in rows]  # one call, every question, in order
        out = np.zeros((len(questions), 3 + len(questions)))
        for i, q in enumerate(questions):
            vec = VECTORS.get(by_question[q])
            out[i, :3] = vec or 0
            out[i, 3 + i] = 0 if vec else 1
        return out

    def support(question: str, answer: str, evidence: list[str]) -> bool | None:
        calls.append((by_question[question], evidence))
        return {"q10": False, "q06": None}.get(by_question[question], True)

    f = audit_eval_set(rows, DOCS, source="eval_sets/set.jsonl", embed=embed, support=support, run_samples=SAMPLES)
    f["_calls"] = calls
    return f


def ids(items: list[dict]) -> list[str]:
    return [i["id"] for i in items]


def test_duplicates_exact_and_near(findings):
    d = findings["duplicates"]
    assert [(i["id"], i["line"], i["other"]) for i in d["exact"]] == [("q02", 2, "q01")]
    assert d["n_exact"] == 1 and d["exact"][0]["detail"] == "same question as q01 (line 1)"
    assert [(i["id"], i["line"], i["other"]) for i in d["near"]] == [("q04", 4, "q03")]  # not q01-q02 again
    assert d["near"][0]["similarity"] == pytest.approx(0.96, abs=1e-4)
    assert d["n_near"] == 1 and d["threshold"] == 0.92 and d["near_checked"]


def test_coverage_per_category_document_and_folder(findings):
    c = findings["coverage"]
    assert [(x["name"], x["n"], x["small"]) for x in c["categories"]] == [
        ("direct_fact", 2, True), ("numerical", 2, True), ("people", 3, True), ("relationship", 3, True)]
    # q01-q04 by keyword; q05 and q08/q10 by their spans (q07's two keywords are both in cropwing)
    assert {d["source"]: d["n"] for d in c["documents"]} == {
        "company/about.md": 4, "company/history.md": 0, "employees/sunita.md": 2, "products/cropwing.md": 2}
    assert c["untouched"] == ["company/history.md"]
    assert c["folders"] == [
        {"folder": "company", "n_documents": 2, "n_untouched": 1, "n_questions": 4},
        {"folder": "employees", "n_documents": 1, "n_untouched": 0, "n_questions": 2},
        {"folder": "products", "n_documents": 1, "n_untouched": 0, "n_questions": 2}]
    # q06's only span names a missing document; q09's keyword is nowhere
    assert [(i["id"], i["detail"]) for i in c["rows_touching_none"]] == [
        ("q06", "its spans name no document of the knowledge base"), ("q09", "no one document holds all its keywords")]


def test_span_errors_with_their_fixes(findings):
    s = findings["spans"]
    assert s["n_spans"] == 4 and s["n_errors"] == 2 and s["n_fixable"] == 2 and s["n_not_checked"] == 0
    wrong, missing = s["errors"]
    assert (wrong["id"], wrong["line"], wrong["kind"], wrong["reference"]) == ("q05", 5, "mismatch", 0)
    assert wrong["fix"] == {"source": "products/cropwing.md", "start_index": 15, "end_index": 15 + 46}
    assert CROPWING[15:61] == TANK  # the fix holds
    assert wrong["detail"] == ("references.0: the content does not match products/cropwing.md chars 0-46; "
                               "the content is at 15-61")
    assert (missing["id"], missing["kind"], missing["source"]) == ("q06", "missing_document", "employees/sunita-rao.md")
    assert missing["fix"] == {"source": "employees/sunita.md", "start_index": 0, "end_index": 38}
    assert missing["detail"].endswith("the content is in employees/sunita.md at 0-38")


def test_keyword_findings(findings):
    k = findings["keywords"]
    assert [(i["id"], i["keywords"]) for i in k["in_question"]] == [("q07", ["Cropwing S8 Heavy"])]
    assert [(i["id"], i["detail"]) for i in k["common"]] == [("q08", "Harrowfield in 4 of 4 documents")]
    assert k["common_terms"] == {"Harrowfield": 4} and k["common_share"] == 0.5
    assert [(i["id"], i["line"], i["keywords"]) for i in k["nowhere"]] == [("q09", 9, ["1,200 drones"])]
    assert [(i["id"], i["has_spans"], i["detail"]) for i in k["without"]] == [
        ("q10", True, "no keywords; 1 golden span(s)")]
    assert (k["n_in_question"], k["n_common"], k["n_nowhere"], k["n_without"], k["n_without_spans"]) == (1, 1, 1, 1, 0)


def test_support_checks_rows_with_spans_and_counts_failures_apart(findings):
    s = findings["support"]
    assert [c[0] for c in findings["_calls"]] == ["q05", "q06", "q08", "q10"]  # the rows with spans
    assert dict(findings["_calls"])["q05"] == [TANK]  # evidence: the span contents
    assert ids(s["unsupported"]) == ["q10"] and ids(s["failed"]) == ["q06"]
    assert (s["n_checked"], s["n_supported"], s["n_unsupported"], s["n_failed"], s["n_skipped"]) == (4, 2, 1, 1, 6)


def test_detectable_difference_by_hand(findings):
    p = findings["power"]
    # direct_fact: mean 0.5, squared deviations .25 + 0 + .25 + 0 = .5, sd = sqrt(.5 / 3) = sqrt(1/6);
    # rho = 0.5 makes sd_d = sd * sqrt(2 * 0.5) = sd; MDE = 2.801585 * sqrt(1/6) / sqrt(4) = 0.5719
    direct = p["categories"][0]
    assert direct["name"] == "direct_fact" and direct["n"] == 4
    assert direct["sd"] == pytest.approx(math.sqrt(1 / 6)) and direct["sd_d"] == pytest.approx(direct["sd"])
    assert direct["mde"] == pytest.approx(Z * math.sqrt(1 / 6) / 2, abs=1e-5)
    assert direct["mde"] == pytest.approx(0.5719, abs=1e-4)
    # relationship: 1, 1: sd 0, nothing to detect
    assert p["categories"][1] == {"name": "relationship", "n": 2, "sd": 0.0, "sd_d": 0.0, "mde": 0.0}
    # overall: 1, .5, 0, .5, 1, 1: mean 2/3, squared deviations 1/9 + 1/36 + 4/9 + 1/36 + 1/9 + 1/9 = 5/6,
    # sd = sqrt(5/6 / 5) = sqrt(1/6); MDE = 2.801585 * sqrt(1/6) / sqrt(6) = 2.801585 / 6 = 0.4669
    assert p["overall"]["n"] == 6 and p["overall"]["mde"] == pytest.approx(Z / 6, abs=1e-5)
    assert (p["n_unscored"], p["n_not_in_set"]) == (1, 1)  # "zz": MRR n/a, and not in the set
    assert "rho = 0.5" in p["assumption"] and p["rho"] == 0.5
    assert detectable_difference([0.3])["mde"] is None  # one value has no sd


def test_summary_problems_worst_first(findings):
    s = findings["summary"]
    assert (s["n_rows"], s["n_categories"], s["n_documents"], s["n_spans"], s["ok"]) == (10, 4, 4, 4, False)
    assert s["problems"] == [
        "golden spans that do not match the knowledge base: 2 (2 with a fix)",
        "exact duplicate questions: 1",
        "rows with keywords in no document (never found): 1",
        "reference answers their spans do not support: 1",
        "near-duplicate pairs (cosine >= 0.92): 1",
        "rows with keywords in over 50% of documents (any retrieval finds them): 1",
        "rows with keywords in the question (they favour BM25): 1",
        "documents touched by no question: 1 of 4",
        "categories under 10 questions: 4 (direct_fact, numerical, people, relationship)",
        "support checks that failed (no verdict): 1",
        "rows without keywords (keyword metrics n/a): 1",
    ]
    f = {k: v for k, v in findings.items() if k != "_calls"}
    assert json.loads(json.dumps(f)) == f  # JSON-serialisable as it is


def test_a_sound_set_is_ok_and_checks_without_a_model_say_so(tmp_path):
    fixed = copy.deepcopy(ROWS[4])
    fixed["references"][0].update(start_index=15, end_index=61)
    rows = write_set(tmp_path, [ROWS[0], ROWS[2], fixed])
    f = audit_eval_set(rows, DOCS, source="set.jsonl")
    assert f["summary"]["ok"] and f["spans"]["n_errors"] == 0
    assert f["duplicates"]["near_checked"] is False and f["support"] == {"checked": False} and f["power"] is None
    assert "not checked: near duplicates (no embedding model); support of reference answers (`lab audit --check` asks the LLM); " \
           "detectable differences (no run's samples)" in audit_lines(f)


@pytest.mark.parametrize("content, start, end, fix, says", [
    # past the end of the document, content found: the fix moves it
    (TANK, 0, 200, {"start_index": 15, "end_index": 61}, "end_index 200 is past the end"),
    # the content twice (at 15 and, after CROPWING and a space, at 108): the occurrence nearest the offsets
    (TANK, 100, 146, {"start_index": 108, "end_index": 154}, "at 108-154"),
    # found only folded (case, whitespace): the fix stores the document's own spelling
    ("the cropwing  S8 HEAVY carries", 0, 30, {"start_index": 15, "end_index": 44,
                                               "content": "The Cropwing S8 Heavy carries"}, "at 15-44"),
    # nowhere in the document: no fix
    ("The Cropwing S9 carries a tank", 15, 45, None, "the content is nowhere in it"),
])
def test_span_fixes(tmp_path, content, start, end, fix, says):
    row = _row("s1", "How big is the Cropwing tank?", "numerical", ["40 litre"],
               [("products/cropwing.md", content, start, end)])
    docs = {**DOCS, "products/cropwing.md": CROPWING + " " + TANK}
    (err,) = audit_eval_set(write_set(tmp_path, [row]), docs, source="s")["spans"]["errors"]
    assert err["fix"] == (None if fix is None else {"source": "products/cropwing.md", **fix})
    assert says in err["detail"]


def test_common_means_more_than_the_share(tmp_path):
    """"the" is in 2 of the 4 documents (cropwing's "the Care Plus", sunita's "the Corporate"): at
    share 0.5 that is not more than half; at 0.25 it is."""
    rows = write_set(tmp_path, [_row("k1", "Who is the Controller?", "people", ["the"])])
    assert audit_eval_set(rows, DOCS, source="s")["keywords"]["common"] == []
    common = audit_eval_set(rows, DOCS, source="s", common_share=0.25)["keywords"]["common"]
    assert [(c["id"], c["detail"]) for c in common] == [("k1", "the in 2 of 4 documents")]


class Tables(HTMLParser):
    """Cell texts of every table (keyed by its id or data-finding), the banner's list items, and
    the SVG's texts, so the tests read the page as a reader does."""

    def __init__(self, html: str):
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.items: list[str] = []
        self.svg: list[str] = []
        self._table = self._cell = None
        self._where: list[str] = []
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table":
            self._table = a.get("id") or a.get("data-finding")
            self.tables[self._table] = []
        elif tag == "tr" and self._table:
            self.tables[self._table].append([])
        elif tag in ("td", "th") and self._table:
            self._cell = []
        elif tag in ("li", "text", "svg"):
            self._where.append(tag)

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.tables[self._table][-1].append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "table":
            self._table = None
        elif tag in ("li", "text", "svg") and self._where:
            self._where.pop()

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)
        elif self._where[-1:] == ["li"]:
            self.items.append(data.strip())
        elif self._where[-1:] == ["text"]:
            self.svg.append(data.strip())


def test_page_shows_the_findings(findings):
    html = render_audit(findings)
    page = Tables(html)
    assert "<h1>Audit of set.jsonl</h1>" in html
    assert "10 rows · 4 categories · 4 documents · 4 golden spans" in html
    assert page.items == findings["summary"]["problems"] and "<b>NOT OK</b>" in html
    cats = {r[0].split()[0]: r[1:] for r in page.tables["categories"][1:]}
    assert cats["direct_fact"] == ["2", "4", "0.408", "0.572"]  # n, n with MRR, sd, MDE
    assert cats["people"] == ["3", "0", "-", "-"] and cats["overall"] == ["10", "6", "0.408", "0.467"]
    assert "⚠ small (under 10)" in page.tables["categories"][1][0]
    docs = {r[0]: r[1:] for r in page.tables["documents"][1:]}
    assert docs["company/history.md untouched"] == ["company", "0"] and docs["company/about.md"] == ["company", "4"]
    assert 'class="untouched" data-source="company/history.md"' in html
    assert page.svg[:4] == ["Questions per folder", "company", "4", "· 2 docs, 1 untouched"]

    def finding(name: str) -> list[list[str]]:
        return page.tables[name][1:]

    assert [r[0] for r in finding("spans")] == ["q05", "q06"]
    assert finding("spans")[0][-1] == "start_index 15, end_index 61"
    assert finding("spans")[1][-1] == "source employees/sunita.md, start_index 0, end_index 38"
    assert finding("exact") == [["q02", "2", "when was HARROWFIELD aerial founded?", "same question as q01 (line 1)"]]
    for name, expected in [("near", "q04"), ("nowhere", "q09"), ("common", "q08"), ("in_question", "q07"),
                           ("unsupported", "q10"), ("failed", "q06"), ("without", "q10")]:
        assert [r[0] for r in finding(name)] == [expected], name
    assert "size" not in page.tables  # an empty finding has no table


def test_page_escapes_and_is_self_contained(findings):
    html = render_audit(findings)
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<script" not in html and "<link" not in html and "http://" not in html and "https://" not in html


def test_the_support_check_says_its_verdict_for_every_row(findings):
    # 4 rows with spans checked: 2 supported, q10 not, q06 without a verdict; 6 rows without spans
    assert ("support check (--check): 2 of 4 reference answers supported by their spans, 1 not, 1 without a verdict; "
            "6 rows without spans not checked") in audit_lines(findings)


def test_rows_the_generators_checks_doubt_are_listed(tmp_path):
    rows = [
        _row("d1", "What does products/cropwing.md say about the tank?", "direct_fact", ["40 litre"]),
        _row("d2", "How big is the Cropwing tank in litres?", "numerical", None,
             [("products/cropwing.md", "40 litre tank.", 42, 56)]),
        {**_row("d3", "How many litres does the Cropwing S8 Heavy tank hold?", "numerical", ["40 litre"]),
         "reference_answer": "A large tank."},
        _row("d4", "When was Harrowfield Aerial founded?", "temporal", ["2015"]),
    ]
    rows[3]["reference_answer"] = "In 2015."
    path = tmp_path / "set.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    f = audit_eval_set(load_eval_set(path, None).rows, DOCS, source="set.jsonl")
    assert [(r["id"], r["detail"]) for r in f["checks"]["rows"]] == [
        ("d1", "the question names a file or path: products/cropwing.md"),
        ("d2", "spans of 3 words in all, without '2'"),  # "The answer to d2." names 2; the span does not
        ("d3", "a numerical question whose answer holds no number"),
    ]
    assert ("rows the generator's rules doubt (a span in an example, a question its span cannot answer, a file named, "
            "a short span, a category the answer contradicts, an answer its spans do not hold): 3"
            in f["summary"]["problems"])
    assert "Rows the rules doubt: 3" in audit_lines(f)


def test_the_audit_says_what_checked_it_and_what_none_of_that_sees(tmp_path):
    """Rows whose spans lie in a console transcript, or whose question asks for a kind of answer
    its span does not hold, are doubted by rule and listed first; the headline names what
    checked the set (rules, the model, a person) and what none of them can see."""
    doc = ("Backups\n=======\n\nThe daily backup keeps 14 copies of every file.\n\n.. code-block:: console\n\n"
           "    $ kiln backup --now\n    Backup finished at 2024-01-02 10:00 in 42 s\n")
    at = doc.index("Backup finished")
    rows = [_row("t1", "When did the backup finish?", "temporal", None,
                 [("backup.rst", doc[at:at + 43], at, at + 43)]),
            _row("t2", "How many copies does the daily backup keep?", "numerical", None,
                 [("backup.rst", "The daily backup keeps 14 copies of every file.", 20, 67)]),
            _row("t3", "How many files does the daily backup skip?", "numerical", None,
                 [("backup.rst", "Backups", 0, 7)])]
    rows[1]["reference_answer"] = "14 copies of every file."
    path = tmp_path / "set.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    f = audit_eval_set(load_eval_set(path, None).rows, {"backup.rst": doc}, source="set.jsonl")
    assert [(r["id"], r["detail"]) for r in f["checks"]["rows"]] == [
        ("t1", "its span lies in a transcript in backup.rst: an example's output, not a fact of the documents"),
        ("t3", "the question asks for a number; its answer holds none")]
    lines = audit_lines(f)
    assert lines[1].startswith("checked by rules: span offsets against the documents;") and \
        lines[1].endswith("(2 rows doubted)")
    one = checked_lines({**f["summary"]["checked_by"], "rule_doubts": 1})[0]
    assert one.endswith("(1 row doubted)")
    assert lines[2:4] == ["checked by the model: not asked (lab audit --check)", "read by a person: 0 of 3 rows"]
    assert lines[4].startswith("not seen by any of these: a reference answer that is wrong")
    listed = [line for line in lines if not line.startswith(" ") and ": " in line and line.split(":")[0][0].isupper()]
    assert listed[0] == "Rows the rules doubt: 2"  # the first rows listed
    html = render_audit(f)
    assert "no score will be wrong" not in html and "read by a person: 0 of 3 rows" in html


def test_terminal_lines_mention_every_problem(findings):
    lines = audit_lines(findings)
    assert lines[0] == ("audit of eval_sets/set.jsonl: 10 rows, 4 categories, 4 documents, 4 golden spans: NOT OK")
    one = {**findings, "summary": {**findings["summary"], "n_rows": 1, "n_categories": 1, "n_documents": 1, "n_spans": 1}}
    assert audit_lines(one)[0] == "audit of eval_sets/set.jsonl: 1 row, 1 category, 1 document, 1 golden span: NOT OK"
    for problem in findings["summary"]["problems"]:
        assert f"  - {problem}" in lines
    assert "  q05 (line 5): references.0: the content does not match products/cropwing.md chars 0-46; the content " \
           "is at 15-61" in lines
    assert "documents no question touches: company/history.md" in lines
    assert any(line.startswith("smallest MRR difference detectable at 80% power: overall 0.467 (n=6); "
                               "direct_fact 0.572 (n=4)") for line in lines)
    many = copy.deepcopy({k: v for k, v in findings.items() if k != "_calls"})
    many["keywords"]["in_question"] *= 5
    lines = audit_lines(many, more="reports/audit.html")
    assert "Keywords in the question: 5" in lines and "  ... 2 more in reports/audit.html" in lines


@pytest.mark.browser
def test_page_loads_clean_in_a_browser(findings, tmp_path):
    """In headless Chromium: no console error, no request but the file itself, the chart drawn."""
    from pages import Page, browser

    path = tmp_path / "audit.html"
    path.write_text(render_audit(findings), encoding="utf-8")
    with browser() as b:
        page = Page(b, path)
        assert page.errors == [] and page.requests == [path.resolve().as_uri()]
        assert page.locator("svg.chart rect.bar").count() == 3  # company, employees, products
        widths = page.eval_on_selector_all("svg.chart rect.bar", "r => r.map(x => x.getBBox().width)")
        assert widths == [300.0, 150.0, 150.0]  # 4, 2 and 2 questions on a 300-pixel scale
        assert page.locator("tr.untouched").count() == 1 and page.title() == "audit of set.jsonl · lab"


def test_cli_audit_import_export_on_the_fixture_project(project):
    """The verbs end to end: audit with the real embedding model and a run's samples, a CSV
    import, a ragas export, and bad input that exits 2 and writes nothing."""
    import json

    from runs import lab

    assert lab(project, "run", "small-retrieval").returncode == 0
    p = lab(project, "audit", "eval.jsonl", "--kb", "kb", "--run", "small-retrieval")
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("audit of eval.jsonl: 6 rows") and "smallest MRR difference detectable" in p.stdout
    assert "<html" in (project / "eval.audit.html").read_text()
    (project / "q.csv").write_text("question,reference_answer,keywords,category\n"
                                   "Who founded Brightwater Kilns?,Odile Ferrand.,Odile Ferrand,direct_fact\n")
    p = lab(project, "import", "csv", "q.csv", "--out", "sets/q.jsonl")
    assert p.returncode == 0, p.stderr
    assert json.loads((project / "sets" / "q.jsonl").read_text())["keywords"] == ["Odile Ferrand"]
    p = lab(project, "export", "eval.jsonl", "--out", "eval.ragas.jsonl")
    assert p.returncode == 0, p.stderr
    first = json.loads((project / "eval.ragas.jsonl").read_text().splitlines()[0])
    assert first["user_input"] == "Who founded Brightwater Kilns?"
    (project / "bad.csv").write_text("question,colour\nx,y\n")
    p = lab(project, "import", "csv", "bad.csv", "--out", "sets/bad.jsonl")
    assert p.returncode == 2 and "bad.csv line 1: unknown column(s) 'colour'" in p.stderr
    assert not (project / "sets" / "bad.jsonl").exists()


def test_spans_with_twins_are_counted(tmp_path):
    """The tank sentence repeated in two more documents, once in capitals across a line break: q05's
    span has two twins; q08's (Sunita's page whole) none."""
    docs = {**DOCS, "products/spares.md": "Spares. " + TANK, "products/faq.md": TANK.upper().replace(" 40 ", "\n40 ")}
    fixed = copy.deepcopy(ROWS[4])
    fixed["references"][0].update(start_index=15, end_index=61)
    f = audit_eval_set(write_set(tmp_path, [fixed, ROWS[7]]), docs, source="s")
    s = f["spans"]
    assert (s["n_spans"], s["n_errors"], s["n_twins"], s["n_twin_places"]) == (2, 0, 1, 2)
    (twin,) = s["twins"]
    assert (twin["id"], twin["n_twins"], twin["twin_sources"]) == ("q05", 2, ["products/faq.md", "products/spares.md"])
    assert twin["detail"] == "references.0: the same text in 2 other places (products/faq.md, products/spares.md)"
    lines = audit_lines(f)
    assert "golden spans with twins (the same text elsewhere): 1 of 2, 2 places" in lines
    assert "Golden spans with twins: 1" in lines and f["summary"]["ok"]
    html = render_audit(f)
    assert "(1 with twins in 2 places)" in html and 'data-finding="twins"' in html


def test_the_two_verdicts_of_the_support_check_are_listed_and_counted(tmp_path):
    from lab.evalsets.grounding import Verdict

    rows = write_set(tmp_path, ROWS)
    by_question = {r.question: r.id for r in rows}
    verdicts = {"q05": Verdict(True, False), "q08": Verdict(False, True), "q10": Verdict(False, False)}

    def support(question: str, answer: str, evidence: list[str]) -> Verdict | None:
        return verdicts.get(by_question[question], Verdict(True, True))

    f = audit_eval_set(rows, DOCS, source="eval_sets/set.jsonl", embed=None, support=support)
    s = f["support"]
    assert [(i["id"], i["faults"]) for i in s["unsupported"]] == [
        ("q05", ["entailed"]), ("q08", ["answers"]), ("q10", ["answers", "entailed"])]
    assert s["unsupported"][1]["detail"].startswith("the answer does not give what the question asks (1 span(s)): ")
    # q06 passes both: 1 of 4 rows with spans supported; faults counted by verdict (q10 has both)
    assert ("support check (--check): 1 of 4 reference answers supported by their spans and answering their "
            "question, 3 not (2 with a fact the spans do not state, 2 not answering the question), 0 without a "
            "verdict; 6 rows without spans not checked") in audit_lines(f)


def test_the_answer_check_reads_each_span_in_its_passage_and_lists_the_rows_it_doubts(tmp_path):
    """``lab audit --check``'s answer check: the model copies the words of the span's passage (the
    span among the prose sentences within two of it, the console left out, as generation reads a
    candidate) that answer the question; the rows it fails are listed after the rules' doubts and
    counted in the headline."""
    from lab.evalsets.answercheck import model_checks, neighbours
    from lab.evalsets.extract import blocks, document_sentences
    from lab.models.backends import Completion
    from lab.models.llm import LabLLM
    from lab.models.resolve import LLMPlan
    from lab.config import LLMConfig

    doc = ("Backups\n=======\n\nThe daily backup starts at 02:00. It keeps 14 copies of every file.\n\n"
           ".. code-block:: console\n\n    $ kiln backup --now\n\nOld backups are deleted by the prune command.\n")
    s2 = "It keeps 14 copies of every file."
    at = doc.index(s2)
    assert neighbours(doc, document_sentences(doc, blocks(doc, "backup.rst")), at, at + len(s2)) == (
        ["The daily backup starts at 02:00."], ["Old backups are deleted by the prune command."])

    class Model:  # {"yes"} for the verdicts, then the copied answers in order
        def __init__(self):
            self.read, self.answers = [], ["14 copies", "NONE"]

        def chat(self, messages, schema, temperature, seed, max_tokens=None, head=None, stop=None):
            text = messages[-1]["content"]
            if "PASSAGE" not in text:
                return Completion(json.dumps({"answer": "yes"}), 50, 0, 0.1, "stop", top_logprobs=[{"yes": 0.0}])
            self.read.append(text.split("<<<\n", 1)[1].split("\n>>>", 1)[0])
            return Completion(json.dumps({"answer": self.answers.pop(0)}), 80, 6, 0.1, "stop")

    model = Model()
    llm = LabLLM(LLMPlan(LLMConfig(), "check", "m.gguf", "m:1"), None, model)
    rows = [_row("t1", "How many copies does the daily backup keep?", "numerical", None,
                 [("backup.rst", s2, at, at + len(s2))]),
            _row("t2", "Which command restores a backup?", "direct_fact", None,
                 [("backup.rst", s2, at, at + len(s2))])]
    path = tmp_path / "set.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    support, answer_check = model_checks(llm, {"backup.rst": doc})
    f = audit_eval_set(load_eval_set(path, None).rows, {"backup.rst": doc}, source="set.jsonl", support=support,
                       answer_check=answer_check)
    assert model.read == ["The daily backup starts at 02:00. It keeps 14 copies of every file. Old backups are "
                          "deleted by the prune command."] * 2
    assert f["answer_check"] == {"checked": True, "n_checked": 2, "n_doubted": 1, "doubted": [
        {"id": "t2", "line": 2, "question": "Which command restores a backup?",
         "detail": "the model finds no answer to it in its passage"}]}
    assert "questions the model's answer check doubts (no answer in the span's passage, a neighbour's words, or " \
           "circular): 1" in f["summary"]["problems"]
    lines = audit_lines(f)
    assert lines[2].endswith("; the answer from the span's passage doubts 1 of 2 questions (listed)")
    assert "Questions the answer check doubts: 1" in lines and "  t2 (line 2): the model finds no answer to it in its " \
                                                               "passage" in lines


def test_the_answer_check_is_asked_with_the_seed_the_set_was_generated_with(tmp_path):
    """``lab audit --check`` and the review queue ask the answer check with the seed in a generated
    set's sidecar (``lab generate --seed 3 --answer-check`` cached its checks under 3), else 0."""
    from lab.evalsets.answercheck import seed_of

    path = tmp_path / "docs.jsonl"
    assert seed_of(path) == 0  # a set written by hand: no sidecar
    path.with_suffix(".gen.json").write_text(json.dumps({"seed": 3, "mode": "extractive"}), encoding="utf-8")
    assert seed_of(path) == 3
    for broken in ("{not json", "[1, 2]", json.dumps({"seed": "3"})):
        path.with_suffix(".gen.json").write_text(broken, encoding="utf-8")
        assert seed_of(path) == 0


def test_the_audit_says_its_calls_before_it_asks_them_and_counts_out_the_cached(tmp_path, caplog):
    """Before any call, ``lab audit --check`` says its calls (two a row with a span), how many are
    cached and about how long the rest take; a second audit on the same cache finds all of them
    cached, and its model is not run."""
    from lab.caches import CallCache
    from lab.config import LLMConfig
    from lab.evalsets.answercheck import CALL_SECONDS, model_checks
    from lab.models.backends import Completion
    from lab.models.llm import LabLLM
    from lab.models.resolve import LLMPlan
    from lab.progress import duration

    doc = "Backups\n=======\n\nThe daily backup starts at 02:00. It keeps 14 copies of every file.\n"
    s2 = "It keeps 14 copies of every file."
    at = doc.index(s2)

    class Model:
        calls = 0

        def chat(self, messages, schema, temperature, seed, max_tokens=None, head=None, stop=None):
            Model.calls += 1
            if "PASSAGE" not in messages[-1]["content"]:
                return Completion(json.dumps({"answers": "yes", "entailed": "yes"}), 50, 4, 0.1, "stop")
            said = "at 02:00" if "start?" in messages[-1]["content"] else "14 copies"
            return Completion(json.dumps({"answer": said}), 80, 6, 0.1, "stop")

    s1 = "The daily backup starts at 02:00."
    own = {**_row("t3", "When does the daily backup start?", "temporal", None, [("backup.rst", s1, doc.index(s1),
                                                                                   doc.index(s1) + len(s1))]),
           "reference_answer": s1}  # its span's own words, as lab generate writes a row: no yes/no verdict
    rows = [_row("t1", "How many copies does the daily backup keep?", "numerical", None,
                 [("backup.rst", s2, at, at + len(s2))]),
            _row("t2", "What keeps 14 copies?", "direct_fact", ["14"], []), own]  # no span: no call
    path = tmp_path / "set.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    eval_rows = load_eval_set(path, None).rows
    cache = CallCache(tmp_path / "llm.sqlite")
    first = (f"2 rows with a span: the answer from each one's passage, and the yes/no verdicts of the 1 whose "
             f"reference answer is not its span's own words: 3 calls, 0 cached; 3 to compute, about "
             f"{duration(3 * CALL_SECONDS)} ({CALL_SECONDS:g} s a call")
    for told, computed in [(first, 3), ("3 calls, all cached (no model time)", 0)]:
        llm = LabLLM(LLMPlan(LLMConfig(), "check", "m.gguf", "m:1"), cache, Model())
        caplog.clear()
        with caplog.at_level("INFO", logger="lab.evalsets.answercheck"):
            support, answer_check = model_checks(llm, {"backup.rst": doc}, rows=eval_rows)
        assert any(told in m for m in caplog.messages), caplog.messages
        f = audit_eval_set(eval_rows, {"backup.rst": doc}, source="set.jsonl", support=support,
                           answer_check=answer_check)
        assert (f["support"]["n_checked"], f["support"]["n_supported"], f["support"]["n_verbatim"]) == (1, 1, 1)
        assert (f["support"]["n_skipped"], f["answer_check"]["n_checked"], f["answer_check"]["n_doubted"]) == (1, 2, 0)
        assert llm.usage.calls == computed and Model.calls == 3
    assert audit_lines(f)[2] == ("checked by the model: 1 of 1 reference answers supported by their spans; the "
                                 "answer from the span's passage doubts 0 of 2 questions; 1 reference answers are "
                                 "their spans' own words (no yes/no verdict asked)")


def test_documents_no_question_touches_say_which_hold_nothing_to_ask_from(tmp_path):
    """sphinx-gallery's documentation: 39 of 44 documents untouched, 28 of them API pages of
    directives or pages of code and tables, which hold no sentence lab generate asks from. The
    audit counts them apart and lists first the untouched documents a question could be about,
    the example pages (asked last) after them."""
    fact = "The daily backup keeps 14 copies of every file in the `vault` folder.\n"
    docs = {"api/kiln.backup.rst": "kiln.backup\n===========\n\n.. automodule:: kiln.backup\n   :members:\n",
            "examples/demo.md": "# Demo\n\n" + fact, "faq.md": "# FAQ\n\n" + fact.replace("14", "12"),
            "guide.md": "# Guide\n\n" + fact.replace("14", "10"), "times.rst": "Times\n=====\n\n.. code-block:: text\n\n"
                                                                              "   plot_0.py  00:01\n"}
    at = docs["guide.md"].index("The")
    path = tmp_path / "set.jsonl"
    path.write_text(json.dumps(_row("t1", "How many copies does the daily backup keep?", "numerical", ["10"],
                                    [("guide.md", docs["guide.md"][at:-1], at, len(docs["guide.md"]) - 1)])) + "\n")
    f = audit_eval_set(load_eval_set(path, None).rows, docs, source="set.jsonl")
    c = f["coverage"]
    assert c["untouched"] == ["api/kiln.backup.rst", "examples/demo.md", "faq.md", "times.rst"]
    assert c["without_candidates"] == ["api/kiln.backup.rst", "times.rst"]
    assert c["untouched_examples"] == ["examples/demo.md"]
    assert "documents touched by no question: 4 of 5 (2 of them hold no sentence lab generate asks from)" in \
        f["summary"]["problems"]
    assert "documents no question touches: faq.md, examples/demo.md, api/kiln.backup.rst and 1 more in set.audit.html " \
           "(2 of them hold no sentence lab generate asks from: directives, code or tables alone)" in \
           audit_lines(f, more="set.audit.html")
    html = render_audit(f)
    assert 'class="bare" data-source="times.rst"' in html and 'class="untouched" data-source="faq.md"' in html


def test_a_reference_is_its_spans_own_words_with_the_markup_taken_off():
    from lab.evalsets.grounding import verbatim

    assert verbatim("Use --exclude with care.", ["Use ``--exclude``\n   with **care**."])
    assert not verbatim("Use --exclude with care.", ["Use ``--exclude``", "with **care**."])  # two spans
    assert not verbatim("Use --exclude sparingly.", ["Use ``--exclude`` with **care**."])
