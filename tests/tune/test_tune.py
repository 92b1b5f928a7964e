"""``lab tune`` end to end on the fixture knowledge base: a few real training steps with
sentence-transformers' trainers, the folder it writes, configs that use it through both LlamaIndex
rerankers, the leakage guard, determinism, resume after a kill, and bad input."""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lab.models.tuned import CARD, QUESTIONS
from lab.tune.dev import CANDIDATES, DEV_SET, pick_fusion

FIXTURES = Path(__file__).parent.parent / "fixtures"
QUICK = ["--max-steps", "3", "--batch-size", "4", "--max-length", "64", "--no-progress"]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A copy of the fixture project, its own cache (LAB_CACHE), and one reranker tuned on it: the
    fixture eval set's span rows plus 30 pseudo-queries, three steps, its dev split scored after
    each (--curve 3)."""
    root = tmp_path_factory.mktemp("tune")
    project = root / "project"
    shutil.copytree(FIXTURES, project)
    (project / "experiments" / "small-tuned.yaml").write_text(
        "schema_version: 1\nextends: small-retrieval\ndescription: fixture, tuned cross-encoder\n"
        "retriever: {name: vector, top_k: 6}\n"
        "reranker: {name: sentence_transformer, model: tuned/fixture-reranker, top_n: 3}\n")
    mp = pytest.MonkeyPatch()
    mp.setenv("LAB_CACHE", str(root / "cache"))
    mp.chdir(project)
    from lab.cli import main

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = main(["tune", "reranker", "--index", "small-retrieval", "--train", "eval.jsonl", "--pseudo", "30",
                     "--out", "fixture-reranker", "--curve", "3", *QUICK])
    assert code == 0
    (root / "printed.txt").write_text(printed.getvalue())
    yield project, root / "cache"
    mp.undo()


def _tune(cli, *args):
    return cli("tune", *args, *QUICK)


def test_the_folder_is_a_plain_hugging_face_model_with_its_card(world):
    project, cache = world
    folder = cache / "tuned" / "fixture-reranker"
    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "README.md",
                 CARD, QUESTIONS):
        assert (folder / name).is_file(), name
    card = json.loads((folder / CARD).read_text())
    assert card["target"] == "reranker" and card["base_model"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert card["steps"] == 3 and card["seed"] == 0
    assert card["hyperparameters"] == {"loss": "bce", "epochs": 1.0, "lr": 5e-5, "head_lr": 1e-3, "batch_size": 4,
                                       "max_length": 64, "negatives": 3, "random_negatives": 2, "max_steps": 3,
                                       "warmup_ratio": 0.1, "seed": 0, "head_init": "probe"}
    # one eval row has a golden span (f2); 30 pseudo-queries asked, the fixture's chunks hold 20
    # usable sentences and headings; 10% of the questions held back as dev
    q = card["questions"]
    assert (q["generated"], q["pseudo"], q["skipped"]) == (1, 20, {"no golden span": 5})
    # one training question's sentence ends past the 64 tokens the model reads of its chunk: left out
    assert q["train"] + q["dev"] + q["beyond_max_length"] == 21 and q["dev"] == 2 and q["beyond_max_length"] == 1
    trained = [json.loads(line) for line in (folder / QUESTIONS).read_text().splitlines()]
    assert len(trained) == q["train"]
    assert len(card["fingerprint"]) == 16 and len(card["training_set"]) == 16 and len(card["kb"]) == 64
    assert math.isfinite(card["final_loss"]) and card["dev"]["n"] == 2
    # the dev split scored fused with the first stage at each weight, and the pick among them
    dev = card["dev"]
    assert list(dev["fusion"]) == ["0.25", "0.5", "1", "2"] and all(0 < v <= 1 for v in dev["fusion"].values())
    assert dev["first_stage_weight"] == pick_fusion(dev["mrr_after"], dev["fusion"])
    # --curve 3: the dev split after steps 1 and 2, then the end, its last point the card's own figures
    assert [p["step"] for p in dev["curve"]] == [1, 2, 3]
    assert dev["curve"][-1]["mrr_after"] == dev["mrr_after"] and dev["curve"][-1]["best_fused"] == max(
        dev["fusion"].values())
    assert all(p["mrr_before"] == dev["mrr_before"] and 0 < p["mrr_after"] <= 1 for p in dev["curve"])
    printed = (cache.parent / "printed.txt").read_text()
    assert "learning curve (dev MRR against steps):\n  step     1: loss " in printed
    assert "| learning curve (dev MRR against steps) | step 1: alone " in (folder / "README.md").read_text()
    fused = ", ".join(f"w {w}: {v:.4f}" for w, v in dev["fusion"].items())
    assert f"dev split fused with the first stage, z(tuned) + w * z(dense): {fused}; " in printed
    w = dev["first_stage_weight"]
    assert ("use it: reranker: {name: sentence_transformer, model: tuned/fixture-reranker, top_n: 3"
            + ("}" if w is None else f", first_stage_weight: {w:g}}}")) in printed
    assert "tuned/fixture-reranker" in (folder / "README.md").read_text()
    # nothing half-written beside it, and the checkpoints are gone once saved
    assert sorted(p.name for p in (cache / "tuned").iterdir() if p.name != ".work") == ["fixture-reranker"]
    assert (folder / DEV_SET).is_file()
    assert list((cache / "tuned" / ".work").iterdir()) == []
    from transformers import AutoModelForSequenceClassification

    model = AutoModelForSequenceClassification.from_pretrained(folder)  # a plain Hugging Face folder
    assert model.config.num_labels == 1


def test_the_dev_figures_are_lab_runs_span_mrr_on_the_same_questions(world, cli):
    """The dev MRR lab tune prints and writes is the span_mrr of lab run over the dev questions it
    keeps beside the model: the base (the index's dense top 20) and the tuned model reordering it."""
    project, cache = world
    folder = cache / "tuned" / "fixture-reranker"
    dev = json.loads((folder / CARD).read_text())["dev"]
    rows = [json.loads(line) for line in (folder / DEV_SET).read_text().splitlines()]
    assert len(rows) == dev["n"] == 2 and all(r["references"] for r in rows)
    assert {r["category"] for r in rows} == {"direct_fact"}  # the config's first: its categories are closed
    (project / "experiments" / "small-dev-base.yaml").write_text(
        "schema_version: 1\nextends: small-retrieval\ndescription: fixture, dense top 20\n"
        f"retriever: {{name: vector, top_k: {CANDIDATES}}}\n")
    (project / "experiments" / "small-dev-tuned.yaml").write_text(
        "schema_version: 1\nextends: small-dev-base\ndescription: fixture, the tuned cross-encoder\n"
        f"reranker: {{name: sentence_transformer, model: tuned/fixture-reranker, top_n: {CANDIDATES}}}\n")
    figures = {}
    for name in ("small-dev-base", "small-dev-tuned"):
        code, out, err = cli("run", name, "--eval", folder / DEV_SET, "--retrieval-only", "--reports", "dev-re",
                             "--no-progress")
        assert code == 0, err
        run = sorted((project / "dev-re" / name).glob("2*"))[-1]
        figures[name] = json.loads((run / "results.json").read_text())["metrics"]["overall"]["span_mrr"]["mean"]
    assert figures["small-dev-base"] == dev["mrr_before"]
    assert figures["small-dev-tuned"] == dev["mrr_after"]
    printed = (cache.parent / "printed.txt").read_text()
    assert f"MRR {dev['mrr_before']:.4f} (first stage) -> {dev['mrr_after']:.4f} (tuned)" in printed


def test_lab_models_lists_it(world, cli):
    code, out, err = cli("models")
    assert code == 0 and any(line.split()[:2] == ["tuned/fixture-reranker", "tuned"] for line in out.splitlines())


def test_both_llamaindex_rerankers_load_it_and_rank_alike(world):
    project, cache = world
    from llama_index.core.postprocessor import SentenceTransformerRerank
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
    from llama_index.postprocessor.flag_embedding_reranker import FlagEmbeddingReranker

    folder = str(cache / "tuned" / "fixture-reranker")
    texts = ["The Ember 90 costs 8,400 euros.", "The Ghent workshop opened in 2014.", "Kilns need a vent."]

    def nodes():
        return [NodeWithScore(node=TextNode(text=t, id_=str(i)), score=0.0) for i, t in enumerate(texts)]

    q = QueryBundle("How much does the Ember 90 cost?")
    st = SentenceTransformerRerank(model=folder, top_n=3, device="cpu").postprocess_nodes(nodes(), query_bundle=q)
    flag = FlagEmbeddingReranker(model=folder, top_n=3, use_fp16=False).postprocess_nodes(nodes(), query_bundle=q)
    assert [n.node.node_id for n in st] == [n.node.node_id for n in flag]
    # FlagEmbedding gives the logit, sentence-transformers its sigmoid: the same model either way
    for a, b in zip(st, flag):
        assert float(a.score) == pytest.approx(1 / (1 + math.exp(-float(b.score))), abs=1e-5)


def test_a_config_uses_it_and_the_run_records_it(world, cli):
    project, cache = world
    (project / "held.jsonl").write_text("".join(
        line + "\n" for line in (project / "eval.jsonl").read_text().splitlines() if '"f2"' not in line))
    code, out, err = cli("run", "small-tuned", "--eval", "held.jsonl", "--reports", "reports", "--no-progress")
    assert code == 0, err
    run = sorted((project / "reports" / "small-tuned").glob("2*"))[-1]
    results = json.loads((run / "results.json").read_text())
    card = json.loads((cache / "tuned" / "fixture-reranker" / CARD).read_text())
    tuned = results["models"]["reranker"]["tuned"]
    assert tuned["name"] == "fixture-reranker" and tuned["fingerprint"] == card["fingerprint"]
    assert tuned["training_set"] == card["training_set"] and tuned["overlap"] == 0 and tuned["same_kb"] is True
    assert results["models"]["reranker"]["source"] == "tuned"
    samples = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]
    assert len(samples) == 5 and all(len(s["retrieved"]) == 3 for s in samples)
    assert "fixture-reranker" in (run / "report.html").read_text()
    # the cross-encoder's scores are in the content cache: the same run again computes none, orders alike
    import sqlite3

    def stored():
        with contextlib.closing(sqlite3.connect(cache / "scores.sqlite")) as conn:
            return conn.execute("SELECT COUNT(*) FROM vectors").fetchone()[0]

    n = stored()
    assert n >= 5 * 3  # 5 questions, 6 candidates each (fewer where they repeat)
    code, out, err = cli("run", "small-tuned", "--eval", "held.jsonl", "--reports", "reports", "--no-progress")
    again = sorted((project / "reports" / "small-tuned").glob("2*"))[-1]
    assert code == 0 and again != run and stored() == n
    assert [[(c["id"], c["score"]) for c in json.loads(line)["retrieved"]] for line in
            (again / "samples.jsonl").read_text().splitlines()] == [[(c["id"], c["score"]) for c in s["retrieved"]]
                                                                   for s in samples]


def test_a_fused_config_records_first_stage_scores_and_orders_by_both(world, cli):
    project, cache = world
    (project / "held.jsonl").write_text("".join(
        line + "\n" for line in (project / "eval.jsonl").read_text().splitlines() if '"f2"' not in line))
    experiments = project / "experiments"
    (experiments / "small-vector6.yaml").write_text(
        "schema_version: 1\nextends: small-retrieval\ndescription: fixture, vector top 6\n"
        "retriever: {name: vector, top_k: 6}\n")
    for name, w in (("small-fused0", 0), ("small-fused-far", 1000)):
        (experiments / f"{name}.yaml").write_text(
            f"schema_version: 1\nextends: small-tuned\ndescription: fixture, fused w {w}\nreranker: "
            f"{{name: sentence_transformer, model: tuned/fixture-reranker, top_n: 3, first_stage_weight: {w}}}\n")
    runs = {}
    for name in ("small-vector6", "small-tuned", "small-fused0", "small-fused-far"):
        code, out, err = cli("run", name, "--eval", "held.jsonl", "--reports", "fused", "--no-progress")
        assert code == 0, err
        run = sorted((project / "fused" / name).glob("2*"))[-1]
        runs[name] = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]
    vector = {s["id"]: [(c["id"], c["score"]) for c in s["retrieved"]] for s in runs["small-vector6"]}
    for name in ("small-tuned", "small-fused0", "small-fused-far"):
        for s in runs[name]:  # the first stage's own scores, not the cross-encoder's
            assert [(c["id"], c["score"]) for c in s["first_stage"]] == vector[s["id"]], name
    ids = {name: {s["id"]: [c["id"] for c in s["retrieved"]] for s in samples} for name, samples in runs.items()}
    assert ids["small-fused0"] == ids["small-tuned"]  # w 0: z(model) alone, the model's order
    assert ids["small-fused-far"] == {q: v[:3] for q, v in ids["small-vector6"].items()}  # w 1000: the first stage's
    assert ids["small-fused0"] != ids["small-fused-far"]


def test_first_stage_scores_the_dev_split_over_a_configs_retriever_without_retraining(world, cli):
    project, cache = world
    folder = cache / "tuned" / "fixture-reranker"
    before = json.loads((folder / CARD).read_text())
    weights = (folder / "model.safetensors").stat().st_mtime_ns
    (project / "experiments" / "small-vector20.yaml").write_text(
        "schema_version: 1\nextends: small-retrieval\ndescription: fixture, vector top 20\n"
        "retriever: {name: vector, top_k: 20}\n")
    same = ["reranker", "--index", "small-retrieval", "--train", "eval.jsonl", "--pseudo", "30", "--out",
            "fixture-reranker"]
    code, out, err = _tune(cli, *same, "--first-stage", "small-vector20", "--first-stage", "small-hybrid")
    assert code == 0, err
    assert "(not retrained now: the same questions and hyperparameters; its dev split was scored again)" in out
    card = json.loads((folder / CARD).read_text())
    assert (folder / "model.safetensors").stat().st_mtime_ns == weights  # the weights untouched
    assert {k: v for k, v in card.items() if k != "dev"} == {k: v for k, v in before.items() if k != "dev"}
    dev, stages = card["dev"], card["dev"]["first_stages"]
    assert {k: dev[k] for k in ("n", "mrr_before", "mrr_after", "fusion", "first_stage_weight")} == {
        k: before["dev"][k] for k in ("n", "mrr_before", "mrr_after", "fusion", "first_stage_weight")}
    # the same index's dense top 20 is the dev split's own first stage: the same figures by the other path
    vec = stages["small-vector20"]
    assert (vec["retriever"], vec["top_k"], vec["n"], vec["left_out"]) == ("vector", 20, 2, 0)
    assert vec["mrr_first_stage"] == pytest.approx(dev["mrr_before"]) and vec["mrr_after"] == pytest.approx(
        dev["mrr_after"])
    assert vec["fusion"] == pytest.approx(dev["fusion"]) and vec["first_stage_weight"] == dev["first_stage_weight"]
    hyb = stages["small-hybrid"]
    assert (hyb["retriever"], hyb["top_k"], hyb["n"] + hyb["left_out"]) == ("hybrid", 3, 2)
    assert list(hyb["fusion"]) == ["0.25", "0.5", "1", "2"]
    assert hyb["first_stage_weight"] == pick_fusion(hyb["mrr_after"], hyb["fusion"])
    assert "dev split over small-hybrid's first stage (hybrid top 3;" in out
    assert "| dev MRR over another first stage | small-vector20's first stage" in (folder / "README.md").read_text()
    # other options than the model was trained with: no silent retraining, and no rescoring either
    code, out, err = _tune(cli, "reranker", "--index", "small-retrieval", "--pseudo", "5", "--out", "fixture-reranker",
                           "--first-stage", "small-hybrid")
    assert code == 2 and "trained on other questions or hyperparameters" in err and "--force" in err
    code, out, err = _tune(cli, *same, "--first-stage", "no-such-config")
    assert code == 2 and "no-such-config" in err
    code, out, err = _tune(cli, "embedding", "--pseudo", "5", "--out", "x", "--first-stage", "small-hybrid")
    assert code == 2 and "an embedding model is the first stage" in err
    assert json.loads((folder / CARD).read_text()) == card and not (cache / "tuned" / "x").exists()


def test_the_leakage_guard_refuses_its_own_training_questions(world, cli):
    project, cache = world
    # f2 was a training question: the full eval set overlaps
    code, out, err = cli("run", "small-tuned", "--reports", "refused", "--no-progress")
    assert code == 2
    assert "trained on 1 question(s) of the eval set" in err and "How much does the Ember 90 cost?" in err
    assert "same question" in err and "--allow-overlap" in err and "--holdout" in err
    assert not (project / "refused").exists()  # refused at start-up: nothing written
    code, out, err = cli("run", "small-tuned", "--reports", "reports2", "--no-progress", "--allow-overlap")
    assert code == 0, err
    run = sorted((project / "reports2" / "small-tuned").glob("2*"))[-1]
    assert json.loads((run / "results.json").read_text())["models"]["reranker"]["tuned"]["overlap"] == 1


def test_holdout_leaves_overlapping_questions_out(world, cli):
    project, cache = world
    code, out, err = _tune(cli, "reranker", "--index", "small-retrieval", "--train", "eval.jsonl", "--pseudo", "10",
                           "--holdout", "eval.jsonl", "--out", "held-out")
    assert code == 0, err
    card = json.loads((cache / "tuned" / "held-out" / CARD).read_text())
    assert card["questions"]["held_out"] == 1 and card["sources"]["holdout"] == ["eval.jsonl"]
    texts = [json.loads(x)["text"] for x in (cache / "tuned" / "held-out" / QUESTIONS).read_text().splitlines()]
    assert "How much does the Ember 90 cost?" not in texts


def test_same_data_and_seed_same_weights(world, cli):
    project, cache = world
    for name in ("same-a", "same-b"):
        code, out, err = _tune(cli, "reranker", "--index", "small-retrieval", "--pseudo", "12", "--out", name)
        assert code == 0, err
    a, b = (json.loads((cache / "tuned" / n / CARD).read_text()) for n in ("same-a", "same-b"))
    assert a["fingerprint"] == b["fingerprint"] and a["training_set"] == b["training_set"]
    code, out, err = _tune(cli, "reranker", "--index", "small-retrieval", "--pseudo", "12", "--seed", "1",
                           "--out", "seed-1")
    assert code == 0, err
    assert json.loads((cache / "tuned" / "seed-1" / CARD).read_text())["fingerprint"] != a["fingerprint"]


@pytest.mark.parametrize("head", ["fresh", "probe"])
def test_a_killed_tuning_resumes_from_its_checkpoint(world, head):
    project, cache = world
    env = {**os.environ, "LAB_CACHE": str(cache), "LAB_FAULT": "tune.after_checkpoint"}
    cmd = [sys.executable, "-m", "lab", "tune", "reranker", "--index", "small-retrieval", "--pseudo", "12",
           "--out", f"killed-{head}", "--max-steps", "4", "--batch-size", "4", "--max-length", "64", "--no-progress",
           "--head-init", head]
    first = subprocess.run(cmd, cwd=project, env=env, capture_output=True, text=True, timeout=600)
    assert first.returncode == -9, first.stderr  # SIGKILL at the first checkpoint (step 1 of 4)
    assert not (cache / "tuned" / f"killed-{head}").exists()  # no half-written model a config could load
    work = list((cache / "tuned" / ".work").glob(f"killed-{head}-*"))
    assert len(work) == 1 and (work[0] / "checkpoints" / "checkpoint-1").is_dir()
    del env["LAB_FAULT"]
    second = subprocess.run(cmd, cwd=project, env=env, capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stderr
    assert "resuming from checkpoint-1" in second.stderr
    card = json.loads((cache / "tuned" / f"killed-{head}" / CARD).read_text())
    assert card["steps"] == 4 and not work[0].exists()
    if head == "probe":  # the head came from the checkpoint; the probe's report, from the work folder
        assert "starts from a probe" in first.stderr and "starts from a probe" not in second.stderr
        assert card["head_probe"]["pairs"] == card["rows"] and 0 < card["head_probe"]["logit_std"] <= 1.0
    else:
        assert "head_probe" not in card


def test_bad_input_exits_2_and_writes_nothing(world, cli):
    project, cache = world
    (project / "bad.jsonl").write_text('{"question": "Q?", "keywords": ["kiln"], "reference_answer": "A", '
                                       '"category": "x"}\n{"question": \n')
    code, out, err = _tune(cli, "reranker", "--index", "small-retrieval", "--train", "bad.jsonl", "--out", "bad")
    assert code == 2 and "bad.jsonl" in err and "line 2" in err
    assert not (cache / "tuned" / "bad").exists()
    code, out, err = _tune(cli, "reranker", "--index", "small-retrieval", "--pseudo", "5", "--out", "fixture-reranker")
    assert code == 2 and "exists already" in err and "--force" in err
    code, out, err = _tune(cli, "reranker", "--index", "small-retrieval", "--out", "nothing")
    assert code == 2 and "no training questions" in err and "--pseudo" in err
    code, out, err = _tune(cli, "embedding", "--pseudo", "5", "--loss", "bce", "--out", "x", "--index", "small-retrieval")
    assert code == 2 and "does not train a embedding" in err
    code, out, err = cli("run", "small-retrieval", "--reports", "r", "--no-progress")  # unrelated runs unaffected
    assert code == 0, err


def test_a_config_naming_an_untuned_model_says_how_to_make_it(world, cli):
    project, cache = world
    (project / "experiments" / "small-missing.yaml").write_text(
        "schema_version: 1\nextends: small-retrieval\nembedding: {model: tuned/never-made}\n")
    code, out, err = cli("run", "small-missing", "--reports", "r", "--no-progress")
    assert code == 2 and "tuned/never-made" in err and "lab tune embedding" in err and "--out never-made" in err


def test_a_tuned_embedding_builds_its_own_index_and_a_retrained_one_another(world, cli):
    project, cache = world
    (project / "experiments" / "small-embed.yaml").write_text(
        "schema_version: 1\nextends: small-retrieval\nembedding: {model: tuned/fixture-embed}\n")
    keys = []
    for seed in ("0", "1"):
        code, out, err = _tune(cli, "embedding", "--index", "small-retrieval", "--pseudo", "20", "--out",
                               "fixture-embed", "--seed", seed, "--force")
        assert code == 0, err
        code, out, err = cli("run", "small-embed", "--eval", "held.jsonl" if (project / "held.jsonl").exists()
                             else "eval.jsonl", "--reports", "re", "--no-progress", "--allow-overlap")
        assert code == 0, err
        run = sorted((project / "re" / "small-embed").glob("2*"))[-1]
        results = json.loads((run / "results.json").read_text())
        keys.append((results["index"]["key"], results["models"]["embedding"]["fingerprint"]))
    assert keys[0][0] != keys[1][0] and keys[0][1] != keys[1][1]  # retrained: a new index, never the stale one
    code, out, err = cli("run", "small-retrieval", "--reports", "re", "--no-progress")
    base = json.loads((sorted((project / "re" / "small-retrieval").glob("2*"))[-1] / "results.json").read_text())
    assert base["index"]["key"] not in (keys[0][0], keys[1][0])
    # a first stage whose bi-encoder was tuned on the reranker's dev questions: those are left out
    code, out, err = _tune(cli, "reranker", "--index", "small-retrieval", "--train", "eval.jsonl", "--pseudo", "30",
                           "--out", "fixture-reranker", "--first-stage", "small-embed")
    assert code == 0, err
    stage = json.loads((cache / "tuned" / "fixture-reranker" / CARD).read_text())["dev"]["first_stages"]["small-embed"]
    from lab.evidence.text import fold
    from lab.tune.data import prepare
    from lab.tune.options import TuneOptions

    dev = prepare(TuneOptions("reranker", "x", index="small-retrieval", train=[Path("eval.jsonl")], pseudo=30,
                              show_progress=False)).dev
    trained = [json.loads(x) for x in (cache / "tuned" / "fixture-embed" / QUESTIONS).read_text().splitlines()]
    texts, spans = {fold(t["text"]) for t in trained}, {t["span"] for t in trained}
    seen = sum(fold(q.text) in texts or q.span in spans for q in dev)
    assert seen >= 1 and stage["trained_on"] == seen and stage["n"] + stage["left_out"] == len(dev) - seen
    assert f"{seen} left out: its bi-encoder trained on them" in out


def test_a_head_started_from_a_probe_is_recorded_and_a_fresh_one_is_as_before(world, cli):
    project, cache = world
    card = json.loads((cache / "tuned" / "fixture-reranker" / CARD).read_text())  # the default: a probe
    assert card["hyperparameters"]["head_init"] == "probe"
    probe = card["head_probe"]
    assert probe["pairs"] == card["rows"] and 0 < probe["logit_std"] <= 1.0 and 0 < probe["train_mrr"] <= 1
    assert "started from a linear probe of" in (cache / "tuned" / "fixture-reranker" / "README.md").read_text()
    code, out, err = _tune(cli, "reranker", "--index", "small-retrieval", "--pseudo", "12", "--head-init", "fresh",
                           "--out", "fresh")
    assert code == 0, err
    fresh = json.loads((cache / "tuned" / "fresh" / CARD).read_text())
    assert "head_init" not in fresh["hyperparameters"] and "head_probe" not in fresh
    assert "started from a linear probe" not in (cache / "tuned" / "fresh" / "README.md").read_text()
    code, out, err = _tune(cli, "reranker", "--index", "small-retrieval", "--pseudo", "12", "--head-init", "probe",
                           "--loss", "listnet", "--out", "probed-listnet")
    assert code == 2 and "--head-init probe" in err and "bce" in err
    assert not (cache / "tuned" / "probed-listnet").exists()
