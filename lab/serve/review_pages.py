"""The review queue's pages and API in ``lab serve`` (the verdicts and the reviewed copy:
:mod:`lab.serve.reviews`): ``/review`` lists the eval sets offered, ``/review/KEY?reviewer=NAME``
shows one row at a time, ``POST /api/review`` keeps a verdict."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Awaitable, Callable

from jinja2 import Environment
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response

from lab.errors import LabError
from lab.judge.labels import check_annotator
from lab.progress import duration
from lab.serve.reviews import (ReviewSet, ReviewStore, copy_paths, current, queue, reading, review_row,
                               reviewed_rows)


class ReviewPages:
    """The review queue over the eval sets offered (``lab serve --review``)."""

    def __init__(self, root: Path, env: Environment, review_sets: tuple[ReviewSet, ...],
                 body: Callable[[Request], Awaitable[dict]]):
        self.sets = {s.key: s for s in review_sets}
        self._body = body  # the request's JSON object, or the LabError that says what it is not
        self.store = ReviewStore(root)
        self.env = env
        self._lock = threading.Lock()  # a verdict and the reviewed copy it rewrites, one at a time

    def sets_page(self, request: Request) -> Response:
        sets = []
        for s in self.sets.values():
            verdicts = current(s, self.store.verdicts(str(s.path)))
            _, counts = reviewed_rows(s, verdicts)
            r = reading(verdicts)
            took = f"{duration(r['seconds'])} (median {duration(r['median_seconds'])} a row)" if r["n_timed"] else ""
            sets.append({"key": s.key, "path": str(s.path), "n": len(s.rows), "counts": counts, "reading": took,
                         "doubted": sum(1 for r in s.rows if s.notes.get(r["id"])), "copy": str(copy_paths(s.path)[0])})
        html = self.env.get_template("serve_review_sets.html").render(sets=sets, db=str(self.store.path))
        return HTMLResponse(html)

    def page(self, request: Request) -> Response:
        s = self.sets.get(request.path_params["key"])
        if s is None:
            return Response("not found", status_code=404, media_type="text/plain")
        reviewer = (request.query_params.get("reviewer") or "").strip()
        error = None
        if reviewer:
            try:
                reviewer = check_annotator(reviewer)
            except LabError as exc:
                error, reviewer = str(exc), ""
        q = queue(s, current(s, self.store.verdicts(str(s.path))), request.query_params.get("q"))
        html = self.env.get_template("serve_review.html").render(s=s, q=q, reviewer=reviewer, error=error,
                                                                 copy=str(copy_paths(s.path)[0]))
        return HTMLResponse(html)

    async def api_review(self, request: Request) -> Response:
        try:
            doc = await self._body(request)
            s = self.sets.get(str(doc.get("set")))
            if s is None:
                return JSONResponse({"error": f"no eval set {doc.get('set')!r} is offered for review"}, status_code=404)
            with self._lock:
                saved = review_row(self.store, s, doc)
                q = queue(s, current(s, self.store.verdicts(str(s.path))), None)
        except LookupError:
            return JSONResponse({"error": f"no row {doc.get('id')!r} in the eval set"}, status_code=404)
        except LabError as exc:
            return JSONResponse({"error": exc.message, "fix": exc.hint}, status_code=400)
        except OSError as exc:
            return JSONResponse({"error": f"the reviewed copy cannot be written: {exc}",
                                 "fix": "make the eval set's folder writable (the verdict itself is kept)"},
                                status_code=500)
        return JSONResponse({"saved": saved, "counts": q["counts"], "todo": q["todo"],
                             "copy": str(copy_paths(s.path)[0])})
