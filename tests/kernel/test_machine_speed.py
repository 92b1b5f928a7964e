"""scripts/machine_speed.py, the line ``make test`` prints first: it reads a DAMON pageout scheme
from the kernel's sysfs tree (here a copy of one in a temporary folder) and says nothing when
none runs."""

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location("machine_speed", ROOT / "scripts" / "machine_speed.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _tree(root: Path, state: str, action: str) -> None:
    files = {"0/state": state,
             "0/contexts/0/monitoring_attrs/intervals/aggr_us": "5000000",
             "0/contexts/0/schemes/0/action": action,
             "0/contexts/0/schemes/0/access_pattern/age/min": "12",
             "0/contexts/0/schemes/0/quotas/bytes": "134217728",
             "0/contexts/0/schemes/0/quotas/reset_interval_ms": "1000"}
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text + "\n")


def test_a_pageout_scheme_is_said_with_its_idle_age_and_rate(tmp_path, monkeypatch, capsys):
    m = _script()
    _tree(tmp_path, "on", "pageout")
    monkeypatch.setattr(m, "DAMON", tmp_path)
    assert m.pageout() == "; file pages idle for 60 s are paged out (DAMON pageout, up to 128 MiB/s)"
    flt = tmp_path / "0/contexts/0/schemes/0/ops_filters"
    for i, (kind, allow) in enumerate((("anon", "N"), ("unmapped", "Y"))):
        for name, text in (("type", kind), ("allow", allow), ("matching", "Y")):
            (flt / str(i)).mkdir(parents=True, exist_ok=True)
            (flt / str(i) / name).write_text(text + "\n")
    assert m.pageout() == ("; file pages no process maps idle for 60 s are paged out"
                           " (DAMON pageout, up to 128 MiB/s)")
    m.main()
    line = capsys.readouterr().out
    assert line.startswith("machine: 10 M Python additions in ") and line.rstrip().endswith("up to 128 MiB/s)")
    assert re.search(r" s, memory copies \d+\.\d GB/s, load average ", line)


def test_nothing_is_said_without_a_running_pageout_scheme(tmp_path, monkeypatch):
    m = _script()
    monkeypatch.setattr(m, "DAMON", tmp_path / "absent")
    assert m.pageout() == ""
    _tree(tmp_path, "off", "pageout")
    monkeypatch.setattr(m, "DAMON", tmp_path)
    assert m.pageout() == ""
    _tree(tmp_path, "on", "stat")
    assert m.pageout() == ""
