"""Local answering + judging: the lab against raw llama-cpp-python doing the same calls.

    .venv/bin/python bench/llm.py [--experiment turn13] [--n 5] [--no-reuse] [--smoke]

Lab side: for N questions (a stratified sample of the experiment's eval set), the lab's
retrieval, then its answer and judge stages (calibration included) on an empty LLM cache, so
every call is computed; each call's messages, schema, temperature and seed are recorded.
Raw side: a plain ``llama_cpp.Llama`` with the same settings replays those calls in the same
order with ``create_chat_completion`` (so it reuses cached prompt prefixes just as the lab
does). Models are loaded before timing on both sides. Prints seconds, tokens per second, the
ratio lab / raw (goal <= 1.2), and whether both produced the same text.

``--no-reuse`` also replays the judge's calls with the KV cache reset before each one (and the
generator's with reuse): what prefix reuse buys each (the judge's three judgements of a
question share rubric, question and reference; answers share only the system prompt), and how
many texts it changes.

``--smoke``: the test fixture's ``small`` experiment (SmolLM2-135M for answers and judge,
tests/fixtures) on 2 questions, with a temporary cache: well under a minute, nothing written.
It exits 1 unless both stages made calls and the raw replay reproduced every text (the
generator's calls start from an empty KV cache on both sides, and the judge's run in the same
order on both sides, so the texts must be the same).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("LANCEDB_LOG", "error")  # before lancedb loads: no "No existing dataset" warnings
ROOT = Path(__file__).resolve().parents[1]

from lab.caches import CallCache
from lab.progress import setup_logging
from lab.config import load_experiment
from lab.evalsets.evalset import load_eval_set, stratified_sample
from lab.judge.methods import grader
from lab.judge.rubric import resolve_judge
from lab.models.backends import LlamaCppBackend, llama_class
from lab.models.llm import LabLLM
from lab.paths import project_path
from lab.rag.pipeline import open_pipeline, resolve_models

FIXTURES = ROOT / "tests" / "fixtures"


class Recording(LlamaCppBackend):
    def __init__(self, plan):
        super().__init__(plan)
        self.calls: list[tuple] = []

    def chat(self, messages, schema, temperature, seed, max_tokens=None, head=None, stop=None):
        out = super().chat(messages, schema, temperature, seed, max_tokens, head=head, stop=stop)
        self.calls.append((messages, schema, temperature, seed, max_tokens or self.plan.cfg.max_tokens, stop, out))
        return out


def replay(llm, calls, reset: bool) -> tuple[float, int, int, int]:
    """Seconds, prompt tokens, output tokens, and how many texts differ from the lab's."""
    t0 = time.perf_counter()
    p = c = differ = 0
    for messages, schema, temperature, seed, max_tokens, stop, lab_out in calls:
        if reset:
            llm.reset()
        kwargs = {"response_format": {"type": "json_object", "schema": schema}} if schema else {}
        if stop:
            kwargs["stop"] = stop
        out = llm.create_chat_completion(messages=messages, temperature=temperature, max_tokens=max_tokens,
                                         seed=seed, **kwargs)
        p += out["usage"]["prompt_tokens"]
        c += out["usage"]["completion_tokens"]
        differ += (out["choices"][0]["message"]["content"] or "") != lab_out.text
    return time.perf_counter() - t0, p, c, differ


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--experiment", default=None, help="experiment (default turn13; --smoke: the fixture's small)")
    ap.add_argument("--n", type=int, default=None, help="questions (default 5; --smoke: 2)")
    ap.add_argument("--no-reuse", action="store_true", help="also replay with the KV cache reset per call")
    ap.add_argument("--smoke", action="store_true",
                    help="SmolLM2 on 2 questions of the test fixture, temporary cache, checks only")
    args = ap.parse_args()
    setup_logging(False)  # the CLI's logging: expected library warnings filtered, lab lines kept
    if args.smoke:
        root, name, n_questions = FIXTURES, args.experiment or "small", args.n or 2
    else:
        root, name, n_questions = ROOT, args.experiment or "turn13", args.n or 5

    # llama.cpp's class as the lab imports it (OpenMP threads waiting passively): both sides alike
    Llama = llama_class()

    from lab.eval.stages import Timer, answer_stage, judge_stage, retrieve_stage

    cfg = load_experiment(name, root / "experiments", {"judge": {"method": "rubric"}})  # judge-v1's JSON calls
    plans = resolve_models(cfg, root)
    judge = resolve_judge(cfg.judge, root)  # config, LLM plan and prompt, as the evaluator resolves them
    if plans.generation is None or judge is None:
        raise SystemExit(f"experiment {name!r} needs a generation and a judge section")
    judge_plan = judge.llm
    for plan in (plans.generation, judge_plan):
        if plan.cfg.backend != "llama_cpp":
            raise SystemExit(f"experiment {name!r}: {plan.role} uses {plan.cfg.backend!r}, not llama_cpp")
    rows = stratified_sample(load_eval_set(project_path(root, cfg.data.eval_set), cfg.data.categories).rows,
                             n_questions, cfg.sample.seed)

    with tempfile.TemporaryDirectory() as tmp:  # an empty LLM cache: every call computed
        from lab.paths import cache_dir

        # the smoke run's index too goes to the temporary folder: it writes nothing that stays
        pipe = open_pipeline(cfg, plans, root, Path(tmp) if args.smoke else cache_dir(), show_progress=False)
        timer = Timer()
        samples, finals, _ = retrieve_stage(cfg, rows, pipe, timer, False)
        cache = CallCache(Path(tmp) / "llm.sqlite")
        gen_backend, judge_backend = Recording(plans.generation), Recording(judge_plan)
        gen_backend.load(), judge_backend.load()
        pipe.synthesizer.lab_llm = LabLLM(plans.generation, cache, gen_backend)
        judge_llm = LabLLM(judge_plan, cache, judge_backend)
        t0 = time.perf_counter()
        answer_stage(samples, finals, pipe.synthesizer, timer, False)
        t1 = time.perf_counter()
        judge_stage(samples, grader(judge_llm, judge), cfg.sample.seed, timer, False)
        t2 = time.perf_counter()

    def raw_llm(plan):
        c = plan.cfg
        return Llama(model_path=plan.location, n_ctx=c.n_ctx, n_threads=c.n_threads or os.cpu_count(),
                     n_batch=512, seed=c.seed, verbose=False)

    raw_gen, raw_judge = raw_llm(plans.generation), raw_llm(judge_plan)
    g = replay(raw_gen, gen_backend.calls, reset=True)  # the lab's generator starts each call afresh
    j = replay(raw_judge, judge_backend.calls, reset=False)
    lab_gen, lab_judge = t1 - t0, t2 - t1
    n = len(samples)
    print(f"{n} questions of {name}; generator {plans.generation.cfg.model}, judge {judge_plan.cfg.model}")
    print(f"{'stage':<10}{'calls':>6}{'prompt tok':>11}{'out tok':>9}{'lab s':>9}{'raw s':>9}{'ratio':>7}{'differ':>8}")
    for stage, calls, lab_s, (raw_s, p, c, differ) in (("generate", gen_backend.calls, lab_gen, g),
                                                          ("judge", judge_backend.calls, lab_judge, j)):
        print(f"{stage:<10}{len(calls):>6}{p:>11}{c:>9}{lab_s:>9.1f}{raw_s:>9.1f}{lab_s / raw_s:>7.2f}{differ:>8}")
    total_lab, total_raw = lab_gen + lab_judge, g[0] + j[0]
    print(f"{'total':<10}{'':>26}{total_lab:>9.1f}{total_raw:>9.1f}{total_lab / total_raw:>7.2f}   (goal <= 1.2)")
    print(f"per question: {total_lab / n:.1f} s (generate {lab_gen / n:.1f} s, judge with calibration {lab_judge / n:.1f} s)")
    if args.no_reuse:
        jr = replay(raw_judge, judge_backend.calls, reset=True)
        gr = replay(raw_gen, gen_backend.calls, reset=False)
        print(f"KV prefix reuse: judge {jr[0]:.1f} s without, {j[0]:.1f} s with ({jr[0] / j[0]:.2f}x, "
              f"{jr[3]} of {len(judge_backend.calls)} texts differ); generate {g[0]:.1f} s without, {gr[0]:.1f} s with "
              f"({gr[3]} of {len(gen_backend.calls)} texts differ)")
    if not args.smoke:
        return 0
    failures = []
    if n != n_questions:
        failures.append(f"{n} questions evaluated, {n_questions} asked")
    for stage, calls, (_, p, c, differ) in (("generate", gen_backend.calls, g), ("judge", judge_backend.calls, j)):
        if not calls or p <= 0:
            failures.append(f"{stage}: {len(calls)} calls, {p} prompt tokens")
        if differ:
            failures.append(f"{stage}: {differ} of {len(calls)} raw texts differ from the lab's")
    for f in failures:
        print(f"FAILED {f}", file=sys.stderr)
    if not failures:
        print("smoke: ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
