"""What a run prints: progress with ETA (a tqdm bar on a terminal, periodic log lines
elsewhere: CI, ``| tee``, nohup), the process's logging set-up, and :func:`printable`, through
which every line the CLI prints passes."""

from __future__ import annotations

import logging
import os
import re
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterable, Iterator, Sequence, TypeVar

T = TypeVar("T")
log = logging.getLogger("lab.progress")

#: What a terminal acts on instead of showing: C0 controls but tab and newline (ESC starts CSI
#: and OSC sequences: colours, cursor moves, window titles, hyperlinks), DEL, C1 controls (U+009B
#: is a one-character CSI), and the bidirectional overrides and isolates that reorder a line.
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """``text`` as a terminal should show it: every control character written as its escape
    (``\\x1b``, ``\\x9b``, ``\\u202e``), so a run name, a config description or a question cannot
    move the cursor, recolour, retitle or rewrite what is on screen. Tab and newline stay."""
    return _CONTROLS.sub(lambda m: repr(m.group())[1:-1], text)


class PrintableStream:
    """A text stream that writes through :func:`printable` (the CLI's stdout)."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, text: str) -> int:
        self.stream.write(printable(text))
        return len(text)

    def __getattr__(self, name: str):
        return getattr(self.stream, name)


class _PrintableFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return printable(super().format(record))


def duration(seconds: float) -> str:
    """``seconds`` as people read a wait: "42 s", "3 min 05 s", "1 h 18 min"."""
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


#: Who else is told of progress (a run's status file: lab.eval.status): each is called with the
#: ticker's description, items done, total and seconds elapsed, at most every
#: :data:`OBSERVE_EVERY` seconds and when the work is done.
_observers: list[Callable[[str, int, int, float], None]] = []
OBSERVE_EVERY = 1.0


def observe(fn: Callable[[str, int, int, float], None]) -> Callable[[], None]:
    """Tell ``fn`` of every ticker's progress until the returned function is called."""
    _observers.append(fn)
    return lambda: _observers.remove(fn) if fn in _observers else None


class Ticker:
    """Counts work done. On a terminal (``bar``) a tqdm bar; elsewhere (CI, ``| tee``, nohup)
    log lines ``desc i/total (p%), elapsed, ETA``: at every ``every`` share of the total and
    at least every ``heartbeat`` seconds (from a background thread, so a single slow item,
    e.g. a model loading, still shows the run is alive). Work that finishes within ``quiet``
    seconds logs nothing."""

    def __init__(self, desc: str, total: int, bar: bool, unit: str = "q", every: float = 0.1,
                 heartbeat: float = 30.0, quiet: float = 5.0):
        self.desc, self.total, self.unit, self.quiet = desc, total, unit, quiet
        self.done = 0
        self._t0 = self._last = time.perf_counter()
        self._step = max(1, int(total * every))
        self._next = self._step
        self._logged = False
        self._note = ""
        self._expect: float | None = None
        self._bar = None
        self._told = 0.0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._tell(force=True)
        if bar:
            from tqdm import tqdm  # only on a terminal

            self._bar = tqdm(total=total, desc=desc, unit=unit, file=sys.stderr)
        elif total > 0:
            self._thread = threading.Thread(target=self._beat, args=(heartbeat,), daemon=True)
            self._thread.start()

    def _line(self, note: str = "") -> None:
        now = time.perf_counter()
        elapsed = now - self._t0
        share = self.done / self.total if self.total else 1.0
        left = self._expect if self._expect is not None else \
            elapsed / self.done * (self.total - self.done) if self.done else None
        eta = f", ETA {duration(left)}" if left is not None else ""
        note = note or self._note
        log.info("%s %d/%d %s (%.0f%%), %s elapsed%s%s", self.desc, self.done, self.total, self.unit, 100 * share,
                 duration(elapsed), eta, f": {note}" if note else "")
        self._last = now
        self._logged = True

    def _beat(self, every: float) -> None:
        while not self._stop.wait(min(every, 5.0)):
            with self._lock:
                if time.perf_counter() - self._last >= every and self.done < self.total:
                    self._line()

    def _tell(self, force: bool = False) -> None:
        """Tell the observers (:func:`observe`), at most every :data:`OBSERVE_EVERY` seconds."""
        now = time.perf_counter()
        if not _observers or (not force and now - self._told < OBSERVE_EVERY and self.done < self.total):
            return
        self._told = now
        for fn in list(_observers):
            try:
                fn(self.desc, self.done, self.total, now - self._t0)
            except Exception:  # a status file that cannot be written never stops the work
                log.debug("progress observer failed", exc_info=True)

    def expect(self, seconds: float | None) -> None:
        """The seconds left, as the caller knows them better than the share done (work whose first
        items came from a cache); None: from the share done again."""
        with self._lock:
            self._expect = seconds

    def update(self, n: int = 1, note: str = "") -> None:
        """Count ``n`` more done; ``note`` (e.g. which item finished) ends the line it logs."""
        with self._lock:
            self.done += n
            self._tell()
            if self._bar is not None:
                if note:
                    self._bar.set_postfix_str(note, refresh=False)
                self._bar.update(n)
                return
            quiet = time.perf_counter() - self._t0 < self.quiet
            if self.done >= self._next:
                self._next = (self.done // self._step + 1) * self._step
                if not quiet or (self.done >= self.total and self._logged):
                    self._line(note)

    def note(self, text: str) -> None:
        """What the work is doing between counted items (e.g. candidates tried and rejected): shown
        beside the bar, and in every line logged until the next note."""
        with self._lock:
            self._note = text
            if self._bar is not None:
                self._bar.set_postfix_str(text)

    def close(self) -> None:
        self._stop.set()
        if self._bar is not None:
            self._bar.close()

    def __enter__(self) -> "Ticker":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def progress(items: Iterable[T], total: int, desc: str, bar: bool, unit: str = "q") -> Iterator[T]:
    """Yield ``items``, counting each one done when the caller asks for the next (see :class:`Ticker`)."""
    with Ticker(desc, total, bar, unit) as ticker:
        for item in items:
            yield item
            ticker.update()


def run_all(fn: Callable[[T], object], items: Sequence[T], desc: str, bar: bool, concurrency: int = 1) -> list:
    """``[fn(x) for x in items]`` with progress and ETA; ``concurrency`` > 1 runs that many in
    threads (remote LLM calls), results still in input order."""
    if concurrency <= 1:
        return [fn(x) for x in progress(items, len(items), desc, bar)]
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        futures = [pool.submit(fn, x) for x in items]
        try:
            return [f.result() for f in progress(futures, len(futures), desc, bar)]
        except BaseException:  # an error that stops the command: the items not started never start
            for f in futures:
                f.cancel()
            raise


#: Libraries whose INFO chatter is not the user's business (their warnings still show).
QUIET_LOGGERS = ("httpx", "llama_index", "sentence_transformers", "urllib3", "huggingface_hub", "filelock")
#: Warnings that say what the lab does on purpose: (logger, start of the message).
EXPECTED = (
    ("llama_index.vector_stores.lancedb.base", "Table chunks doesn't exist yet"),  # every new index starts empty
    # every start of a local Ray (--workers N) keeps Ray's default, a token in ~/.ray
    ("ray._private.authentication.authentication_token_setup", "Token authentication is enabled"),
)


class _Expected(logging.Filter):
    def __init__(self, prefix: str):
        super().__init__()
        self.prefix = prefix

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(self.prefix)


def setup_logging(verbose: bool) -> None:
    """The CLI's logging: lab INFO lines (with times) on stderr, libraries at WARNING."""
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname).1s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
        stream=sys.stderr,
    )
    for handler in logging.getLogger().handlers:  # names and questions in log lines are shown, never obeyed
        if (getattr(handler, "stream", None) is sys.stderr and handler.formatter is not None
                and not isinstance(handler.formatter, _PrintableFormatter)):
            handler.setFormatter(_PrintableFormatter(handler.formatter._fmt, handler.formatter.datefmt))
    for noisy in QUIET_LOGGERS:
        logging.getLogger(noisy).setLevel(logging.WARNING)
    for name, prefix in EXPECTED:
        logging.getLogger(name).addFilter(_Expected(prefix))
    # Lance's Rust logger warns "No existing dataset ... will be created" for every new table; it
    # reads LANCEDB_LOG when lancedb loads (later, on first use). Errors still show.
    os.environ.setdefault("LANCEDB_LOG", "error")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
