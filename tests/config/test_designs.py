"""Retrieval designs past the seeds: contextual chunk headers and the document-level boost.

By hand first (the header of a document, the boost's arithmetic), then what a real run on the
fixture project retrieves and sends, and that each shipped config runs retrieval-only."""

from __future__ import annotations

import html
import json
from pathlib import Path
from types import SimpleNamespace

import lancedb
import pytest
from llama_index.core.schema import Document, MetadataMode, NodeWithScore, QueryBundle, TextNode
from pydantic import ValidationError

from lab.config import HeadersConfig, SummaryConfig, load_experiment
from lab.config import SentenceWindowChunker
from lab.errors import ConfigError
from lab.rag.chunkers import add_headers, build_chunker, first_heading, header_text, matched_text
from lab.rag.index import TABLE, index_key, open_or_build
from lab.rag.summaries import DocumentSummarizer, clean_summary
from lab.metrics.spans import span_rank_scores, span_scores
from lab.rag.documents import DocBoostReranker, DocTypeFilter, doc_boost, named_doc_types
from lab.rag.postprocess import build_chain
from lab.rag.sent import PARTS, merge_by_document, passage_spans, send_headers, send_windows, sent_header, sent_spans
from runs import ROOT, lab, latest, load, page_text

FIX = ROOT / "tests" / "fixtures"


# ---------------------------------------------------------------------------------------------
# contextual headers, by hand

@pytest.mark.parametrize("text, heading", [
    ("# HR Record\n\n# Alex Chen\n\n## Summary", "HR Record"),  # the first one, not the best one
    ("Intro line\n\n## Pricing ##\nbody", "Pricing"),  # closing hashes dropped
    ("#hashtag is not a heading\nplain text", ""),  # a heading needs a space after the hashes
    ("", ""),
])
def test_first_heading(text, heading):
    assert first_heading(text) == heading


@pytest.mark.parametrize("meta, title, fields, header", [
    ({"doc_type": "employees", "file_name": "Alex Chen.md"}, "HR Record", ["doc_type", "name", "title"],
     "employees / Alex Chen / HR Record"),
    # the file name and the heading say the same (case aside): said once
    ({"doc_type": "contracts", "file_name": "Contract with Belvedere Insurance for Markellm.md"},
     "Contract with Belvedere INSURANCE for Markellm", ["doc_type", "name", "title"],
     "contracts / Contract with Belvedere Insurance for Markellm"),
    ({"doc_type": "", "file_name": "notes.txt"}, "", ["doc_type", "name", "title"], "notes"),  # empty parts go
    ({"doc_type": "products", "file_name": "Rellm.md"}, "Rellm:  AI   Reinsurance", ["title", "doc_type"],
     "Rellm: AI Reinsurance / products"),  # order as configured, white space collapsed
])
def test_header_text(meta, title, fields, header):
    assert header_text(meta, title, HeadersConfig(fields=fields)) == header


def test_headers_config_refuses_unknown_or_no_fields():
    with pytest.raises(ValidationError, match="fields"):
        HeadersConfig(fields=[])
    with pytest.raises(ValidationError, match="fields"):
        HeadersConfig(fields=["abstract"])


# ---------------------------------------------------------------------------------------------
# document summaries in the headers, by hand (a stand-in LLM: plumbing only)

def test_header_text_puts_the_summary_on_a_line_of_its_own():
    meta = {"doc_type": "products", "file_name": "ember90.md"}
    cfg = HeadersConfig(fields=["doc_type", "name", "summary"])
    assert header_text(meta, "Ember 90", cfg, "The Ember 90  kiln\n costs 8,400 euros.") == \
        "products / ember90\nThe Ember 90 kiln costs 8,400 euros."
    assert header_text(meta, "", cfg, "") == "products / ember90"  # no summary: the line alone
    assert header_text(meta, "", HeadersConfig(fields=["summary"]), "A kiln.") == "A kiln."
    assert header_text(meta, "", HeadersConfig(), "not asked for") == "products / ember90"


def test_summary_section_follows_its_field():
    h = HeadersConfig(fields=["name", "summary"])
    assert h.summary == SummaryConfig() and h.summary.prompt == "doc-summary-v1" and h.summary.max_chars == 4000
    assert h.summary.llm.model == "qwen2.5-coder-1.5b-instruct" and h.summary.llm.max_tokens == 96
    with pytest.raises(ValidationError, match="'summary' is not in fields"):
        HeadersConfig(summary={"max_chars": 100})
    with pytest.raises(ValidationError, match="max_chars"):
        HeadersConfig(fields=["summary"], summary={"max_chars": 0})
    assert HeadersConfig().key_body() == {"fields": ["doc_type", "name", "title"], "separator": " / "}


def test_summary_headers_key_holds_the_summary_model_and_plain_headers_keep_theirs():
    cfg = load_experiment("small-retrieval", FIX / "experiments")
    plain = index_key("c", cfg.chunker, cfg.embedding, "m", None, HeadersConfig())
    assert plain == "d4725444f19989936112"  # tables with headers built before summaries existed
    summary = HeadersConfig(fields=["doc_type", "name", "title", "summary"])
    a = index_key("c", cfg.chunker, cfg.embedding, "m", None, summary, "qwen.gguf:aaa")
    b = index_key("c", cfg.chunker, cfg.embedding, "m", None, summary, "qwen.gguf:bbb")
    shorter = HeadersConfig(fields=summary.fields, summary={"max_chars": 2000})
    assert len({plain, a, b, index_key("c", cfg.chunker, cfg.embedding, "m", None, shorter, "qwen.gguf:aaa")}) == 4
    # the shipped header configs keep their fingerprints
    assert {n: load_experiment(n, ROOT / "experiments").fingerprint()
            for n in ("headers", "bm25-headers", "hybrid-headers")} == {
        "headers": "869a05e0e4b3f3b6", "bm25-headers": "df7d193f43734991", "hybrid-headers": "61c210b92081e346"}


@pytest.mark.parametrize("reply, summary", [
    ("Summary: A kiln\n  catalogue.", "A kiln catalogue."),
    ('**Summary:** "The HR record of Alex Chen."', "The HR record of Alex Chen."),
    ("  This document is a contract.  ", "This document is a contract."),
    ("", ""),
])
def test_clean_summary(reply, summary):
    assert clean_summary(reply) == summary


class _StandInLLM:
    """Records each chat call and answers with a fixed reply (plumbing only)."""

    plan = SimpleNamespace(fingerprint="stand-in:1")

    def __init__(self, reply: str = "Summary: A kiln  catalogue."):
        self.reply, self.calls = reply, []

    def chat(self, messages, prompt_version):
        self.calls.append((messages, prompt_version))
        return SimpleNamespace(text=self.reply)


def test_summarizer_reads_the_first_max_chars_of_each_document_once():
    llm = _StandInLLM()
    docs = [Document(text="0123456789ABCDEF", metadata={"source": "products/a.md"}),
            Document(text="short", metadata={"source": "company/b.md"})]
    summarizer = DocumentSummarizer(llm, SummaryConfig(max_chars=10))
    assert summarizer.summaries(docs) == {"products/a.md": "A kiln catalogue.", "company/b.md": "A kiln catalogue."}
    assert [v for _, v in llm.calls] == ["doc-summary-v1", "doc-summary-v1"]
    user = llm.calls[0][0][1]["content"]
    assert "Document: products/a.md\n\n0123456789" in user and "A" not in user.split("0123456789")[1]
    assert llm.calls[1][0][1]["content"].endswith("Document: company/b.md\n\nshort")
    assert summarizer.fingerprint == "stand-in:1"


def test_summary_headers_need_their_llm_to_build():
    cfg = load_experiment("small-retrieval", FIX / "experiments").model_copy(
        update={"headers": HeadersConfig(fields=["name", "summary"])})
    with pytest.raises(ConfigError, match="headers.summary needs its LLM"):
        open_or_build(SimpleNamespace(content_hash="c"), cfg, SimpleNamespace(fingerprint="m"), Path("/nonexistent"))


@pytest.mark.parametrize("fields, header, sent", [
    (["doc_type", "name", "title"], "employees / Avery Lancaster / HR Record", "employees / Avery Lancaster / HR Record"),
    (["doc_type", "name", "summary"], "employees / Avery Lancaster\nThe HR record of the CEO.", "employees / Avery Lancaster"),
    (["name", "summary"], "Avery Lancaster", "Avery Lancaster"),  # the summary was empty
    (["summary"], "The HR record of the CEO.", ""),  # a model's words are never sent
])
def test_sent_header_is_the_line_without_the_summary(fields, header, sent):
    assert sent_header(header, HeadersConfig(fields=fields)) == sent


def test_send_headers_sends_copies_under_the_line_with_the_chunk_offsets():
    node = TextNode(text="Base salary: $225,000", id_="employees/a.md#3", start_char_idx=900, end_char_idx=921,
                    metadata={"header": "employees / Avery Lancaster\nA summary.", "source": "employees/a.md"})
    bare = TextNode(text="no header", id_="x")
    cfg = HeadersConfig(fields=["doc_type", "name", "summary"], send=True)
    out = send_headers([NodeWithScore(node=node, score=0.7), NodeWithScore(node=bare, score=0.2)], cfg)
    assert [n.node.get_content() for n in out] == ["employees / Avery Lancaster\n\nBase salary: $225,000", "no header"]
    assert (out[0].node.start_char_idx, out[0].node.end_char_idx, out[0].score) == (900, 921, 0.7)
    assert out[0].node.node_id == "employees/a.md#3"
    assert node.get_content() == "Base salary: $225,000"  # the retrieved node itself is left as it was
    assert HeadersConfig(send=True).key_body() == HeadersConfig().key_body()  # sending is not in the index key
    chain = build_chain(load_experiment("hybrid-headers-sent", ROOT / "experiments"), None)
    assert chain.headers is not None and chain.headers.send
    assert build_chain(load_experiment("hybrid-headers", ROOT / "experiments"), None).headers is None


def _chunk(source: str, start: int | None, text: str, score: float) -> NodeWithScore:
    end = None if start is None else start + len(text)
    return NodeWithScore(node=TextNode(text=text, id_=f"{source}#{start}", start_char_idx=start, end_char_idx=end,
                                       metadata={"source": source}), score=score)


def test_merge_by_document_by_hand():
    # document a: 0123456789ABCDEFGHIJKLMNO...; chunks [0,10) [8,15) [2,6) [20,25); document b: [0,5)
    a = "0123456789ABCDEFGHIJKLMNOP"
    nodes = [_chunk("a.md", 0, a[0:10], 0.9), _chunk("b.md", 0, "bbbbb", 0.8), _chunk("a.md", 20, a[20:25], 0.7),
             _chunk("a.md", 8, a[8:15], 0.6), _chunk("a.md", 2, a[2:6], 0.5)]
    out = merge_by_document(nodes, joiner=" | ")
    assert [n.node.node_id for n in out] == ["a.md#0", "b.md#0"] and [n.score for n in out] == [0.9, 0.8]
    merged = out[0].node
    assert merged.get_content() == "0123456789ABCDE | KLMNO"  # overlap joined once, the contained chunk adds nothing
    assert (merged.start_char_idx, merged.end_char_idx) == (0, 25)
    assert merged.metadata[PARTS] == [[0, 15], [20, 25]]
    assert PARTS not in merged.get_content(metadata_mode=MetadataMode.LLM)
    assert out[1] is nodes[1]  # a document with one chunk passes unchanged
    assert nodes[0].node.get_content() == "0123456789" and PARTS not in nodes[0].node.metadata  # copies leave
    assert sent_spans(out, [n.node.get_content() for n in out]) == [
        ("a.md", 0, 15, 15), ("a.md", 20, 25, 5), ("b.md", 0, 5, 5)]
    # span metrics over the merged passage: the golden span [12, 22) is covered by [0,15) and [20,25)
    assert span_scores(sent_spans(out, ["", ""]), [("a.md", 12, 22)])["span_recall"] == pytest.approx(5 / 10)
    # passage by passage, for the span rank metrics: the merged passage is one passage of two pieces,
    # covering 5 of the span's 10 characters (HOLD): held at rank 1
    assert passage_spans(out) == [[("a.md", 0, 15), ("a.md", 20, 25)], [("b.md", 0, 5)]]
    assert span_rank_scores(passage_spans(out), [[("a.md", 12, 22)]], 10)["span_ranks"] == [1]


def test_merge_by_document_without_offsets_joins_in_rank_order():
    out = merge_by_document([_chunk("a.md", None, "second", 0.9), _chunk("a.md", None, "first", 0.5)])
    assert len(out) == 1 and out[0].node.get_content() == "second\n\nfirst"
    assert out[0].node.start_char_idx is None and out[0].node.metadata[PARTS] is None
    assert merge_by_document([]) == []


def test_merge_then_headers_sends_the_line_once_per_document():
    cfg = load_experiment("hybrid-headers-merged", ROOT / "experiments")
    chain = build_chain(cfg, None)
    assert chain.merge is not None and chain.headers is not None
    nodes = [_chunk("employees/a.md", 0, "Avery Lancaster, CEO.", 0.9), _chunk("employees/a.md", 40, "$225,000", 0.5)]
    for n in nodes:
        n.node.metadata["header"] = "employees / Avery Lancaster / HR Record"
    sent = chain.apply(nodes, QueryBundle("What is Avery Lancaster's salary?")).nodes
    assert [n.node.get_content() for n in sent] == [
        "employees / Avery Lancaster / HR Record\n\nAvery Lancaster, CEO.\n\n$225,000"]


def test_chunks_of_one_document_share_its_summary():
    doc = Document(text="# Ember 90\n\nThe Ember 90 costs 8,400 euros.", id_="products/ember90.md",
                   metadata={"source": "products/ember90.md", "doc_type": "products", "file_name": "ember90.md"})
    nodes = [TextNode(text=t, metadata=dict(doc.metadata)) for t in ("The Ember 90", "costs 8,400 euros.")]
    add_headers(nodes, [doc], HeadersConfig(fields=["name", "summary"]), {"products/ember90.md": "A kiln."})
    assert [matched_text(n, MetadataMode.NONE) for n in nodes] == [
        "ember90\nA kiln.\n\nThe Ember 90", "ember90\nA kiln.\n\ncosts 8,400 euros."]
    assert all("A kiln." not in n.get_content(metadata_mode=m) for n in nodes
               for m in (MetadataMode.LLM, MetadataMode.EMBED, MetadataMode.NONE))


def test_header_is_matched_but_never_read_as_the_chunk():
    doc = Document(text="# Ember 90\n\nThe Ember 90 costs 8,400 euros.", id_="products/ember90.md",
                   metadata={"source": "products/ember90.md", "doc_type": "products", "file_name": "ember90.md"},
                   excluded_embed_metadata_keys=["source", "doc_type", "file_name", "page"],
                   excluded_llm_metadata_keys=[])
    node = TextNode(text="The Ember 90 costs 8,400 euros.", metadata=dict(doc.metadata),
                    excluded_embed_metadata_keys=list(doc.excluded_embed_metadata_keys),
                    excluded_llm_metadata_keys=[])
    add_headers([node], [doc], HeadersConfig())
    assert node.metadata["header"] == "products / ember90 / Ember 90"
    assert matched_text(node) == "products / ember90 / Ember 90\n\nThe Ember 90 costs 8,400 euros."
    assert matched_text(node, MetadataMode.NONE) == matched_text(node)
    # what metrics score and what the answer's context sends: no header
    assert node.get_content() == "The Ember 90 costs 8,400 euros."
    assert "products / ember90" not in node.get_content(metadata_mode=MetadataMode.LLM)
    assert node.get_content(metadata_mode=MetadataMode.EMBED) == "The Ember 90 costs 8,400 euros."
    bare = TextNode(text="no header")
    assert matched_text(bare) == "no header"


def test_headers_change_the_index_key_and_their_absence_does_not():
    cfg = load_experiment("small-retrieval", FIX / "experiments")
    plain = index_key("c", cfg.chunker, cfg.embedding, "m")
    assert plain == "8fbfe52857c86c0d5634"  # every table built before headers existed keeps its key
    assert index_key("c", cfg.chunker, cfg.embedding, "m", None, None) == plain
    with_headers = index_key("c", cfg.chunker, cfg.embedding, "m", None, HeadersConfig())
    assert with_headers != plain
    assert index_key("c", cfg.chunker, cfg.embedding, "m", None, HeadersConfig(fields=["name"])) != with_headers
    assert load_experiment("small-retrieval", FIX / "experiments").fingerprint() == cfg.fingerprint()


# ---------------------------------------------------------------------------------------------
# document-level boost, by hand

def test_doc_boost_by_hand():
    # scores 0.9 0.8 0.7 0.1 normalise to 1, 0.875, 0.75, 0; documents a b b c
    # sum per document: a 1, b 1.625, c 0; boost = 0.5 * D / 1.625
    parts = doc_boost([0.9, 0.8, 0.7, 0.1], ["a", "b", "b", "c"], 0.5, "sum")
    assert [p[0] for p in parts] == pytest.approx([1.0, 0.875, 0.75, 0.0])
    assert [p[1] for p in parts] == pytest.approx([0.5 / 1.625, 0.5, 0.5, 0.0])
    # max per document: a 1, b 0.875 -> boosts 0.5, 0.4375, 0.4375, 0
    assert [p[1] for p in doc_boost([0.9, 0.8, 0.7, 0.1], ["a", "b", "b", "c"], 0.5, "max")] == \
        pytest.approx([0.5, 0.4375, 0.4375, 0.0])
    # mean per document: a 1, b 0.8125 -> boosts 0.5, 0.40625, 0.40625, 0
    assert [p[1] for p in doc_boost([0.9, 0.8, 0.7, 0.1], ["a", "b", "b", "c"], 0.5, "mean")] == \
        pytest.approx([0.5, 0.40625, 0.40625, 0.0])
    assert doc_boost([0.4, 0.4], ["a", "b"], 1.0, "sum") == [(1.0, 1.0), (1.0, 1.0)]  # equal scores
    assert doc_boost([], [], 0.5, "sum") == []


def test_doc_boost_reranker_orders_by_evidence_and_keeps_top_n():
    nodes = [NodeWithScore(node=TextNode(id_=i, text=i, metadata={"source": d}), score=s)
             for i, d, s in [("a1", "a", 0.9), ("b1", "b", 0.8), ("b2", "b", 0.7), ("c1", "c", 0.1)]]
    out = DocBoostReranker(weight=0.5, aggregate="sum", top_n=3).postprocess_nodes(nodes)
    # finals: a1 1.3077, b1 1.375, b2 1.25, c1 0
    assert [n.node.node_id for n in out] == ["b1", "a1", "b2"]
    assert [n.score for n in out] == pytest.approx([1.375, 1 + 0.5 / 1.625, 1.25])
    assert out[0].node.metadata["lab_doc_boost"] == pytest.approx(0.5)
    assert "lab_doc_boost" not in out[0].node.get_content(metadata_mode=MetadataMode.LLM)
    # weight 0: the first stage's order
    nodes0 = [NodeWithScore(node=n.node, score=s) for n, s in zip(nodes, [0.9, 0.8, 0.7, 0.1])]
    zero = DocBoostReranker(weight=0.0, aggregate="sum", top_n=4).postprocess_nodes(nodes0)
    assert [n.node.node_id for n in zero] == ["a1", "b1", "b2", "c1"]


# ---------------------------------------------------------------------------------------------
# metadata filter by the document type a question names

@pytest.mark.parametrize("question, named", [
    ("Who signed the Metropolitan Life Group contract?", {"contracts"}),  # singular names the folder
    ("How many Contracts does Healthllm have?", {"contracts"}),  # any case
    ("Which employees joined in 2020?", {"employees"}),
    ("Which companies does it list?", {"companies"}),  # -ies / -y
    ("Which company founded it?", {"companies"}),
    ("Is the contractor paid monthly?", set()),  # a longer word names nothing
    ("Which product does the contract cover?", {"products", "contracts"}),
    ("When was Insurellm founded?", set()),
])
def test_named_doc_types(question, named):
    assert named_doc_types(question, ["contracts", "employees", "products", "companies"]) == named


def test_doc_type_filter_keeps_the_named_type_in_order():
    def nodes():
        return [NodeWithScore(node=TextNode(id_=i, text=i, metadata={"doc_type": t}), score=s)
                for i, t, s in [("p1", "products", 0.9), ("c1", "contracts", 0.8), ("e1", "employees", 0.7),
                                ("c2", "contracts", 0.6), ("c3", "contracts", 0.5)]]

    keep = DocTypeFilter(top_n=2)
    out = keep.postprocess_nodes(nodes(), query_bundle=QueryBundle(query_str="Who signed the contract?"))
    assert [n.node.node_id for n in out] == ["c1", "c2"] and [n.score for n in out] == [0.8, 0.6]
    # naming no type, or a type no candidate has: the first stage's best
    for q in ("Who founded it?", "Which company founded it?"):
        out = keep.postprocess_nodes(nodes(), query_bundle=QueryBundle(query_str=q))
        assert [n.node.node_id for n in out] == ["p1", "c1"]


# ---------------------------------------------------------------------------------------------
# small-to-big: sentence windows

SOURCE = "First one here.\nSecond one  follows. Third is short.\n\nFourth ends it."


def _window_nodes(window_size: int) -> list:
    doc = Document(text=SOURCE, id_="d.md", metadata={"source": "d.md"}, excluded_embed_metadata_keys=["source"],
                   excluded_llm_metadata_keys=[])  # as the loader makes them
    return build_chunker(SentenceWindowChunker(name="sentence_window", window_size=window_size), None
                         ).get_nodes_from_documents([doc])


def test_sentence_window_is_the_exact_source_around_each_sentence():
    nodes = _window_nodes(1)
    # LlamaIndex's sentences keep the white space after them
    assert [n.get_content() for n in nodes] == ["First one here.\n", "Second one  follows. ", "Third is short.\n\n",
                                                "Fourth ends it."]
    for n in nodes:  # each sentence's own offsets are exact
        assert SOURCE[n.start_char_idx:n.end_char_idx] == n.get_content()
    # the 2nd sentence's window: the 1st to the 3rd as in the source (LlamaIndex's own window joins
    # the sentences with another space: "First one here.\n Second one  follows.  Third ...")
    second = nodes[1].metadata
    assert second["window"] == "First one here.\nSecond one  follows. Third is short.\n\n"
    assert (second["window_start"], second["window_end"]) == (0, 37 + len("Third is short.\n\n"))
    assert nodes[0].metadata["window"] == "First one here.\nSecond one  follows. "  # cut at the start
    assert nodes[3].metadata["window"] == "Third is short.\n\nFourth ends it."  # and at the end
    assert (nodes[3].metadata["window_start"], nodes[3].metadata["window_end"]) == (37, len(SOURCE))
    # matched alone: the window is in neither the embedded nor the LLM text
    assert nodes[1].get_content(metadata_mode=MetadataMode.EMBED) == "Second one  follows. "
    assert "Third" not in nodes[1].get_content(metadata_mode=MetadataMode.LLM)


def test_send_windows_sends_the_window_with_its_offsets():
    nodes = _window_nodes(1)
    sent = send_windows([NodeWithScore(node=nodes[3], score=0.9), NodeWithScore(node=TextNode(text="plain"), score=0.1)])
    assert sent[0].node.get_content() == "Third is short.\n\nFourth ends it."
    assert SOURCE[sent[0].node.start_char_idx:sent[0].node.end_char_idx] == sent[0].node.get_content()
    assert sent[1].node.get_content() == "plain"  # not a window node: passes as it is
    assert [n.score for n in sent] == [0.9, 0.1]


# ---------------------------------------------------------------------------------------------
# real runs on the fixture project

def _write(project: Path, name: str, body: str) -> None:
    (project / "experiments" / f"{name}.yaml").write_text(body)


@pytest.mark.slow
def test_headers_run_matches_with_the_header_and_scores_the_chunk(project):
    _write(project, "small-headers", "schema_version: 1\nextends: small-hybrid\n"
                                     "description: fixture hybrid with headers\nheaders: {}\n")
    p = lab(project, "run", "small-headers", "--no-progress")
    assert p.returncode == 0, p.stderr
    results, samples = load(latest(project, "small-headers"))
    path = Path(results["index"]["path"])
    manifest = json.loads((path / "manifest.json").read_text())
    assert manifest["headers"] == {"fields": ["doc_type", "name", "title"], "separator": " / "}
    rows = lancedb.connect(str(path / "lancedb")).open_table(TABLE).to_arrow().to_pylist()
    by_id = {r["id"]: r for r in rows}
    # the BM25 column: header over the chunk's own text; the stored node: the chunk's own text
    about = json.loads(by_id["company/about.md#0"]["metadata"]["_node_content"])
    assert about["metadata"]["header"] == "company / about / About Brightwater Kilns"
    assert by_id["company/about.md#0"]["text"] == "company / about / About Brightwater Kilns\n\n" + about["text"]
    assert about["text"].startswith("# About Brightwater Kilns")
    for s in samples:  # scored and sent: chunk texts only, and the context size counts them
        assert all(not r["text"].startswith("company / ") and not r["text"].startswith("products / ")
                   for r in s["retrieved"])
        assert s["metrics"]["context_chars"] == sum(len(r["text"]) for r in s["retrieved"])
    plain = lab(project, "run", "small-hybrid", "--no-progress")
    assert plain.returncode == 0, plain.stderr
    base, _ = load(latest(project, "small-hybrid"))
    assert base["index"]["key"] != results["index"]["key"]
    assert "headers" not in json.loads((Path(base["index"]["path"]) / "manifest.json").read_text())


@pytest.mark.slow
def test_summary_headers_run_summarises_each_document_once(project):
    """The real LLM summarises each of the fixture's 4 documents once; every chunk of a document is
    matched under the same header line and summary; what is scored and sent is the chunk alone;
    another index over the same documents asks the cache, and a rerun asks nothing."""
    _write(project, "small-summary", "schema_version: 1\nextends: small-hybrid\n"
                                     "description: fixture hybrid with summary headers\n"
                                     "headers:\n  fields: [doc_type, name, title, summary]\n")
    p = lab(project, "run", "small-summary", "--no-progress")
    assert p.returncode == 0, p.stderr
    results, samples = load(latest(project, "small-summary"))
    assert results["llm_usage"]["summary"]["calls"] == 4 and results["counters"]["llm_calls_summary"] == 4
    assert results["timings"]["summary_s"] > 0
    path = Path(results["index"]["path"])
    manifest = json.loads((path / "manifest.json").read_text())
    assert manifest["headers"]["summary"]["prompt"] == "doc-summary-v1"
    rows = lancedb.connect(str(path / "lancedb")).open_table(TABLE).to_arrow().to_pylist()
    headers: dict[str, set] = {}
    for r in rows:
        node = json.loads(r["metadata"]["_node_content"])
        header = node["metadata"]["header"]
        line, summary = header.split("\n")
        assert line.startswith(node["metadata"]["doc_type"] + " / ") and len(summary) > 20
        assert r["text"] == header + "\n\n" + node["text"]  # matched: header, summary, chunk
        headers.setdefault(node["metadata"]["source"], set()).add(header)
    assert len(headers) == 4 and all(len(h) == 1 for h in headers.values())
    for s in samples:  # scored and sent: the chunk's own text
        assert all(r["text"] == next(row["text"].split("\n\n", 1)[1] for row in rows if row["id"] == r["id"])
                   for r in s["retrieved"])
        assert s["metrics"]["context_chars"] == sum(len(r["text"]) for r in s["retrieved"])
    _write(project, "small-summary-2", "schema_version: 1\nextends: small-summary\n"
                                       "description: other chunks, same documents\n"
                                       "chunker:\n  name: recursive_character\n  chunk_size: 300\n  chunk_overlap: 0\n")
    other = lab(project, "run", "small-summary-2", "--no-progress")
    assert other.returncode == 0, other.stderr
    results2, _ = load(latest(project, "small-summary-2"))
    assert results2["index"]["key"] != results["index"]["key"]
    assert results2["llm_usage"]["summary"] == {**results2["llm_usage"]["summary"], "calls": 0, "cached": 4}
    again = lab(project, "run", "small-summary", "--no-progress")
    assert again.returncode == 0, again.stderr
    results3, samples3 = load(latest(project, "small-summary"))
    assert results3["index"]["reused"] and results3["llm_usage"]["summary"]["calls"] == 0
    assert results3["llm_usage"]["summary"]["cached"] == 0  # the table was reused: no summary asked for
    assert [s["retrieved"] for s in samples3] == [s["retrieved"] for s in samples]


@pytest.mark.slow
def test_doc_boost_run_reorders_by_the_recorded_first_stage(project):
    _write(project, "small-doc-boost", "schema_version: 1\nextends: small-hybrid\n"
                                       "description: fixture hybrid top 6, doc boost, top 3\n"
                                       "retriever:\n  top_k: 6\n"
                                       "reranker:\n  name: doc_boost\n  top_n: 3\n  weight: 0.5\n")
    p = lab(project, "run", "small-doc-boost", "--no-progress")
    assert p.returncode == 0, p.stderr
    results, samples = load(latest(project, "small-doc-boost"))
    assert results["models"]["reranker"]["source"] == "builtin"
    sources = {}
    for s in samples:
        for r in s["retrieved"]:
            sources[r["id"]] = r["source"]
    for s in samples:
        first = s["first_stage"]
        docs = [f["id"].split("#")[0] for f in first]  # node ids are <source>#<n>
        parts = doc_boost([f["score"] for f in first], docs, 0.5, "sum")
        expected = sorted(range(len(first)), key=lambda i: -sum(parts[i]))[:3]
        assert [r["id"] for r in s["retrieved"]] == [first[i]["id"] for i in expected]
        assert [r["score"] for r in s["retrieved"]] == pytest.approx([sum(parts[i]) for i in expected])


@pytest.mark.slow
def test_sentence_window_run_scores_and_counts_the_windows(project):
    _write(project, "small-window", "schema_version: 1\nextends: small-retrieval\n"
                                    "description: fixture sentences, window 1\n"
                                    "chunker:\n  name: sentence_window\n  window_size: 1\n")
    p = lab(project, "run", "small-window", "--no-progress")
    assert p.returncode == 0, p.stderr
    _, samples = load(latest(project, "small-window"))
    kb = project / "kb"
    for s in samples:
        for r in s["retrieved"]:  # what is recorded as sent: the exact window, at its offsets
            assert (kb / r["source"]).read_text()[r["start_char_idx"]:r["end_char_idx"]] == r["text"]
        assert s["metrics"]["context_chars"] == sum(len(r["text"]) for r in s["retrieved"])
    f2 = next(s for s in samples if s["id"] == "f2")  # "How much does the Ember 90 cost?"
    top = f2["retrieved"][0]
    assert top["source"] == "products/ember90.md" and "8,400 euros" in top["text"]
    # its golden span "costs 8,400 euros." lies inside the window that was sent: recall 1
    assert f2["metrics"]["span_recall"] == 1.0


DESIGNS = ["headers", "bm25-headers", "hybrid-headers", "headers-summary", "bm25-headers-summary",
           "hybrid-headers-summary", "hybrid-headers-sent", "doc-merge", "hybrid-headers-merged",
           "hybrid-headers-merged-unsent", "hybrid-headers-summary-merged", "doc-boost", "hybrid-headers-boost",
           "hybrid-headers-filter",
           "sentence-window", "parent-child", "multi-query", "hyde", "condense"]


@pytest.mark.parametrize("name", DESIGNS)
def test_every_design_config_validates_and_resolves_its_models(name):
    """What `lab validate NAME` checks, for each design config, without loading a model: the
    config, its prompts, and every model it names (the LLMs of summaries and rewrites included)."""
    from lab.rag.pipeline import resolve_models

    cfg = load_experiment(name, ROOT / "experiments")
    plans = resolve_models(cfg, ROOT)
    assert (plans.summary is not None) == ("summary" in name)
    assert (plans.query is not None) == (cfg.query is not None)
    assert plans.embedding.name == "sentence-transformers/all-MiniLM-L6-v2"


def test_the_design_list_is_every_design_config():
    designs = {p.stem for p in (ROOT / "experiments").glob("*.yaml")
               if (c := load_experiment(p.stem, ROOT / "experiments")).headers or c.merge or c.query
               or (c.reranker and c.reranker.name in ("doc_boost", "doc_type_filter"))
               or (c.chunker is not None and c.chunker.name in ("sentence_window", "parent_child"))}
    assert designs == set(DESIGNS)  # a target config (no chunker: a system the lab did not build) is no design


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory) -> Path:
    """One cache for every shipped design config's run in this module."""
    return tmp_path_factory.mktemp("designs-cache")


@pytest.mark.parametrize("name", ["headers", "bm25-headers", "hybrid-headers", "hybrid-headers-sent", "hybrid-headers-merged",
                                  "hybrid-headers-merged-unsent", "doc-merge", "doc-boost", "hybrid-headers-boost",
                                  "hybrid-headers-filter", "sentence-window", "parent-child", "condense",
                                  pytest.param("multi-query", marks=pytest.mark.slow),  # Qwen: ~1 min
                                  pytest.param("hyde", marks=pytest.mark.slow),
                                  pytest.param("headers-summary", marks=pytest.mark.slow),  # Qwen: 4 summaries
                                  pytest.param("bm25-headers-summary", marks=pytest.mark.slow),
                                  pytest.param("hybrid-headers-summary", marks=pytest.mark.slow),
                                  pytest.param("hybrid-headers-summary-merged", marks=pytest.mark.slow)])
def test_shipped_design_configs_run_retrieval_only(project, name, shared_cache):
    """Each shipped design config validates and runs retrieval-only (here on the fixture's documents).
    The configs share one cache, as a user's runs do: the summary configs' one index (its 4 summaries
    from the real LLM) is built once."""
    cfg = load_experiment(name, ROOT / "experiments")
    assert cfg.headers or cfg.reranker or cfg.query or cfg.merge or cfg.chunker.name in ("sentence_window",
                                                                                        "parent_child")
    p = lab(project, "run", name, "--experiments", str(ROOT / "experiments"), "--retrieval-only", "--no-progress",
            "--kb", str(project / "kb"), "--eval", str(project / "eval.jsonl"), "--reports", str(project / "reports"),
            LAB_CACHE=str(shared_cache))
    assert p.returncode == 0, p.stderr
    results, samples = load(latest(project, name))
    assert len(samples) == 6 and results["config"]["generation"] is None
    assert all(1 <= len(s["retrieved"]) <= 6 for s in samples)
    if cfg.headers is not None:
        assert results["config"]["headers"]["fields"] == cfg.headers.fields
    if cfg.headers is not None and cfg.headers.send:  # sent under the header line, whose characters count
        kb = project / "kb"
        for s in samples:
            assert s["metrics"]["context_chars"] == sum(len(r["text"]) for r in s["retrieved"])
            for r in s["retrieved"]:
                line, text = r["text"].split("\n\n", 1)
                assert line.startswith(r["source"].split("/")[0] + " / ")
                assert (kb / r["source"]).read_text()[r["start_char_idx"]:r["end_char_idx"]] == text
    if cfg.merge is not None:  # one passage per document, its pieces cut from the source
        kb = project / "kb"
        for s in samples:
            assert len({r["source"] for r in s["retrieved"]}) == len(s["retrieved"])
            assert s["metrics"]["context_chars"] == sum(len(r["text"]) for r in s["retrieved"])
            for r in s["retrieved"]:
                src = (kb / r["source"]).read_text()
                body = r["text"].split("\n\n", 1)[1] if cfg.headers is not None and cfg.headers.send else r["text"]
                assert body.startswith(src[r["start_char_idx"]:r["start_char_idx"] + 40])
                assert body.endswith(src[r["end_char_idx"] - 40:r["end_char_idx"]])
    if cfg.headers is not None and cfg.headers.summary is not None:  # each of the 4 documents, once at most
        usage = results["llm_usage"]["summary"]
        assert usage["calls"] + usage["cached"] in (0, 4)  # 0: the index was built by an earlier config


# ---------------------------------------------------------------------------------------------
# query side: multi-query fusion

@pytest.mark.parametrize("reply, expected", [
    ("1. Ember 90 price\n2. cost of the Ember 90 kiln\n3. Ember 90 euros", ["Ember 90 price", "cost of the Ember 90 kiln"]),
    ("- \"Ember 90 price\"\n\n* Ember 90 PRICE\nQuery 3: kiln prices", ["Ember 90 price", "kiln prices"]),  # repeats out
    ("How much does the Ember 90 cost?\nEmber 90 price", ["Ember 90 price"]),  # the question itself is not a rewrite
    ("```\nEmber 90 price\n```", ["Ember 90 price"]),
    ("", []),
])
def test_parse_rewrites(reply, expected):
    from lab.rag.query import parse_rewrites

    assert parse_rewrites(reply, "How much does the Ember 90 cost?", 2) == expected


class _Lists(__import__("llama_index.core.base.base_retriever", fromlist=["BaseRetriever"]).BaseRetriever):
    """A first stage answering each query string with a fixed ranked list (plumbing only)."""

    def __init__(self, lists: dict) -> None:
        self.lists, self.asked = lists, []
        super().__init__()

    def _retrieve(self, query_bundle):
        self.asked.append(query_bundle.query_str)
        return [NodeWithScore(node=TextNode(id_=i, text=f"chunk {i}"), score=1.0 - r / 10)
                for r, i in enumerate(self.lists.get(query_bundle.query_str, []))]


class _Replies:
    """An LLM that answers every prompt with one reply, counting calls (plumbing only)."""

    def __init__(self, text: str) -> None:
        self.text, self.messages = text, []

    def chat(self, messages, prompt_version, **kw):
        self.messages.append((messages, prompt_version))
        return type("Completion", (), {"text": self.text})()


def test_multi_query_fuses_the_question_and_its_rewrites_by_reciprocal_rank():
    from lab.config import QueryConfig
    from lab.rag.query import MultiQueryRetriever

    base = _Lists({"q": ["a", "b", "c"], "alpha": ["b", "d"], "beta": ["b", "a"]})
    llm = _Replies("1. alpha\n2. beta\n3. gamma")
    mq = MultiQueryRetriever(base, QueryConfig(rewrites=2), llm, top_k=3)
    [out] = mq.retrieve_many([QueryBundle(query_str="q")])
    # LlamaIndex's RRF, k = 60, ranks from 0: b 1/61 + 1/60 + 1/60, a 1/60 + 1/61, d 1/61, c 1/62
    assert [n.node.node_id for n in out] == ["b", "a", "d"]
    assert [n.score for n in out] == pytest.approx([1 / 61 + 2 / 60, 1 / 60 + 1 / 61, 1 / 61])
    assert base.asked == ["q", "alpha", "beta"] and mq.rewrites == {"q": ["alpha", "beta"]}
    [(messages, version)] = llm.messages
    assert version == "multi-query-v1" and "Write 2 search queries for the next question" in messages[1]["content"]
    assert messages[1]["content"].endswith("Question: q\nQueries:")


def test_multi_query_tells_chunks_apart_by_id_not_by_their_per_query_metadata():
    """Hybrid retrieval records per-query scores in a node's metadata, which LlamaIndex's node hash
    covers: the same chunk found by two queries must still add up as one chunk."""
    from lab.config import QueryConfig
    from lab.rag.query import MultiQueryRetriever

    class Scored(_Lists):
        def _retrieve(self, query_bundle):
            return [NodeWithScore(node=TextNode(id_=n.node.node_id, text=n.node.text,
                                                metadata={"lab_scores": {"query": query_bundle.query_str}}), score=n.score)
                    for n in super()._retrieve(query_bundle)]

    base = Scored({"q": ["a", "b", "c", "d"], "alpha": ["b", "a"]})
    [out] = MultiQueryRetriever(base, QueryConfig(rewrites=1), _Replies("alpha"), top_k=4).retrieve_many(
        [QueryBundle(query_str="q")])
    # a 1/60 + 1/61, b 1/61 + 1/60 (a tie: a was found first), c 1/62, d 1/63: four distinct chunks
    assert [n.node.node_id for n in out] == ["a", "b", "c", "d"]
    assert [n.score for n in out] == pytest.approx([1 / 60 + 1 / 61, 1 / 61 + 1 / 60, 1 / 62, 1 / 63])


@pytest.mark.slow
def test_multi_query_run_records_rewrites_and_reruns_from_the_cache(project):
    p = lab(project, "run", "small-multi-query", "--no-progress")
    assert p.returncode == 0, p.stderr
    results, samples = load(latest(project, "small-multi-query"))
    assert results["config"]["query"]["rewrites"] == 2
    assert results["llm_usage"]["query"]["calls"] == 6 and results["counters"]["llm_calls_query"] == 6
    assert all(isinstance(s["query_rewrites"], list) and len(s["query_rewrites"]) <= 2 for s in samples)
    assert all(r.casefold() != s["question"].casefold() for s in samples for r in s["query_rewrites"])
    page = page_text(latest(project, "small-multi-query") / "report.html")  # each question shows its rewrites
    assert "searched also as" in page
    assert all(f"<q>{html.escape(r)}</q>" in page for s in samples for r in s["query_rewrites"])
    again = lab(project, "run", "small-multi-query", "--no-progress")
    assert again.returncode == 0, again.stderr
    results2, samples2 = load(latest(project, "small-multi-query"))
    assert results2["llm_usage"]["query"]["calls"] == 0 and results2["llm_usage"]["query"]["cached"] == 6
    assert [s["retrieved"] for s in samples2] == [s["retrieved"] for s in samples]  # same rewrites, same ranking


def test_hyde_searches_with_the_passage_and_the_question():
    from lab.config import QueryConfig
    from lab.rag.query import HyDERetriever

    class Seen(_Lists):
        def _retrieve(self, query_bundle):
            self.asked.append((query_bundle.query_str, list(query_bundle.embedding_strs)))
            return [NodeWithScore(node=TextNode(id_="a", text="chunk a"), score=1.0)]

    base = Seen({})
    llm = _Replies("  The Ember 90 costs 8,400 euros.  ")
    hyde = HyDERetriever(base, QueryConfig(mode="hyde"), llm)
    [out] = hyde.retrieve_many([QueryBundle(query_str="How much is the Ember 90?", embedding=[0.1, 0.2])])
    assert [n.node.node_id for n in out] == ["a"]
    # the dense side embeds the passage and the question (LlamaIndex averages them); the words
    # searched (query_str, BM25's) stay the question's; a precomputed question vector is not reused
    assert base.asked == [("How much is the Ember 90?", ["The Ember 90 costs 8,400 euros.", "How much is the Ember 90?"])]
    assert hyde.rewrites == {"How much is the Ember 90?": ["The Ember 90 costs 8,400 euros."]}
    [(messages, version)] = llm.messages
    assert version == "hyde-v1" and messages[1]["content"].endswith("Question: How much is the Ember 90?")
    empty = HyDERetriever(Seen({}), QueryConfig(mode="hyde"), _Replies("   "))
    empty.retrieve_many([QueryBundle(query_str="q")])
    assert empty._retriever.asked == [("q", ["q"])] and empty.rewrites == {"q": []}  # nothing written: the question


def test_hyde_mean_embedding_is_llamaindex_aggregation(minilm):
    """What the dense side searches with: the mean of the passage's and the question's vectors."""
    import numpy as np

    q, passage = "How much is the Ember 90?", "The Ember 90 costs 8,400 euros."
    agg = np.asarray(minilm.get_agg_embedding_from_queries([passage, q]))
    mean = (minilm.encode([passage], "")[0] + minilm.encode([q], "")[0]) / 2
    assert np.allclose(agg, mean, atol=1e-6)


def test_lab_split_writes_the_halves_a_sweep_uses(tmp_path):
    import subprocess
    import sys

    from lab.evalsets.evalset import load_eval_set
    from lab.evalsets.holdout import split_rows

    p = subprocess.run([sys.executable, "-m", "lab", "split", str(FIX / "eval.jsonl"),
                        "--out", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == f"3 dev and 3 held-out questions in {tmp_path}"
    dev, held = split_rows(load_eval_set(FIX / "eval.jsonl", None).rows, 0.5, 13)
    for half, rows in (("dev", dev), ("held-out", held)):
        written = [json.loads(line)["id"] for line in (tmp_path / f"{half}.jsonl").read_text().splitlines()]
        assert written == [r.id for r in rows]
    assert sorted(r.id for r in dev + held) == ["f1", "f2", "f3", "f4", "f5", "f6"]
    bad = subprocess.run([sys.executable, "-m", "lab", "split", str(tmp_path / "none.jsonl"),
                          "--out", str(tmp_path / "x")], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "does not exist" in bad.stderr and not (tmp_path / "x").exists()


def test_formats_configs_put_each_design_over_the_formats_knowledge_base(tmp_path):
    import subprocess
    import sys

    out = tmp_path / "fmt"
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "formats_configs.py"), "--out", str(out),
                        "hybrid", "hybrid-headers-merged"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == f"2 configs in {out}: fmt-hybrid, fmt-hybrid-headers-merged"
    cfg = load_experiment("fmt-hybrid-headers-merged", out)
    design, formats = load_experiment("hybrid-headers-merged", ROOT / "experiments"), load_experiment(
        "formats-mixed", ROOT / "experiments")
    assert cfg.data.knowledge_base == str(ROOT / "knowledge-base-formats")
    assert cfg.data.eval_set == str(ROOT / formats.data.eval_set) and Path(cfg.data.eval_set).is_file()
    assert cfg.loader.extensions == formats.loader.extensions and ".pdf" in cfg.loader.extensions
    # everything else is the design's: retriever, headers (sent), merge
    for section in ("chunker", "headers", "retriever", "merge", "embedding"):
        assert getattr(cfg, section) == getattr(design, section), section
    bad = subprocess.run([sys.executable, str(ROOT / "scripts" / "formats_configs.py"), "--out", str(tmp_path / "x"),
                          "hybrid", "hybird"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "hybird" in bad.stderr and not (tmp_path / "x").exists()


@pytest.mark.slow
def test_a_semantic_cache_does_not_serve_plain_retrievals_to_a_rewriting_config(project):
    """The semantic cache's scope covers the query section where there is one: a config that
    rewrites its questions never gets the retrievals of one that does not (and keeps its own)."""
    _write(project, "small-cached", "schema_version: 1\nextends: small-retrieval\ndescription: cached\n"
                                    "caches:\n  semantic_threshold: 0.5\n")
    _write(project, "small-cached-mq", "schema_version: 1\nextends: small-multi-query\ndescription: cached mq\n"
                                       "caches:\n  semantic_threshold: 0.5\n")
    assert lab(project, "run", "small-cached", "--no-progress").returncode == 0
    p = lab(project, "run", "small-cached-mq", "--no-progress")
    assert p.returncode == 0, p.stderr
    results, samples = load(latest(project, "small-cached-mq"))
    assert results["counters"]["semantic_cache_hits"] == 0 and results["llm_usage"]["query"]["calls"] == 6
    again = lab(project, "run", "small-cached-mq", "--no-progress")
    assert again.returncode == 0, again.stderr
    results2, _ = load(latest(project, "small-cached-mq"))
    assert results2["counters"]["semantic_cache_hits"] == 6  # its own scope serves it


def test_condense_searches_the_standalone_question_only_in_a_conversation():
    from lab.config import QueryConfig
    from lab.rag.query import CondenseRetriever

    class Seen(_Lists):
        def _retrieve(self, query_bundle):
            self.asked.append(query_bundle.query_str)
            return []

    base, llm = Seen({}), _Replies("How much does the Ember 90 cost?\nextra line")
    c = CondenseRetriever(base, QueryConfig(mode="condense"), llm)
    c.retrieve_many([QueryBundle(query_str="Tell me about the Ember 90.")])  # no turns: as asked, no call
    assert base.asked == ["Tell me about the Ember 90."] and llm.messages == []
    c.history = [{"role": "user", "content": "Tell me about the Ember 90."},
                 {"role": "assistant", "content": "A 90-litre production kiln."}]
    c.retrieve(QueryBundle(query_str="And what does it cost?"))
    assert base.asked[-1] == "How much does the Ember 90 cost?"  # the reply's first line
    assert c.rewrites == {"And what does it cost?": ["How much does the Ember 90 cost?"]}
    [(messages, version)] = llm.messages
    assert version == "condense-v1"
    assert "user: Tell me about the Ember 90.\nassistant: A 90-litre production kiln." in messages[1]["content"]
    assert "Last question: And what does it cost?" in messages[1]["content"]


@pytest.mark.slow
def test_ask_condenses_a_follow_up_before_searching(project, monkeypatch):
    """`lab ask`'s engine passes the conversation to a condensing retriever (the tiny packaged
    LLM: plumbing, not quality), and a question with no turns before it costs no rewrite."""
    _write(project, "small-condense", "schema_version: 1\nextends: small\ndescription: condense follow-ups\n"
                                      "query:\n  mode: condense\n  llm:\n    model: smollm2-135m-instruct\n"
                                      "    n_ctx: 2048\n    max_tokens: 48\n")
    monkeypatch.setenv("LAB_CACHE", str(project / "cache"))
    from lab.rag.pipeline import query_engine

    engine = query_engine("small-condense", project / "experiments")
    retriever = engine._retriever
    first = engine.ask("How much does the Ember 90 cost?")
    assert retriever.rewrites == {} and retriever.history == []
    history = [{"role": "user", "content": "How much does the Ember 90 cost?"},
               {"role": "assistant", "content": str(first)}]
    engine.ask("And how hot does it get?", history)
    assert list(retriever.rewrites) == ["And how hot does it get?"] and retriever.history == []


def test_parent_child_children_carry_their_parents_and_send_them_once():
    from lab.config import ParentChildChunker

    text = "Alpha one two.\nBeta three four.\n\nGamma five six.\nDelta seven eight."
    doc = Document(text=text, id_="d.md", metadata={"source": "d.md"}, excluded_embed_metadata_keys=["source"],
                   excluded_llm_metadata_keys=[])
    nodes = build_chunker(ParentChildChunker(name="parent_child", parent_size=40, child_size=20), None
                          ).get_nodes_from_documents([doc])
    parents = [(n.metadata["parent"], n.metadata["window"]) for n in nodes]
    # two parents (the blank line splits them), each cut into two children
    assert [n.get_content() for n in nodes] == ["Alpha one two.", "Beta three four.", "Gamma five six.",
                                                "Delta seven eight."]
    first, second = "Alpha one two.\nBeta three four.", "Gamma five six.\nDelta seven eight."
    assert parents == [("d.md#p0", first), ("d.md#p0", first), ("d.md#p1", second), ("d.md#p1", second)]
    for n in nodes:  # exact offsets, the child's and its parent's
        assert text[n.start_char_idx:n.end_char_idx] == n.get_content()
        assert text[n.metadata["window_start"]:n.metadata["window_end"]] == n.metadata["window"]
        assert n.get_content(metadata_mode=MetadataMode.EMBED) == n.get_content()  # matched alone
    # found: child 3, child 0, child 1 -> parent 1 then parent 0, once each, at the best child's rank
    sent = send_windows([NodeWithScore(node=nodes[i], score=s) for i, s in ((3, 0.9), (0, 0.8), (1, 0.7))])
    assert [n.node.get_content() for n in sent] == [second, first]
    assert [n.score for n in sent] == [0.9, 0.8]
    assert (sent[1].node.start_char_idx, sent[1].node.end_char_idx) == (0, len(first))


def test_parent_child_config_needs_smaller_children():
    from lab.config import ParentChildChunker

    with pytest.raises(ValidationError, match="child_size"):
        ParentChildChunker(name="parent_child", parent_size=300, child_size=300)
