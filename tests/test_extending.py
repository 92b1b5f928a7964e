"""The docs' "How to add a component" recipes (docs/extending.md), followed on a copy of the lab.

A chunker, a retriever, a reranker, a metric, a judge method and an eval-set importer are added by
editing exactly the files the docs
names (the edits are the recipes' steps, as text), then an experiment using all four runs through
the CLI and the test checks what landed on disk. When the code moves, an anchor below stops
matching and this test fails: update the recipe and docs/extending.md together.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from runs import load

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures"

pytestmark = pytest.mark.slow

CHUNKER_CONFIG = '''
class ParagraphChunker(ChunkerBase):
    """One chunk per paragraph (blank-line separated)."""

    name: Literal["paragraph"]


'''
CHUNKER_CODE = '''
class ParagraphNodeParser(NodeParser):
    def _parse_nodes(self, nodes: Sequence[BaseNode], show_progress: bool = False, **kw: Any) -> list[BaseNode]:
        out: list[BaseNode] = []
        for node in nodes:
            splits = [p for p in node.get_content().split("\\n\\n") if p.strip()]
            out.extend(build_nodes_from_splits(splits, node, id_func=self.id_func))
        return out


@CHUNKERS.register("paragraph")
def _paragraph(cfg: Any, embed_model: Any) -> NodeParser:
    return ParagraphNodeParser(id_func=stable_id, include_prev_next_rel=False)


'''
RETRIEVER_CONFIG = '''
class OnePerDocumentRetriever(Strict):
    """Dense top 3 * top_k, then the best chunk of each document, top_k kept."""

    name: Literal["one_per_document"]
    top_k: int = Field(3, gt=0)


'''
RETRIEVER_CODE = '''
class OnePerDocument(BaseRetriever):
    def __init__(self, dense: VectorRetriever, top_k: int, **kwargs: Any) -> None:
        self._dense, self._top_k = dense, top_k
        super().__init__(**kwargs)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        seen, out = set(), []
        for n in self._dense.retrieve(query_bundle):
            if n.node.metadata.get("source") not in seen:
                seen.add(n.node.metadata.get("source"))
                out.append(n)
        return out[: self._top_k]

    def retrieve_many(self, bundles: Sequence[QueryBundle]) -> list[list[NodeWithScore]]:
        return [self._retrieve(b) for b in bundles]


@RETRIEVERS.register("one_per_document")
def _one_per_document(cfg: Any, index: Any, embed_model: Any) -> OnePerDocument:
    return OnePerDocument(VectorRetriever(index=index, similarity_top_k=3 * cfg.top_k, embed_model=embed_model),
                          cfg.top_k)


'''
RERANKER_CONFIG = '''
class ShortFirstRerankerConfig(_RerankerBase):
    """final = first-stage score - penalty * characters / 1000."""

    name: Literal["short_first"]
    penalty: float = Field(0.1, ge=0)


'''
RERANKER_CODE = '''
class ShortFirst(BaseNodePostprocessor):
    penalty: float = Field(default=0.1)
    top_n: int = Field(default=3)

    def _postprocess_nodes(self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
                           ) -> list[NodeWithScore]:
        scored = [NodeWithScore(node=n.node, score=float(n.score or 0.0) - self.penalty * len(n.node.get_content())
                                / 1000) for n in nodes]
        return sorted(scored, key=lambda n: -n.score)[: self.top_n]


@RERANKERS.register("short_first")
def _short_first(plan: RerankerPlan, cache: Any) -> BaseNodePostprocessor:
    return ShortFirst(penalty=plan.cfg.penalty, top_n=plan.cfg.top_n)


'''
METRIC_ROW = '''    Metric("hit_at_1", "Hit@1", "retrieval", "share", True, None, _v("compare", "terminal")),
'''
METRIC_CODE = '''

def hit_at_1(keywords: Sequence[str], texts: Sequence[str]) -> float:
    """Share of the keywords found in the first text (0.0 when nothing was retrieved)."""
    return sum(1 for k in keywords if texts and holds(Passage(texts[0]), Evidence.keyword(k))) / len(keywords)
'''

JUDGE_METHOD_CODE = '''

def _length(g, item, answer, scores_only):
    """A judge without a model: one point per five words, from 1 to 5."""
    score = float(min(5, 1 + len(answer.split()) // 5))
    return {"status": "ok", "accuracy": score, "completeness": score, "relevance": score,
            "feedback": f"{len(answer.split())} words", "attempts": 1, "cached": True,
            "prompt_tokens": 0, "completion_tokens": 0}


METHODS.register("length")(JudgeMethod(lambda rubric, where: MethodPrompts(rubric, {}), _length))
'''
IMPORTER_CODE = '''

def _from_tsv(source, category, extra):
    """question <TAB> reference answer <TAB> keywords separated by ';', one question a line."""
    rows = []
    for n, line in enumerate(source.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            question, answer, keywords = line.split("\\t")
            rows.append((f"{source} line {n}", {"question": question, "reference_answer": answer,
                                                "keywords": keywords.split(";"), "category": category}))
    return rows, {}, {}


IMPORTERS.register("tsv")(Importer(_from_tsv, {}))
'''


def insert(path: Path, anchor: str, text: str, after: bool = False) -> None:
    body = path.read_text(encoding="utf-8")
    assert body.count(anchor) == 1, f"{path}: the recipe's anchor {anchor!r} moved"
    i = body.index(anchor) + (len(anchor) if after else 0)
    path.write_text(body[:i] + text + body[i:], encoding="utf-8")


def replace(path: Path, old: str, new: str) -> None:
    body = path.read_text(encoding="utf-8")
    assert body.count(old) == 1, f"{path}: the recipe's anchor {old!r} moved"
    path.write_text(body.replace(old, new), encoding="utf-8")


def follow_the_recipes(lab: Path) -> None:
    comp = lab / "config" / "components.py"
    # chunker: 2 files
    insert(comp, "ChunkerConfig = Annotated[", CHUNKER_CONFIG)
    replace(comp, "          ParentChildChunker],", "          ParentChildChunker, ParagraphChunker],")
    insert(lab / "rag" / "chunkers.py", "def build_chunker(", CHUNKER_CODE)
    # retriever: 2 files
    insert(comp, "RetrieverConfig = Annotated[", RETRIEVER_CONFIG)
    replace(comp, "Union[VectorRetriever, BM25Retriever, HybridRetriever]",
            "Union[VectorRetriever, BM25Retriever, HybridRetriever, OnePerDocumentRetriever]")
    insert(lab / "rag" / "retrievers.py", "#: Retrievers that read LanceDB's full-text index", RETRIEVER_CODE)
    # reranker: 2 files
    insert(comp, "RerankerConfig = Annotated[", RERANKER_CONFIG)
    replace(comp, "          KeywordOverlapRerankerConfig, DocBoostRerankerConfig, DocTypeFilterRerankerConfig],",
            "          KeywordOverlapRerankerConfig, DocBoostRerankerConfig, DocTypeFilterRerankerConfig,\n"
            "          ShortFirstRerankerConfig],")
    post = lab / "rag" / "postprocess.py"
    insert(post, "class KeepFirst(BaseNodePostprocessor):", RERANKER_CODE)
    replace(post, 'MODEL_FREE = {"keyword_overlap", "doc_boost", "doc_type_filter"}',
            'MODEL_FREE = {"keyword_overlap", "doc_boost", "doc_type_filter", "short_first"}')
    # metric: 3 files
    insert(lab / "metrics" / "catalog.py", '    Metric("span_precision"', METRIC_ROW)
    (lab / "metrics" / "retrieval.py").write_text((lab / "metrics" / "retrieval.py").read_text() + METRIC_CODE)
    stages = lab / "eval" / "stages.py"
    replace(stages, "from lab.metrics.retrieval import KEYWORD_METRICS, question_scores",
            "from lab.metrics.retrieval import KEYWORD_METRICS, hit_at_1, question_scores")
    insert(stages, '        scores["context_chars"] = sum(len(t) for t in texts)\n',
           '        scores["hit_at_1"] = hit_at_1(row.keywords, texts)\n', after=True)
    # judge method: 2 files
    replace(lab / "config" / "schema.py", 'JUDGE_METHODS = ("rubric", "rubric-expected", "per-dimension", "claims", "split")',
            'JUDGE_METHODS = ("rubric", "rubric-expected", "per-dimension", "claims", "split", "length")')
    insert(lab / "judge" / "methods.py", "assert set(METHODS.names()) == set(JUDGE_METHODS)", JUDGE_METHOD_CODE.lstrip() + "\n\n")
    # importer: 1 file
    insert(lab / "evalsets" / "interop.py", "def import_set(", IMPORTER_CODE.lstrip() + "\n\n")


def changed_files(original: Path, copy: Path) -> set[str]:
    out = set()
    for p in copy.rglob("*.py"):
        rel = p.relative_to(copy)
        if (original / rel).read_bytes() != p.read_bytes():
            out.add(f"lab/{rel.as_posix()}")
    return out


def test_a_chunker_a_retriever_a_reranker_and_a_metric_added_as_the_readme_says(tmp_path):
    copy = tmp_path / "src" / "lab"
    shutil.copytree(ROOT / "lab", copy, ignore=shutil.ignore_patterns("__pycache__"))
    follow_the_recipes(copy)
    assert changed_files(ROOT / "lab", copy) == {
        "lab/config/components.py", "lab/rag/chunkers.py", "lab/rag/retrievers.py", "lab/rag/postprocess.py",
        "lab/metrics/catalog.py", "lab/metrics/retrieval.py", "lab/eval/stages.py", "lab/config/schema.py",
        "lab/judge/methods.py", "lab/evalsets/interop.py"}

    project = tmp_path / "project"
    shutil.copytree(FIXTURES, project)
    (project / "experiments" / "extended.yaml").write_text(
        "schema_version: 1\nextends: small-retrieval\ndescription: the four recipes at once\n"
        "chunker: {name: paragraph}\nretriever: {name: one_per_document, top_k: 3}\n"
        "reranker: {name: short_first, top_n: 2, penalty: 0.5}\n", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(copy.parent), "LAB_CACHE": str(project / "cache"), "HF_HUB_OFFLINE": "1"}
    p = subprocess.run([sys.executable, "-m", "lab", "run", "extended"], cwd=project, env=env,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    assert "hit_at_1" in p.stdout  # the terminal view reads the catalogue
    base = project / "reports" / "extended"
    results, samples = load(base / (base / "LATEST").read_text().strip())
    assert results["config"]["chunker"] == {"name": "paragraph"}
    assert results["models"]["reranker"]["source"] == "builtin"
    kb = {p.relative_to(project / "kb").as_posix(): p.read_text() for p in (project / "kb").rglob("*.md")}
    for s in samples:
        chunks = s["retrieved"]
        assert len(chunks) <= 2  # the reranker's top_n
        assert len({c["source"] for c in chunks}) == len(chunks)  # one chunk per document
        for c in chunks:  # every chunk is one paragraph of its document, at its offsets
            assert kb[c["source"]][c["start_char_idx"]:c["end_char_idx"]] == c["text"] and "\n\n" not in c["text"]
        scores = [c["score"] for c in chunks]
        assert scores == sorted(scores, reverse=True)
        for c in chunks:  # short_first's score, recomputed from what landed on disk
            assert c["score"] == pytest.approx(c["first_stage_score"] - 0.5 * len(c["text"]) / 1000)
        first = chunks[0]["text"].lower() if chunks else ""
        expected = sum(1 for k in s["keywords"] if k.lower() in first) / len(s["keywords"])
        assert s["metrics"]["hit_at_1"] == pytest.approx(expected)
    overall = results["metrics"]["overall"]["hit_at_1"]
    assert overall["n"] == len(samples)
    assert overall["mean"] == pytest.approx(sum(s["metrics"]["hit_at_1"] for s in samples) / len(samples))

    # the judge method: the config accepts it, and the run's grader grades with it (no model call)
    code = ("from pathlib import Path\n"
            "from lab.config import load_experiment\n"
            "from lab.judge.methods import grader\n"
            "from lab.judge.rubric import judge_item, resolve_judge\n"
            "cfg = load_experiment('small', Path('experiments'), {'judge': {'method': 'length'}})\n"
            "grade = grader(None, resolve_judge(cfg.judge, Path('.')))\n"
            "item = judge_item({'id': 'q', 'category': 'c', 'question': 'Q?', 'reference_answer': 'R.'})\n"
            "rec = grade(item, 'one two three four five six seven')\n"
            "print(grade.method, grade.version, rec['accuracy'], rec['feedback'], grade.scores(item, 'x'))\n")
    p = subprocess.run([sys.executable, "-c", code], cwd=project, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split("\n")[0] == ("length length:judge-v1 2.0 7 words "
                                       "{'accuracy': 1.0, 'completeness': 1.0, 'relevance': 1.0}")

    # the importer: `lab import tsv` lists it and writes validated rows
    tsv = project / "questions.tsv"
    tsv.write_text("Who founded Harrowfield?\tMaxine did.\tMaxine;Harrowfield\n\nWhen?\tIn 2015.\t2015\n",
                   encoding="utf-8")
    p = subprocess.run([sys.executable, "-m", "lab", "import", "tsv", str(tsv), "--out", "imported.jsonl"],
                       cwd=project, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    rows = [json.loads(line) for line in (project / "imported.jsonl").read_text().splitlines()]
    assert [(r["question"], r["keywords"], r["category"]) for r in rows] == [
        ("Who founded Harrowfield?", ["Maxine", "Harrowfield"], "direct_fact"), ("When?", ["2015"], "direct_fact")]
