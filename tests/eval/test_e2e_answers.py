"""Answers and judgements end to end, with the real packaged SmolLM2 (plumbing, not quality)."""

import json
import time
from pathlib import Path

import pytest

from lab.judge.rubric import DIMENSIONS, calibration_summary

from runs import lab, latest, load

pytestmark = pytest.mark.slow
FIXTURES = Path(__file__).parents[1] / "fixtures"


@pytest.fixture(scope="module")
def judged(tmp_path_factory):
    """One full run of the fixture experiment `small`, then the same run again."""
    import shutil

    project = tmp_path_factory.mktemp("answers") / "project"
    shutil.copytree(FIXTURES, project)
    first = lab(project, "run", "small")
    assert first.returncode == 0, first.stderr
    run1 = latest(project, "small")
    time.sleep(1)  # a distinct run id
    t0 = time.perf_counter()
    second = lab(project, "run", "small")
    wall = time.perf_counter() - t0
    assert second.returncode == 0, second.stderr
    return project, run1, latest(project, "small"), first, second, wall


def test_answers_judgements_and_calibration_land_on_disk(judged):
    project, run, _, proc, _, _ = judged
    results, samples = load(run)
    gen, judge = results["models"]["generation"], results["models"]["judge"]
    assert (gen["backend"], gen["model"], gen["prompt_version"], gen["temperature"]) == (
        "llama_cpp", "smollm2-135m-instruct", "answer-grounded-v1", 0.0)
    assert gen["context_builder"] == {"name": "top_n", "n": None} and gen["location"].endswith(".gguf")
    assert (judge["model"], judge["prompt_version"], judge["calibration"], judge["method"]) == (
        "smollm2-135m-instruct", "judge-v1", True, "rubric-expected")  # the default method for a local judge
    assert len(gen["prompt_sha256"]) == 12 and len(judge["prompt_sha256"]) == 12
    usage = results["llm_usage"]
    assert usage["generation"]["calls"] == 6 and usage["generation"]["cached"] == 0
    assert usage["judge"]["calls"] >= 18  # 3 judgements per question, more when one is retried
    assert usage["generation"]["completion_tokens"] > 0 and results["cost_usd"] == 0.0
    assert results["counters"]["llm_calls_generation"] == 6
    for s in samples:
        a, ctx = s["answer"], s["context"]
        assert a["text"].strip() and a["prompt_version"] == "answer-grounded-v1" and a["cached"] is False
        # top_n with no n: every retrieved chunk is sent, numbered, in retrieval order
        assert [p["id"] for p in ctx["passages"]] == [c["id"] for c in s["retrieved"]]
        assert ctx["text"].startswith(f"[1] (source: {s['retrieved'][0]['source']})\n")
        assert ctx["chars"] == s["metrics"]["sent_context_chars"] == sum(len(c["text"]) for c in s["retrieved"])
        assert s["metrics"]["answer_chars"] == len(a["text"])
        j = s["judgement"]
        assert j["status"] in {"ok", "failed"} and j["prompt_version"] == "rubric-expected:judge-v1"
        if j["status"] == "ok":
            assert all(s["metrics"][d] == j[d] and 1 <= j[d] <= 5 for d in DIMENSIONS)
        else:
            assert all(s["metrics"][d] is None for d in DIMENSIONS) and j["error"]
        cal = s["calibration"]
        assert cal["mismatched_id"] != s["id"] and cal["reference"]["status"] in {"ok", "failed"}
    # aggregates are recomputed here from what landed in samples.jsonl
    ok = [s for s in samples if s["judgement"]["status"] == "ok"]
    failed = [s["id"] for s in samples if s["judgement"]["status"] == "failed"]
    acc = results["metrics"]["overall"]["accuracy"]
    assert acc["n"] == len(ok) and results["judge"] == {"n_judged": len(ok), "n_failed": len(failed), "failed_ids": failed,
                                                        "n_suspect": 0, "suspect_ids": [],
                                                        "suspect_rule": results["judge"]["suspect_rule"]}
    assert results["judge"]["suspect_rule"].startswith("excluded")
    if ok:
        assert acc["mean"] == pytest.approx(sum(s["judgement"]["accuracy"] for s in ok) / len(ok))
    assert results["calibration"] == calibration_summary(samples)
    assert results["calibration"]["n_pairs"] + results["calibration"]["n_failed"] == 6
    assert results["metrics"]["by_category"]["numerical"]["judge_failed"] in (0, 1)
    assert set(results["timings"]) >= {"generate_s", "judge_s"}
    html = (run / "report.html").read_text()
    assert "judge calibration" in html and "Accuracy" in html and "smollm2-135m-instruct" in html
    assert "judge calibration: reference-as-answer" in proc.stdout and "generation LLM: 6 calls" in proc.stdout


def test_the_funnel_follows_each_question_to_its_answer_and_judgement(judged):
    """What landed on disk: every question's candidates and funnel, each keyword's verdict matching
    the sent context and the answer, and results.json's counts matching the questions'."""
    _, run, _, _, _, _ = judged
    results, samples = load(run)
    f = results["funnel"]
    assert f["stages"] == ["kb", "chunking", "first_stage", "second_stage", "budget", "generation", "judge"]
    assert f["n"] == 6 and f["n_without_gold"] == 0
    verdicts = {}
    for s in samples:
        assert [c["rank"] for c in s["candidates"]] == [1, 2, 3] and s["candidates"][0]["id"] == s["retrieved"][0]["id"]
        rec = s["funnel"]
        assert rec["seen"] == f["stages"]
        answer = s["answer"]["text"].lower()
        for item in rec["items"]:
            if item["kind"] == "keyword":
                kw = item["keyword"].lower()
                assert item["stated"] == (kw in answer)
                sent = item["sent"]
                assert (sent is not None) == (kw in s["context"]["text"].lower())
                if sent is not None:
                    assert s["context"]["passages"][sent - 1]["id"] == s["retrieved"][item["rank"] - 1]["id"] or \
                        kw in s["retrieved"][sent - 1]["text"].lower()
        # the answer side reads the keywords, for a row with spans too
        stated = [k.lower() in answer for k in s["keywords"]]
        assert rec["stated"] == pytest.approx(sum(stated) / len(stated))
        if all(i["lost_at"] is None for i in rec["items"]):  # everything reached the model: the answer side decides
            acc = s["judgement"]["accuracy"]
            expected = ("judge" if (all(stated) and acc <= 2) or (not any(stated) and acc >= 4) else
                        "kept" if all(stated) else "generation")
            assert rec["lost_at"] == expected, (s["id"], stated, acc)
        verdicts[s["id"]] = rec["lost_at"]
    counted = {st: sum(v == st for v in verdicts.values()) for st in f["stages"]}
    assert f["overall"]["lost"] == counted and f["overall"]["kept"] == sum(v == "kept" for v in verdicts.values())
    assert sum(p["n"] for p in f["by_category"].values()) == 6
    assert f["diagnostics"]["n"] == 6


def test_the_run_measured_this_machine_and_said_the_cost_before_its_first_call(judged):
    project, run, _, first, second, _ = judged
    results, _ = load(run)
    u = results["llm_usage"]["generation"]
    stored = json.loads((project / "cache" / "throughput.json").read_text())
    assert stored["generation|llama_cpp|smollm2-135m-instruct"] == {
        "s_per_call": round(u["seconds"] / u["calls"], 3), "calls_per_unit": 1.0}
    # the judge's unit is a text it grades: each answer, its calibration pair, the checks' perturbations
    j = results["llm_usage"]["judge"]
    key = next(k for k in stored if k.startswith("judge|"))
    graded = results["sample"]["n_questions"] * 3 + results["judge_checks"]["n"] * 6
    assert stored[key]["calls_per_unit"] == round((j["calls"] + j["cached"]) / graded, 3)
    # the first run estimated from the prior; the second from what the first measured
    assert "generation smollm2-135m-instruct: ~6 calls, about 1 min 44 s (2-core prior)" in first.stderr
    assert "generation smollm2-135m-instruct: ~6 calls" in second.stderr and "(measured here)" in second.stderr


def test_no_run_reached_for_the_network(judged):
    project = judged[0]
    assert (project / "cache" / "llm.sqlite").is_file()  # the guard was there while models ran
    log = project / "network.log"
    assert not log.exists(), f"connections attempted: {log.read_text()}"


def test_changing_only_the_judge_rejudges_without_regenerating(judged):
    project = judged[0]
    (project / "experiments" / "small-judge2.yaml").write_text(
        "schema_version: 1\nextends: small\njudge:\n  prompt: judge-v2\n  calibration: false\n  checks: 0\n")
    p = lab(project, "run", "small-judge2")
    assert p.returncode == 0, p.stderr
    results, _ = load(latest(project, "small-judge2"))
    u = results["llm_usage"]
    assert (u["generation"]["calls"], u["generation"]["cached"]) == (0, 6)
    assert u["judge"]["calls"] >= 6 and u["judge"]["cached"] == 0


def test_second_run_makes_no_model_call(judged):
    project, run1, run2, _, proc, wall = judged
    (r1, s1), (r2, s2) = load(run1), load(run2)
    assert r2["llm_usage"]["generation"]["calls"] == 0 and r2["llm_usage"]["judge"]["calls"] == 0
    assert r2["llm_usage"]["generation"]["cached"] == 6
    # run 1's judge checks already reused its calibration calls: run 2 serves all from the cache
    assert r2["llm_usage"]["judge"]["cached"] == r1["llm_usage"]["judge"]["calls"] + r1["llm_usage"]["judge"]["cached"]
    assert r2["counters"]["embeddings_computed"] == 0 and r2["index"]["reused"] is True
    assert [s["answer"]["text"] for s in s2] == [s["answer"]["text"] for s in s1]
    assert [s["judgement"]["feedback"] for s in s2] == [s["judgement"]["feedback"] for s in s1]
    assert all(s["answer"]["cached"] for s in s2)
    assert r2["metrics"] == r1["metrics"] and r2["calibration"] == r1["calibration"]
    assert r2["timings"]["generate_s"] + r2["timings"]["judge_s"] < 1.0
    assert r2["timings"]["total_s"] < 10 and "generation LLM: 0 calls, 6 from cache" in proc.stdout


def test_ask_prints_answer_sources_and_timings(judged):
    project = judged[0]
    p = lab(project, "ask", "small", "How much does the Ember 90 cost?")
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "\nsources:\n  [1] " in out and "products/ember90.md" in out
    assert "retrieve " in out and "generate " in out and "output tokens" in out


def test_python_api_returns_the_same_engine_and_answer(judged, monkeypatch):
    project = judged[0]
    monkeypatch.setenv("LAB_CACHE", str(project / "cache"))
    from llama_index.core.query_engine import RetrieverQueryEngine

    from lab.rag.pipeline import query_engine

    engine = query_engine("small", project / "experiments")
    assert isinstance(engine, RetrieverQueryEngine)
    _, samples = load(latest(project, "small"))
    s = next(x for x in samples if x["id"] == "f2")
    response = engine.query(s["question"])  # answered from the cache the run filled
    assert str(response) == s["answer"]["text"] and response.metadata["answer"]["cached"] is True
    assert [n.node.node_id for n in response.source_nodes] == [c["id"] for c in s["retrieved"]]


def test_openai_model_without_key_stops_at_start_up(project):
    (project / "experiments" / "remote.yaml").write_text(
        "schema_version: 1\nextends: small\njudge:\n  llm:\n    backend: openai\n    model: gpt-4.1-nano\n")
    t0 = time.perf_counter()
    p = lab(project, "run", "remote")
    assert p.returncode == 2 and time.perf_counter() - t0 < 30, p.stderr
    assert "judge.llm: model 'gpt-4.1-nano' uses the OpenAI API, and OPENAI_API_KEY is not set" in p.stderr
    assert "Traceback" not in p.stderr and not (project / "cache" / "indexes").exists()


def test_ragas_runs_on_a_sample_with_the_configured_models(judged):
    pytest.importorskip("ragas")
    project = judged[0]
    p = lab(project, "run", "small-ragas")
    assert p.returncode == 0, p.stderr
    results, samples = load(latest(project, "small-ragas"))
    rg = results["ragas"]
    assert (rg["metrics"], rg["n_questions"], rg["of"], rg["seed"]) == (["answer_relevancy", "context_recall"], 1, 6, 3)
    scored = [s for s in samples if "ragas" in s]
    assert [s["id"] for s in scored] == rg["ids"]
    for m in rg["metrics"]:  # a number, or None with the reason recorded: never silently missing
        v = scored[0]["ragas"][m]
        assert (isinstance(v, float) and 0 <= v <= 1) or (v is None and scored[0]["ragas"]["errors"][m])
        assert results["metrics"]["overall"][f"ragas_{m}"]["n"] == (0 if v is None else 1)
    assert results["llm_usage"]["generation"]["calls"] == 0  # answers came from the cache
    assert "ragas metrics on a sample:" in (latest(project, "small-ragas") / "report.html").read_text()


def test_judge_checks_land_on_disk_and_add_up(judged):
    """The perturbation checks of a judged run, recomputed here from the items in results.json."""
    from lab.judge.perturb import KEEPS, KINDS, TARGETS
    from lab.metrics.perturbation import summarize

    _, run, _, proc, _, _ = judged
    results, samples = load(run)
    checks = results["judge_checks"]
    assert (checks["n"], checks["seed"], checks["method"]) == (6, 13, "rubric-expected")  # min(20, 6 questions)
    assert sorted(i["id"] for i in checks["items"]) == sorted(s["id"] for s in samples)
    for item in checks["items"]:
        assert set(item["texts"]) == set(KINDS)
        assert item["texts"]["refusal"]["text"] == "I don't have enough information to answer that question."
        for kind, t in item["texts"].items():  # made, or skipped with a reason; judged when made
            assert ("text" in t) != ("skipped" in t)
            if "skipped" in t:
                assert item["perturbed"][kind] is None and t["skipped"]
    summary = summarize(checks["items"], TARGETS, KEEPS, DIMENSIONS)
    assert summary["kinds"] == checks["summary"]["kinds"] and summary["goals"] == checks["summary"]["goals"]
    assert set(summary["kinds"]) == set(TARGETS) | {"injection"}  # the wrong fact with an injected instruction
    assert any(g["kind"] == "injection" for g in summary["goals"])
    real = [s["judgement"] for s in samples if s["judgement"]["status"] == "ok"]
    assert checks["differs"]["n"] == len(real)
    # a paraphrase is asked once, and again when the first try repeats the reference or loses a fact
    asked = sum(1 if (i["texts"]["paraphrase"].get("detail") or {}).get("attempt") == 1 else 2 for i in checks["items"])
    assert results["llm_usage"]["paraphrase"]["calls"] + results["llm_usage"]["paraphrase"]["cached"] == asked
    assert "judge checks (rubric-expected, 6 questions)" in proc.stdout
    assert "Judge perturbation checks" in (run / "report.html").read_text()


def test_judge_check_cli_checks_another_method_on_the_run(judged):
    project, _, run, *_ = judged  # the latest run of `small`
    p = lab(project, "judge-check", "small", "--n", "4", "--method", "rubric")
    assert p.returncode == 0, p.stderr
    out = json.loads((run / "judge-check-rubric-n4.json").read_text())
    assert (out["method"], out["run_method"], out["n"]) == ("rubric", "rubric-expected", 4) and len(out["items"]) == 4
    scores = [v for it in out["items"] for v in [it["reference"], *it["perturbed"].values()] if v]
    assert scores and all(v[d] in (1, 2, 3, 4, 5) for v in scores for d in DIMENSIONS)  # judge-v1's digits
    assert set(out["agreement_with_run_judge"]) == set(DIMENSIONS)
    assert "judge checks (rubric, 4 questions" in p.stdout and "goals met:" in p.stdout
    again = lab(project, "judge-check", "small", "--n", "4", "--method", "rubric")
    assert again.returncode == 0 and json.loads((run / "judge-check-rubric-n4.json").read_text())[
        "seconds"]["calls"] == 0  # every call from the cache


def test_repeats_report_flip_rate_icc_and_variance_split(judged):
    project = judged[0]
    (project / "experiments" / "small-repeats.yaml").write_text(
        "schema_version: 1\nextends: small\ngeneration:\n  repeats: 2\njudge:\n  method: rubric\n  repeats: 2\n  checks: 0\n")
    p = lab(project, "run", "small-repeats")
    assert p.returncode == 0, p.stderr
    results, _ = load(latest(project, "small-repeats"))
    rep = results["repeatability"]
    assert (rep["judge_repeats"], rep["answer_repeats"], rep["temperature"]) == (2, 2, 0.7)
    assert "judge_checks" not in results
    for d in DIMENSIONS:
        row = rep["by_dimension"][d]
        assert row["n_items"] + row["n_left_out"] == 2 * rep["n_questions"]
        assert row["flip_rate"] is None or 0.0 <= row["flip_rate"] <= 1.0
        assert "variance_components" in row
