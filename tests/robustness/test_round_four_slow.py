"""Round four with real models (docs/robustness.md): a disk that fills up during `lab tune` (its
writer made to fail as a full disk fails), and `lab.api.run` leaving its caller's process as it
found it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from safetensors import SafetensorError

from lab.tune.options import TuneOptions

pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
#: What safetensors raises when the disk is full (its Rust writer's io::Error).
FULL = 'Error while serializing: IoError(Os { code: 28, kind: StorageFull, message: "No space left on device" })'


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """The fixture project and a cache of its own, its index built once."""
    root = tmp_path_factory.mktemp("tune-full")
    shutil.copytree(FIXTURES, root / "project")
    return root / "project", root / "cache"


def full_when(monkeypatch, where: str) -> list[str]:
    """Every weights file written where the path holds ``where`` fails as on a full disk, after
    writing part of it (what a real one leaves). Returns the paths it failed on."""
    import transformers.modeling_utils as mu

    real, failed = mu.safe_save_file, []

    def save(tensors, filename, *args, **kw):
        if where in str(filename):
            Path(filename).write_bytes(b"\0" * (1 << 20))
            failed.append(str(filename))
            raise SafetensorError(FULL)
        return real(tensors, filename, *args, **kw)
    monkeypatch.setattr(mu, "safe_save_file", save)
    return failed


@pytest.mark.parametrize("where", ["checkpoint-", ".tmp-"])  # the first checkpoint; the model's final save
def test_a_full_disk_during_lab_tune_exits_2_and_leaves_nothing(world, cli, monkeypatch, where):
    project, cache = world
    monkeypatch.chdir(project)
    monkeypatch.setenv("LAB_CACHE", str(cache))
    failed = full_when(monkeypatch, where)
    code, out, err = cli("tune", "reranker", "--index", "small-retrieval", "--pseudo", "12", "--dev", "0",
                         "--out", "full", "--max-steps", "2", "--batch-size", "4",
                         "--max-length", "64", "--no-progress")
    assert failed and code == 2, err[-3000:]
    assert "Traceback" not in err
    assert f"the disk holding {cache / 'tuned'} is full: lab tune stopped (SafetensorError)" in err
    assert "were removed and nothing was written" in err and "fix: free some space" in err
    tuned = cache / "tuned"
    assert sorted(p.name for p in tuned.iterdir()) == [".work"]  # no model, no .full.tmp-PID, no lock
    assert list((tuned / ".work").iterdir()) == []  # no checkpoint


def test_lab_api_run_leaves_the_callers_environment_and_warning_filters_as_they_were(tmp_path):
    project = tmp_path / "project"
    shutil.copytree(FIXTURES, project)
    script = tmp_path / "notebook.py"
    script.write_text(
        "import json, os, sys, warnings\n"
        "from lab import api\n"
        "before = (dict(os.environ), list(warnings.filters), 'huggingface_hub' in sys.modules)\n"
        "run = api.run('small-retrieval', retrieval_only=True)\n"
        "import huggingface_hub.constants as hub  # loaded by the run's models, offline as the run was\n"
        "after = (dict(os.environ), list(warnings.filters), hub.HF_HUB_OFFLINE)\n"
        "print(json.dumps({'env_added': sorted(set(after[0]) - set(before[0])),\n"
        "                  'env_changed': sorted(k for k in before[0] if after[0].get(k) != before[0][k]),\n"
        "                  'filters': [len(before[1]), len(after[1])], 'same_filters': before[1] == after[1],\n"
        "                  'hub': {'loaded_before': before[2], 'offline_after': after[2]},\n"
        "                  'mrr': run.results['metrics']['overall']['mrr']['mean']}))\n")
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    env["LAB_CACHE"] = str(tmp_path / "cache")
    p = subprocess.run([sys.executable, str(script)], cwd=project, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    seen = json.loads(p.stdout.strip().splitlines()[-1])
    assert seen["env_added"] == [] and seen["env_changed"] == []  # HF_HUB_OFFLINE, TRANSFORMERS_OFFLINE gone
    assert seen["same_filters"], seen["filters"]
    assert seen["hub"] == {"loaded_before": False, "offline_after": False}  # a later download is not refused
    assert 0 < seen["mrr"] <= 1
