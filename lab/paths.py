"""Where the lab keeps things: the cache folder, config-relative paths, atomic writes, and the
``reports/<NAME>/LATEST`` pointer of run folders."""

from __future__ import annotations

import errno
import hashlib
import os
import re
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Iterator

from lab.errors import DataError, LabError


def cache_location(value: str | os.PathLike) -> Path:
    """A cache folder from a path (``~`` expanded) or a ``file://`` URI, e.g. ``file:///srv/lab-cache``;
    any other URI (s3://, gs://, az://, LanceDB Cloud's db://, memory://) is an error that says what
    works instead: a build is published by an atomic rename under a file lock, which they lack."""
    text = os.fspath(value)
    scheme = text.split("://", 1)[0].lower() if "://" in text else ""
    if scheme == "file":
        from urllib.parse import unquote, urlparse

        parsed = urlparse(text)
        if parsed.netloc not in ("", "localhost"):
            raise LabError(f"cache URI {text}: file URIs name a local path (file:///path), not host {parsed.netloc!r}",
                           hint="write file:///absolute/path, or the path itself")
        return Path(unquote(parsed.path)).expanduser()
    if scheme:
        raise LabError(
            f"cache {text}: the cache must be a local or mounted folder ({scheme}:// is not one)",
            hint="index builds are published by an atomic rename under a file lock, which object stores do not "
                 "offer: share indexes by mounting the bucket (s3fs, gcsfuse, blobfuse2) or syncing "
                 "the cache's indexes/ folder; see docs/caches.md")
    return Path(text).expanduser()


def cache_root(option: str | None) -> Path:
    """The cache of a command: its ``--cache`` (a path or a ``file://`` URI), else :func:`cache_dir`."""
    if not option:
        return cache_dir()
    path = cache_location(option).resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


def cache_dir() -> Path:
    """The lab's cache: ``$LAB_CACHE`` (a path or a ``file://`` URI), else ``~/.cache/lab``."""
    root = os.environ.get("LAB_CACHE") or Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "lab"
    path = cache_location(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


def project_path(project_root: Path, value: str) -> Path:
    """A config path: absolute as written, else relative to the project root."""
    p = Path(value).expanduser()
    return p if p.is_absolute() else (project_root / p)


def reviewed_note(eval_set: Path) -> str | None:
    """A line for a command given an eval set that has a reviewed copy beside it (the review queue
    of ``lab serve`` writes ``<set>.reviewed.jsonl``): the copy is not used unless it is named."""
    copy = eval_set.with_name(eval_set.stem + ".reviewed.jsonl")
    if eval_set.name.endswith(".reviewed.jsonl") or not copy.is_file():
        return None
    return (f"note: {copy.name} beside {eval_set.name} holds this set as people reviewed it; read here: "
            f"{eval_set.name} (a copy is read only where it is named: {copy})")


_UNSAFE = re.compile(r"[^A-Za-z0-9_.,:=@+\[\]-]")


def safe_name(value: str, limit: int = 120) -> str:
    """A folder name made from user values (experiment names, sweep dials, run labels): one path
    component, never ``..`` or hidden; characters outside a small safe set become ``_``; a long or
    altered name keeps a short hash of the original, so two values never share a folder."""
    name = _UNSAFE.sub("_", value).replace("..", "__").lstrip(".") or "_"
    if name != value or len(name) > limit:
        name = name[: limit - 11] + "-" + hashlib.sha256(value.encode()).hexdigest()[:10]
    return name


def inside(root: Path, name: str) -> Path:
    """``root / safe_name(name)``, checked to lie inside ``root``."""
    path = root / safe_name(name)
    if not path.resolve().is_relative_to(root.resolve()):
        raise LabError(f"{name!r} would write outside {root}", hint="use letters, digits, '.', '_' and '-' in names")
    return path


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename: readers see the old
    file or the new one, never half of one. An error names ``path``, not the temporary file."""
    tmp = path.parent / f".{path.name}.tmp-{os.getpid()}"
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        if exc.filename != str(tmp):
            raise
        what = "is a folder" if path.is_dir() else exc.strerror
        raise OSError(exc.errno, f"cannot write {path}: {what}", str(path)) from None
    finally:
        tmp.unlink(missing_ok=True)


def _same(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` name one file: the same resolved path, or a hard link to it."""
    if a.resolve() == b.resolve():
        return True
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return False


def check_output(path: Path, inputs: Iterable[Path] = (), kb: Path | None = None, force: bool = False,
                 option: str = "--out") -> Path:
    """Refuse an output ``path`` (what ``option`` names) that would destroy something: a folder;
    one of the command's ``inputs`` (files, or folders whose files it reads) or a file inside
    one; a file inside the knowledge base ``kb``; an existing file unless ``force``. Every verb
    that writes a file checks it here before any work. Returns ``path``."""
    path = Path(path).expanduser()
    if path.is_dir():
        raise DataError(f"{option} {path} is a folder", hint=f"give {option} the path of a file to write")
    for source in inputs:
        source = Path(source).expanduser()
        inside_it = source.is_dir() and path.resolve().is_relative_to(source.resolve())
        if inside_it or _same(path, source):
            what = f"inside {source}, an input of this command" if inside_it else \
                f"{source}, an input of this command: writing it would destroy it"
            raise DataError(f"{option} {path} is {what}", hint=f"give {option} another path")
    if kb is not None and path.resolve().is_relative_to(Path(kb).expanduser().resolve()):
        raise DataError(f"{option} {path} is inside the knowledge base {kb}: it would become one of its documents, "
                        "or replace one", hint=f"give {option} a path outside the knowledge base")
    if path.exists() and not force:
        raise DataError(f"{option} {path} already exists",
                        hint=f"pass --force to replace it, or give {option} another path")
    return path


class OutputClaimed(LabError):
    """Another command is writing the same output now."""


@contextmanager
def claim_output(path: Path, option: str = "--out") -> Iterator[Path]:
    """Hold ``path`` for this process while a command makes it: an exclusive create
    (``O_CREAT | O_EXCL``) of ``.<name>.lock`` beside it, holding the process id, so that a second
    command writing the same path at the same time stops at once instead of replacing the first
    one's work. A lock left by a process that is gone is taken over. The lock goes when the
    block ends."""
    lock = path.parent / f".{path.name}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    for _ in range(2):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            break
        except FileExistsError:
            holder = _holder(lock)
            if holder is not None:
                raise OutputClaimed(f"{option} {path} is being written by another command now ({holder}, "
                                    f"lock {lock})", hint=f"wait for it to finish, or give {option} another path")
            lock.unlink(missing_ok=True)  # its process is gone: take the lock over
    else:
        raise OutputClaimed(f"{option} {path}: cannot take the lock {lock}", hint="try again")
    try:
        os.write(fd, f"{os.getpid()}\n".encode())
        os.close(fd)
        yield path
    finally:
        lock.unlink(missing_ok=True)


def _holder(lock: Path) -> str | None:
    """Who holds ``lock`` (``process N``), or None when its process is gone."""
    try:
        text = lock.read_text().strip()
    except FileNotFoundError:
        return None  # released meanwhile
    except OSError:
        return "a process"
    if not text:
        return "a process starting"  # created, its id not written yet
    try:
        pid = int(text)
        os.kill(pid, 0)
    except (ValueError, ProcessLookupError):
        return None
    except PermissionError:
        pass
    return f"process {pid}"


#: ``reports/<NAME>/LATEST`` names the newest run of NAME, sample or not; ``LATEST-FULL`` the newest
#: run over the whole eval set (written by runs since it was added: older folders have none).
LATEST, LATEST_FULL = "LATEST", "LATEST-FULL"


def follow_latest(path: Path) -> Path:
    """``reports/<NAME>/LATEST`` (a file naming the newest run id) -> that run's folder; any
    other path as it is."""
    if path.name in (LATEST, LATEST_FULL) and path.is_file():
        return path.parent / path.read_text().strip()
    return path


def resolve_run(ref: str, reports_root: Path) -> Path:
    """A run folder, ``reports/<NAME>/LATEST``, or an experiment NAME (its latest run)."""
    path = follow_latest(Path(ref))
    if not (path / "results.json").is_file():
        latest = reports_root / ref / "LATEST"
        if latest.is_file():
            path = follow_latest(latest)
    if not (path / "results.json").is_file():
        raise LabError(f"{ref!r} is neither a run folder nor an experiment with runs in {reports_root}",
                       hint="pass reports/<NAME>/<run-id>, or a NAME that `lab run NAME` has written")
    return path


def remove_orphans(folder: Path, pattern: str = ".*.tmp-*") -> None:
    """Remove what processes that are gone left in ``folder`` (killed, or a power cut: no cleanup
    ran): the entries matching ``pattern`` whose name ends in ``-<pid>`` of no live process. A
    live process's folder is left alone."""
    try:
        found = list(Path(folder).glob(pattern))
    except OSError:
        return
    for debris in found:
        pid = debris.name.rsplit("-", 1)[-1]
        if not pid.isdigit() or _holder_alive(int(pid)):
            continue
        if debris.is_dir() and not debris.is_symlink():
            shutil.rmtree(debris, ignore_errors=True)
        else:
            debris.unlink(missing_ok=True)


def _holder_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return False
    except PermissionError:  # another user's live process
        return True
    return pid > 0


#: What a full disk says, where it is not an OSError (safetensors' Rust error, torch's writer).
_FULL = re.compile(r"No space left on device|StorageFull|Disk quota exceeded|errno 28\b|os error 28\b", re.I)


#: torch's writer names no cause: a failed write, with little space left where it wrote, is a full disk.
_FAILED_WRITE = re.compile(r"PytorchStreamWriter failed writing|file write failed|unexpected pos")
_LITTLE_LEFT = 256 << 20


def disk_full(exc: BaseException, folder: Path | None = None) -> bool:
    """Whether ``exc``, or an exception it was raised from, says the disk is full (or the quota
    used up), whichever library wrote (``folder``: where it wrote, for a writer that does not say)."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT) or _FULL.search(str(exc)):
            return True
        if folder is not None and _FAILED_WRITE.search(str(exc)):
            try:
                return shutil.disk_usage(folder).free < _LITTLE_LEFT
            except OSError:
                return False
        exc = exc.__cause__ or exc.__context__
    return False
