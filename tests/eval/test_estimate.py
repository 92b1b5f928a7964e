"""The cost of a run before its first model call: calls per role and their time, from the 2-core
prior until a run has measured this machine, then from what it measured."""

from __future__ import annotations

import json

from lab.config import LLMConfig, load_experiment
from lab.cli.data import ANSWER_CHECK_HELD_OUT
from lab.eval.estimate import THROUGHPUT_FILE, checked_hint, describe, estimate, record, role_key
from lab.judge.rubric import resolve_judge
from lab.models.resolve import LLMPlan


def plans(project):
    cfg = load_experiment("small", project / "experiments")
    judge = resolve_judge(cfg.judge, project)
    gen = LLMPlan(cfg.generation.llm, "generation", "x.gguf", "fp")
    return cfg, gen, judge


def test_before_any_measurement_a_local_model_is_estimated_from_the_2_core_prior(project, tmp_path):
    """Every call is counted: 20 answers; the judge grades 20 answers, 40 calibration texts
    (calibration on) and 6 perturbations of each of the 20 checked questions (checks: 20), 180
    texts of 3.4 calls; the generator paraphrases the 20 checked references (1.8 calls each)."""
    cfg, gen, judge = plans(project)
    costs = estimate(cfg, 20, gen, None, judge, tmp_path)
    assert [(c.role, c.calls, c.source) for c in costs] == [("generation", 20, "2-core prior"),
                                                              ("judge", 612, "2-core prior"),
                                                              ("paraphrase", 36, "2-core prior")]
    assert [c.seconds for c in costs] == [20 * 17.3, 612 * 0.53, 36 * 6.2]  # 346 s, 324.36 s, 223.2 s
    lines = describe(costs, 20)
    assert lines[0] == "20 questions; LLM calls (a call already cached takes no time):"
    assert lines[1] == "  generation smollm2-135m-instruct: ~20 calls, about 5 min 46 s (2-core prior)"
    assert lines[2] == "  judge      smollm2-135m-instruct: ~612 calls, about 5 min 24 s (2-core prior)"
    assert lines[3] == "  paraphrase smollm2-135m-instruct: ~36 calls, about 3 min 43 s (2-core prior)"
    assert lines[4].startswith("  estimated total: about 14 min 54 s (from the 2-core prior")
    quiet = cfg.model_copy(update={"judge": cfg.judge.model_copy(update={"calibration": False, "checks": 0})})
    assert [(c.role, c.calls) for c in estimate(quiet, 20, gen, None, judge, tmp_path)] == [("generation", 20),
                                                                                          ("judge", 68)]


def test_a_finished_run_replaces_the_prior_with_what_it_measured(project, tmp_path):
    cfg, gen, judge = plans(project)
    usage = {"generation": {"calls": 8, "cached": 2, "seconds": 16.0},  # 2 s a call, 10 calls for 10 questions
             "judge": {"calls": 24, "cached": 6, "seconds": 12.0}}     # 0.5 s a call, 30 calls for 90 graded texts
    record(tmp_path, usage, 10, {"generation": (gen, None), "judge": (judge.llm, judge)}, cfg)
    stored = json.loads((tmp_path / THROUGHPUT_FILE).read_text())
    assert stored[role_key(gen)] == {"s_per_call": 2.0, "calls_per_unit": 1.0}
    assert stored[role_key(judge.llm, judge)] == {"s_per_call": 0.5, "calls_per_unit": 0.333}  # 10 + 20 + 10 x 6
    assert role_key(judge.llm, judge) == "judge|llama_cpp|smollm2-135m-instruct|rubric-expected|judge-v1"  # the default method
    costs = estimate(cfg, 50, gen, None, judge, tmp_path)
    # 50 answers; 50 + 100 + 20 x 6 = 270 graded texts x 0.333 = 90 calls; the paraphraser not measured yet
    assert [(c.calls, c.seconds, c.source) for c in costs] == [(50, 100.0, "measured here"),
                                                               (90, 45.0, "measured here"),
                                                               (36, 36 * 6.2, "2-core prior")]
    # an older file's judge figure was per question, checks inside: not used for a graded text
    (tmp_path / THROUGHPUT_FILE).write_text(json.dumps({role_key(judge.llm, judge): {
        "s_per_call": 0.5, "calls_per_question": 3.0}}))
    assert estimate(cfg, 50, gen, None, judge, tmp_path)[1].source == "2-core prior"


def test_a_few_calls_do_not_replace_a_measurement_and_a_damaged_file_is_measured_again(project, tmp_path):
    cfg, gen, judge = plans(project)
    record(tmp_path, {"generation": {"calls": 2, "cached": 0, "seconds": 100.0}}, 2, {"generation": (gen, None)})
    assert not (tmp_path / THROUGHPUT_FILE).exists()
    (tmp_path / THROUGHPUT_FILE).write_text("{not json")
    assert estimate(cfg, 1, gen, None, None, tmp_path)[0].source == "2-core prior"


def test_a_remote_model_is_counted_in_calls_with_its_time_unknown(project, tmp_path):
    cfg, _, _ = plans(project)
    remote = LLMPlan(LLMConfig(backend="openai", model="gpt-4.1-nano"), "generation", "gpt-4.1-nano", "fp")
    (cost,) = estimate(cfg, 7, remote, None, None, tmp_path)
    assert (cost.calls, cost.seconds, cost.source) == (7, None, "no measurement yet")
    assert describe([cost], 7)[1] == "  generation gpt-4.1-nano: ~7 calls, time unknown (no measurement yet)"


def test_retrieval_only_makes_no_call():
    assert describe([], 121) == ["121 questions, retrieval only: no LLM call"]


def test_dry_run_prints_the_plan_and_writes_nothing(cli, project):
    code, out, err = cli("run", "small", "--dry-run", "--limit", "4", "--experiments", project / "experiments",
                         "--reports", project / "reports", "--cache", project / "cache")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("small[") or lines[0].startswith("small: ")
    assert "4 questions; LLM calls (a call already cached takes no time):" in lines
    assert "  generation smollm2-135m-instruct: ~4 calls, about 1 min 09 s (2-core prior)" in lines
    assert lines[-2] == "  cheaper first: --retrieval-only (no LLM call)"  # a sample of 4 is already small
    assert lines[-1] == "dry run: nothing was run or written"
    assert not (project / "reports").exists()
    code, out, _ = cli("run", "small", "--dry-run", "--retrieval-only", "--experiments", project / "experiments",
                       "--reports", project / "reports", "--cache", project / "cache")
    assert code == 0 and out.splitlines()[1].endswith("questions, retrieval only: no LLM call")


def test_generate_dry_run_estimates_before_loading_any_model(cli, project):
    common = ["generate", "--kb", project / "kb", "--out", project / "new.jsonl", "--n", "10", "--llm",
              "smollm2-135m-instruct", "--dry-run", "--cache", project / "cache", "--experiments", project / "experiments"]
    code, out, err = cli(*common, "--mode", "abstractive")
    assert code == 0, err
    assert out.splitlines()[:2] == [  # the writer's calls and the support checks' (3 a question, 17.4 s each)
        "10 accepted questions wanted; LLM calls (a call already cached takes no time):",
        "  testset    smollm2-135m-instruct: ~30 calls, about 8 min 42 s (2-core prior)"]
    code, out, err = cli(*common, "--max-minutes", "5")  # extractive: one call a candidate, no check
    assert code == 0, err
    # 10 questions at 3.2 candidates would make 32 calls; the fixture's documents hold 13 candidate
    # sentences (a generated set's sidecar says so: candidate_sentences), so 13 calls at 3.0 s
    assert out.splitlines()[1:5] == ["  questions  smollm2-135m-instruct: ~13 calls, about 39 s (2-core prior)",
                                     "  estimated total: about 39 s (from the 2-core prior where this machine "
                                     "has no measurement yet; a run measures it)",
                                     "  at most 13 candidates: 13 candidate sentences in these documents' prose, a "
                                     "budget of 40 (--max-candidates)",
                                     "  stops after 5 minutes, keeping what was accepted"]
    code, out, err = cli(*common, "--max-candidates", "5")  # the budget binds: 5 calls
    assert code == 0, err
    assert out.splitlines()[1] == "  questions  smollm2-135m-instruct: ~5 calls, about 15 s (2-core prior)"
    assert "  at most 5 candidates: 13 candidate sentences in these documents' prose, a budget of 5 " \
           "(--max-candidates)" in out.splitlines()
    assert not (project / "new.jsonl").exists()


def test_an_extractive_role_makes_no_more_calls_than_its_candidates_allow(tmp_path):
    """Lark's documentation: 113 candidate sentences for 45 questions. The checked role's prior
    (7.5 calls a question) says 338 calls; a question a candidate and a check for a third of them
    (1.33 a candidate) bound it at 150 (the run made 146: 113 questions, 33 checks)."""
    from lab.eval.estimate import role_cost

    plan = LLMPlan(LLMConfig(model="qwen2.5-coder-1.5b-instruct"), "questions", "x.gguf", "fp")
    assert role_cost("questions-checked", plan, 45, tmp_path).calls == 338
    lark = role_cost("questions-checked", plan, 45, tmp_path, candidates=113)
    assert (lark.calls, lark.seconds) == (150, 525.0)
    assert role_cost("questions", plan, 45, tmp_path, candidates=500).calls == 144  # more candidates than needed
    assert role_cost("questions", plan, 45, tmp_path, candidates=20).calls == 20
    assert role_cost("testset", plan, 45, tmp_path, candidates=20).calls == 135  # the abstractive mode: no bound


def test_after_a_default_set_the_answer_checks_cost_counts_only_the_calls_not_cached(tmp_path):
    """restic's first hour: 150 questions from 436 candidates. --answer-check's prior is 7.5 calls
    an accepted question at 3.5 s: 1,125 calls, of which the 436 questions written are cached, so
    689 more, 2,411.5 s; once this machine has measured the checked role, its own figures."""
    plan = LLMPlan(LLMConfig(model="qwen2.5-coder-1.5b-instruct"), "questions", "x.gguf", "fp")
    hint = checked_hint(plan, 150, 436, tmp_path, ANSWER_CHECK_HELD_OUT)
    assert hint.startswith("next: a set less often wrong, the same command with --answer-check --max-candidates 1200 ")
    assert hint.endswith("the 436 questions written here are cached, ~689 calls more, about 40 min 12 s (2-core prior)")
    (tmp_path / THROUGHPUT_FILE).write_text(json.dumps(
        {role_key(plan, role="questions-checked"): {"s_per_call": 2.0, "calls_per_unit": 5.0}}))
    assert checked_hint(plan, 150, 436, tmp_path, ANSWER_CHECK_HELD_OUT).endswith("~314 calls more, about 10 min 28 s (measured here)")
    assert "~0 calls more, about 0 s" in checked_hint(plan, 10, 436, tmp_path, ANSWER_CHECK_HELD_OUT)  # all cached already


def test_the_answer_checks_hint_is_bounded_by_the_candidates_and_names_a_new_out(tmp_path):
    """Babel's documentation: 100 candidate sentences, every one tried for 33 questions. The checked
    run can try no other candidate: 100 at 1.33 calls is 133, of which the 100 written are cached,
    so 33 calls more (its prior's 3.5 s: 1 min 55.5 s), and it keeps fewer questions, not more; the
    command writes beside the set (the same --out would be refused: the set is finished)."""
    plan = LLMPlan(LLMConfig(model="qwen2.5-coder-1.5b-instruct"), "questions", "x.gguf", "fp")
    hint = checked_hint(plan, 45, 100, tmp_path, ANSWER_CHECK_HELD_OUT, pool=100, out="sets/babel.jsonl", accepted=33)
    assert hint.startswith("next: a set less often wrong, the same command with --answer-check --max-candidates 100 "
                           "--out sets/babel-checked.jsonl (on ")
    assert hint.endswith("the 100 questions written here are cached, ~33 calls more, about 1 min 56 s (2-core prior); "
                         "every candidate sentence was tried here, so it checks these questions and keeps fewer than "
                         "the 33 accepted here")
    roomy = checked_hint(plan, 45, 120, tmp_path, ANSWER_CHECK_HELD_OUT, pool=500, out="b.jsonl", accepted=45)
    assert "--max-candidates 360 --out b-checked.jsonl" in roomy and "~218 calls more" in roomy  # 338 by the prior
    assert "every candidate" not in roomy
