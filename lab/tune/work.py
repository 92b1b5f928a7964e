"""What ``lab tune`` writes while it works, kept safe: one command at a time for one ``--out``
(the lock ``lab generate`` takes, :func:`lab.paths.claim_output`), what killed tunings left
removed, and a full disk stopped with exit 2 and nothing written (the checkpoints go too)."""

from __future__ import annotations

import re
import shutil
from contextlib import contextmanager
from typing import Iterator

from lab.errors import LabError
from lab.models.tuned import tuned_dir, tuned_root
from lab.paths import claim_output, disk_full, remove_orphans
from lab.tune.options import TuneOptions


@contextmanager
def guarded(opts: TuneOptions) -> Iterator[None]:
    """The block that tunes ``opts.out`` (see the module)."""
    root = tuned_root(opts.cache_root)
    with claim_output(tuned_dir(opts.out, opts.cache_root), "--out"):
        for folder, pattern in ((root, ".*.tmp-*"), (root, ".*.old-*"), (root / ".work", "*-rescore-*")):
            remove_orphans(folder, pattern)  # a killed save's .NAME.tmp-PID, .NAME.old-PID; a rescoring's
        try:
            yield
        except BaseException as exc:
            if not disk_full(exc, root):
                raise
            # this --out's checkpoints and dev runs (the lock says no other command's)
            mine = re.compile(re.escape(opts.out) + r"-([0-9a-f]{12}|rescore-\d+)")
            work = [w for w in (root / ".work").glob("*") if w.is_dir() and mine.fullmatch(w.name)]
            size = sum(f.stat().st_size for w in work for f in w.rglob("*") if f.is_file())
            for w in work:
                shutil.rmtree(w, ignore_errors=True)
            raise LabError(f"the disk holding {root} is full: lab tune stopped ({exc.__class__.__name__}); its "
                           f"checkpoints ({size / 1e6:.0f} MB) were removed and nothing was written",
                           hint="free some space (or point LAB_CACHE at a larger disk), then run the same "
                                "command again") from None
