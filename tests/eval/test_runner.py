"""lab/eval/runner.py's options: keywords only."""

import pytest

from lab.eval.runner import RunOptions


def test_run_options_are_given_by_keyword_only(tmp_path):
    """Every caller names each option, so that an option added or reordered never shifts the
    meaning of another caller's arguments."""
    with pytest.raises(TypeError, match="positional"):
        RunOptions(tmp_path, tmp_path / "reports", tmp_path / "cache", False)
    opts = RunOptions(project_root=tmp_path, reports_root=tmp_path / "reports", cache_root=tmp_path / "cache")
    assert (opts.show_progress, opts.allow_overlap) == (True, False)
