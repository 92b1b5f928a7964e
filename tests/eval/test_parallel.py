"""lab sweep / lab optimize --workers N: points as Ray tasks give the serial run's results, in
its order; Ray is optional and its absence is a clear error; trials are asked and told in order,
so a seeded search repeats; and several processes share one SQLite cache without losing a row."""

from __future__ import annotations

import json
import logging
import math
import subprocess
import sys
from pathlib import Path

import optuna
import pytest

from lab.cli import main
from lab.errors import ConfigError
from lab.eval.parallel import Workers, _Deferred, windowed
from runs import ROOT, lab

FIXTURES = Path(__file__).parents[1] / "fixtures"


# --- serial: the order, the progress lines, the errors --------------------------------------------

def test_serial_workers_run_in_order_and_log_one_line_per_point_with_its_eta(caplog):
    done = []

    def point(x: int) -> int:
        done.append(x)
        return x * x

    with caplog.at_level(logging.INFO, logger="lab.progress"), Workers(1) as pool:
        assert not pool.parallel
        assert pool.map(point, [(3,), (1,), (2,)], "sweep", ["a=3", "a=1", "a=2"]) == [9, 1, 4]
    assert done == [3, 1, 2]
    lines = [r.getMessage() for r in caplog.records]
    assert [line.split(" elapsed")[0].rsplit(",", 1)[0] for line in lines] == [
        "sweep 1/3 points (33%)", "sweep 2/3 points (67%)", "sweep 3/3 points (100%)"]
    assert [line.split(": ")[-1] for line in lines] == ["a=3", "a=1", "a=2"]
    assert all("ETA" in line for line in lines)  # logged at once, not after the Ticker's quiet 5 s


def test_one_worker_never_imports_ray():
    code = ("import sys\nfrom lab.eval.parallel import Workers\n"
            "with Workers(1) as pool:\n    assert pool.map(abs, [(-2,), (3,)], 'sweep') == [2, 3]\n"
            "print('ray' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_without_ray_two_workers_is_a_config_error_that_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    with pytest.raises(ConfigError) as exc:
        with Workers(2):
            pass
    assert exc.value.message == "--workers 2 runs points on Ray, which is not installed"
    assert exc.value.hint == "pip install .[ray]  (or run with --workers 1)"
    assert exc.value.exit_code == 2


def test_the_cli_without_ray_exits_2_with_the_hint_before_running_a_point(project, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)
    monkeypatch.chdir(project)
    code = main(["sweep", "small-retrieval", "--set", "retriever.top_k=1,2", "--workers", "2", "--no-progress",
                 "--cache", str(project / "cache")])
    err = capsys.readouterr().err
    assert code == 2
    assert err == ("error: --workers 2 runs points on Ray, which is not installed\n"
                   "  fix: pip install .[ray]  (or run with --workers 1)\n")
    assert not list((project / "reports" / "_sweep").rglob("results.json"))  # no point ran


@pytest.mark.parametrize("workers, address, says", [
    (0, None, "--workers 0 is not a number of processes"),
    (1, "auto", "--ray-address needs --workers 2 or more (the points in flight at once)"),
])
def test_bad_worker_options_are_refused(workers, address, says):
    with pytest.raises(ConfigError) as exc:
        Workers(workers, address)
    assert exc.value.message == says


# --- the ask/tell window: a seeded search repeats --------------------------------------------------

def _objective(x: int, y: int) -> float:
    return -((x - 7) ** 2) - (y - 900) ** 2 / 1e4 + math.sin(x * y)


class _Pool:
    """A pool of ``size`` slots that runs a call when its result is asked for (as Workers(1) does)."""

    def __init__(self, size: int):
        self.size = size
        self.in_flight = 0
        self.most = 0

    def submit(self, fn, *args):
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        return _Deferred(fn, args)

    def result(self, job):
        self.in_flight -= 1
        return job.fn(*job.args)


def _search(trials: int, workers: int | None) -> list[tuple[int, int]]:
    """A TPE search (seed 13): study.optimize (None), or windowed over a pool of ``workers``."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.TPESampler(seed=13))
    if workers is None:
        study.optimize(lambda t: _objective(t.suggest_int("x", 2, 8), t.suggest_int("y", 400, 1600, step=200)),
                       n_trials=trials)
    else:
        def ask():
            t = study.ask()
            return _objective, (t.suggest_int("x", 2, 8), t.suggest_int("y", 400, 1600, step=200)), t

        pool = _Pool(workers)
        windowed(pool, ask, lambda t, value: study.tell(t, value), trials)
        assert pool.most == workers
    return [(t.params["x"], t.params["y"]) for t in study.trials]


def test_a_window_of_one_is_optunas_serial_search_and_wider_windows_repeat():
    serial = _search(16, None)
    assert _search(16, 1) == serial
    two = _search(16, 2)
    assert _search(16, 2) == two  # same seed, same window: the same search
    # TPE's first 10 trials are its seeded random start: the same whatever the window; after
    # them a trial is asked before the previous ones are told, so the search goes elsewhere
    assert two[:10] == serial[:10] and _search(16, 4)[:10] == serial[:10]
    assert two[10:] != serial[10:]


def test_windowed_tells_in_ask_order_and_skips_what_needs_no_run():
    told = []
    asks = iter([(abs, (-1,), "t0"), (None, None, "t1"), (abs, (-2,), "t2"), (abs, (-3,), "t3")])
    windowed(_Pool(2), lambda: next(asks), lambda token, out: told.append((token, out)), 4)
    assert told == [("t1", None), ("t0", 1), ("t2", 2), ("t3", 3)]  # an invalid trial is told when asked


# --- several processes on one cache --------------------------------------------------------------

def _hammer(*args: str) -> dict:
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "cache_hammer.py"), *args], cwd=ROOT,
                         capture_output=True, text=True, timeout=600)
    assert out.stdout, out.stderr
    return json.loads(out.stdout)


def test_four_processes_writing_one_sqlite_cache_lose_no_row_and_raise_no_error():
    r = _hammer("--procs", "4", "--rows", "600", "--batch", "1")  # 4 x 600 commits each to both caches
    assert r["exit_codes"] == [0, 0, 0, 0] and r["errors"] == {}
    assert r["expected_rows"] == 4 * 300 + 300  # each process's own half, and the shared half once
    assert (r["missing_vectors"], r["wrong_vectors"], r["missing_calls"]) == (0, 0, 0)


def test_the_cache_check_catches_writers_that_do_not_wait_for_the_lock():
    """The control: with no busy timeout, processes fail with "database is locked" and rows go
    missing; so the check above would see it."""
    r = _hammer("--procs", "4", "--rows", "600", "--batch", "1", "--busy-timeout", "0")
    assert r["errors"] and "database is locked" in json.dumps(r["errors"])
    assert r["missing_vectors"] + r["missing_calls"] > 0


# --- end to end: Ray workers give the serial run's results ----------------------------------------

def _strip(summary: dict) -> dict:
    """A summary less what differs between any two runs: run folders (timestamps) and seconds."""
    out = json.loads(json.dumps(summary))
    for p in out["points"]:
        p.pop("run"), p.pop("seconds")
    for key in ("best_run", "base_run"):
        out.get("held_out", {}).pop(key, None)
    return out


@pytest.mark.slow
def test_a_sweep_on_two_ray_workers_matches_the_serial_sweep(project):
    assert lab(project, "run", "small-retrieval", "--no-progress").returncode == 0  # the index, built once
    args = ("sweep", "small-retrieval", "--set", "retriever.top_k=1,2,3,4", "--no-progress")
    serial = lab(project, *args, "--reports", "serial")
    assert serial.returncode == 0, serial.stderr
    par = lab(project, *args, "--reports", "par", "--workers", "2")
    assert par.returncode == 0, par.stderr
    folder = Path("_sweep") / "small-retrieval-retriever.top_k"
    a = json.loads((project / "serial" / folder / "sweep.json").read_text())
    b = json.loads((project / "par" / folder / "sweep.json").read_text())
    assert [p["label"] for p in b["points"]] == ["top_k=1", "top_k=2", "top_k=3", "top_k=4"]  # the grid's order
    assert [p["metrics"] for p in b["points"]] == [p["metrics"] for p in a["points"]]
    assert [p["metrics"]["context_chars"] for p in a["points"]] == sorted(p["metrics"]["context_chars"]
                                                                         for p in a["points"])  # k matters
    assert (b["held_out"]["best"], b["held_out"]["base"]) == (a["held_out"]["best"], a["held_out"]["base"])
    assert _strip(b) == _strip(a)
    # run folders named as in a serial run: relative to where lab was started, under the reports
    assert all(p["run"].startswith(f"par/{folder}/small-retrieval[top_k=") for p in b["points"])
    assert all((project / p["run"] / "results.json").is_file() for p in b["points"])
    assert "Ray: 2 workers (local)" in par.stderr
    done = [line for line in par.stderr.splitlines() if "lab.progress: sweep " in line and "ETA" in line]
    assert sorted(line.rsplit("[", 1)[-1] for line in done) == ["top_k=1]", "top_k=2]", "top_k=3]", "top_k=4]"]
    assert [line.split("lab.progress: ")[1].split(" points")[0] for line in done] == [
        "sweep 1/4", "sweep 2/4", "sweep 3/4", "sweep 4/4"]  # one line per finished point, with its ETA
    for noise in ("Traceback", "lancedb fork support", "Token authentication is enabled"):
        assert noise not in par.stderr


@pytest.mark.slow
def test_an_optimize_search_on_two_ray_workers_matches_the_serial_search(project):
    """4 trials: all in TPE's seeded random start, so the same trials as the serial search."""
    args = ("optimize", "small-retrieval", "--trials", "4", "--space", "chunker.chunk_size=150:250:50",
            "--space", "retriever.top_k=1:3", "--seed", "3", "--no-config")
    serial = lab(project, *args, "--reports", "serial")
    assert serial.returncode == 0, serial.stderr
    par = lab(project, *args, "--reports", "par", "--workers", "2")
    assert par.returncode == 0, par.stderr
    a, b = (json.loads((project / r / "_optimize" / "small-retrieval-mrr" / "optimize.json").read_text())
            for r in ("serial", "par"))
    assert [(p["trial"], p["point"], p["metrics"]) for p in b["points"]] == [
        (p["trial"], p["point"], p["metrics"]) for p in a["points"]]
    assert (b["best"], b["best_values"]) == (a["best"], a["best_values"])
    assert (b["held_out"]["best"], b["held_out"]["base"]) == (a["held_out"]["best"], a["held_out"]["base"])
    journal = project / "par" / "_optimize" / "small-retrieval-mrr" / "optuna.journal"
    study = optuna.load_study(study_name=None, storage=optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(journal))))
    assert [t.params for t in study.trials] == [
        {"chunker.chunk_size": p["point"]["chunker.chunk_size"], "retriever.top_k": p["point"]["retriever.top_k"]}
        for p in b["points"]]
