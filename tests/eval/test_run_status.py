"""A run in progress writes reports/<NAME>/.running-<pid>.json as its tickers move, replaced
atomically, and removes it when it ends, whether it finished or failed."""

import json
import os

import pytest

from lab.eval.status import running
from lab.progress import Ticker
from lab.runfiles import read_running


def test_the_status_file_follows_the_tickers_and_goes_when_the_run_ends(tmp_path, monkeypatch):
    monkeypatch.setattr("lab.progress.OBSERVE_EVERY", 0.0)  # every update told (a run: at most once a second)
    folder = tmp_path / "turn13"
    path = folder / f".running-{os.getpid()}.json"
    with running(folder, "turn13", 4) as status:
        assert read_running(path)["stage"] == "starting"
        with Ticker("retrieve", 4, bar=False, quiet=0) as t:
            t.update()
            doc = read_running(path)
            assert (doc["stage"], doc["done"], doc["total"]) == ("retrieve", 1, 4)
            t.update(3)  # the last item is always told, however soon
            doc = read_running(path)
            assert (doc["done"], doc["eta_s"]) == (4, 0.0)
        assert doc["name"] == "turn13" and doc["pid"] == os.getpid() and doc["n_questions"] == 4
        assert [p.name for p in folder.iterdir()] == [path.name]  # no temporary file left beside it
        assert status.path == path
    assert not path.exists()
    assert not folder.exists()  # made for the status only: a failed first run leaves no empty folder


def test_a_failed_run_removes_its_status_but_not_a_folder_that_holds_runs(tmp_path):
    folder = tmp_path / "turn13"
    (folder / "20261126-100000").mkdir(parents=True)
    with pytest.raises(RuntimeError):
        with running(folder, "turn13"):
            raise RuntimeError("boom")
    assert [p.name for p in folder.iterdir()] == ["20261126-100000"]
    with Ticker("after", 2, bar=False) as t:  # no observer is left behind
        t.update(2)
    assert not list(folder.glob(".running-*"))


def test_a_run_refused_at_start_leaves_no_folder_and_a_file_for_a_folder_keeps_its_own_error(tmp_path):
    reports = tmp_path / "new-reports"
    with pytest.raises(ValueError):
        with running(reports / "turn13", "turn13"):
            raise ValueError("refused")
    assert not reports.exists()  # neither the run's folder nor the reports folder it made
    blocked = tmp_path / "blocked"
    blocked.write_text("a file")
    with pytest.raises(ValueError, match="the run's own"):
        with running(blocked / "turn13", "turn13"):
            raise ValueError("the run's own error")
    assert blocked.read_text() == "a file"


def test_an_unreadable_status_is_no_status(tmp_path):
    (tmp_path / ".running-1.json").write_text("{half")
    assert read_running(tmp_path / ".running-1.json") is None
    (tmp_path / ".running-2.json").write_text(json.dumps({"pid": "x"}))
    assert read_running(tmp_path / ".running-2.json") is None
