"""The run-time side of the loss funnel on crafted documents, chunks and passages: where a keyword
or a span is lost, by the same rules as the metrics (lab.eval.funnel)."""

from llama_index.core.schema import NodeWithScore, TextNode

from lab.eval.funnel import FunnelView, retrieval_side, sent_side
from lab.evalsets.evalset import EvalRow, Reference
from lab.evalsets.twins import Twins
from lab.evidence.holds import Passage as IndexPassage
from lab.rag.context import Context, Passage

DOC = "Brightwater Kilns was founded by Odile Ferrand. The Ember 90 costs 8,400 euros. Ghent opened in 2014."
DOCS = {"a.md": DOC, "b.md": "A copy: The Ember 90 costs 8,400 euros."}
# chunk boundaries: "Odile Fer|rand" is cut, so that keyword is in no chunk whole
CHUNKS = [("a#0", "a.md", 0, 42, DOC[0:42]), ("a#1", "a.md", 42, 80, DOC[42:80]),
          ("a#2", "a.md", 80, len(DOC), DOC[80:]), ("b#0", "b.md", 0, 39, DOCS["b.md"])]


def node(cid, score=1.0):
    c = next(c for c in CHUNKS if c[0] == cid)
    return NodeWithScore(node=TextNode(id_=cid, text=c[4], metadata={"source": c[1]}, start_char_idx=c[2],
                                       end_char_idx=c[3]), score=score)


VIEW = FunnelView(DOCS, [IndexPassage(text=t, pieces=((src, a, b),), id=cid, source=src) for cid, src, a, b, t in CHUNKS])


def row(keywords=None, refs=None):
    return EvalRow(question="q?", keywords=keywords, reference_answer="r", category="c", references=refs)


def test_keywords_lost_in_the_knowledge_base_at_chunking_and_at_each_stage():
    rec = retrieval_side(row(["Zorblat", "Odile Ferrand", "2014", "8,400", "Brightwater"]),
                         [node("a#1"), node("b#0"), node("a#0")], [node("a#0")], VIEW, {})
    got = {i["keyword"]: (i["lost_at"], i["chunk"], i["candidate_rank"], i["rank"]) for i in rec["items"]}
    assert got == {"Zorblat": ("kb", None, None, None),
                   "Odile Ferrand": ("chunking", None, None, None),  # cut across a#0 and a#1
                   "2014": ("first_stage", "a#2", None, None),
                   "8,400": ("second_stage", "a#1", 1, None),
                   "Brightwater": (None, "a#0", 3, 1)}
    assert [i.get("n_chunks") for i in rec["items"]] == [0, 0, 1, 2, 1]  # 8,400 is in a#1 and b#0
    assert rec["n_candidates"] == 3 and rec["seen"] == ["kb", "chunking", "first_stage", "second_stage"]


def test_spans_by_offsets_twins_count_and_a_span_no_chunk_holds_is_lost_at_chunking():
    price = (DOC.index("The Ember"), DOC.index("euros.") + 6)
    refs = [Reference(source="a.md", content=DOC[price[0]:price[1]], start_index=price[0], end_index=price[1]),
            # 80 characters over three chunks, a#1 covering 38 of them: no chunk holds half
            Reference(source="a.md", content=DOC[20:100], start_index=20, end_index=100),
            Reference(source="gone.md", content="x", start_index=0, end_index=1)]
    twin = {("a.md", *price): Twins([("b.md", 8, 39)], 1)}
    rec = retrieval_side(row(refs=refs), [node("b#0")], [node("b#0")], VIEW, twin)
    first, straddle, gone = rec["items"]
    assert (first["lost_at"], first["chunk"], first["candidate_rank"], first["rank"]) == (None, "a#1", 1, 1)
    assert first["text"].startswith("The Ember 90")  # kept for the answer check of a row without keywords
    assert (straddle["lost_at"], straddle["chunk"]) == ("chunking", None)
    assert gone["lost_at"] == "kb"


def test_the_budget_drops_and_cuts_passages():
    final = [node("a#0"), node("a#1")]
    rec = retrieval_side(row(["Brightwater", "8,400"]), final, final, VIEW, {})
    cut = Passage("a#0", "a.md", DOC[0:11], truncated=True)  # "Brightwater": the first passage cut to 11 chars
    rec = sent_side(rec, final, Context("char_budget", [cut], dropped=["a#1"]))
    assert [(i["keyword"], i["sent"], i["lost_at"]) for i in rec["items"]] == [("Brightwater", 1, None),
                                                                             ("8,400", None, "budget")]
    assert rec["budget"] == {"dropped": ["a#1"], "truncated": ["a#0"]} and rec["seen"][-1] == "budget"
    # a span in the cut-off part of a truncated passage is lost at the budget
    span = Reference(source="a.md", content=DOC[20:40], start_index=20, end_index=40)
    rec = retrieval_side(row(refs=[span]), final, final, VIEW, {})
    rec = sent_side(rec, final, Context("char_budget", [cut], dropped=["a#1"]))
    assert rec["items"][0]["lost_at"] == "budget"
    rec = retrieval_side(row(refs=[span]), final, final, VIEW, {})
    rec = sent_side(rec, final, Context("top_n", [Passage("a#0", "a.md", DOC[0:42])]))
    assert (rec["items"][0]["lost_at"], rec["items"][0]["sent"]) == (None, 1)


def test_the_guardrails_suppressed_context_loses_at_the_second_stage():
    final = [node("a#0")]
    rec = retrieval_side(row(["Brightwater"]), final, final, VIEW, {})
    rec = sent_side(rec, final, Context("top_n", []), suppressed=True)
    assert rec["items"][0]["lost_at"] == "second_stage"
