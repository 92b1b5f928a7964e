"""A run that cannot write its results stops with a clear error and leaves nothing half-written."""

import errno
import os

import pytest

from runs import lab


@pytest.mark.slow
def test_reports_folder_that_is_a_file_is_a_clear_error(project):
    (project / "blocked").write_text("a file where the reports folder should be")
    p = lab(project, "run", "small-retrieval", "--reports", "blocked", "--no-progress")
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "error: cannot write the run into blocked/small-retrieval" in p.stderr
    assert "fix: free disk space or make the folder writable" in p.stderr


def test_disk_full_while_writing_leaves_no_run_folder(tmp_path, monkeypatch):
    """ENOSPC in the middle of writing samples.jsonl: no run folder, no temporary folder, no LATEST."""
    from lab.config import load_experiment
    from lab.errors import LabError
    from lab.eval.records import write_run
    from report_fixtures import _sample, results_for

    from pathlib import Path

    cfg = load_experiment("small-retrieval", Path(__file__).parents[1] / "fixtures" / "experiments")
    samples = [_sample(i, 1.0, 4, "A") for i in range(3)]
    results = results_for("small-retrieval", None, samples)
    real_open = open

    def full_disk(path, mode="r", *args, **kw):
        if str(path).endswith("samples.jsonl") and "w" in mode:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        return real_open(path, mode, *args, **kw)

    monkeypatch.setattr("builtins.open", full_disk)
    with pytest.raises(LabError, match="No space left on device"):
        write_run(results, samples, cfg, tmp_path / "reports")
    monkeypatch.undo()
    assert list((tmp_path / "reports" / "small-retrieval").iterdir()) == []


def test_latest_not_updated_at_the_very_end_says_so_and_leaves_no_debris(tmp_path, monkeypatch):
    """The run folder is complete; only the LATEST pointer cannot be moved (disk full): the message
    says the run is there and how to reach it, and no .LATEST.tmp-* is left."""
    import lab.eval.records as records
    from lab.config import load_experiment
    from lab.errors import LabError
    from report_fixtures import _sample, results_for

    from pathlib import Path

    cfg = load_experiment("small-retrieval", Path(__file__).parents[1] / "fixtures" / "experiments")
    samples = [_sample(i, 1.0, 4, "A") for i in range(3)]
    real_replace = os.replace

    def full_at_latest(src, dst):
        if str(dst).endswith("LATEST"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(dst))
        return real_replace(src, dst)

    monkeypatch.setattr(records.os, "replace", full_at_latest)
    with pytest.raises(LabError) as exc:
        records.write_run(results_for("small-retrieval", None, samples), samples, cfg, tmp_path / "reports")
    base = tmp_path / "reports" / "small-retrieval"
    runs = [d for d in base.iterdir() if d.is_dir()]
    assert len(runs) == 1 and (runs[0] / "results.json").is_file() and (runs[0] / "report.html").is_file()
    assert f"the run is complete in {runs[0]}" in str(exc.value) and "No space left on device" in str(exc.value)
    assert f"lab show {runs[0]}" in str(exc.value)
    assert not list(base.glob(".*tmp*")) and not (base / "LATEST").exists()
