import hashlib
import json
from pathlib import Path

import pytest

from lab.errors import DataError
from lab.evalsets.evalset import check_references, load_eval_set
from lab.evalsets.interop import export_ragas, import_set, kb_documents

ABOUT = "Brightwater Kilns was founded in 2009.\nIts workshop is in Ghent.\n"
EMBER = "# Ember 90\n\nThe Ember 90 costs 8,400 euros.\r\nIt fires at 1300 C.\n"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8", newline="")
    return path


def jsonl(path: Path, rows: list) -> Path:
    return write(path, "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))


def span(source: str, text: str, content: str) -> dict:
    start = text.index(content)
    return {"source": source, "content": content, "start_index": start, "end_index": start + len(content)}


@pytest.fixture
def kb(tmp_path) -> Path:
    write(tmp_path / "kb" / "company" / "about.md", ABOUT)
    write(tmp_path / "kb" / "products" / "ember90.txt", EMBER)
    write(tmp_path / "kb" / ".hidden" / "copy.md", ABOUT)  # hidden, as the loader skips it
    return tmp_path / "kb"


def rows_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_ragas_export_then_import_keeps_questions_answers_and_spans(tmp_path, kb):
    spanned = [
        {"id": "f1", "question": "Who founded it, and when?", "reference_answer": "Founded in 2009; in Ghent.",
         "category": "direct_fact", "references": [span("company/about.md", ABOUT, "founded in 2009"),
                                                   span("products/ember90.txt", EMBER, "costs 8,400 euros.\r\nIt")]},
        {"id": "f2", "question": "Où est l'atelier ?", "keywords": ["Ghent"], "reference_answer": "À Gand.",
         "category": "direct_fact", "references": [span("company/about.md", ABOUT, "Its workshop is in Ghent.")]},
    ]
    source = jsonl(tmp_path / "lab.jsonl", spanned + [
        {"question": "How hot?", "keywords": ["1300"], "reference_answer": "1300 C", "category": "numerical"}])
    summary = export_ragas(source, tmp_path / "ragas.jsonl", kb_documents(kb))
    assert summary == {"rows": 3, "kind": "ragas", "out": str(tmp_path / "ragas.jsonl"), "reference_contexts": 3,
                       "rows_without_contexts": 1}
    exported = rows_of(tmp_path / "ragas.jsonl")
    assert exported[0] == {"user_input": "Who founded it, and when?", "reference": "Founded in 2009; in Ghent.",
                           "reference_contexts": ["founded in 2009", "costs 8,400 euros.\r\nIt"], "id": "f1",
                           "category": "direct_fact"}
    assert exported[2] == {"user_input": "How hot?", "reference": "1300 C", "id": "L0003", "keywords": ["1300"],
                           "category": "numerical"}  # no spans: no reference_contexts; the lab's fields kept

    jsonl(tmp_path / "two.jsonl", exported[:2])  # the keyword-only third: tests/robustness/test_round_three.py
    summary = import_set("ragas", tmp_path / "two.jsonl", tmp_path / "back.jsonl", kb=kb)
    assert summary == {"rows": 2, "kind": "ragas", "out": str(tmp_path / "back.jsonl"), "contexts_located": 3,
                       "contexts_not_located": 0, "contexts_in_several_documents": 0, "ignored_fields": []}
    back = load_eval_set(tmp_path / "back.jsonl", None)
    assert [(r.question, r.reference_answer, r.category) for r in back.rows] == [
        (r["question"], r["reference_answer"], "direct_fact") for r in spanned]
    assert [[ref.model_dump() for ref in r.references] for r in back.rows] == [r["references"] for r in spanned]
    assert [r.keywords for r in back.rows] == [None, ["Ghent"]]  # keywords come back as they were, never invented
    assert check_references(back, kb_documents(kb)) == 0


def test_ragas_loads_the_export_and_its_own_jsonl_imports(tmp_path, kb):
    ragas = pytest.importorskip("ragas")
    source = jsonl(tmp_path / "lab.jsonl", [
        {"question": "When?", "reference_answer": "2009", "category": "temporal",
         "references": [span("company/about.md", ABOUT, "founded in 2009")]},
        {"question": "How hot?", "keywords": ["1300"], "reference_answer": "1300 C", "category": "numerical"}])
    export_ragas(source, tmp_path / "ragas.jsonl")
    dataset = ragas.EvaluationDataset.from_jsonl(tmp_path / "ragas.jsonl")
    assert [(s.user_input, s.reference, s.reference_contexts) for s in dataset] == [
        ("When?", "2009", ["founded in 2009"]), ("How hot?", "1300 C", None)]
    ragas.EvaluationDataset(samples=dataset.samples[:1]).to_jsonl(tmp_path / "by_ragas.jsonl")
    import_set("ragas", tmp_path / "by_ragas.jsonl", tmp_path / "back.jsonl", kb=kb, category="temporal")
    assert rows_of(tmp_path / "back.jsonl") == rows_of(source)[:1]


def test_ragas_import_reads_a_json_list_older_names_and_counts_what_it_cannot_place(tmp_path, kb):
    source = write(tmp_path / "testset.json", json.dumps([
        {"user_input": "When?", "reference": "2009", "synthesizer_name": "single_hop_specific",
         "reference_contexts": ["  Brightwater Kilns was founded in 2009.", "not in any document"],
         "retrieved_contexts": ["x"], "response": "2009"},
        {"question": "Price?", "ground_truth": "8,400 euros", "keywords": ["8,400"], "id": "p",
         "reference_contexts": ["nowhere"]},
    ], indent=1))
    summary = import_set("ragas", source, tmp_path / "out.jsonl", kb=kb, category="numerical")
    assert summary["contexts_located"] == 1 and summary["contexts_not_located"] == 2
    assert summary["ignored_fields"] == ["response", "retrieved_contexts"]
    assert rows_of(tmp_path / "out.jsonl") == [
        {"question": "When?", "reference_answer": "2009", "category": "single_hop_specific",
         "references": [span("company/about.md", ABOUT, "Brightwater Kilns was founded in 2009.")]},  # stripped
        {"id": "p", "question": "Price?", "keywords": ["8,400"], "reference_answer": "8,400 euros",
         "category": "numerical"},
    ]
    assert len(load_eval_set(tmp_path / "out.jsonl", None).rows) == 2


def beir(tmp_path: Path, qrels: str = "qrels/test.tsv") -> Path:
    root = tmp_path / "scifact"
    jsonl(root / "corpus.jsonl", [{"_id": "d1", "title": "Kilns", "text": "Kilns fire clay."},
                                  {"_id": "d2", "title": "", "text": "Glaze is glass."},
                                  {"_id": "d/3", "title": "Ghent", "text": "A city in Belgium."}])
    jsonl(root / "queries.jsonl", [{"_id": "q1", "text": "What fires clay?"}, {"_id": "q2", "text": "What is glaze?"},
                                   {"_id": "q3", "text": "Unjudged?"}])
    write(root / qrels, "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\t0\nq1\td/3\t2\nq2\td2\t1\nq3\td1\t0\n")
    return root


def test_beir_import_writes_the_corpus_and_whole_document_spans(tmp_path):
    summary = import_set("beir", beir(tmp_path), tmp_path / "out.jsonl", kb_out=tmp_path / "kb", category="beir")
    assert summary == {"rows": 2, "kind": "beir", "out": str(tmp_path / "out.jsonl"), "documents_written": 3,
                       "documents_empty": 0, "qrels_dropped": 2, "qrels_kept": 4, "qrels_read": 5,
                       "queries_without_qrels": 1, "split": "test"}
    d3 = "d_3-" + hashlib.sha256(b"d/3").hexdigest()[:10] + ".txt"  # safe_name of an unsafe id
    files = {p.name: p.read_text() for p in (tmp_path / "kb").iterdir()}
    assert files == {"d1.txt": "Kilns\n\nKilns fire clay.", "d2.txt": "Glaze is glass.",  # no title: text alone
                     d3: "Ghent\n\nA city in Belgium."}
    whole = {name: {"source": name, "content": text, "start_index": 0, "end_index": len(text)}
             for name, text in files.items()}
    assert rows_of(tmp_path / "out.jsonl") == [
        {"id": "q1", "question": "What fires clay?", "reference_answer": "", "category": "beir",
         "references": [whole["d1.txt"], whole[d3]],  # d2 scored 0: not relevant, no span
         "qrels": {"d1": 1, "d2": 0, d3: 2}},  # every grade kept; d/3 by its file name
        {"id": "q2", "question": "What is glaze?", "reference_answer": "", "category": "beir",
         "references": [whole["d2.txt"]], "qrels": {"d2": 1}},
    ]
    assert check_references(load_eval_set(tmp_path / "out.jsonl", None), kb_documents(tmp_path / "kb")) == 0


def test_beir_graded_qrels_round_trip_into_the_document_metrics(tmp_path):
    """The import keeps BEIR's ids and grades: loaded back, each row's qrels equal the qrels file's
    lines for its query, name documents of the written knowledge base, and score a ranking as
    trec_eval does (graded gains, the ideal over every judged document)."""
    import math

    from lab.evalsets.evalset import check_qrels, document_ids, qrels_sources
    from lab.metrics.qrels import qrels_scores

    root = beir(tmp_path)
    import_set("beir", root, tmp_path / "out.jsonl", kb_out=tmp_path / "kb")
    eval_set = load_eval_set(tmp_path / "out.jsonl", None)
    lines = [line.split("\t") for line in (root / "qrels" / "test.tsv").read_text().splitlines()[1:]]
    d3 = "d_3-" + hashlib.sha256(b"d/3").hexdigest()[:10] + ".txt"
    expected = {}
    for q, d, score in lines:
        expected.setdefault(q, {})[d3 if d == "d/3" else d] = int(score)
    assert {r.id: r.qrels for r in eval_set.rows} == {q: g for q, g in expected.items() if q != "q3"}  # q3: no grade > 0
    sources = kb_documents(tmp_path / "kb")
    check_qrels(eval_set, sources)
    graded = qrels_sources(eval_set.rows[0].qrels, document_ids(sources))
    assert graded == {"d1.txt": 1, "d2.txt": 0, d3: 2}
    # chunks of d2, d1, d1 (max-passage: d2 then d1); d3 (grade 2) never retrieved
    scores = qrels_scores(["d2.txt", "d1.txt", "d1.txt"], graded)
    assert scores["qrels_ndcg10"] == pytest.approx((1 / math.log2(3)) / (2 + 1 / math.log2(3)))
    assert scores["qrels_recall100"] == 0.5 and scores["qrels_mrr10"] == 0.5 and scores["qrels_map"] == 0.25


def test_beir_imports_the_split_of_a_qrels_file(tmp_path):
    root = beir(tmp_path)
    write(root / "qrels" / "train.tsv", "query-id\tcorpus-id\tscore\nq3\td2\t1\n")
    summary = import_set("beir", root / "qrels" / "train.tsv", tmp_path / "train.jsonl", kb_out=tmp_path / "kb")
    assert summary["split"] == "train" and summary["rows"] == 1
    assert [(r.id, r.qrels) for r in load_eval_set(tmp_path / "train.jsonl", None).rows] == [("q3", {"d2": 1})]


def test_an_eval_set_written_by_an_older_beir_import_still_loads(tmp_path):
    """Before qrels were kept, a BEIR row had whole-document spans alone: it loads, with no qrels."""
    write(tmp_path / "kb" / "d1.txt", "Kilns\n\nKilns fire clay.")
    text = "Kilns\n\nKilns fire clay."
    jsonl(tmp_path / "old.jsonl", [{"id": "q1", "question": "What fires clay?", "reference_answer": "",
                                    "category": "direct_fact", "references": [
                                        {"source": "d1.txt", "content": text, "start_index": 0,
                                         "end_index": len(text)}]}])
    rows = load_eval_set(tmp_path / "old.jsonl", None).rows
    assert rows[0].qrels is None and rows[0].references[0].source == "d1.txt"


def test_beir_reads_a_top_level_qrels_file(tmp_path):
    summary = import_set("beir", beir(tmp_path, "qrels.tsv"), tmp_path / "out.jsonl", kb_out=tmp_path / "kb")
    assert summary["rows"] == 2 and [r.category for r in load_eval_set(tmp_path / "out.jsonl", None).rows] == [
        "direct_fact", "direct_fact"]


def test_csv_import(tmp_path):
    source = write(tmp_path / "qs.csv", "id,question,answer,keywords,category\r\n"
                                        'a1,"Who founded it,\nand when?",Odile in 2009,Odile; 2009;,\r\n'
                                        ",,,,\r\n"
                                        ",How much?,\"8,400 euros\",\"8,400\",numerical\r\n")
    summary = import_set("csv", source, tmp_path / "out.jsonl")
    assert summary == {"rows": 2, "kind": "csv", "out": str(tmp_path / "out.jsonl"), "answer_column": "answer"}
    assert rows_of(tmp_path / "out.jsonl") == [
        {"id": "a1", "question": "Who founded it,\nand when?", "keywords": ["Odile", "2009"],
         "reference_answer": "Odile in 2009", "category": "direct_fact"},
        {"question": "How much?", "keywords": ["8,400"], "reference_answer": "8,400 euros", "category": "numerical"},
    ]
    assert [r.id for r in load_eval_set(tmp_path / "out.jsonl", None).rows] == ["a1", "L0002"]


CSV_HEAD = "question,reference_answer,keywords\n"


@pytest.mark.parametrize(
    "kind, name, content, where, message",
    [
        ("csv", "qs.csv", "question,keywords\nq,k\n", "line 1", "column 'reference_answer' missing"),
        ("csv", "qs.csv", "question,answer,keywords,colour\nq,a,k,red\n", "line 1", "unknown column(s) 'colour'"),
        ("csv", "qs.csv", CSV_HEAD + 'q,"two\nlines",k\nq2,a,\n', "line 4", "field 'keywords': missing"),
        ("csv", "qs.csv", CSV_HEAD + "q,a,k\nq,a,k,extra\n", "line 3", "4 cells, the header has 3"),
        ("csv", "qs.csv", "id,question,answer,keywords\nx,q,a,k\nx,q2,a,k\n", "line 3",
         "field 'id': 'x' already used"),
        ("ragas", "r.jsonl", '{"user_input": "q", "reference": "a", "keywords": ["k"]}\n{"user_input": \n',
         "line 2", "invalid JSON"),
        ("ragas", "r.jsonl", '\n{"reference": "a", "keywords": ["k"]}\n', "line 2", "field 'user_input': missing"),
        ("ragas", "r.jsonl", '{"user_input": "q", "reference": "a", "reference_contexts": ["c"]}\n', "line 1",
         "field 'reference_contexts': no knowledge base to find its reference contexts in, and the row has no "
         "keywords"),
        ("ragas", "r.jsonl", '{"user_input": " ", "reference": "a", "keywords": ["k"]}\n', "line 1",
         "field 'user_input': Value error, the question is only whitespace"),
        ("ragas", "r.json", '[{"user_input": "q", "reference": "a", "keywords": ["k"]},\n 3]', "item 2",
         "expected a JSON object, got int"),
    ],
)
def test_bad_input_names_file_and_line_and_writes_nothing(tmp_path, kind, name, content, where, message):
    source = write(tmp_path / name, content)
    with pytest.raises(DataError) as exc:
        import_set(kind, source, tmp_path / "out.jsonl")
    assert f"{source} {where}: {message}" in str(exc.value)
    assert exc.value.hint
    assert not (tmp_path / "out.jsonl").exists()


def test_ragas_contexts_found_nowhere_say_to_pass_the_kb_or_keywords(tmp_path, kb):
    source = jsonl(tmp_path / "r.jsonl", [{"user_input": "q", "reference": "a", "reference_contexts": ["x", "y"]}])
    with pytest.raises(DataError) as exc:
        import_set("ragas", source, tmp_path / "out.jsonl", kb=kb)
    assert str(exc.value).startswith(f"{source} line 1: field 'reference_contexts': none of its 2 reference "
                                     f"contexts occurs verbatim in {kb}, and the row has no keywords")
    assert "--kb" in exc.value.hint and "keywords" in exc.value.hint
    assert not (tmp_path / "out.jsonl").exists()


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda root: (root / "qrels" / "test.tsv").rename(root / "qrels" / "dev.tsv"),
         "{root}: no qrels file (qrels/test.tsv or qrels.tsv)"),
        (lambda root: write(root / "qrels" / "test.tsv", "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td9\t1\n"),
         "{root}/qrels/test.tsv line 3: corpus-id 'd9' is not in corpus.jsonl"),
        (lambda root: write(root / "qrels" / "test.tsv", "q1\td1\tone\n"),
         "{root}/qrels/test.tsv line 1: expected 'query-id<TAB>corpus-id<TAB>score'"),
        (lambda root: jsonl(root / "corpus.jsonl", [{"_id": "D1", "text": "t"}, {"_id": "d1", "text": "u"}]),
         "{root}/corpus.jsonl line 2: field '_id': 'd1' maps to the file name d1.txt, as 'D1' does"),
        (lambda root: jsonl(root / "queries.jsonl", [{"_id": "q1"}]),
         "{root}/queries.jsonl line 1: field 'text': missing"),
        (lambda root: write(root / "qrels" / "test.tsv", "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td1\t2\n"),
         "{root}/qrels/test.tsv line 3: query-id 'q1' grades corpus-id 'd1' 2, and 1 on an earlier line"),
    ],
)
def test_bad_beir_input_writes_neither_set_nor_corpus(tmp_path, damage, message):
    root = beir(tmp_path)
    damage(root)
    with pytest.raises(DataError) as exc:
        import_set("beir", root, tmp_path / "out.jsonl", kb_out=tmp_path / "kb")
    assert message.format(root=root) in str(exc.value)
    assert not (tmp_path / "out.jsonl").exists() and not (tmp_path / "kb").exists()


def test_beir_needs_kb_out(tmp_path):
    with pytest.raises(DataError) as exc:
        import_set("beir", beir(tmp_path), tmp_path / "out.jsonl")
    assert "BEIR labels whole documents" in str(exc.value) and "--kb-out" in exc.value.hint


def test_an_existing_output_is_kept_unless_overwrite(tmp_path):
    source = write(tmp_path / "qs.csv", CSV_HEAD + "q,a,k\n")
    out = write(tmp_path / "out.jsonl", "precious\n")
    for call in (lambda: import_set("csv", source, out), lambda: export_ragas(source, out)):
        with pytest.raises(DataError, match=f"{out} already exists"):
            call()
        assert out.read_text() == "precious\n"
    assert import_set("csv", source, out, overwrite=True)["rows"] == 1
    assert rows_of(out) == [{"question": "q", "keywords": ["k"], "reference_answer": "a", "category": "direct_fact"}]


def test_an_unknown_format_lists_the_known_ones(tmp_path):
    with pytest.raises(DataError, match="unknown import format 'squad'") as exc:
        import_set("squad", tmp_path / "x", tmp_path / "out.jsonl")
    assert exc.value.hint == "use one of beir, csv, ragas"
