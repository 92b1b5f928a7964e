"""End to end through the CLI, with the real packaged models, on the fixture project."""

import time

import pytest

from runs import lab, latest, load, page_text

pytestmark = pytest.mark.slow


def test_run_writes_results_samples_and_report(project):
    p = lab(project, "run", "small-retrieval")
    assert p.returncode == 0, p.stderr
    run = latest(project, "small-retrieval")
    assert f"report: reports/small-retrieval/{run.name}/report.html" in p.stdout
    results, samples = load(run)
    assert results["name"] == "small-retrieval" and results["sample"] == {
        "is_sample": False, "n_questions": 6, "n_total": 6, "limit": None, "seed": 13}
    assert results["index"]["reused"] is False and results["index"]["texts_embedded"] == results["index"]["n_chunks"]
    assert results["models"]["embedding"]["source"] == "package"
    assert results["models"]["generation"] is None and "judge" not in results and "accuracy" not in results["metrics"]["overall"]
    assert set(results["timings"]) >= {"load_s", "chunk_s", "embed_s", "write_s", "retrieve_s", "total_s"}
    assert [s["id"] for s in samples] == ["f1", "f2", "f3", "f4", "f5", "f6"]
    for s in samples:  # ranks and metrics recomputed here from the chunks that landed on disk
        texts = [c["text"].lower() for c in s["retrieved"]]
        assert len(texts) == 3 and [c["rank"] for c in s["retrieved"]] == [1, 2, 3]
        ranks = {kw: next((i + 1 for i, t in enumerate(texts) if kw.lower() in t), None) for kw in s["keywords"]}
        assert s["keyword_ranks"] == ranks
        expected = sum(1 / r for r in ranks.values() if r) / len(ranks)
        assert s["metrics"]["mrr"] == pytest.approx(expected)
        assert s["metrics"]["context_chars"] == sum(len(c["text"]) for c in s["retrieved"])
    overall = results["metrics"]["overall"]["mrr"]
    assert overall["n"] == 6 and overall["mean"] == pytest.approx(sum(s["metrics"]["mrr"] for s in samples) / 6)
    assert results["metrics"]["by_category"]["direct_fact"]["n"] == 1
    f2 = samples[1]  # "How much does the Ember 90 cost?" -> the Ember 90 page first
    assert f2["retrieved"][0]["source"] == "products/ember90.md" and f2["keyword_ranks"] == {"8,400": 1}
    # its golden span "costs 8,400 euros." is chars 104-122 of the page; span metrics recomputed
    # here from the offsets that landed on disk
    kb_text = (project / "kb" / "products" / "ember90.md").read_text()
    covered = set()
    for c in f2["retrieved"]:
        if c["source"] == "products/ember90.md":
            assert kb_text[c["start_char_idx"]:c["end_char_idx"]] == c["text"]
            covered |= set(range(c["start_char_idx"], c["end_char_idx"]))
    gold = set(range(104, 122))
    retrieved_chars = len(covered) + sum(len(c["text"]) for c in f2["retrieved"] if c["source"] != "products/ember90.md")
    assert f2["metrics"]["span_recall"] == pytest.approx(len(covered & gold) / 18) == 1.0
    assert f2["metrics"]["span_precision"] == pytest.approx(18 / retrieved_chars)
    assert f2["metrics"]["span_iou"] == pytest.approx(18 / (retrieved_chars + 18 - 18))
    assert results["metrics"]["overall"]["span_iou"]["n"] == 1 and "span_iou" not in samples[0]["metrics"]
    html = page_text(run / "report.html")
    assert "How much does the Ember 90 cost?" in html
    assert '&lt;script&gt;alert(&#34;kb&#34;)&lt;/script&gt;' in html and '<script>alert("kb")' not in html
    assert (run / "config.yaml").read_text().startswith("schema_version: 1\nname: small-retrieval\n")
    assert not list((project / "reports" / "small-retrieval").glob(".*tmp*"))
    import pandas as pd

    df = pd.read_parquet(run / "questions.parquet")
    assert list(df["id"]) == ["f1", "f2", "f3", "f4", "f5", "f6"]
    assert df["mrr"].tolist() == pytest.approx([s["metrics"]["mrr"] for s in samples])
    assert df.loc[1, "retrieved_sources"].startswith("products/ember90.md; ")
    assert (run / "questions.csv").read_text().splitlines()[0].startswith("experiment,run_id,id,category,question")


def test_retrieval_only_skips_answers_and_the_judge(project, tmp_path):
    gguf = tmp_path / "gguf"  # its own: the hint after the run names the LLMs without assembling one
    p = lab(project, "run", "small", "--retrieval-only", "--no-progress", LAB_GGUF_DIR=str(gguf))
    assert not gguf.exists()
    assert p.returncode == 0, p.stderr
    results, samples = load(latest(project, "small"))
    assert results["config"]["generation"] is None and results["config"]["judge"] is None
    assert results["models"]["generation"] is None and "llm_usage" in results and results["llm_usage"] == {}
    assert "accuracy" not in results["metrics"]["overall"] and all(s.get("answer") is None for s in samples)
    assert not (project / "cache" / "llm.sqlite").exists()
    # the funnel stops at the final list: no context was built
    assert results["funnel"]["stages"] == ["kb", "chunking", "first_stage", "second_stage"]
    assert all(s["funnel"]["seen"] == results["funnel"]["stages"] and "budget" not in s["funnel"] for s in samples)
    assert results["funnel"]["overall"]["n"] == 6
    # what to run next, and its cost, before any model has been measured here (the 2-core prior)
    assert "6 questions, retrieval only: no LLM call" in p.stderr
    # every call counted: 10 answers; the judge's 10 + 20 calibration + 10 x 6 perturbed texts, 3.4 calls each;
    # 10 paraphrases of 1.8 calls: 10 + 306 + 18 = 334 calls, 173 + 162.18 + 111.6 s (the 2-core prior)
    assert p.stdout.splitlines()[-1] == ("next: lab run small --limit 10 answers and judges a stratified sample of 10 "
                                         "questions (334 LLM calls, about 7 min 27 s (2-core prior)); --dry-run says "
                                         "what the whole set costs")


def test_a_cold_run_piped_to_a_file_prints_no_expected_warnings(project):
    """stderr is not a terminal here: no bars, and none of LlamaIndex's "Table chunks doesn't
    exist yet", Lance's Rust "No existing dataset ... will be created" or transformers' "Loading
    weights" bars, which every new index used to print."""
    p = lab(project, "run", "small", "--retrieval-only")
    assert p.returncode == 0, p.stderr
    assert "built index" in p.stderr
    for noise in ("doesn't exist yet", "No existing dataset", "WARN", "Loading weights", "\r", "it/s"):
        assert noise not in p.stderr, (noise, p.stderr)


def test_two_stage_reuses_the_index_and_caches_scores(project):
    assert lab(project, "run", "small-retrieval").returncode == 0
    p = lab(project, "run", "small-llm-rerank")
    assert p.returncode == 0, p.stderr
    first, samples = load(latest(project, "small-llm-rerank"))
    assert first["index"]["reused"] is True and first["index"]["texts_embedded"] == 0
    assert first["counters"]["embeddings_computed"] == 0  # chunks and questions all cached
    assert first["counters"]["rerank_scores_computed"] == 6 * 4  # candidate_k = 4 of top 5
    assert all(len(s["retrieved"]) == 2 and len(s["first_stage"]) == 5 for s in samples)
    assert all(c["first_stage_rank"] <= 4 for s in samples for c in s["retrieved"])
    assert all(type(c["score"]) is float and type(c["first_stage_score"]) is float
               for s in samples for c in s["retrieved"])
    assert first["models"]["reranker"]["prompt_version"] == "relevance-yesno-v1"
    time.sleep(1)  # a distinct run id
    p = lab(project, "run", "small-llm-rerank")
    second, samples2 = load(latest(project, "small-llm-rerank"))
    assert second["counters"]["rerank_scores_computed"] == 0 and second["counters"]["rerank_scores_cached"] == 24
    assert [[c["id"] for c in s["retrieved"]] for s in samples2] == [[c["id"] for c in s["retrieved"]] for s in samples]
    assert second["metrics"] == first["metrics"]


def test_sample_runs_say_so(project):
    p = lab(project, "run", "small-retrieval", "--limit", "3", "--seed", "5")
    assert p.returncode == 0, p.stderr
    results, samples = load(latest(project, "small-retrieval"))
    assert results["sample"]["is_sample"] is True and len(samples) == 3
    assert "Sample run:" in (latest(project, "small-retrieval") / "report.html").read_text()
    assert "sample" in p.stdout


def test_missing_reranker_model_stops_at_start_up(project):
    (project / "experiments" / "two-stage-hub.yaml").write_text(
        "schema_version: 1\nextends: small-semantic\nretriever:\n  name: vector\n  top_k: 5\n"
        "reranker:\n  name: flag_embedding\n  model: BAAI/bge-reranker-base\n  top_n: 3\n"
    )
    t0 = time.perf_counter()
    p = lab(project, "run", "two-stage-hub")
    assert p.returncode == 2 and time.perf_counter() - t0 < 30
    assert "error: reranker model (cross-encoder) 'BAAI/bge-reranker-base' is not available" in p.stderr
    assert "Traceback" not in p.stderr
    assert not (project / "reports" / "two-stage-hub").exists() and not (project / "cache" / "indexes").exists()


def test_bad_name_and_bad_config_exit_2(project):
    p = lab(project, "run", "../../etc/passwd")
    assert p.returncode == 2 and "invalid experiment name" in p.stderr
    (project / "experiments" / "typo.yaml").write_text("extends: small\nretriever:\n  name: vectr\n")
    p = lab(project, "run", "typo")
    assert p.returncode == 2 and "did you mean 'vector'?" in p.stderr


def test_report_rerenders_from_files_alone(project):
    assert lab(project, "run", "small-retrieval").returncode == 0
    run = latest(project, "small-retrieval")
    (run / "report.html").unlink()
    p = lab(project, "report", "reports/small-retrieval/LATEST")
    assert p.returncode == 0 and (run / "report.html").is_file()


def test_guardrail_suppresses_generation_without_a_call(project):
    p = lab(project, "run", "small-guardrail", "--no-progress")
    assert p.returncode == 0, p.stderr
    results, samples = load(latest(project, "small-guardrail"))
    assert results["guardrail"] == {"min_top_score": 0.99, "suppress_generation": True, "n_flagged": 6,
                                    "flagged_ids": ["f1", "f2", "f3", "f4", "f5", "f6"]}
    assert results["llm_usage"]["generation"]["calls"] == 0 and results["llm_usage"]["generation"]["cached"] == 0
    assert all(s["low_confidence"] and s["answer"]["suppressed"] and s["answer"]["refused"] for s in samples)
    assert all(len(s["retrieved"]) == 3 for s in samples)  # retrieval metrics still measured
    assert "6 of 6 questions flagged" in (latest(project, "small-guardrail") / "report.html").read_text()


def test_keyword_overlap_rerank_fires_only_for_long_questions(project):
    p = lab(project, "run", "small-overlap", "--no-progress")
    assert p.returncode == 0, p.stderr
    results, samples = load(latest(project, "small-overlap"))
    long_ids = {s["id"] for s in samples if len(s["question"].split()) > 5}
    assert long_ids and {s["id"] for s in samples if s["rerank"]["fired"]} == long_ids
    assert results["rerank_activation"] == {"n_fired": len(long_ids), "n": 6,
                                            "why": {"long": len(long_ids), "low": 0, "flat": 0}}
    for s in samples:
        firsts = [c["first_stage_rank"] for c in s["retrieved"]]
        if not s["rerank"]["fired"]:  # the vector order, cut to 3
            assert firsts == [1, 2, 3]
        else:
            assert all(a >= b for a, b in zip([c["score"] for c in s["retrieved"]], [c["score"] for c in s["retrieved"]][1:]))


def test_labelled_recall_and_mrr_at_k(project):
    (project / "labels.csv").write_text("query_id,relevant_ids\nf2,products/ember90.md#0;nowhere.md#7\n")
    (project / "experiments" / "small-labelled.yaml").write_text(
        "schema_version: 1\nextends: small-retrieval\ndata:\n  labels: labels.csv\n")
    p = lab(project, "run", "small-labelled", "--no-progress")
    assert p.returncode == 0, p.stderr
    assert "1 labelled chunk ids are not in this index" in p.stderr
    results, samples = load(latest(project, "small-labelled"))
    assert results["labels"] == {"path": "labels.csv", "n_labelled": 1, "n_missing_ids": 1,
                                 "missing_ids": ["nowhere.md#7"]}
    f2 = samples[1]
    ids = [c["id"] for c in f2["retrieved"]]
    rank = ids.index("products/ember90.md#0") + 1
    assert f2["metrics"]["label_recall"] == 0.5 and f2["metrics"]["label_mrr"] == 1 / rank
    assert results["metrics"]["overall"]["label_mrr"] == {"mean": 1 / rank, "n": 1}


def test_query_caches_count_hits_and_serve_the_same_retrieval(project):
    (project / "experiments" / "small-semantic-cache.yaml").write_text(
        "schema_version: 1\nextends: small-retrieval\ncaches:\n  semantic_threshold: 0.9\n")
    first = lab(project, "run", "small-semantic-cache", "--no-progress")
    assert first.returncode == 0, first.stderr
    r1, s1 = load(latest(project, "small-semantic-cache"))
    assert (r1["counters"]["semantic_cache_hits"], r1["counters"]["semantic_cache_misses"]) == (0, 6)
    assert r1["counters"]["query_embeddings_computed"] == 6 and all(not s["semantic_cache"]["hit"] for s in s1)
    time.sleep(1)
    second = lab(project, "run", "small-semantic-cache", "--no-progress")
    assert second.returncode == 0, second.stderr
    r2, s2 = load(latest(project, "small-semantic-cache"))
    assert (r2["counters"]["semantic_cache_hits"], r2["counters"]["semantic_cache_misses"]) == (6, 0)
    assert r2["counters"]["query_embeddings_cached"] == 6 and r2["counters"]["query_embeddings_computed"] == 0
    assert all(s["semantic_cache"] == {"hit": True, "of": s["question"], "similarity": 1.0} for s in s2)
    assert [[c["id"] for c in s["retrieved"]] for s in s2] == [[c["id"] for c in s["retrieved"]] for s in s1]
    assert r2["metrics"] == r1["metrics"]


def test_rows_without_keywords_are_not_scored_on_keywords(project):
    """A row with golden spans and no keywords: MRR, nDCG and coverage are n/a for it (left out
    of the means, with the reason in results and on the page), and its span metrics count."""
    import json

    rows = [json.loads(line) for line in (project / "eval.jsonl").read_text().splitlines()]
    f2 = next(r for r in rows if r["id"] == "f2")
    del f2["keywords"]
    (project / "eval.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    p = lab(project, "run", "small-retrieval")
    assert p.returncode == 0, p.stderr
    run = latest(project, "small-retrieval")
    results, samples = load(run)
    s2 = next(s for s in samples if s["id"] == "f2")
    assert s2["keywords"] == [] and s2["keyword_ranks"] == {}
    assert s2["metrics"]["mrr"] is None and s2["metrics"]["span_recall"] is not None
    others = [s["metrics"]["mrr"] for s in samples if s["id"] != "f2"]
    assert results["metrics"]["overall"]["mrr"] == {"mean": pytest.approx(sum(others) / 5), "n": 5}
    assert results["not_scored"]["mrr"] == {"n": 1, "why": "no keywords in the eval row", "ids": ["f2"]}
    assert "MRR (keywords) is n/a for 1 question (no keywords in the eval row)" in page_text(run / "report.html")


def test_rows_with_golden_spans_are_ranked_by_them_and_their_twins(project):
    """A row whose golden span names an archived price list (its only keyword removed) while the
    Ember 90 page holds the same sentence in another case and line break: the span's twin is found
    at start-up with exact offsets, the span rank metrics count a passage holding it, the keyword
    metrics stay n/a, and the terminal prints each metric's own n."""
    import json

    archive = "Archived price list of a discontinued line.\n\nThe kiln COSTS 8,400\neuros. Prices changed since.\n"
    start = archive.index("COSTS")
    (project / "kb" / "archive").mkdir()
    (project / "kb" / "archive" / "price-list.md").write_text(archive)
    rows = [json.loads(line) for line in (project / "eval.jsonl").read_text().splitlines()]
    f2 = next(r for r in rows if r["id"] == "f2")
    del f2["keywords"]
    f2["references"] = [{"source": "archive/price-list.md", "content": "COSTS 8,400\neuros.",
                         "start_index": start, "end_index": start + 18}]
    (project / "eval.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    p = lab(project, "run", "small-retrieval")
    assert p.returncode == 0, p.stderr
    results, samples = load(latest(project, "small-retrieval"))
    s2 = next(s for s in samples if s["id"] == "f2")
    (ref,) = s2["references"]
    # "costs 8,400 euros." is chars 104-122 of the Ember 90 page (see test_run_writes_results_samples_and_report)
    assert ref["twins"] == [{"source": "products/ember90.md", "start": 104, "end": 122}] and ref["n_twins"] == 1
    places = [("archive/price-list.md", start, start + 18), ("products/ember90.md", 104, 122)]

    def share(chunk, place):
        if chunk["source"] != place[0]:
            return 0.0
        return max(0, min(chunk["end_char_idx"], place[2]) - max(chunk["start_char_idx"], place[1])) / 18

    held = [max(share(c, x) for x in places) for c in s2["retrieved"]]  # each passage's best share
    rank = next(i + 1 for i, h in enumerate(held) if h >= 0.5)
    assert rank == 1 and ref["rank"] == 1 and ref["held_by_twin"] is True  # the Ember 90 page comes first
    assert s2["metrics"]["span_mrr"] == 1.0 and s2["metrics"]["span_ndcg"] == 1.0
    assert s2["metrics"]["span_recall_any"] == 1.0
    own = sum(share(c, places[0]) for c in s2["retrieved"])  # the archive's own place: the old metric
    assert s2["metrics"]["span_recall"] == pytest.approx(own)
    assert s2["metrics"]["mrr"] is None
    overall = results["metrics"]["overall"]
    assert overall["span_mrr"] == {"mean": 1.0, "n": 1} and overall["mrr"]["n"] == 5
    assert results["not_scored"]["span_mrr"]["n"] == 5 and results["not_scored"]["mrr"]["ids"] == ["f2"]
    overall_line = next(line for line in p.stdout.splitlines() if line.startswith("overall"))
    assert f"{results['metrics']['overall']['mrr']['mean']:.4f} (n=5)" in overall_line
    assert "1.0000 (n=1)" in overall_line


def test_a_hybrids_first_stage_is_both_lists_before_the_fusions_cut(project):
    """The loss funnel's candidates of a hybrid: every node the dense and the BM25 search returned,
    in fused order, of which the fusion kept its top k (the second stage's cut)."""
    p = lab(project, "run", "small-hybrid", "--retrieval-only", "--no-progress")
    assert p.returncode == 0, p.stderr
    results, samples = load(latest(project, "small-hybrid"))
    cfg = results["config"]["retriever"]
    for s in samples:
        ids = [c["id"] for c in s["candidates"]]
        assert cfg["top_k"] < len(ids) <= cfg["dense_k"] + cfg["sparse_k"] and len(set(ids)) == len(ids)
        assert ids[:len(s["retrieved"])] == [r["id"] for r in s["retrieved"]]  # the fusion keeps the head
        assert [c["rank"] for c in s["candidates"]] == list(range(1, len(ids) + 1))
        assert s["funnel"]["n_candidates"] == len(ids)
