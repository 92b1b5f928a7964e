import json
from collections import Counter
from pathlib import Path

import pytest

from lab.config import DEFAULT_CATEGORIES
from lab.errors import DataError
from lab.evalsets.evalset import load_eval_set, stratified_sample

ROOT = Path(__file__).resolve().parents[2]
GOOD = {"question": "q?", "keywords": ["k"], "reference_answer": "a", "category": "direct_fact"}


def write_rows(path: Path, rows: list) -> Path:
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return path


@pytest.mark.parametrize(
    "bad, message",
    [
        ("{not json", "line 2: invalid JSON"),
        ({**GOOD, "keywords": []}, "line 2: field 'keywords'"),
        ({**GOOD, "keywords": ["ok", " "]}, "line 2: field 'keywords': Value error, keyword 1 is empty"),
        ({k: v for k, v in GOOD.items() if k != "category"}, "line 2: field 'category': missing"),
        ({**GOOD, "category": "gossip"}, "line 2: field 'category': 'gossip' is not a declared category"),
        ({**GOOD, "colour": "red"}, "line 2: field 'colour': unknown field"),
        ({**GOOD, "id": "x"}, "line 2: field 'id': 'x' already used on line 1"),
        ({**GOOD, "qrels": {"d1": 0}}, "line 2: field 'qrels': Value error, no document graded 1 or more"),
        ({**GOOD, "qrels": {"d1": "high"}}, "line 2: field 'qrels.d1': Input should be a valid integer"),
    ],
)
def test_errors_name_line_and_field(tmp_path, bad, message):
    path = write_rows(tmp_path / "e.jsonl", [{**GOOD, "id": "x"}, bad])
    with pytest.raises(DataError) as exc:
        load_eval_set(path, DEFAULT_CATEGORIES)
    assert f"{path} {message}" in str(exc.value)


def test_ids_default_to_line_numbers(tmp_path):
    path = write_rows(tmp_path / "e.jsonl", [GOOD, GOOD])
    assert [r.id for r in load_eval_set(path, DEFAULT_CATEGORIES).rows] == ["L0001", "L0002"]


def test_stratified_sample_is_proportional_seeded_and_ordered(tmp_path):
    rows = [{**GOOD, "id": f"a{i}", "category": "direct_fact"} for i in range(60)]
    rows += [{**GOOD, "id": f"b{i}", "category": "temporal"} for i in range(30)]
    rows += [{**GOOD, "id": f"c{i}", "category": "holistic"} for i in range(10)]
    es = load_eval_set(write_rows(tmp_path / "e.jsonl", rows), DEFAULT_CATEGORIES)
    s1 = stratified_sample(es.rows, 20, seed=13)
    s2 = stratified_sample(es.rows, 20, seed=13)
    assert [r.id for r in s1] == [r.id for r in s2]
    assert Counter(r.category for r in s1) == {"direct_fact": 12, "temporal": 6, "holistic": 2}
    positions = [es.rows.index(r) for r in s1]
    assert positions == sorted(positions)
    assert [r.id for r in stratified_sample(es.rows, 20, seed=14)] != [r.id for r in s1]


def test_stratified_sample_keeps_every_category():
    from lab.evalsets.evalset import EvalRow

    rows = [EvalRow(**{**GOOD, "id": str(i)}) for i in range(97)]
    rows += [EvalRow(**{**GOOD, "id": f"t{i}", "category": "temporal"}) for i in range(3)]
    sample = stratified_sample(rows, 5, seed=1)
    assert len(sample) == 5 and Counter(r.category for r in sample)["temporal"] == 1


def test_shipped_eval_set_is_valid_and_its_keywords_occur_in_the_kb():
    es = load_eval_set(ROOT / "eval_sets" / "company.jsonl", DEFAULT_CATEGORIES)
    assert len(es.rows) >= 100
    assert set(r.category for r in es.rows) == set(DEFAULT_CATEGORIES)
    kb = "\n".join(p.read_text(encoding="utf-8").lower() for p in (ROOT / "knowledge-base").rglob("*.md"))
    missing = [(r.id, kw) for r in es.rows for kw in r.keywords if kw.lower() not in kb]
    assert missing == []


def test_shipped_references_point_at_their_text():
    es = load_eval_set(ROOT / "eval_sets" / "company.jsonl", DEFAULT_CATEGORIES)
    refs = [(r.id, ref) for r in es.rows for ref in (r.references or [])]
    assert len({rid for rid, _ in refs}) >= 30
    for rid, ref in refs:
        text = (ROOT / "knowledge-base" / ref.source).read_text(encoding="utf-8")
        assert text[ref.start_index : ref.end_index] == ref.content, rid


def test_spans_outside_or_not_matching_their_document_name_line_and_field(tmp_path):
    from lab.evalsets.evalset import check_references, load_eval_set

    doc = {"a.md": "The Ember 90 costs 8,400 euros."}
    def write(refs):
        row = {"id": "x", "question": "q?", "keywords": ["k"], "reference_answer": "a", "category": "direct_fact",
               "references": refs}
        (tmp_path / "e.jsonl").write_text("\n" + json.dumps(row) + "\n")
        return load_eval_set(tmp_path / "e.jsonl", ["direct_fact"])
    ok = write([{"source": "a.md", "content": "8,400 euros", "start_index": 19, "end_index": 30},
                {"source": "b.md", "content": "x", "start_index": 0, "end_index": 1}])
    # b.md is in the knowledge base as a PDF: the same document in another format, not scored
    assert check_references(ok, {**doc, "b.pdf": "x"}) == 1
    with pytest.raises(DataError, match=r"e.jsonl line 2: field 'references.1.source': 'b.md' names no document"):
        check_references(ok, doc)
    # b.md is a file of the knowledge base in a format the run does not read: said, with the fix
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "b.md").write_text("x")
    with pytest.raises(DataError) as exc:
        check_references(ok, doc, kb, [".txt"])
    assert (exc.value.message, exc.value.hint) == (
        f"{tmp_path / 'e.jsonl'} line 2: field 'references.1.source': 'b.md' is a file of the knowledge base that "
        "this run does not read (.md is not in loader.extensions: \".txt\")",
        'read it: loader: {extensions: [".txt", ".md"]} in the config (lab generate reads every format the lab reads)')
    # one of a format it reads is no document because the loader skipped it (empty, unreadable): not that
    with pytest.raises(DataError, match="'b.md' names no document"):
        check_references(ok, doc, kb, [".md"])
    past = write([{"source": "a.md", "content": "x", "start_index": 30, "end_index": 99}])
    with pytest.raises(DataError, match=r"e.jsonl line 2: field 'references.0.end_index': 99 is past the end of a.md \(31 chars\)"):
        check_references(past, doc)
    shifted = write([{"source": "a.md", "content": "8,400 euros", "start_index": 18, "end_index": 29}])
    with pytest.raises(DataError, match="field 'references.0.content': does not match a.md chars 18-29") as exc:
        check_references(shifted, doc)
    assert "start_index 19, end_index 30" in str(exc.value)
    with pytest.raises(DataError, match="end_index \\(3\\) must be greater than start_index \\(5\\)"):
        write([{"source": "a.md", "content": "x", "start_index": 5, "end_index": 3}])


def test_span_content_matches_in_nfc_and_sources_are_normalised(tmp_path):
    import json
    import unicodedata

    from lab.evalsets.evalset import check_references, load_eval_set

    doc = "Menu. " + unicodedata.normalize("NFC", "Crème brûlée") + " costs 9 euros."
    start = doc.index("Cr")
    row = {"id": "q1", "question": "What does the dessert cost?", "keywords": ["9 euros"], "reference_answer": "9",
           "category": "direct_fact", "references": [
               {"source": ".\\menu\\desserts.md", "content": unicodedata.normalize("NFD", "Crème brûlée"),
                "start_index": start, "end_index": start + len("Crème brûlée")}]}
    path = tmp_path / "e.jsonl"
    path.write_text(json.dumps(row) + "\n")
    es = load_eval_set(path, ["direct_fact"])
    assert es.rows[0].references[0].source == "menu/desserts.md"
    assert check_references(es, {"menu/desserts.md": doc}) == 0


def test_keywords_are_optional_with_references_or_labels(tmp_path):
    ref = {"source": "a.md", "content": "abc", "start_index": 0, "end_index": 3}
    rows = [{"id": "s", "question": "q?", "reference_answer": "a", "category": "direct_fact", "references": [ref]},
            {"id": "l", "question": "q2?", "reference_answer": "a", "category": "direct_fact"}]
    path = write_rows(tmp_path / "e.jsonl", rows)
    assert [r.keywords for r in load_eval_set(path, None, labelled=["l"]).rows] == [None, None]
    with pytest.raises(DataError, match=r"line 2: field 'keywords': missing") as err:
        load_eval_set(path, None)
    assert "golden spans in 'references'" in err.value.hint
    path = write_rows(tmp_path / "f.jsonl", [{**rows[0], "keywords": []}])
    with pytest.raises(DataError, match="field 'keywords': .*an empty list"):
        load_eval_set(path, None)


def test_qrels_name_documents_by_path_or_stem(tmp_path):
    """A row may carry graded qrels instead of keywords; each key names one document of the
    knowledge base, by its path or its path without the extension, or the run stops at start-up."""
    from lab.evalsets.evalset import check_qrels, document_ids, qrels_sources

    row = {"question": "q?", "reference_answer": "", "category": "direct_fact"}
    path = write_rows(tmp_path / "set.jsonl", [{**row, "qrels": {"company/about": 2, "products/Homellm.md": 0,
                                                                 "4983": 1}}])
    eval_set = load_eval_set(path, None)
    assert eval_set.rows[0].keywords is None and eval_set.rows[0].qrels == {"company/about": 2,
                                                                            "products/Homellm.md": 0, "4983": 1}
    sources = ["company/about.md", "products/Homellm.md", "4983.txt"]
    assert qrels_sources(eval_set.rows[0].qrels, document_ids(sources)) == {
        "company/about.md": 2, "products/Homellm.md": 0, "4983.txt": 1}
    with pytest.raises(DataError) as exc:
        check_qrels(eval_set, ["company/about.md", "products/Homellm.md", "4938.txt"])
    assert exc.value.message == f"{path} line 1: field 'qrels': '4983' names no document of the knowledge base"
    assert exc.value.hint.startswith("did you mean '4938'?")
    with pytest.raises(DataError) as exc:  # the same document in two formats: the stem names both
        check_qrels(eval_set, [*sources, "company/about.pdf"])
    assert "'company/about' names 2 documents (company/about.md, company/about.pdf)" in str(exc.value)
    assert exc.value.hint == "write the document's path with its extension"
    twice = write_rows(tmp_path / "twice.jsonl", [{**row, "qrels": {"4983": 1, "4983.txt": 1}}])
    with pytest.raises(DataError, match="'4983.txt' names 4983.txt, as another key of the row does"):
        check_qrels(load_eval_set(twice, None), sources)
