"""Where a sweep's points and an optimize search's trials run: here, one after another
(``--workers 1``, the default: Ray is not imported), or as Ray tasks, one per point, on
``--workers N`` local processes (``ray.init(num_cpus=N)``) or on a running cluster
(``--ray-address``). Either way every point calls the same function (``run_point``) with the
same arguments, and results come back in the order the points were given, so a parallel sweep
writes the same ``sweep.json`` metrics as a serial one.

The workers share the cache folder: the SQLite caches (:mod:`lab.caches`, WAL and a 60 s busy
timeout) take writers from several processes, and an index is built once, under its file lock
(:func:`lab.rag.index.open_or_build`), the others waiting and then reusing it. On a cluster the
project, the reports and the cache folder must be at the same paths on every node (a shared
file system).

Ray is an optional extra (``pip install .[ray]``), imported only when ``workers`` > 1.
"""

from __future__ import annotations

import logging
import os
import warnings
from collections import deque
from typing import Any, Callable, Sequence

from lab.errors import ConfigError, LabError
from lab.models.llm import SHARE_ENV
from lab.progress import Ticker

log = logging.getLogger(__name__)

#: What a worker process needs in its environment (the driver's value where it has one): no
#: network for models, llama.cpp's OpenMP threads waiting passively, no tokenizer thread pools.
WORKER_ENV = {"HF_HUB_OFFLINE": "1", "OMP_WAIT_POLICY": "PASSIVE", "TOKENIZERS_PARALLELISM": "false",
              "LANCEDB_LOG": "error"}
#: Ray's shared-memory object store: points pass configs and small dicts, not arrays.
OBJECT_STORE_BYTES = 128 * 1024 ** 2


def worker_env() -> dict[str, str]:
    return {k: os.environ.get(k, default) for k, default in WORKER_ENV.items()}


def _call(cwd: str, fn: Callable, args: tuple) -> Any:
    """A Ray task's body: ``fn(*args)`` in the driver's working directory, so relative report
    paths name the same folders (and are written as the same strings) as in a serial run."""
    os.chdir(cwd)
    return fn(*args)


class _Deferred:
    """A serial 'task': run when its result is asked for."""

    def __init__(self, fn: Callable, args: tuple):
        self.fn, self.args = fn, args


class Workers:
    """Run calls of a module-level function serially (``workers`` 1) or as Ray tasks.

    Use as a context manager: Ray starts on entry (workers > 1) and stops on exit; a local
    Ray's worker processes stay up between calls, so the models a point loads are loaded
    once per worker process, not once per point."""

    def __init__(self, workers: int = 1, address: str | None = None):
        if workers < 1:
            raise ConfigError(f"--workers {workers} is not a number of processes", hint="e.g. --workers 2")
        if address and workers < 2:
            raise ConfigError("--ray-address needs --workers 2 or more (the points in flight at once)",
                              hint="e.g. --workers 4 --ray-address auto")
        self.size, self.address = workers, address
        self._ray: Any = None
        self._task: Any = None
        self._started = False

    @property
    def parallel(self) -> bool:
        return self.size > 1

    def __enter__(self) -> "Workers":
        if self.parallel:
            self._ray = _import_ray(self.size)
            self._start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._started:
            self._ray.shutdown()  # a local Ray's workers go with it; a cluster's tasks are cancelled
            self._started = False

    def _start(self) -> None:
        ray = self._ray
        # each worker keeps 1/N of a remote LLM's concurrency: N workers together keep the config's limit
        runtime_env = {"env_vars": {**worker_env(), SHARE_ENV: str(self.size)}}
        quiet = dict(logging_level=logging.WARNING, log_to_driver=True, include_dashboard=False)
        with warnings.catch_warnings():
            # Ray starts its processes with fork + exec: nothing of LanceDB's runtime lives on in them
            warnings.filterwarnings("ignore", "lancedb fork support", RuntimeWarning)
            if self.address:
                ray.init(address=self.address, runtime_env=runtime_env, **quiet)
            else:
                # one CPU per point; a local cluster of its own, on the loopback only
                ray.init(num_cpus=self.size, object_store_memory=OBJECT_STORE_BYTES, runtime_env=runtime_env,
                         _node_ip_address="127.0.0.1", **quiet)
        self._started = True
        self._task = ray.remote(num_cpus=1, max_retries=0)(_call)
        log.info("Ray: %d workers%s", self.size, f" on {self.address}" if self.address else " (local)")

    def submit(self, fn: Callable, *args: Any) -> Any:
        """Start ``fn(*args)`` (serially: when :meth:`result` asks for it)."""
        if not self.parallel:
            return _Deferred(fn, args)
        return self._task.remote(os.getcwd(), fn, args)

    def result(self, job: Any) -> Any:
        """Wait for one submitted call; a user-facing error in a worker is raised here as itself."""
        if isinstance(job, _Deferred):
            return job.fn(*job.args)
        try:
            return self._ray.get(job)
        except self._ray.exceptions.RayTaskError as exc:
            cause = getattr(exc, "cause", None)
            if isinstance(cause, LabError):
                raise cause from None
            raise

    def map(self, fn: Callable, calls: Sequence[tuple], desc: str, labels: Sequence[str] | None = None) -> list:
        """``[fn(*args) for args in calls]``, in that order, logging one line per finished call
        (``desc i/n points (p%), elapsed, ETA: label``), on a terminal or not."""
        labels = list(labels) if labels is not None else [""] * len(calls)
        with Ticker(desc, len(calls), False, unit="points", every=0.0, quiet=0.0) as ticker:
            if not self.parallel:
                out = []
                for args, label in zip(calls, labels):
                    out.append(fn(*args))
                    ticker.update(note=label)
                return out
            jobs = [self.submit(fn, *args) for args in calls]
            which = {job: i for i, job in enumerate(jobs)}
            pending = list(jobs)
            while pending:
                done, pending = self._ray.wait(pending, num_returns=1)
                self.result(done[0])  # a failed point fails the sweep now, not after the others
                ticker.update(note=labels[which[done[0]]])
            return [self.result(job) for job in jobs]


def windowed(pool: Workers, asks: Callable[[], Any], tell: Callable[[Any, Any], None], total: int) -> None:
    """Ask ``total`` times, keeping up to ``pool.size`` calls in flight, and ``tell(token,
    result)`` their results in the order they were asked. ``asks()`` returns ``(fn, args,
    token)`` to run, or ``(None, None, token)`` when there is nothing to run (told at once, with
    None). The n-th ask always follows the same tells, whichever call finishes first: with a
    seeded sampler a search with the same ``--workers`` repeats exactly, and ``--workers 1`` is
    the serial ask, run, tell loop."""
    running: deque = deque()
    asked = 0
    while asked < total or running:
        while asked < total and len(running) < pool.size:
            asked += 1
            fn, args, token = asks()
            if fn is None:
                tell(token, None)
            else:
                running.append((token, pool.submit(fn, *args)))
        if running:
            token, job = running.popleft()
            tell(token, pool.result(job))


def _import_ray(workers: int) -> Any:
    try:
        import ray  # the optional extra, only for --workers 2 or more (seconds to import)
    except ImportError:
        raise ConfigError(f"--workers {workers} runs points on Ray, which is not installed",
                          hint="pip install .[ray]  (or run with --workers 1)") from None
    return ray

