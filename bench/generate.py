"""Eval-set generation speed: accepted questions per minute, the acceptance rate, and the lab
against raw llama-cpp-python replaying the same calls.

    .venv/bin/python bench/generate.py [--kb DIR] [--n 10] [--smoke] [--mode extractive|abstractive]
                                       [--excerpt held|copied|cited] [--answer-check] [--no-replay]
                                       [--out FILE]

Runs ``lab generate``'s loop, :func:`lab.evalsets.questions.extractive` (``--mode extractive``, the
default: a question to a sentence chosen by rule) or :func:`lab.evalsets.generate.generate`
(``--mode abstractive``), with an empty LLM cache (every call computed; the
embedding cache is the lab's own) over ``--kb`` (default: the InsureLLM knowledge base), then
replays every recorded call, question writer's and checker's, through a raw ``Llama`` with the
same parameters. Prints accepted, candidates, acceptance, accepted questions per minute, the
seconds of both and their ratio (goal <= 1.2: the lab's loop, filters and embeddings add little
to the model's time) and the tokens the model wrote per accepted question. ``--out FILE`` also
writes the accepted rows and the sidecar's statistics beside them (``FILE.gen.json``).
``--excerpt``: how the model gives its excerpt (``lab generate --excerpt``): ``held`` (the
default: copied under a grammar that allows only the window's sentences), ``copied`` (written
freely, then located) or ``cited`` (by sentence number, ``generate-qa-v2``), to compare them.
The raw replay evaluates every prompt whole under the call's grammar; the lab evaluates each
prompt's fixed head once per task and a held excerpt's forced text as a batch
(``LlamaCppBackend``), so its texts may differ from the replay's in the last bits.
``--answer-check``: the extractive mode with ``lab generate --answer-check``'s passage check (a
second call for each question the rules pass), to weigh its cost against the default's.
``--smoke``: SmolLM2 on the test fixture's knowledge base, 2 candidates. Run both modes over
the same documents to compare their accepted questions per minute.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from lab.caches import CallCache
from lab.config import EmbeddingConfig, LLMConfig
from lab.evalsets.generate import Options, generate
from lab.evalsets.questions import LOCAL_WINDOW, extractive
from lab.models.backends import llama_class
from lab.models.embeddings import build_embedding
from lab.models.llm import LabLLM
from lab.models.resolve import offline_env_for, resolve_hf_model, resolve_llm
from lab.paths import cache_dir
from lab.progress import setup_logging
from lab.rag.loaders import load_folder

_spec = importlib.util.spec_from_file_location("bench_llm", ROOT / "bench" / "llm.py")
bench_llm = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_llm)  # Recording and replay, shared with the answers' bench

INSURELLM = ROOT.parent / "shared" / "benchmarks" / "insurellm" / "knowledge-base"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kb", type=Path, default=None)
    ap.add_argument("--n", type=int, default=None, help="questions wanted (default 10)")
    ap.add_argument("--smoke", action="store_true", help="SmolLM2, the fixture's kb, 2 candidates")
    ap.add_argument("--mode", choices=("extractive", "abstractive"), default="extractive",
                    help="lab generate's mode (default extractive)")
    ap.add_argument("--excerpt", choices=("held", "copied", "cited"), default="held",
                    help="how the model gives its excerpt (default held: under a grammar of the window's sentences)")
    ap.add_argument("--answer-check", action="store_true",
                    help="extractive: the passage check's call for each question the rules pass (lab generate --answer-check)")
    ap.add_argument("--no-replay", action="store_true", help="skip the raw llama.cpp replay (accepted per minute only)")
    ap.add_argument("--out", type=Path, help="also write the accepted rows here (JSONL), to read them")
    args = ap.parse_args()
    setup_logging(False)
    kb = args.kb or (ROOT / "tests" / "fixtures" / "kb" if args.smoke else INSURELLM)
    model = "smollm2-135m-instruct" if args.smoke else "qwen2.5-coder-1.5b-instruct"
    n = args.n or (1 if args.smoke else 10)
    Llama = llama_class()
    corpus = load_folder(kb, [".md", ".txt", ".pdf", ".docx", ".html"], 5_000_000, False)
    docs = {d.metadata["source"]: d.text for d in corpus.documents}
    resolved = resolve_hf_model(EmbeddingConfig().model, "embedding model")
    offline_env_for([resolved])
    embedder = build_embedding(EmbeddingConfig(), resolved, cache_dir())
    if args.answer_check and args.mode != "extractive":
        ap.error("--answer-check checks the extractive mode's questions")
    roles = ("testset", "check") if args.mode == "abstractive" else ("questions", "check") if args.answer_check \
        else ("questions",)
    plans = [resolve_llm(LLMConfig(model=model), role, ROOT) for role in roles]
    with tempfile.TemporaryDirectory() as tmp:  # an empty LLM cache: every call computed
        cache = CallCache(Path(tmp) / "llm.sqlite")
        backends = [bench_llm.Recording(p) for p in plans]
        for b in backends:
            b.load()
        llms = [LabLLM(p, cache, b) for p, b in zip(plans, backends)]
        embed = lambda t: embedder.encode(list(t), "")  # noqa: E731
        t0 = time.perf_counter()
        if args.mode == "extractive":
            out = extractive(docs, llms[0], embed, n, 0, max_candidates=2 if args.smoke else None,
                             literal=corpus.literal, local_window=LOCAL_WINDOW,
                             checker=llms[1] if args.answer_check else None)
        else:
            out = generate(docs, llms[0], llms[1], embed,
                           Options(n=n, max_candidates=2 if args.smoke else None, excerpt=args.excerpt))
        lab_s = time.perf_counter() - t0
    s = out.stats
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in out.rows), encoding="utf-8")
        args.out.with_suffix(".gen.json").write_text(json.dumps(s, indent=1, ensure_ascii=False), encoding="utf-8")
    per_min = 60 * s["n_accepted"] / lab_s
    tokens = sum(u["completion_tokens"] for u in s["usage"].values() if u)
    how = f"excerpts {args.excerpt}" if args.mode == "abstractive" else \
        "mode extractive" + (", --answer-check" if args.answer_check else "")
    print(f"{s['n_accepted']} accepted of {s['candidates']} candidates ({100 * s['acceptance_rate']:.0f}%) "
          f"from {len(docs)} documents; model {model}; {how}")
    print(f"accepted per minute {per_min:.2f}; lab {lab_s:.1f} s; {tokens} tokens written, "
          f"{tokens / max(1, s['n_accepted']):.0f} per accepted question")
    if args.mode == "abstractive":
        print(f"paraphrased excerpts placed in their window (near_excerpts): {s['near_excerpts']['n']} of the "
              f"accepted; spans moved to where the window states the answer (moved_spans): {s['moved_spans']['n']}")
    else:
        trip = s["round_trip"]
        print(f"round trip among {trip['sentences']} sentences: passed by words only {trip['passed_by_words_only']}, "
              f"by meaning only {trip['passed_by_meaning_only']}")
        if args.answer_check:
            print(f"answer check: {s['usage']['check']['calls']} calls, "
                  f"{s['rejected'].get('answer_check', {}).get('n', 0)} questions rejected")
    if args.no_replay:
        print(f"rejected: {({k: v['n'] for k, v in s['rejected'].items() if v['n']})}")
        return 0

    def raw(plan):
        c = plan.cfg
        return Llama(model_path=plan.location, n_ctx=c.n_ctx, n_threads=c.n_threads or os.cpu_count(),
                     n_batch=512, seed=c.seed, verbose=False)

    replays = [bench_llm.replay(raw(p), b.calls, reset=False) for p, b in zip(plans, backends)]
    raw_s = sum(r[0] for r in replays)
    print(f"raw replay {raw_s:.1f} s "
          f"({sum(len(b.calls) for b in backends)} calls, {sum(r[3] for r in replays)} texts differ); "
          f"ratio {lab_s / raw_s:.2f}")
    print("smoke: ok" if args.smoke else f"rejected: {({k: v['n'] for k, v in s['rejected'].items() if v['n']})}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
