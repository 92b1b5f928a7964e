"""`device: auto` with the accelerators faked: CUDA, then MPS, then the CPU; `cpu` forces; a forced
device that is not there stops at start-up; the device changes no key."""

import pytest

from lab.config import EmbeddingConfig, SentenceTransformerRerankerConfig
from lab.errors import ConfigError
from lab.models import device as dev


@pytest.fixture
def machine(monkeypatch):
    """Set which accelerators torch reports: machine(cuda=True, mps=False)."""
    import torch

    def set_(cuda: bool = False, mps: bool = False) -> None:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
        monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=0: "NVIDIA H100 80GB HBM3")
        monkeypatch.setattr(torch.backends.mps, "is_available", lambda: mps)
    return set_


@pytest.mark.parametrize("cuda, mps, expected", [
    (True, True, "cuda"),  # CUDA first
    (False, True, "mps"),  # then Apple's MPS
    (False, False, "cpu"),  # then the CPU
])
def test_auto_picks_cuda_then_mps_then_cpu(machine, cuda, mps, expected):
    machine(cuda=cuda, mps=mps)
    assert dev.pick_device("auto") == expected and dev.pick_device(None) == expected


def test_cpu_forces_the_cpu_and_a_missing_accelerator_is_an_error(machine):
    machine(cuda=True, mps=True)
    assert dev.pick_device("cpu") == "cpu"
    machine(cuda=False, mps=False)
    with pytest.raises(ConfigError) as exc:
        dev.pick_device("cuda", "embedding.device")
    assert exc.value.message == "embedding.device: cuda was asked for, and torch finds no CUDA device here"
    assert "device: auto" in exc.value.hint
    with pytest.raises(ConfigError, match="unknown device 'tpu'"):
        dev.pick_device("tpu")


def test_the_record_names_the_card(machine):
    machine(cuda=True)
    assert dev.device_record(None) == {"asked": "auto", "used": "cuda (NVIDIA H100 80GB HBM3)"}
    assert dev.device_record("cpu") == {"asked": "cpu", "used": "cpu"}


def test_auto_is_written_as_null_so_fingerprints_and_index_keys_stay(tmp_path):
    """``device: auto`` is the default (null), so a config that writes it has the fingerprint of one
    that does not; ``cpu`` is kept. The index key reads no device at all."""
    from lab.rag.index import index_key

    for cls in (EmbeddingConfig, SentenceTransformerRerankerConfig):
        extra = {"name": "sentence_transformer"} if cls is SentenceTransformerRerankerConfig else {}
        assert cls(**extra, device="auto").model_dump(exclude_none=True) == cls(**extra).model_dump(exclude_none=True)
        assert cls(**extra, device="cpu").device == "cpu"
    from lab.config import RecursiveCharacterChunker

    chunker = RecursiveCharacterChunker(name="recursive_character")
    keys = {index_key("corpus", chunker, EmbeddingConfig(device=d), "minilm:abc") for d in ("auto", "cpu", "cuda")}
    assert len(keys) == 1


def test_the_embedding_loads_on_the_picked_device_with_unchanged_cache_keys(machine, tmp_path, monkeypatch):
    """The embedding model asks pick_device at load time (faked CUDA here) and hands the device to
    LlamaIndex's HuggingFaceEmbedding; its fingerprint, and so every cache key, holds no device."""
    import llama_index.embeddings.huggingface as hf

    from lab.models.embeddings import build_embedding
    from lab.models.resolve import resolve_hf_model

    seen = {}

    class Fake:
        def __init__(self, **kwargs):
            seen.update(kwargs)

    monkeypatch.setattr(hf, "HuggingFaceEmbedding", Fake)
    machine(cuda=True)
    resolved = resolve_hf_model("sentence-transformers/all-MiniLM-L6-v2", "embedding model")
    auto = build_embedding(EmbeddingConfig(), resolved, None)
    forced = build_embedding(EmbeddingConfig(device="cpu"), resolved, None)
    assert auto.device_record() == {"asked": "auto", "used": None}  # not loaded yet
    auto.load()
    assert seen["device"] == "cuda" and auto.device_record()["used"] == "cuda (NVIDIA H100 80GB HBM3)"
    forced.load()
    assert seen["device"] == "cpu"
    assert auto.fingerprint == forced.fingerprint
    machine(cuda=False)
    with pytest.raises(ConfigError, match="embedding.device: cuda was asked for"):
        build_embedding(EmbeddingConfig(device="cuda"), resolved, None)  # at start-up, before any work


def test_lab_tune_takes_the_device_and_its_card_names_it(machine, tmp_path):
    """`lab tune --device cuda` where torch finds none stops in the option checks, before any
    work; the card's wall-time line names the device the model trained on."""
    from lab.tune.card import model_card
    from lab.tune.options import TuneOptions
    from lab.tune.train import check_options

    machine(cuda=False)
    opts = TuneOptions(target="reranker", out="x", pseudo=10, device="cuda", cache_root=tmp_path)
    with pytest.raises(ConfigError) as exc:
        check_options(opts)
    assert exc.value.message == "--device: cuda was asked for, and torch finds no CUDA device here"
    card = {"name": "x", "target": "reranker", "base_model": "m", "fingerprint": "f", "training_set": "t", "kb": "k",
            "index": {"experiment": "turn13", "key": "i"}, "questions": {"train": 1, "generated": 0, "pseudo": 1, "dev": 0},
            "hyperparameters": {"loss": "bce", "lr": 5e-5, "epochs": 1, "batch_size": 16, "max_length": 256,
                                "negatives": 3, "warmup_ratio": 0.1},
            "seed": 0, "steps": 3, "wall_s": 9.5, "train_s": 4.0, "pairs_per_s": 12.0, "final_loss": 0.5,
            "mean_loss": 0.6, "dev": {}, "device": "cuda (NVIDIA H100 80GB HBM3)"}
    assert "| wall time | 9.5 s (training 4.0 s, 12.0 rows/s, on cuda (NVIDIA H100 80GB HBM3)) |" in model_card(card)
    assert "| wall time | 9.5 s (training 4.0 s, 12.0 rows/s) |" in model_card({**card, "device": None})
