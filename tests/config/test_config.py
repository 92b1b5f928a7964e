from pathlib import Path

import pytest

from lab.config import load_experiment, merge
from lab.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]


def write(d: Path, name: str, text: str) -> None:
    (d / f"{name}.yaml").write_text(text)


BASE = """schema_version: 1
data:
  knowledge_base: kb
  eval_set: eval.jsonl
chunker:
  name: recursive_character
  chunk_size: 500
  chunk_overlap: 50
retriever:
  name: vector
  top_k: 4
"""


def test_shipped_story_configs_resolve():
    exp = ROOT / "experiments"
    t13 = load_experiment("turn13", exp)
    t18 = load_experiment("turn18", exp)
    t22 = load_experiment("turn22", exp)
    off = load_experiment("turn22-offline", exp)
    assert (t13.chunker.name, t13.chunker.chunk_size, t13.chunker.chunk_overlap) == ("recursive_character", 1000, 200)
    assert t13.retriever.top_k == 4 and t13.reranker is None
    assert t13.embedding.model == "sentence-transformers/all-MiniLM-L6-v2" and not t13.embedding.embed_metadata
    assert (t18.chunker.name, t18.chunker.buffer_size, t18.chunker.breakpoint_percentile_threshold) == ("semantic", 1, 95)
    assert t18.retriever.top_k == 4
    assert t22.chunker == t18.chunker and t22.embedding == t18.embedding  # same index key inputs
    assert t22.retriever.top_k == 50 and t22.reranker.name == "flag_embedding"
    assert t22.reranker.model == "BAAI/bge-reranker-base" and t22.reranker.top_n == 3
    assert off.chunker == t18.chunker and off.reranker.name == "llm_pointwise" and off.reranker.top_n == 3
    assert (off.reranker.candidate_k, off.reranker.first_stage_weight) == (5, None)  # off
    fused = load_experiment("turn22-offline-fused", exp)
    assert fused.reranker == off.reranker.model_copy(update={"first_stage_weight": 1.0})


def test_extends_replaces_a_component_whose_name_changes(tmp_path):
    write(tmp_path, "a", BASE)
    write(tmp_path, "b", "extends: a\nchunker:\n  name: semantic\n")
    cfg = load_experiment("b", tmp_path)
    assert cfg.chunker.name == "semantic" and cfg.chunker.buffer_size == 1
    assert cfg.extends == "a" and cfg.name == "b"


def test_extends_merges_same_component(tmp_path):
    write(tmp_path, "a", BASE)
    write(tmp_path, "b", "extends: a\nchunker:\n  chunk_size: 800\n")
    cfg = load_experiment("b", tmp_path)
    assert (cfg.chunker.chunk_size, cfg.chunker.chunk_overlap) == (800, 50)


def test_merge_null_removes():
    assert merge({"reranker": {"name": "x"}}, {"reranker": None}) == {"reranker": None}


def test_unknown_key_names_file_line_and_field(tmp_path):
    write(tmp_path, "a", BASE + "retriver:\n  top_k: 3\n")
    with pytest.raises(ConfigError) as exc:
        load_experiment("a", tmp_path)
    assert f"{tmp_path / 'a.yaml'} line 12: field 'retriver': unknown key" in str(exc.value)


def test_wrong_type_names_line(tmp_path):
    write(tmp_path, "a", BASE.replace("top_k: 4", "top_k: four"))
    with pytest.raises(ConfigError) as exc:
        load_experiment("a", tmp_path)
    assert "a.yaml line 11: field 'retriever.top_k'" in str(exc.value)


def test_unknown_component_suggests(tmp_path):
    write(tmp_path, "a", BASE.replace("name: recursive_character", "name: recursive_charcter"))
    with pytest.raises(ConfigError) as exc:
        load_experiment("a", tmp_path)
    msg = str(exc.value)
    assert "a.yaml line 6: field 'chunker.name': unknown chunker 'recursive_charcter'" in msg
    assert "did you mean 'recursive_character'?" in msg and "semantic" in msg


def test_invalid_yaml_names_line(tmp_path):
    write(tmp_path, "a", BASE + "metrics: [\n")
    with pytest.raises(ConfigError, match=r"a.yaml line \d+: invalid YAML"):
        load_experiment("a", tmp_path)


def test_extends_cycle_and_missing_parent(tmp_path):
    write(tmp_path, "a", "extends: b\n" + BASE)
    write(tmp_path, "b", "extends: a\n")
    with pytest.raises(ConfigError, match="extends cycle: a -> b -> a"):
        load_experiment("a", tmp_path)
    write(tmp_path, "c", "extends: nope\n")
    with pytest.raises(ConfigError, match="extends 'nope', but .*nope.yaml does not exist"):
        load_experiment("c", tmp_path)


@pytest.mark.parametrize("name", ["../../x", "a/b", "", ".hidden"])
def test_names_cannot_leave_experiments(tmp_path, name):
    with pytest.raises(ConfigError, match="invalid experiment name"):
        load_experiment(name, tmp_path)


def test_missing_experiment_lists_available(tmp_path):
    write(tmp_path, "turn13", BASE)
    with pytest.raises(ConfigError, match="did you mean 'turn13'"):
        load_experiment("turn31", tmp_path)


def test_rerank_sizes_checked(tmp_path):
    write(tmp_path, "a", BASE + "reranker:\n  name: llm_pointwise\n  top_n: 5\n")
    with pytest.raises(ConfigError, match="top_n \\(5\\) exceeds retriever.top_k \\(4\\)"):
        load_experiment("a", tmp_path)


def test_overlap_must_be_below_size(tmp_path):
    write(tmp_path, "a", BASE.replace("chunk_overlap: 50", "chunk_overlap: 500"))
    with pytest.raises(ConfigError, match="chunk_overlap \\(500\\) must be smaller than chunk_size \\(500\\)"):
        load_experiment("a", tmp_path)


def test_overrides_and_fingerprint(tmp_path):
    write(tmp_path, "a", BASE)
    a = load_experiment("a", tmp_path)
    b = load_experiment("a", tmp_path, {"sample": {"limit": 3}, "data": {"eval_set": "/x.jsonl"}})
    assert b.sample.limit == 3 and b.data.eval_set == "/x.jsonl"
    assert a.fingerprint() != b.fingerprint()  # data changed; the sample alone would not change it
    c = load_experiment("a", tmp_path, {"sample": {"limit": 3}})
    assert a.fingerprint() == c.fingerprint()


@pytest.mark.parametrize("reranker", ["sentence_transformer", "flag_embedding", "llm_pointwise"])
def test_first_stage_weight_zero_is_off_as_null_is(reranker):
    """One off value: 0 reads as null for every model reranker (a cross-encoder's 0 used to record
    z-scores of its own order)."""
    from pydantic import TypeAdapter

    from lab.config import RerankerConfig

    read = TypeAdapter(RerankerConfig).validate_python
    off, zero, fused = (read({"name": reranker, "first_stage_weight": w}) for w in (None, 0, 0.5))
    assert (off.first_stage_weight, zero.first_stage_weight, fused.first_stage_weight) == (None, None, 0.5)
    assert zero == off == read({"name": reranker})
    with pytest.raises(ValueError, match="greater than or equal to 0"):
        read({"name": reranker, "first_stage_weight": -1})


def test_llm_pointwise_writes_off_as_zero_so_earlier_fingerprints_stand():
    """llm_pointwise's off value was 0.0 and its resolved configs wrote it: they still do, so the
    fingerprints of its runs (and turn22-offline's) are as they were; a cross-encoder leaves it out."""
    from lab.config import LLMPointwiseRerankerConfig, SentenceTransformerRerankerConfig

    llm = LLMPointwiseRerankerConfig(name="llm_pointwise")
    assert llm.model_dump(mode="json", exclude_none=True)["first_stage_weight"] == 0.0
    assert LLMPointwiseRerankerConfig.model_validate(llm.model_dump(mode="json")) == llm
    assert llm.model_copy(update={"first_stage_weight": 1.0}).model_dump()["first_stage_weight"] == 1.0
    ce = SentenceTransformerRerankerConfig(name="sentence_transformer", first_stage_weight=0)
    assert "first_stage_weight" not in ce.model_dump(mode="json", exclude_none=True)
    offline = load_experiment("turn22-offline", ROOT / "experiments")
    assert offline.reranker.first_stage_weight is None
    hashed = offline.model_dump(mode="json", exclude_none=True)  # as the fingerprint dumps it
    assert hashed["reranker"]["first_stage_weight"] == 0.0  # what its fingerprint hashed before


def test_registries_match_the_config_schema():
    from lab.config import ChunkerConfig, RerankerConfig, RetrieverConfig, component_names
    from lab.rag.chunkers import CHUNKERS
    from lab.rag.postprocess import RERANKERS
    from lab.rag.retrievers import RETRIEVERS

    assert CHUNKERS.names() == sorted(component_names(ChunkerConfig))
    assert RETRIEVERS.names() == sorted(component_names(RetrieverConfig))
    assert RERANKERS.names() == sorted(component_names(RerankerConfig))


def test_the_ragas_metrics_the_config_accepts_are_the_catalogues_and_the_evaluators():
    from typing import get_args

    from lab.config.schema import RagasConfig, RagasMetric
    from lab.eval.ragas import RAGAS_METRICS
    from lab.metrics.catalog import METRICS, RAGAS_METRICS as CATALOGUE

    names = list(get_args(RagasMetric))
    assert names == list(CATALOGUE) == list(RAGAS_METRICS) == RagasConfig().metrics
    assert [m for m in METRICS if m.startswith("ragas_")] == [f"ragas_{n}" for n in names]


def test_a_bad_value_from_the_command_line_is_blamed_on_the_command_line_not_the_file():
    """A --set typo was reported as "experiments/hybrid.yaml line 7" (the retriever section's line)."""
    from lab.config import load_experiment
    from lab.errors import ConfigError

    ex = Path(__file__).resolve().parents[2] / "experiments"
    with pytest.raises(ConfigError) as exc:
        load_experiment("hybrid", ex, {"retriever": {"alfa": 1}})
    assert exc.value.message == ("invalid experiment config 'hybrid':\nthe command line (--set, --kb, --eval, --limit or "
                                 "--seed): field 'retriever.alfa': unknown key (check its spelling against the docs)")
    with pytest.raises(ConfigError) as exc:  # the value is given, though its section is in the file
        load_experiment("hybrid", ex, {"retriever": {"top_k": 0}})
    assert "the command line (--set, --kb, --eval, --limit or --seed): field 'retriever.top_k'" in exc.value.message


def test_a_bad_key_in_a_file_is_still_named_by_file_and_line(tmp_path):
    from lab.config import load_experiment
    from lab.errors import ConfigError

    (tmp_path / "typo.yaml").write_text("schema_version: 1\ndescription: x\nretriever:\n  name: vector\n  alfa: 1\n")
    with pytest.raises(ConfigError) as exc:
        load_experiment("typo", tmp_path, {"retriever": {"top_k": 3}})
    assert f"{tmp_path / 'typo.yaml'} line 5: field 'retriever.alfa': unknown key" in exc.value.message


def test_a_kb_given_for_a_run_in_other_formats_is_read_in_them(tmp_path, caplog):
    """``lab run turn13 --kb PAGES`` on a folder of HTML pages (the config reads Markdown and text)
    reads the pages, as ``lab generate`` did, saying so; one file of the config's formats leaves
    the config as it is, and so does a folder with nothing the lab reads."""
    from lab.config import run_overrides

    write(tmp_path, "a", BASE)
    pages = tmp_path / "pages"
    (pages / "user").mkdir(parents=True)
    (pages / "user" / "quickstart.html").write_text("<p>Hi.</p>")
    (pages / "index.HTML").write_text("<p>Hi.</p>")
    (pages / "logo.png").write_bytes(b"\x89PNG")
    (pages / ".hidden").mkdir()
    (pages / ".hidden" / "notes.md").write_text("hidden")
    with caplog.at_level("WARNING"):
        cfg = load_experiment("a", tmp_path, run_overrides(pages))
    assert cfg.loader.extensions == [".html"]
    assert "has no .md, .txt file: reading its .html files instead" in caplog.text
    (pages / "user" / "notes.md").write_text("# Notes")
    assert load_experiment("a", tmp_path, run_overrides(pages)).loader.extensions == [".md", ".txt"]
    images = tmp_path / "images"
    images.mkdir()
    (images / "a.png").write_bytes(b"\x89PNG")
    assert load_experiment("a", tmp_path, run_overrides(images)).loader.extensions == [".md", ".txt"]
    assert load_experiment("a", tmp_path).loader.extensions == [".md", ".txt"]
