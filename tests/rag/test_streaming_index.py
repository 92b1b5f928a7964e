"""Streaming ingestion: a build holds one group of documents' nodes and vectors at a time, so its
peak memory does not grow with the corpus beyond the corpus text itself."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from lab.rag.index import document_groups
from lab.rag.loaders import _document

ROOT = Path(__file__).resolve().parents[2]

# Builds an index over N generated documents with a deterministic stand-in embedding (the
# memory of the pipeline is under test here, not the model's), then prints the peak RSS.
SCRIPT = r'''
import hashlib, json, random, resource, sys
from pathlib import Path
import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
import lab.rag.index as index
from lab.config import load_experiment
from lab.rag.loaders import load_folder

class HashEmbedding(BaseEmbedding):
    passage_prefix: str = ""
    query_prefix: str = ""
    fingerprint: str = "hash-384"
    counters: dict = {"computed": 0, "cached": 0}
    def encode(self, texts, prefix, show_progress=False, use_cache=True):
        seeds = [int(hashlib.sha256(t.encode()).hexdigest()[:8], 16) for t in texts]
        v = np.stack([np.random.default_rng(s).standard_normal(384, dtype=np.float32) for s in seeds])
        self.counters["computed"] += len(texts)
        return v / np.linalg.norm(v, axis=1, keepdims=True)
    def _get_query_embedding(self, q): return self.encode([q], "")[0].tolist()
    def _get_text_embedding(self, t): return self.encode([t], "")[0].tolist()
    async def _aget_query_embedding(self, q): return self._get_query_embedding(q)

root, docs, group = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
index.GROUP_CHARS = group
rng = random.Random(5)
words = "policy claim premium broker coverage deductible renewal hazard marine liability clause rider".split()
kb = root / "kb"
kb.mkdir(parents=True)
for d in range(docs):
    text = "\n\n".join(" ".join(rng.choice(words) for _ in range(70)) + f" ({d}-{p})." for p in range(50))
    (kb / f"doc{d:05d}.md").write_text(text)
corpus = load_folder(kb, [".md"], 5_000_000, False)
cfg = load_experiment("small-retrieval", Path(sys.argv[4]), {"chunker": {"chunk_size": 400, "chunk_overlap": 0}})
handle = index.open_or_build(corpus, cfg, HashEmbedding(), root / "cache", show_progress=False)
print(json.dumps({"n_chunks": handle.n_chunks, "chars": corpus.n_chars,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
'''


def build(tmp: Path, docs: int, group: int) -> dict:
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp), str(docs), str(group),
                          str(ROOT / "tests" / "fixtures" / "experiments")],
                         cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_groups_cut_at_the_budget_and_keep_every_document_in_order():
    docs = [_document(f"d{i}.md", Path(f"d{i}.md"), "x" * size, False) for i, size in enumerate([4, 4, 9, 1, 1, 1])]
    groups = list(document_groups(docs, group_chars=8))
    assert [[d.id_ for d in g] for g in groups] == [["d0.md", "d1.md"], ["d2.md"], ["d3.md", "d4.md", "d5.md"]]


@pytest.mark.slow
def test_peak_memory_does_not_grow_with_the_corpus(tmp_path):
    small = build(tmp_path / "small", 160, 500_000)  # ~4 MB of text, ~10,000 chunks
    large = build(tmp_path / "large", 640, 500_000)  # ~16 MB, ~40,000 chunks
    assert large["n_chunks"] > 3.9 * small["n_chunks"] > 30_000
    grown = large["peak_mb"] - small["peak_mb"]
    text_mb = (large["chars"] - small["chars"]) / 2**20
    # held in full, 30,000 more nodes with 384-float vectors as Python lists would add ~400 MB; a
    # streamed build grows by about the corpus text (held by the loader) and no more
    assert grown < 2 * text_mb + 40, (small, large)


def test_build_folders_of_dead_processes_are_removed_and_live_ones_kept(tmp_path):
    from lab.rag.index import _remove_orphans

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    orphan = tmp_path / f".abc.tmp-{dead.stdout.strip()}"
    live = tmp_path / f".def.tmp-{__import__('os').getpid()}"
    table = tmp_path / "abc"
    for folder in (orphan, live, table):
        (folder / "lancedb").mkdir(parents=True)
    _remove_orphans(tmp_path)
    assert not orphan.exists() and live.is_dir() and table.is_dir()
