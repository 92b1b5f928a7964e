"""The house: layers, no cycles, one llama.cpp import site, modules of a readable size."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[1]
LAB = ROOT / "lab"
LINT = Path(sys.executable).parent / "lint-imports"


def lint(project: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(project)}
    return subprocess.run([str(LINT), "--config", str(project / "pyproject.toml"), "--no-cache"], cwd=project,
                          env=env, capture_output=True, text=True, timeout=120)


def test_the_import_contracts_hold():
    out = lint(ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Contracts: 10 kept, 0 broken" in out.stdout


def lint_with(tmp_path: Path, module: str, line: str) -> subprocess.CompletedProcess:
    """lint-imports on a copy of the lab whose ``module`` (a path under lab/) gains ``line``."""
    shutil.copytree(LAB, tmp_path / "lab", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    path = tmp_path / "lab" / module
    path.write_text(path.read_text(encoding="utf-8") + f"\n{line}  # noqa\n", encoding="utf-8")
    return lint(tmp_path)


def test_an_upward_import_breaks_the_contract(tmp_path):
    """The contract is not decorative: config importing the evaluator fails it."""
    out = lint_with(tmp_path, "config/load.py", "import lab.eval.runner")
    assert out.returncode == 1
    assert re.search(r"Contracts: \d kept, [1-9] broken", out.stdout), out.stdout
    assert "lab.config.load -> lab.eval.runner" in out.stdout


def test_the_evidence_imports_nothing_above_the_kernel(tmp_path):
    """lab.evidence sits on the ground floor, beside the caches and paths (which it may not import:
    the layers contract keeps siblings apart), and imports no library that computes or stores
    either: numpy, allowed by the layers, breaks the evidence contract alone."""
    out = lint_with(tmp_path, "evidence/holds.py", "import numpy")
    assert out.returncode == 1
    assert "Contracts: 9 kept, 1 broken" in out.stdout, out.stdout
    assert "lab.evidence.holds -> numpy" in out.stdout
    out = lint_with(tmp_path / "again", "evidence/holds.py", "import lab.paths")
    assert "Contracts: 8 kept, 2 broken" in out.stdout and "lab.evidence.holds -> lab.paths" in out.stdout


def _cycles(graph: grimp.ImportGraph, modules: set[str]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.find_modules_directly_imported_by(v) & modules:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for m in sorted(modules):
        if m not in index:
            visit(m)
    return out


def test_no_import_cycle_between_modules():
    graph = grimp.build_graph("lab")
    assert _cycles(graph, set(graph.modules)) == []


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_llama_cpp_is_imported_in_one_place_only():
    """Every import statement, at the top or inside a function, anywhere in the lab."""
    sites = sorted(str(p.relative_to(ROOT)) for p in LAB.rglob("*.py") if "llama_cpp" in _imports(p))
    assert sites == ["lab/models/backends.py"]


def test_resolving_a_local_llm_does_not_load_llama_cpp_and_loading_it_waits_passively():
    """The defect this guards: resolve_llm imported llama_cpp before OMP_WAIT_POLICY was set, and
    OpenMP reads it when llama.cpp loads, so `lab ask` spun its threads (200 s against 72 s)."""
    code = (
        "import os, sys\n"
        "from lab.config import LLMConfig\n"
        "from lab.models.resolve import resolve_llm\n"
        "resolve_llm(LLMConfig(model='smollm2-135m-instruct'), 'generation', None)\n"
        "assert 'llama_cpp' not in sys.modules, 'resolving imported llama_cpp'\n"
        "from lab.models.backends import llama_class\n"
        "llama_class()\n"
        "assert 'llama_cpp' in sys.modules\n"
        "print(os.environ['OMP_WAIT_POLICY'])\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "PASSIVE"


def test_llama_cpp_waits_passively_also_when_torch_loaded_openmp_first():
    """torch loads its own libgomp.so.1 and llama.cpp then links that runtime, which read the wait
    policy when torch loaded it: importing the lab must set it before. OMP_DISPLAY_ENV=VERBOSE
    makes libgomp print its settings; a passive runtime has GOMP_SPINCOUNT 0."""
    body = ("import torch; torch.ones(4, 4) @ torch.ones(4, 4)\n"
            "from lab.models.backends import llama_class\n"
            "llama_class()\n")
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    env["OMP_DISPLAY_ENV"] = "VERBOSE"

    def spincount(code: str) -> str:
        out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                             timeout=120)
        assert out.returncode == 0, out.stderr
        return re.findall(r"GOMP_SPINCOUNT = '(\d+)'", out.stderr)[-1]

    assert spincount("import lab\n" + body) == "0"
    # the defect, shown: a process that loads torch before the lab spins (libgomp's default)
    assert spincount("import torch; torch.ones(4, 4) @ torch.ones(4, 4)\n") == "300000"


def test_the_house_has_few_rooms_at_the_top_and_no_oversized_module():
    top = sorted(p.name for p in LAB.glob("*.py"))
    # the kernel, the package's two entry files and the Python API (lab.api): a new one is a new room, said here
    assert len(top) <= 11, top
    sizes = {str(p.relative_to(ROOT)): len(p.read_text(encoding="utf-8").splitlines()) for p in LAB.rglob("*.py")}
    assert {p: n for p, n in sizes.items() if n > 420} == {}


@pytest.mark.parametrize("module, line, contract", [
    # eval sets and the judge sit side by side: the judge reaching into an eval-set module fails
    ("judge/perturb.py", "import lab.evalsets.excerpts", "eval sets and the judge are independent"),
    # the run files' schema is a leaf: it reads no report
    ("runfiles.py", "import lab.report.html", "the run files' schema and reader are a leaf"),
    # inside rag, the loaders know nothing of the pipeline built over them
    ("rag/loaders.py", "import lab.rag.pipeline", "the pipeline's own order"),
    # the served app reads files: it never builds a pipeline
    ("serve/runs.py", "import lab.rag.index", "the served app reads run files and labels only"),
])
def test_each_new_contract_breaks_on_a_wrong_way_import(tmp_path, module, line, contract):
    out = lint_with(tmp_path, module, line)
    assert out.returncode == 1
    broken = out.stdout.split("Broken contracts", 1)[-1]
    assert contract in broken, out.stdout
