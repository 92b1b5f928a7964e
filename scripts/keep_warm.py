"""Run a command while holding the files it loads in memory, on a machine that pages out file
pages no process maps once they have been idle a while (the kernel's DAMON ``pageout`` scheme,
scripts/machine_speed.py): there every test process read Python's compiled modules and the 1.1 GB
model from disk again after a pause, and the suite took 2.6 times as long (docs/index.md).
``make test`` runs the suite through this script.

    python scripts/keep_warm.py --keep /usr/lib/chromium -- python -m pytest -q
    keep-warm: holding 41,260 files (4.3 GB) mapped while the command runs (DAMON pageout is on)

It maps every compiled module, shared library, model's weights and large executable under this
interpreter's import path and the ``--keep`` folders, reads each page once, and keeps the
mappings until the command ends (the ``--keep`` folders are looked at again every ``--every``
seconds, so a model assembled during the run is held too). A page some process maps is not one
the scheme pages out, and the kernel can still reclaim it when memory runs short (nothing is
locked). Where no pageout scheme runs, the command is run as it is, with nothing beside it
(``LAB_KEEP_WARM=1`` holds files anyway, ``LAB_KEEP_WARM=0`` never). The command's exit status is
this script's.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import importlib.util
import mmap
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

SUFFIXES = (".pyc", ".so", ".gguf", ".safetensors")
BIG = 1 << 20  # an executable of at least this size is held (node, chromium); smaller ones are not
RESERVE = 16384  # mappings left to the process for its own use, of the kernel's vm.max_map_count

_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
MAP_FAILED = ctypes.c_void_p(-1).value
MAP_POPULATE = getattr(mmap, "MAP_POPULATE", 0x8000)


def _machine_speed():
    spec = importlib.util.spec_from_file_location("machine_speed", Path(__file__).with_name("machine_speed.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def wanted(name: str, size: int, mode: int) -> bool:
    """Whether a file is one a test process loads: a compiled module, a shared library (``x.so`` or
    ``x.so.1``), a model's weights, or an executable of at least 1 MiB."""
    if name.endswith(SUFFIXES) or ".so." in name:
        return size > 0
    return size >= BIG and bool(mode & 0o111)


def files(roots: list[Path]) -> dict[tuple[int, int], tuple[Path, int]]:
    """Every wanted file under the roots, each once (by device and inode): its path and size.
    A ``site-packages`` folder inside a root is another interpreter's unless it is a
    root itself."""
    found: dict[tuple[int, int], tuple[Path, int]] = {}
    todo = [str(r) for r in roots]
    named = {os.path.realpath(r) for r in todo}
    while todo:
        try:
            entries = list(os.scandir(todo.pop()))
        except OSError:
            continue
        for e in entries:
            try:
                if e.is_dir(follow_symlinks=False):
                    if e.name not in ("site-packages", "dist-packages") or os.path.realpath(e.path) in named:
                        todo.append(e.path)
                    continue
                st = e.stat()
            except OSError:
                continue
            if e.is_file() and wanted(e.name, st.st_size, st.st_mode):
                found.setdefault((st.st_dev, st.st_ino), (Path(e.path), st.st_size))
    return found


def hold(path: Path, size: int) -> int | None:
    """Map a file read-only with every page read in (``MAP_POPULATE``); the mapping's address, or
    None when it cannot be mapped. No file descriptor stays open."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        addr = _libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED | MAP_POPULATE, fd, 0)
    finally:
        os.close(fd)
    return None if addr in (None, MAP_FAILED) else addr


class Keeper(threading.Thread):
    """Holds the wanted files under ``roots`` and ``watched`` mapped, at most ``limit`` mappings;
    every ``every`` seconds it looks again in ``watched`` (the import path's files do not change
    while the command runs, a model assembled by it appears in a watched folder)."""

    def __init__(self, roots: list[Path], watched: list[Path], every: float, limit: int):
        super().__init__(daemon=True)
        self.roots, self.watched, self.every, self.limit = roots, watched, every, limit
        self.passes = 0
        self.stop = threading.Event()
        self.held: dict[tuple[int, int], tuple[int, int]] = {}  # (device, inode) -> (size, address)

    @property
    def bytes(self) -> int:
        return sum(size for size, _addr in self.held.values())

    def release(self, key: tuple[int, int]) -> None:
        size, addr = self.held.pop(key)
        _libc.munmap(addr, size)

    def one_pass(self) -> int:
        """Map what is new (everything on the first pass), map again what changed size; the number
        of files held. A file deleted stays held until the end (its pages are freed then)."""
        found = files(self.watched if self.passes else self.roots + self.watched)
        if self.passes:
            for key in [k for k, (size, _a) in self.held.items() if k in found and found[k][1] != size]:
                self.release(key)
        self.passes += 1
        for key, (path, size) in found.items():
            if key in self.held or len(self.held) >= self.limit:
                continue
            addr = hold(path, size)
            if addr is not None:
                self.held[key] = (size, addr)
        return len(self.held)

    def run(self) -> None:
        while not self.stop.wait(self.every):
            self.one_pass()

    def close(self) -> None:
        self.stop.set()
        for key in list(self.held):
            self.release(key)


def import_path() -> list[Path]:
    """The folders imports read: this interpreter's ``sys.path`` but the working folder."""
    return list(dict.fromkeys(Path(p) for p in sys.path if p and p != os.getcwd() and Path(p).is_dir()))


def map_limit() -> int:
    try:
        most = int(Path("/proc/sys/vm/max_map_count").read_text())
    except (OSError, ValueError):
        most = 65530
    return max(0, most - RESERVE)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="example: python scripts/keep_warm.py --keep /usr/lib/chromium -- python -m pytest -q",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--keep", action="append", default=[], metavar="DIR",
                   help="a folder whose files to hold too (may not exist yet); repeatable")
    p.add_argument("--every", type=float, default=30.0, metavar="S",
                   help="seconds between looks for new or replaced files (default 30)")
    p.add_argument("command", nargs=argparse.REMAINDER, help="the command to run, after --")
    args = p.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        p.error("no command: python scripts/keep_warm.py -- python -m pytest -q")
    setting = os.environ.get("LAB_KEEP_WARM", "")
    scheme = _machine_speed().pageout()
    if setting == "0" or (not scheme and setting != "1"):
        os.execvp(command[0], command)
    keeper = Keeper(import_path(), [Path(k) for k in args.keep], args.every, map_limit())
    n = keeper.one_pass()
    why = "DAMON pageout is on" if scheme else "LAB_KEEP_WARM=1"
    print(f"keep-warm: holding {n:,} files ({keeper.bytes / 1e9:.1f} GB) mapped while the command runs"
          f" ({why})", flush=True)
    keeper.start()
    child = subprocess.Popen(command)
    # Ctrl-C reaches the command itself (one process group); a TERM sent here is passed on.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda signum, frame: child.send_signal(signum))
    code = child.wait()
    keeper.close()
    return code


if __name__ == "__main__":
    sys.exit(main())
