"""Bad input, end to end through the CLI: every case stops with exit code 2 and a message that
names the file, line or field and says how to fix it, with no traceback, no run folder and no
index written."""

import json

import pytest

from runs import lab

GOOD_ROW = {"id": "z1", "question": "Who founded Brightwater Kilns?", "keywords": ["Odile"],
            "reference_answer": "Odile Ferrand.", "category": "direct_fact"}


def exp(body: str) -> dict:
    return {"experiments/bad.yaml": "schema_version: 1\nextends: small-retrieval\n" + body}


def eval_rows(*lines: str) -> dict:
    return {"bad-eval.jsonl": "\n".join(lines) + "\n", **exp("data:\n  eval_set: bad-eval.jsonl\n")}


def kb(files: dict, extra: str = "") -> dict:
    return {**{f"badkb/{k}": v for k, v in files.items()}, **exp("data:\n  knowledge_base: badkb\n" + extra)}


CASES = {
    # configs
    "invalid yaml": (exp("retriever: [unclosed\n"), "bad", ["bad.yaml", "line"]),
    "unknown key": (exp("retreiver:\n  top_k: 3\n"), "bad", ["bad.yaml", "retreiver"]),
    "wrong type": (exp("retriever:\n  name: vector\n  top_k: many\n"), "bad", ["retriever.top_k"]),
    "unknown component": (exp("retriever:\n  name: vectr\n"), "bad", ["vectr", "vector", "bm25", "hybrid"]),
    "extends cycle": ({"experiments/a.yaml": "schema_version: 1\nextends: b\n",
                       "experiments/b.yaml": "schema_version: 1\nextends: a\n"}, "a", ["cycle"]),
    "missing parent": ({"experiments/bad.yaml": "schema_version: 1\nextends: nope\n"}, "bad", ["nope"]),
    "name leaving experiments": ({}, "../../x", ["invalid experiment name"]),
    "unknown name": ({}, "smal", ["no experiment 'smal'", "did you mean"]),
    "a key written twice": (exp("retriever:\n  top_k: 3\nmetrics:\n  k: 5\nretriever:\n  top_k: 4\n"), "bad",
                            ["bad.yaml line 7: key 'retriever' is written twice (first on line 3)"]),
    "yaml nested 20,000 deep": (exp("x: " + "[" * 20000 + "]" * 20000 + "\n"), "bad",
                                ["bad.yaml line 3: nested more than 32 levels deep"]),
    "yaml alias bomb": (exp("a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(9))
        + "description: *j\n"), "bad", ["more than 64 YAML aliases"]),
    "latin-1 config": ({"experiments/bad.yaml": "schema_version: 1\ndescription: caf\xe9\n".encode("latin-1")},
                       "bad", ["bad.yaml: not UTF-8", "iconv"]),
    "a list as config": ({"experiments/bad.yaml": "- schema_version: 1\n"}, "bad",
                         ["top level must be a mapping", "keys at the left margin"]),
    "top_k of 10^20": (exp("retriever:\n  top_k: 99999999999999999999\n"), "bad",
                       ["retriever.top_k", "less than or equal to 10000"]),
    "metrics.k of a million": (exp("metrics:\n  k: 1000000\n"), "bad", ["metrics.k", "less than or equal to 10000"]),
    "page chunker overlap over size": (exp("chunker:\n  name: page\n  chunk_size: 100\n  chunk_overlap: 300\n"),
                                       "bad", ["chunk_overlap (300) must be smaller than chunk_size (100)"]),
    # knowledge base
    "missing kb folder": (exp("data:\n  knowledge_base: nokb\n"), "bad", ["nokb does not exist"]),
    "empty kb folder": ({"badkb/.keep": "", **exp("data:\n  knowledge_base: badkb\n")}, "bad", ["has no files"]),
    "only empty files": (kb({"a.md": "", "b.md": "  \n"}), "bad", ["no file has text"]),
    "non-utf8 file": (kb({"a.md": b"caf\xe9 au lait\n"}), "bad", ["a.md line 1: not UTF-8", "iconv"]),
    "binary with a text extension": (kb({"a.md": b"PK\x03\x04\x00\x00binary"}), "bad", ["a.md: binary content"]),
    "huge file": (kb({"a.md": "x" * 200}, "loader:\n  max_file_bytes: 100\n"), "bad",
                  ["a.md: 200 bytes is over the limit of 100", "max_file_bytes"]),
    "kb nested 100 folders deep": (kb({"d/" * 100 + "a.md": "deep\n"}), "bad", ["nested more than 64 folders deep"]),
    "utf-16 text": (kb({"a.md": "Brightwater Kilns was founded in 1998.\n".encode("utf-16")}), "bad",
                    ["a.md: UTF-16 text", "iconv -f UTF-16 -t UTF-8"]),
    "utf-16 without a byte-order mark": (kb({"a.md": "Brightwater Kilns.\n".encode("utf-16-le")}), "bad",
                                         ["a.md: UTF-16 text"]),
    # eval sets
    "malformed jsonl": (eval_rows(json.dumps(GOOD_ROW), "{not json"), "bad", ["bad-eval.jsonl line 2: invalid JSON"]),
    "missing field": (eval_rows(json.dumps({k: v for k, v in GOOD_ROW.items() if k != "keywords"})), "bad",
                      ["line 1: field 'keywords': missing"]),
    "empty keywords": (eval_rows(json.dumps({**GOOD_ROW, "keywords": []})), "bad", ["line 1: field 'keywords'"]),
    "duplicate ids": (eval_rows(json.dumps(GOOD_ROW), json.dumps(GOOD_ROW)), "bad",
                      ["line 2: field 'id': 'z1' already used on line 1"]),
    "undeclared category": (eval_rows(json.dumps({**GOOD_ROW, "category": "gossip"})), "bad",
                            ["line 1: field 'category': 'gossip' is not a declared category"]),
    "whitespace-only question": (eval_rows(json.dumps({**GOOD_ROW, "question": "   \t  "})), "bad",
                                 ["line 1: field 'question'", "only whitespace"]),
    "span naming no document": (eval_rows(json.dumps({**GOOD_ROW, "references": [
        {"source": "company/aboot.md", "content": "x", "start_index": 0, "end_index": 1}]})), "bad",
        ["line 1: field 'references.0.source': 'company/aboot.md' names no document", "did you mean 'company/about.md'"]),
    "span outside its document": (eval_rows(json.dumps({**GOOD_ROW, "references": [
        {"source": "company/about.md", "content": "x", "start_index": 90000, "end_index": 90001}]})), "bad",
        ["line 1: field 'references.0.end_index': 90001 is past the end of company/about.md"]),
    "labels for unknown questions": ({"labels.csv": "query_id,relevant_ids\nq404,a.md#0\n",
                                      **exp("data:\n  labels: labels.csv\n")}, "bad",
                                     ["labels.csv line 2: field 'query_id': 'q404'"]),
    # models
    "unresolvable embedding model": (exp("embedding:\n  model: nobody/no-such-model\n"), "bad",
                                     ["nobody/no-such-model", "fix:"]),
    "corrupt gguf": ({"broken.gguf": b"\x00\x01garbage", **exp(
        "generation:\n  llm:\n    model: broken.gguf\n")}, "bad", ["broken.gguf is not a GGUF file"]),
    "missing api key": (exp("generation:\n  llm:\n    backend: openai\n    model: gpt-4.1-nano\n"), "bad",
                        ["OPENAI_API_KEY is not set"]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_stops_cleanly(project, case):
    files, name, says = CASES[case]
    for rel, content in files.items():
        path = project / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    p = lab(project, "run", name, "--no-progress")
    assert p.returncode == 2, (p.returncode, p.stderr[-1500:])
    assert "Traceback" not in p.stderr and p.stderr.lstrip().startswith("error:") or "error:" in p.stderr
    for s in says:
        assert s in p.stderr, (s, p.stderr[-1500:])
    assert "fix:" in p.stderr or case in {"extends cycle", "missing parent"}
    assert not (project / "reports").exists() or not any((project / "reports").rglob("results.json"))
    indexes = project / "cache" / "indexes"
    assert not indexes.exists() or not [d for d in indexes.iterdir() if d.is_dir()]
