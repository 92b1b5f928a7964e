"""lab/cli/experiments.py: your documents on every verb that reads them. `lab validate` and
`lab ask` take --kb and --eval through the same overrides as `lab run` (never the config's demo
knowledge base when documents are named), and a refusal says which knowledge base was searched."""

from __future__ import annotations

import types
from pathlib import Path

import pytest

import lab.rag.pipeline as pipeline
from lab.cli import main

FIXTURES = Path(__file__).parents[1] / "fixtures"
EXPERIMENTS = str(FIXTURES / "experiments")


@pytest.fixture
def docs(tmp_path) -> Path:
    kb = tmp_path / "my-docs"
    (kb / "notes").mkdir(parents=True)
    (kb / "notes" / "quartz.md").write_text("# Zephyr Quartz\n\nZephyr Quartz is cut in Lisbon.\n")
    (kb / "about.md").write_text("# About\n\nWe cut stone.\n")
    return kb


def test_validate_reads_the_kb_and_eval_set_given(docs, capsys):
    assert main(["validate", "small-retrieval", "--experiments", EXPERIMENTS, "--kb", str(docs),
                 "--eval", str(FIXTURES / "eval.jsonl")]) == 0
    out = capsys.readouterr().out
    assert f"knowledge_base: {docs}\n" in out  # the resolved config holds the documents named
    assert f"# knowledge base: {docs} (2 files)\n" in out
    assert f"# eval set: {FIXTURES / 'eval.jsonl'} (6 questions)\n" in out


def test_validate_without_kb_names_the_configs_own(capsys):
    assert main(["validate", "small-retrieval", "--experiments", EXPERIMENTS]) == 0
    assert f"# knowledge base: {FIXTURES / 'kb'} (4 files)\n" in capsys.readouterr().out


def test_validate_of_a_missing_kb_exits_2_naming_it(tmp_path, capsys):
    assert main(["validate", "small-retrieval", "--experiments", EXPERIMENTS, "--kb", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: knowledge base {tmp_path / 'nope'} does not exist")


class _Engine:
    def __init__(self, refused: bool):
        self.refused = refused

    def ask(self, question, history=None):
        text = "I don't have enough information to answer." if self.refused else "In Lisbon [1]."
        answer = {"text": text, "citations": [] if self.refused else [1], "refused": self.refused,
                  "prompt_tokens": 10, "completion_tokens": 5, "cached": False}
        context = {"passages": [{"number": 1, "source": "about.md", "truncated": False}]}
        timings = {"retrieve_s": 0.01, "rerank_s": 0.0, "generate_s": 0.1}
        return types.SimpleNamespace(metadata={"answer": answer, "context": context, "timings": timings})


@pytest.fixture
def opened(monkeypatch):
    """The pipeline `lab ask` opens, standing in for the real one: records the config it gets."""
    seen: dict = {}

    def open_pipeline(cfg, plans, root, cache, show_progress=True):
        seen["cfg"] = cfg
        return types.SimpleNamespace(query_engine=lambda: _Engine(seen.get("refused", True)))

    monkeypatch.setattr(pipeline, "resolve_models", lambda cfg, root: None)
    monkeypatch.setattr(pipeline, "open_pipeline", open_pipeline)
    return seen


def test_ask_searches_the_kb_given_and_says_so_on_a_refusal(docs, opened, tmp_path, capsys):
    assert main(["ask", "small", "Where is Zephyr Quartz cut?", "--experiments", EXPERIMENTS, "--kb", str(docs),
                 "--cache", str(tmp_path / "cache")]) == 0
    assert opened["cfg"].data.knowledge_base == str(docs)
    out = capsys.readouterr().out
    assert out.rstrip().endswith(f"note: no answer in the knowledge base searched, {docs} (--kb)")


def test_ask_without_kb_names_the_configs_kb_and_how_to_search_yours(opened, tmp_path, capsys):
    assert main(["ask", "small", "Where is Zephyr Quartz cut?", "--experiments", EXPERIMENTS,
                 "--cache", str(tmp_path / "cache")]) == 0
    assert opened["cfg"].data.knowledge_base == "kb"
    out = capsys.readouterr().out
    assert (f"note: no answer in the knowledge base searched, {FIXTURES / 'kb'} (data.knowledge_base of small); "
            "to search your own documents: lab ask small --kb DIR") in out


def test_an_answer_has_no_note(docs, opened, tmp_path, capsys):
    opened["refused"] = False
    assert main(["ask", "small", "Where is Zephyr Quartz cut?", "--experiments", EXPERIMENTS, "--kb", str(docs),
                 "--cache", str(tmp_path / "cache")]) == 0
    out = capsys.readouterr().out
    assert "In Lisbon [1]." in out and "note:" not in out


@pytest.mark.slow
def test_query_engine_searches_the_kb_given(docs, tmp_path):
    from llama_index.core.schema import QueryBundle

    engine = pipeline.query_engine("small", FIXTURES / "experiments", tmp_path / "cache", kb=docs)
    sources = {n.node.metadata["source"] for n in engine.retrieve(QueryBundle("Where is Zephyr Quartz cut?"))}
    assert sources == {"notes/quartz.md", "about.md"}  # the fixture's own kb/ has neither
