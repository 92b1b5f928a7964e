"""The lab from Python (a notebook, a script): run an experiment, load a run, compare runs, with
the tables as pandas DataFrames. The same functions as the verbs, from the same code: a run here is
``lab run``, :func:`load` picks the run a NAME stands for as ``lab gate``, ``lab track`` and
``lab compare`` do (its latest full run, never silently a ``--limit`` sample), and
:meth:`Comparison.paired` is ``lab compare``'s paired statistics::

    from lab import api

    run = api.run("turn13", kb="~/my-docs", eval_set="~/my-questions.jsonl", retrieval_only=True)
    run.folder                      # reports/turn13/<run-id>
    run.questions()                 # one row per question, its metrics as columns
    run.by_category()               # one row per category
    api.compare("turn13", "turn18").paired()   # delta, 95% CI, p, adjusted p, verdict per metric

docs/python-api.md is a worked example; a test runs it.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from pydantic import ValidationError

from lab import heap
from lab.config import ExperimentConfig, load_experiment, merge, run_overrides
from lab.errors import ConfigError
from lab.metrics import catalog
from lab.paths import cache_root
from lab.report import compare as cmp
from lab.report.export import frame
from lab.report.latest import choose_run, is_sample
from lab.runfiles import Results, Sample, load_run

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger(__name__)

PathLike = str | Path


def _check_package() -> None:
    """A folder named ``lab`` without ``__init__.py`` before the installed lab on ``sys.path``
    (the clone's own folder, beside a script saved next to it: Python puts a script's folder first)
    is imported as an empty namespace package, and the lab's modules then fail far from the
    cause (``module 'lab' has no attribute '__version__'``): say so where it starts."""
    package = sys.modules.get("lab")
    if package is None or getattr(package, "__file__", None) is not None:
        return
    found = ", ".join(str(p) for p in getattr(package, "__path__", [])) or "a folder named lab"
    raise ImportError(
        f"'lab' is imported from {found}, a folder without __init__.py that Python takes for an empty namespace "
        f"package, not from the lab at {Path(__file__).resolve().parent}: a folder named lab in the script's "
        "folder (or the working folder) shadows the installed lab. Run the script from another folder, or move "
        "it out of the folder that holds the clone")


_check_package()


@dataclass
class Run:
    """A finished run: its folder (an absolute path), ``results.json`` (:class:`lab.runfiles.Results`) and its
    questions' records (``samples.jsonl``); ``note`` says which run a NAME stood for when that was
    not simply its newest run (see :mod:`lab.report.latest`)."""

    folder: Path
    results: Results
    samples: list[Sample] = field(repr=False)
    note: str | None = None

    @property
    def name(self) -> str:
        return self.results["name"]

    @property
    def run_id(self) -> str:
        return self.results["run_id"]

    @property
    def is_sample(self) -> bool:
        """Whether the run asked only some of its eval set's questions (``limit``)."""
        return is_sample(self.results)

    def metrics(self) -> list[str]:
        """The metrics the run has, in the catalogue's order."""
        overall = self.results["metrics"]["overall"]
        return [m for m in catalog.names() if m in overall] + [m for m in overall if m not in catalog.METRICS]

    def overall(self) -> "pd.DataFrame":
        """One row per metric (the index): its ``mean`` over the questions and ``n``, the questions
        with a value."""
        import pandas as pd  # heavy: loaded when a table is asked for

        overall = self.results["metrics"]["overall"]
        return pd.DataFrame([{"metric": m, "mean": overall[m].get("mean"), "n": overall[m].get("n")}
                             for m in self.metrics()]).set_index("metric")

    def questions(self) -> "pd.DataFrame":
        """One row per question, in the run's order: id, category, question, keywords, what was
        retrieved, then one column per metric (NaN where a question has no value), and the answer
        and the judge's feedback where the run has them; the columns of ``questions.csv``."""
        return frame([(self.results, self.samples)])

    def by_category(self) -> "pd.DataFrame":
        """One row per category (the index): ``n`` questions, then each metric's mean."""
        import pandas as pd  # heavy: loaded when a table is asked for

        rows = []
        for category, row in self.results["metrics"]["by_category"].items():
            rows.append({"category": category, "n": row.get("n"),
                         **{m: (row.get(m) or {}).get("mean") for m in self.metrics()}})
        return pd.DataFrame(rows).set_index("category")

    def _report_run(self) -> cmp.Run:
        return cmp.Run(self.folder, self.results, self.samples, note=self.note)


def load(ref: PathLike, *, reports: PathLike = "reports") -> Run:
    """The run ``ref`` names: a run folder, ``reports/<NAME>/LATEST``, or an experiment NAME,
    which stands for its latest full run (a ``limit`` sample only when it has no full run; the
    run's ``note`` says so, and it is logged as a warning)."""
    chosen = choose_run(str(ref), Path(reports))
    if chosen.note:
        log.warning("%s", chosen.note)
    results, samples = load_run(chosen.folder)
    return Run(chosen.folder.absolute(), results, samples, chosen.note)


def run(name: str | Any, *, experiments: PathLike = "experiments", reports: PathLike = "reports",
        cache: PathLike | None = None, kb: PathLike | None = None, eval_set: PathLike | None = None,
        limit: int | None = None, seed: int | None = None, retrieval_only: bool = False,
        show_progress: bool = False, label: str | None = None, version: str | None = None,
        refresh: bool = False) -> Run:
    """Run ``experiments/<name>.yaml`` as ``lab run`` does and return the run: ``kb`` and
    ``eval_set`` are your knowledge-base folder and eval set in place of the config's (``--kb``,
    ``--eval``), ``limit`` and ``seed`` a stratified sample of questions, ``retrieval_only`` skips
    answers and the judge. Paths are relative to the working folder, as on the command line; the
    project root is the folder above ``experiments``.

    ``name`` may also be your RAG system itself, evaluated as a ``python`` target
    (docs/own-rag.md): a callable ``(question, history) -> {answer, contexts}``, a LlamaIndex query
    engine or retriever, a LangChain runnable or retriever. Then ``kb`` and ``eval_set`` are
    required, ``label`` names the run (default: the object's name), ``version`` is the target's
    version (part of the cache key: a new version is asked again), ``refresh`` asks every
    question again."""
    with caller_state():  # the caller's environment and warning filters, as they were
        with heap.loading():
            from lab.eval.runner import RunOptions, run_experiment  # heavy: torch, LanceDB, LlamaIndex

        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
            raise ConfigError(f"limit={limit!r}: give a whole number of 1 or more, or None for every question")
        experiments = Path(experiments)
        overrides = run_overrides(kb, eval_set, limit, seed, answers=not retrieval_only)
        obj = None if isinstance(name, str) else name
        cfg = (load_experiment(name, experiments, overrides) if obj is None
               else _target_config(obj, label, version, kb, eval_set, overrides))
        folder = run_experiment(cfg, RunOptions(project_root=experiments.resolve().parent, reports_root=Path(reports),
                                                cache_root=cache_root(None if cache is None else str(cache)),
                                                show_progress=show_progress, refresh=refresh, target_object=obj))
        results, samples = load_run(folder)
        return Run(folder.absolute(), results, samples)


def _target_config(obj: Any, label: str | None, version: str | None, kb: PathLike | None,
                   eval_set: PathLike | None, overrides: dict) -> ExperimentConfig:
    """The config of a run of ``obj`` as a python target: recorded as ``module:qualname`` of the
    object (or of its class), with the data and sample given."""
    if kb is None or eval_set is None:
        raise ConfigError("run(<your RAG system>) needs kb= (the documents it answers from) and eval_set= (the "
                          "questions)", hint='e.g. api.run(my_rag, kb="knowledge-base", eval_set="eval_sets/company.jsonl")')
    named = obj if callable(obj) and hasattr(obj, "__qualname__") else type(obj)
    where = f"{named.__module__}:{re.sub(r'[^A-Za-z0-9_.]', '_', named.__qualname__)}"
    label = label or re.sub(r"[^A-Za-z0-9_.-]", "-", named.__qualname__.split(".")[-1]).strip("-.") or "target"
    raw = merge({"name": label, "data": {}, "target": {"python": where, "version": version}}, overrides)
    try:
        return ExperimentConfig.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError("; ".join(f"{'.'.join(map(str, e['loc'])) or 'config'}: {e['msg']}" for e in exc.errors()),
                          hint="label: letters, digits, '-', '_' and '.'") from None


@contextmanager
def caller_state() -> Iterator[None]:
    """The caller's process as it was, after a run: the environment (a run sets ``HF_HUB_OFFLINE``
    and ``TRANSFORMERS_OFFLINE`` once its models are found locally, which would refuse a
    notebook's later downloads) and the warning filters (the libraries a run loads add theirs)."""
    before = dict(os.environ)
    with warnings.catch_warnings():
        try:
            yield
        finally:
            for key in set(os.environ) - set(before):
                del os.environ[key]
            for key, value in before.items():
                if os.environ.get(key) != value:
                    os.environ[key] = value
            # huggingface_hub reads its offline switch once, when first imported (by the run's models)
            hub = sys.modules.get("huggingface_hub.constants")
            if hub is not None and isinstance(getattr(hub, "HF_HUB_OFFLINE", None), bool):
                said = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
                hub.HF_HUB_OFFLINE = said.upper() in {"1", "ON", "YES", "TRUE"}


@dataclass
class Comparison:
    """Runs side by side, as ``lab compare`` reads them: ``warnings`` name every reason their
    figures may not compare (other questions, eval set, k or judge); ``notes`` which run a NAME
    stood for."""

    runs: list[Run]
    warnings: list[str]
    notes: list[str]
    _report_runs: list[cmp.Run] = field(repr=False)

    def overall(self) -> "pd.DataFrame":
        """One row per metric (the index), one column per run (its label): the overall means."""
        import pandas as pd  # heavy: loaded when a table is asked for

        labels = [r.label for r in self._report_runs]
        metrics = list(dict.fromkeys(m for r in self.runs for m in r.metrics()))
        return pd.DataFrame([{"metric": m, **{label: ((r.results["metrics"]["overall"].get(m) or {}).get("mean"))
                                               for label, r in zip(labels, self.runs)}} for m in metrics]
                            ).set_index("metric")

    def paired(self, categories: bool = False) -> "pd.DataFrame":
        """``lab compare``'s paired statistics, one row per adjacent pair of runs and metric (and,
        with ``categories``, per category; ``category`` is missing, ``isna()``, on the overall rows): n shared
        questions, the means, ``delta`` (b - a), its 95% bootstrap interval ``ci_low``,
        ``ci_high``, the permutation ``p``, the sign test's ``p_sign``, ``p_adjusted`` (Holm) and
        ``q`` (Benjamini-Hochberg) as :mod:`lab.report.pairs` adjusts them, ``real`` and the
        ``verdict`` in words."""
        import pandas as pd  # heavy: loaded when a table is asked for

        pairs, _ = cmp.paired_view(self._report_runs)
        rows = []
        for p in pairs:
            for r in p["rows"]:
                for category, s in [(None, r["overall"])] + ([(c["category"], c) for c in r["categories"]]
                                                             if categories else []):
                    ci = s.get("ci") or (None, None)
                    rows.append({"a": p["a"], "b": p["b"], "metric": r["metric"], "category": category,
                                 "n": s["n"], "mean_a": s.get("mean_a"), "mean_b": s.get("mean_b"),
                                 "delta": s["delta"], "ci_low": ci[0], "ci_high": ci[1], "p": s["p_permutation"],
                                 "p_sign": s["p_sign"], "p_adjusted": s["p_adjusted"], "q": s["q"],
                                 "real": s["real"], "verdict": s["verdict"]})
        return pd.DataFrame(rows)

    def method(self) -> str:
        """How the p-values were adjusted, in words."""
        return cmp.paired_view(self._report_runs)[1]["text"]


def compare(*refs: Run | PathLike, reports: PathLike = "reports") -> Comparison:
    """Compare two or more runs (:class:`Run` objects, run folders or experiment NAMEs, each NAME
    its latest full run), the first the base. Warnings, the different-questions one first, are
    also logged."""
    if len(refs) < 2:
        raise ConfigError(f"compare needs two runs or more, got {len(refs)}", hint='e.g. compare("turn13", "turn18")')
    runs = [r if isinstance(r, Run) else load(r, reports=reports) for r in refs]
    report_runs = cmp.labelled([r._report_run() for r in runs])
    found = cmp.warnings([r.results for r in runs])
    for w in found:
        log.warning("%s", w)
    return Comparison(runs, found, [r.note for r in runs if r.note], report_runs)


__all__ = ["Comparison", "Run", "compare", "load", "run"]
