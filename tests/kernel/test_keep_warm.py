"""scripts/keep_warm.py, which ``make test`` runs the suite through: which files it holds, that it
holds them mapped with every page in memory (read back from /proc/self/smaps), that a file appearing
later in a watched folder is held on the next pass, and that the command's exit status is its own
whether files are held or not."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "keep_warm.py"
PAGE = os.sysconf("SC_PAGE_SIZE")

pytestmark = pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="needs Linux's /proc")


def _script():
    spec = importlib.util.spec_from_file_location("keep_warm", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _resident(path: Path) -> int | None:
    """The resident bytes of this process's mapping of ``path`` (None when it is not mapped)."""
    lines = Path("/proc/self/smaps").read_text().splitlines()
    for i, line in enumerate(lines):
        if line.endswith(" " + str(path)):
            for field in lines[i + 1:]:
                if field.startswith("Rss:"):
                    return int(field.split()[1]) * 1024
    return None


def test_it_wants_compiled_modules_libraries_weights_and_large_executables_only():
    m = _script()
    assert m.wanted("x.cpython-311.pyc", 10, 0o644)
    assert m.wanted("libtorch_cpu.so", 10, 0o755) and m.wanted("libarrow.so.2500", 10, 0o644)
    assert m.wanted("model.gguf", 10, 0o644) and m.wanted("model.safetensors", 10, 0o644)
    assert m.wanted("node", 1 << 20, 0o755)
    assert not m.wanted("node", (1 << 20) - 1, 0o755)      # a small executable
    assert not m.wanted("blob.bin", 1 << 30, 0o644)        # large, not executable, not weights
    assert not m.wanted("x.py", 10, 0o644) and not m.wanted("empty.so", 0, 0o644)


def test_files_are_found_once_and_another_interpreters_site_packages_is_skipped(tmp_path):
    m = _script()
    lib = tmp_path / "lib"
    (lib / "pkg" / "__pycache__").mkdir(parents=True)
    (lib / "pkg" / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"a" * 5)
    (lib / "pkg" / "a.py").write_text("x = 1\n")
    (lib / "_ext.so").write_bytes(b"b" * 7)
    os.link(lib / "_ext.so", lib / "_ext_again.so")             # the same file under two names
    (lib / "site-packages").mkdir()
    (lib / "site-packages" / "other.so").write_bytes(b"c" * 3)  # not on this import path
    found = m.files([lib])
    assert sorted(p.name for p, _size in found.values()) in (["_ext.so", "a.cpython-311.pyc"],
                                                             ["_ext_again.so", "a.cpython-311.pyc"])
    assert sorted(size for _p, size in found.values()) == [5, 7]
    found = m.files([lib, lib / "site-packages"])               # a root of its own: read
    assert sorted(size for _p, size in found.values()) == [3, 5, 7]


def test_held_files_are_mapped_with_every_page_in_memory_and_let_go_at_the_end(tmp_path):
    m = _script()
    lib, watched = tmp_path / "lib", tmp_path / "gguf"
    lib.mkdir()
    big = lib / "_big.so"
    big.write_bytes(os.urandom(3 * PAGE + 100))
    keeper = m.Keeper([lib], [watched], every=60, limit=100)   # the watched folder does not exist yet
    assert keeper.one_pass() == 1 and keeper.bytes == 3 * PAGE + 100
    assert _resident(big) == 4 * PAGE                           # every page, the last one partly used
    watched.mkdir()
    model = watched / "model.gguf"
    model.write_bytes(b"m" * PAGE)
    assert keeper.one_pass() == 2 and _resident(model) == PAGE   # found on the next pass
    model.write_bytes(b"m" * (2 * PAGE))                       # rewritten in place, larger
    assert keeper.one_pass() == 2 and keeper.bytes == 3 * PAGE + 100 + 2 * PAGE
    keeper.close()
    assert _resident(big) is None and _resident(model) is None and keeper.held == {}


def test_no_more_files_than_the_mapping_limit_are_held(tmp_path):
    m = _script()
    for i in range(5):
        (tmp_path / f"m{i}.so").write_bytes(b"x")
    keeper = m.Keeper([tmp_path], [], every=60, limit=3)
    assert keeper.one_pass() == 3
    keeper.close()


def _run(env_value: str, *command: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "LAB_KEEP_WARM": env_value}
    return subprocess.run([sys.executable, str(SCRIPT), "--", *command], env=env,
                          capture_output=True, text=True, timeout=120)


def test_the_command_runs_and_its_exit_status_is_kept_with_and_without_holding():
    code = "import sys; print('ran'); sys.exit(3)"
    held = _run("1", sys.executable, "-c", code)
    assert held.returncode == 3 and held.stdout.splitlines()[-1] == "ran"
    assert held.stdout.startswith("keep-warm: holding ")
    assert held.stdout.splitlines()[0].endswith(("(LAB_KEEP_WARM=1)", "(DAMON pageout is on)"))
    plain = _run("0", sys.executable, "-c", code)
    assert plain.returncode == 3 and plain.stdout == "ran\n"


def test_no_command_is_a_usage_error():
    done = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "no command" in done.stderr
