from pathlib import Path

import pytest
from llama_index.core.schema import MetadataMode

from lab.config import RecursiveCharacterChunker, SemanticChunker
from lab.errors import DataError
from lab.rag.chunkers import chunk
from lab.rag.loaders import load_folder

FIX = Path(__file__).parents[1] / "fixtures"


def corpus(root=FIX / "kb", embed_metadata=False):
    return load_folder(root, [".md", ".txt"], 1_000_000, embed_metadata)


def test_loader_tags_source_and_doc_type():
    c = corpus()
    assert [d.metadata["source"] for d in c.documents] == [
        "company/about.md", "company/history.md", "products/ember40.md", "products/ember90.md"]
    assert [d.metadata["doc_type"] for d in c.documents] == ["company", "company", "products", "products"]
    assert c.documents[0].doc_id == "company/about.md"


@pytest.mark.parametrize(
    "name, content, message",
    [
        ("bad.md", b"caf\xe9 au lait\n", "bad.md line 1: not UTF-8 (byte 0xe9 at offset 3)"),
        ("bin.md", b"abc\x00def", "bin.md: binary content in a text file (NUL byte at offset 3)"),
        ("big.md", b"x" * 2000, "big.md: 2,000 bytes is over the limit of 1,000"),
    ],
)
def test_loader_errors_name_the_file(tmp_path, name, content, message):
    (tmp_path / "ok.md").write_text("fine")
    (tmp_path / name).write_bytes(content)
    with pytest.raises(DataError) as exc:
        load_folder(tmp_path, [".md"], 1000, False)
    assert f"{tmp_path / name}" in str(exc.value) and message in str(exc.value)


def test_loader_missing_empty_and_skipped(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        load_folder(tmp_path / "nope", [".md"], 1000, False)
    with pytest.raises(DataError, match="has no files ending in .md"):
        load_folder(tmp_path, [".md"], 1000, False)
    (tmp_path / "empty.md").write_text("  \n")
    (tmp_path / "real.md").write_text("text")
    c = load_folder(tmp_path, [".md"], 1000, False)
    assert c.skipped == ["empty.md: empty"] and len(c.documents) == 1


def test_recursive_chunks_equal_langchain_and_keep_offsets():
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    c = corpus()
    nodes = chunk(c, RecursiveCharacterChunker(name="recursive_character", chunk_size=120, chunk_overlap=30), None)
    lc = RecursiveCharacterTextSplitter(chunk_size=120, chunk_overlap=30)
    expected = [t for d in c.documents for t in lc.split_text(d.text)]
    assert [n.get_content() for n in nodes] == expected
    by_source = {d.metadata["source"]: d.text for d in c.documents}
    for n in nodes:
        src = by_source[n.metadata["source"]]
        assert src[n.start_char_idx : n.end_char_idx] == n.get_content()
    assert nodes[0].node_id == "company/about.md#0" and nodes[1].node_id == "company/about.md#1"


def test_metadata_stays_out_of_embedded_text_unless_asked():
    cfg = RecursiveCharacterChunker(name="recursive_character", chunk_size=1000, chunk_overlap=0)
    bare = chunk(corpus(), cfg, None)[0]
    assert bare.get_content(metadata_mode=MetadataMode.EMBED) == bare.get_content()
    with_meta = chunk(corpus(embed_metadata=True), cfg, None)[0]
    embedded = with_meta.get_content(metadata_mode=MetadataMode.EMBED)
    assert "doc_type: company" in embedded and embedded.endswith(with_meta.get_content())


def test_batched_semantic_splitter_matches_the_stock_parser(minilm):
    """Same chunks as LlamaIndex's SemanticSplitterNodeParser, with one embedding call."""
    from llama_index.core.node_parser import SemanticSplitterNodeParser

    c = corpus()
    cfg = SemanticChunker(name="semantic", buffer_size=1, breakpoint_percentile_threshold=80)
    calls_before = minilm.counters["computed"] + minilm.counters["cached"]
    ours = chunk(c, cfg, minilm)
    stock = SemanticSplitterNodeParser.from_defaults(
        embed_model=minilm, buffer_size=1, breakpoint_percentile_threshold=80
    ).get_nodes_from_documents(c.documents)
    assert [n.get_content() for n in ours] == [n.get_content() for n in stock]
    assert len(ours) > len(c.documents)  # it did split somewhere
    for n in ours:
        src = next(d.text for d in c.documents if d.doc_id == n.ref_doc_id)
        assert src[n.start_char_idx : n.end_char_idx] == n.get_content()
    assert minilm.counters["computed"] + minilm.counters["cached"] > calls_before


def test_token_windows_overlap_by_the_given_tokens_and_cover_the_text():
    from lab.rag.tokens import encoding as _encoding
    from lab.rag.chunkers import token_windows

    text = "".join(f"Sentence number {i} says something about kilns. " for i in range(60))
    enc = _encoding("cl100k_base")
    n = len(enc.encode(text))
    windows = token_windows(text, 50, 10)
    assert len(windows) == 1 + -(-(n - 50) // 40)  # first window, then one per 40-token step
    assert windows[0] == text[: len(windows[0])] and text.endswith(windows[-1])
    for a, b in zip(windows, windows[1:]):
        assert len(enc.encode(a)) == 50
        start_b = text.find(b)
        assert start_b < text.find(a) + len(a)  # they overlap
        assert len(enc.encode(text[start_b: text.find(a) + len(a)])) == 10
    assert token_windows("", 50, 10) == [] and token_windows("short", 50, 10) == ["short"]
