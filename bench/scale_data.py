"""Data for the scale bench (``bench/scale.py``): real MiniLM vectors, generated tables around
them, queries, brute-force ground truth and recall@k.

Embedding 10^6 texts with all-MiniLM-L6-v2 on 2 CPU cores takes hours (the rate is measured on the
knowledge base's chunks and reported), so a table of N rows holds vectors *sampled around* real
ones: ``normalise(x + sigma * g)`` for a real chunk vector ``x`` drawn uniformly and
``g ~ N(0, I_384)``. ``sigma`` is chosen per size so that the median distance from a generated
vector to its nearest generated neighbour equals the median distance from a real chunk to its
nearest real chunk: with N/n copies of each of n real chunks, a generated vector's nearest
neighbour is almost always a sibling (a copy of the same chunk), so the calibration simulates
siblings only, and the written table measures the result on 200 of its own rows.

Isotropic noise makes neighbourhoods harder than real ones (every neighbour nearly equidistant:
the questions' local intrinsic dimensionality, reported as ``question_lid20``, is ~4-6x the real
data's), which is pessimistic for quantised indexes; ``--noise shaped`` draws the noise with the
real chunks' covariance instead.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
INSURELLM = ROOT.parent / "shared" / "benchmarks" / "insurellm"
MODEL = "sentence-transformers/all-MiniLM-L6-v2"
CHUNK_CHARS = 500
TRUTH_DEPTH = 100  # exact neighbours kept per query: enough to judge ties at the 10th
TIE_TOL = 1e-5  # squared-l2 slack for "as close as the k-th": float32 rounding, LanceDB against numpy
NN_SAMPLE = 200  # generated rows whose nearest neighbour is measured in the written table


def quantiles(x: np.ndarray) -> dict:
    return {f"p{q}": float(np.percentile(x, q)) for q in (10, 50, 90)}


def peak_rss_mb() -> float:
    """This process's peak RSS since it started (VmHWM: getrusage's ru_maxrss would include the
    parent's RSS at fork, a model's worth here)."""
    status = Path("/proc/self/status").read_text()
    return int(status.split("VmHWM:")[1].split()[0]) / 1024  # kB


def normalise(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def nn_l2(x: np.ndarray) -> np.ndarray:
    """Distance from each unit row of ``x`` to its nearest other row."""
    sim = x @ x.T
    np.fill_diagonal(sim, -np.inf)
    return np.sqrt(np.clip(2 - 2 * sim.max(axis=1), 0, None))


def lid(d: np.ndarray, k: int = 20) -> np.ndarray:
    """Local intrinsic dimensionality per query, maximum-likelihood estimate (Levina & Bickel;
    Amsaleg et al. 2015) from the query's ``k`` nearest l2 distances ``d`` (ascending, > 0):
    ``-1 / mean_i ln(d_i / d_k)``. The higher, the more alike the neighbours' distances and the
    harder an ANN index's job."""
    d = np.sort(d, axis=1)[:, :k]
    return -1 / np.log(d / d[:, -1:]).mean(axis=1)


@dataclass
class RealData:
    chunks: np.ndarray  # (n, d) unit vectors of the knowledge base's chunks
    questions: np.ndarray  # (q, d) unit vectors of the eval set's questions
    rate: float  # chunks embedded per second, measured here
    model_location: str
    model_source: str
    nn: np.ndarray = field(init=False)

    def __post_init__(self):
        self.nn = nn_l2(self.chunks)

    n_chunks = property(lambda self: len(self.chunks))
    dim = property(lambda self: self.chunks.shape[1])
    nn_median = property(lambda self: float(np.median(self.nn)))

    def model_info(self) -> dict:
        return {"name": MODEL, "source": self.model_source, "dimension": self.dim, "device": "cpu",
                "chunks_per_s": self.rate, "rate_measured_on_chunks": self.n_chunks,
                "estimated_hours_for_1e6_chunks": 1e6 / self.rate / 3600}

    def data_info(self) -> dict:
        q_d = np.sqrt(np.clip(2 - 2 * (self.questions @ self.chunks.T), 0, None))
        q_top1 = q_d.min(axis=1)
        return {"knowledge_base": "insurellm/knowledge-base", "chunk_chars": CHUNK_CHARS, "real_chunks": self.n_chunks,
                "questions": len(self.questions), "real_nn_l2": quantiles(self.nn),
                "real_question_top1_l2": quantiles(q_top1), "real_question_lid20": quantiles(lid(q_d)),
                "distance": "l2 (LanceDB returns squared l2)"}


def embed_real(max_chunks: int | None = None, max_questions: int | None = None, cache: Path | None = None) -> RealData:
    """Chunk the InsureLLM knowledge base into ~500-character pieces and embed them and the
    questions with the lab's resolved all-MiniLM-L6-v2 (local: a package or the HF cache).

    ``cache``: a folder; the vectors and the rate measured when they were computed are kept there
    under a hash of the texts and the model's folder, so later runs skip the minutes of embedding.
    """
    import hashlib
    import json
    import sys

    from langchain_text_splitters import RecursiveCharacterTextSplitter
    from sentence_transformers import SentenceTransformer  # deferred: torch

    from lab.models.resolve import resolve_hf_model

    splitter = RecursiveCharacterTextSplitter(chunk_size=CHUNK_CHARS, chunk_overlap=0)
    texts = [t for p in sorted((INSURELLM / "knowledge-base").rglob("*.md"))
             for t in splitter.split_text(p.read_text(encoding="utf-8"))]
    lines = (INSURELLM / "tests.jsonl").read_text(encoding="utf-8").splitlines()
    questions = [json.loads(line)["question"] for line in lines if line.strip()]
    texts, questions = texts[:max_chunks], questions[:max_questions]
    resolved = resolve_hf_model(MODEL, "embedding model")
    key = hashlib.sha256(json.dumps([resolved.location, texts, questions]).encode()).hexdigest()[:16]
    path = cache / f"real-{key}.npz" if cache else None
    if path and path.exists():
        z = np.load(path)
        return RealData(z["chunks"], z["questions"], float(z["rate"]), resolved.location, resolved.source)
    model = SentenceTransformer(resolved.location, device="cpu")
    model.encode(texts[:16], batch_size=8)  # warm-up: first-call allocations are not the rate
    t0 = time.perf_counter()
    chunks = model.encode(texts, batch_size=8, normalize_embeddings=True)  # the lab's default batch size
    rate = len(texts) / (time.perf_counter() - t0)
    q = model.encode(questions, batch_size=8, normalize_embeddings=True)
    real = RealData(chunks.astype(np.float32), q.astype(np.float32), rate, resolved.location, resolved.source)
    if path:
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(path, chunks=real.chunks, questions=real.questions, rate=rate)
    return real


def shaped_mix(chunks: np.ndarray) -> np.ndarray:
    """``--noise shaped``: the matrix ``M`` that makes ``z @ M`` (z ~ N(0, I)) Gaussian with the real
    chunks' covariance, scaled to trace d, so that sigma means the same length as isotropic noise
    but the noise lies along the directions real chunks differ in."""
    lam, vecs = np.linalg.eigh(np.cov(chunks, rowvar=False))
    lam = np.clip(lam, 0, None) * chunks.shape[1] / lam.clip(0, None).sum()
    return (np.sqrt(lam)[:, None] * vecs.T).astype(np.float32)


def gaussian(rng: np.random.Generator, n: int, d: int, mix: np.ndarray | None) -> np.ndarray:
    """n draws of N(0, I_d), or of N(0, mix^T mix) with a ``shaped_mix``."""
    z = rng.standard_normal((n, d), dtype=np.float32)
    return z if mix is None else z @ mix


def calibrate_sigma(chunks: np.ndarray, rows: int, target: float, seed: int,
                    mix: np.ndarray | None = None) -> tuple[float, dict]:
    """The noise sigma whose generated vectors' median nearest-neighbour distance is ``target``
    at ``rows`` rows: bisection on a simulation of 16 real chunks with rows / n copies each
    (the same random draws at every step, so the median is monotone in sigma)."""
    rng = np.random.default_rng([seed, rows, 1])
    copies = int(min(max(2, round(rows / len(chunks))), 4000))
    bases = rng.choice(len(chunks), size=min(16, len(chunks)), replace=False)
    noise = gaussian(rng, len(bases) * copies, chunks.shape[1], mix).reshape(len(bases), copies, -1)

    def median_nn(sigma: float) -> float:
        d = []
        for b, g in zip(bases, noise):
            v = normalise(chunks[b] + sigma * g)
            sim = v[:64] @ v.T
            sim[np.arange(min(64, copies)), np.arange(min(64, copies))] = -np.inf
            d.append(np.sqrt(np.clip(2 - 2 * sim.max(axis=1), 0, None)))
        return float(np.median(np.concatenate(d)))

    lo, hi = 0.0, 1.0 / np.sqrt(chunks.shape[1])  # sigma*sqrt(d) = 1: noise as long as the vector
    for _ in range(30):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if median_nn(mid) < target else (lo, mid)
    sigma = (lo + hi) / 2
    return sigma, {"copies_per_chunk": copies, "simulated_chunks": len(bases), "target_nn_l2": target,
                   "simulated_nn_l2": median_nn(sigma)}


def make_queries(questions: np.ndarray, n: int, warmup: int, sigma: float, seed: int,
                 mix: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The real questions first, then perturbed copies (same sigma as the table) up to ``n``;
    ``warmup`` more perturbed ones, untimed."""
    rng = np.random.default_rng([seed, 2])
    extra = n - min(n, len(questions)) + warmup
    picked = questions[rng.integers(0, len(questions), extra)]
    perturbed = normalise(picked + sigma * gaussian(rng, *picked.shape, mix)).astype(np.float32)
    queries = np.concatenate([questions[:n], perturbed[:extra - warmup]])
    return queries, perturbed[extra - warmup:]


class TopK:
    """The ``depth`` smallest squared-l2 distances of each query over batches of rows."""

    def __init__(self, queries: np.ndarray, depth: int):
        self.q, self.qq, self.depth = queries, (queries ** 2).sum(1), depth
        self.ids = np.zeros((len(queries), 0), dtype=np.int64)
        self.d2 = np.zeros((len(queries), 0), dtype=np.float32)

    def add(self, vectors: np.ndarray, first_id: int) -> None:
        d2 = np.clip(self.qq[:, None] + (vectors ** 2).sum(1)[None, :] - 2 * self.q @ vectors.T, 0, None)
        ids = np.broadcast_to(np.arange(first_id, first_id + len(vectors)), d2.shape)
        d2, ids = np.concatenate([self.d2, d2], 1), np.concatenate([self.ids, ids], 1)
        keep = np.argpartition(d2, self.depth - 1, axis=1)[:, :self.depth] if d2.shape[1] > self.depth else \
            np.argsort(d2, axis=1)
        self.d2, self.ids = np.take_along_axis(d2, keep, 1), np.take_along_axis(ids, keep, 1)

    def result(self) -> tuple[np.ndarray, np.ndarray]:
        order = np.argsort(self.d2, axis=1, kind="stable")
        return np.take_along_axis(self.ids, order, 1), np.take_along_axis(self.d2, order, 1)


def generated(chunks: np.ndarray, sigma: float, rows: int, batch: int, seed: int, mix: np.ndarray | None = None):
    """Yield (first id, source chunk per row, unit vectors) batch by batch: bounded memory."""
    rng = np.random.default_rng([seed, rows, 3])
    for start in range(0, rows, batch):
        n = min(batch, rows - start)
        source = rng.integers(0, len(chunks), n)
        noise = gaussian(rng, n, chunks.shape[1], mix)
        yield start, source, normalise(chunks[source] + np.float32(sigma) * noise).astype(np.float32)


def write_table(folder: str, name: str, chunks: np.ndarray, queries: np.ndarray, sigma: float, rows: int,
                batch: int, seed: int, mix: np.ndarray | None = None) -> dict:
    """Worker: write ``rows`` generated rows to a new LanceDB table, one append per batch, and the
    exact top-TRUTH_DEPTH of every query (numpy, as the rows are written)."""
    import lancedb  # deferred: the worker's own import
    import pyarrow as pa

    db, table, t_write = lancedb.connect(folder), None, 0.0
    truth, sample, nn = TopK(queries, TRUTH_DEPTH), None, None
    for start, source, vectors in generated(chunks, sigma, rows, batch, seed, mix):
        if sample is None:  # the first rows: their nearest neighbours among all rows (self excluded below)
            sample = vectors[:NN_SAMPLE].copy()
            nn, sample_source = TopK(sample, 2), source[:NN_SAMPLE].copy()
        truth.add(vectors, start)
        nn.add(vectors, start)
        data = pa.table({"id": pa.array(np.arange(start, start + len(vectors))),
                         "source": pa.array(source.astype(np.int32)),
                         "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1)), vectors.shape[1])})
        t0 = time.perf_counter()
        if table is None:
            table = db.create_table(name, data)
        else:
            table.add(data)
        t_write += time.perf_counter() - t0
    ids, d2 = truth.result()
    nn_ids, nn_d2 = nn.result()
    assert (nn_ids[:, 0] == np.arange(len(sample))).all(), "a sampled row is not its own nearest neighbour"
    to_source = np.linalg.norm(sample - chunks[sample_source], axis=1)
    dataset = Path(folder) / f"{name}.lance"
    return {"rows_in_table": table.count_rows(), "write_s": t_write, "write_batch": batch,
            "fragments": len(table.to_lance().get_fragments()),
            "table_mb": sum(p.stat().st_blocks * 512 for p in dataset.rglob("*") if p.is_file()) / 2**20,
            "write_peak_rss_mb": peak_rss_mb(),
            "generated_nn_l2": quantiles(np.sqrt(nn_d2[:, 1])), "generated_to_source_l2": quantiles(to_source),
            "question_top1_l2": quantiles(np.sqrt(d2[:, 0])), "question_lid20": quantiles(lid(np.sqrt(d2))),
            "truth_ids": ids, "truth_d2": d2}


def recall_at_k(found: list[np.ndarray], truth_ids: np.ndarray, truth_d2: np.ndarray, k: int,
                tol: float = TIE_TOL) -> float:
    """Mean over queries of (returned ids that are true top-k neighbours) / k.

    A returned id counts when its exact squared-l2 distance is at most the k-th smallest exact
    distance plus ``tol``: a row tied with the k-th neighbour is as right as the one the truth
    happened to list. ``truth_ids``/``truth_d2``: each query's exact neighbours, nearest first, at
    least k deep; ids beyond that depth are farther than the k-th and count as misses. A query
    returning fewer than k ids scores the hits over k. Ids are counted once.
    """
    scores = []
    for got, ids, d2 in zip(found, truth_ids, truth_d2):
        right = set(ids[d2 <= d2[k - 1] + tol].tolist())
        scores.append(len(set(got[:k].tolist()) & right) / k)
    return float(np.mean(scores))
