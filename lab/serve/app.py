"""``lab serve``: the reports folder as a web app for a team (Starlette, served by uvicorn).

Pages (rendered by the same functions and templates as the files, :mod:`lab.report`):

- ``/``: every run in one sortable, filterable table, grouped by eval set, with the runs in
  progress (their stage and ETA, polled from ``/api/running``); pick runs of one group to compare.
- ``/compare?run=NAME/RUN-ID&run=...``: what ``lab compare`` writes for those runs, with the
  command that writes the same page.
- ``/runs/NAME/RUN-ID``: the run's page; ``/runs/NAME/RUN-ID/label``: its annotation queue, one
  answer at a time; ``/runs/NAME/RUN-ID/agreement``: agreement between annotators and with the
  judge, and the assignment of questions to annotators.
- ``/runs/NAME/RUN-ID/files/FILE``: a file of the run folder (its exports).
- JSON: ``GET /api/runs``, ``GET /api/running``, ``POST /api/labels``, ``POST /api/assign``,
  ``GET /runs/NAME/RUN-ID/labels.json?annotator=A`` (what ``lab agree RUN FILE`` imports).

Safe by default (:class:`Guard`): bound to 127.0.0.1, where the Host header must name this
machine (a web page elsewhere cannot reach the app through DNS rebinding); bound elsewhere, every
request needs the token (``Authorization: Bearer``, the cookie a first ``?token=`` visit sets),
compared in constant time. A POST must come from the app's own pages: a JSON body and, where the
browser says, the same origin; a cross-origin POST is refused (403). Every text is escaped by the
templates' autoescaping, JSON inside a page is escaped for ``<script>``, and the pages forbid
every source but their own (Content-Security-Policy): no inline script runs (a page's script is a
file, ``/static/NAME.js``, that writes values into the page as text: :mod:`lab.serve.static`).
Only run folders and the files directly in them are served: any other path, ``../`` or encoded,
is 404.
"""

from __future__ import annotations

import hmac
import ipaddress
import shlex
import threading
from collections import OrderedDict
from pathlib import Path
from urllib.parse import quote, urlsplit

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from lab.errors import LabError
from lab.judge.labels import LabelStore, queue_order
from lab.report.compare import Run, compare_html, labelled
from lab.report.html import environment, run_html
from lab.runfiles import load_run
from lab.serve.labels import agreement, dumps
from lab.serve.review_pages import ReviewPages
from lab.serve.reviews import ReviewSet
from lab.serve.runs import RunIndex, groups, run_key
from lab.serve.static import CSP, script

TOKEN_COOKIE = "lab_token"
#: Pages rendered and kept, newest last (a run's files do not change once written).
PAGE_CACHE = 32
HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY",
           "Referrer-Policy": "no-referrer", "Cache-Control": "no-store"}


class Guard:
    """The app's gate (see the module): the Host check, the token and the same-origin rule."""

    def __init__(self, app, token: str | None, local: bool):
        self.app, self.token, self.local = app, token, local

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        request = Request(scope)
        refused = self.refuse(request)
        if refused is not None:
            return await refused(scope, receive, send)
        if self.token and request.query_params.get("token") and request.method == "GET":
            # a first visit by the printed link: keep the token in a cookie, drop it from the address
            rest = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
            target = request.url.path + ("?" + "&".join(f"{quote(k)}={quote(v)}" for k, v in rest) if rest else "")
            response = RedirectResponse(target, status_code=303)
            response.set_cookie(TOKEN_COOKIE, self.token, httponly=True, samesite="strict")
            return await response(scope, receive, send)

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", [])]
                headers += [(k.lower().encode(), v.encode()) for k, v in HEADERS.items()]
                message = {**message, "headers": headers}
            await send(message)

        return await self.app(scope, receive, send_with_headers)

    def refuse(self, request: Request) -> Response | None:
        host = host_name(request.headers.get("host") or "")
        if self.local and not loopback(host):
            return plain(f"host {host!r} is not this machine: open http://127.0.0.1/ (or lab serve --host)", 403)
        if self.token:
            given = (request.headers.get("authorization") or "").removeprefix("Bearer ").strip() \
                or request.cookies.get(TOKEN_COOKIE) or request.query_params.get("token") or ""
            if not hmac.compare_digest(given.encode(), self.token.encode()):
                return plain("a token is needed: open the address lab serve printed (it carries ?token=...), "
                             "or send Authorization: Bearer TOKEN", 401)
        if request.method not in ("GET", "HEAD"):
            origin = request.headers.get("origin")
            # the origin's host and port against the Host asked for (the scheme may differ behind a proxy)
            other = origin is not None and urlsplit(origin).netloc.lower() != (request.headers.get("host") or "").lower()
            site = request.headers.get("sec-fetch-site")
            if other or (site is not None and site not in ("same-origin", "none")):
                return plain("a request from another site is refused: label from the app's own pages", 403)
            if not (request.headers.get("content-type") or "").startswith("application/json"):
                return plain("send JSON (Content-Type: application/json)", 415)
        return None


def host_name(header: str) -> str:
    """The name in a Host header, without its port: ``127.0.0.1:8765`` -> ``127.0.0.1``,
    ``[::1]:8765`` -> ``::1``."""
    if header.startswith("["):
        return header[1:].split("]", 1)[0]
    return header.rsplit(":", 1)[0]


def loopback(host: str) -> bool:
    """Whether ``host`` names this machine: ``localhost`` or a loopback address."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def plain(text: str, status: int) -> Response:
    return Response(text + "\n", status_code=status, media_type="text/plain; charset=utf-8")


def not_found() -> Response:
    return plain("not found", 404)


class Pages:
    """The pages and the API over one reports folder."""

    def __init__(self, reports_root: Path):
        self.root = Path(reports_root)
        self.index = RunIndex(self.root)
        self._store: LabelStore | None = None
        self.env = environment()
        self._cache: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    @property
    def store(self) -> LabelStore:
        """The labels store, opened on first use: a reports folder where it cannot be (read-only)
        is served all the same, and the pages that need labels say why (a LabError)."""
        with self._lock:
            if self._store is None:
                self._store = LabelStore(self.root)
            return self._store

    # -- helpers ---------------------------------------------------------------------------------
    def _cached(self, key: tuple, make) -> str:
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key]
        html = make()
        with self._lock:
            self._cache[key] = html
            while len(self._cache) > PAGE_CACHE:
                self._cache.popitem(last=False)
        return html

    def _stamp(self, folder: Path) -> tuple:
        st = (folder / "results.json").stat()
        return str(folder), st.st_mtime_ns, st.st_size

    def _run(self, request: Request) -> tuple[Path, str] | None:
        name, run_id = request.path_params["name"], request.path_params["run_id"]
        folder = self.index.folder(name, run_id)
        return None if folder is None else (folder, f"/runs/{quote(name)}/{quote(run_id)}")

    def _loaded(self, folder: Path):
        return self._cached(("load",) + self._stamp(folder), lambda: load_run(folder))

    # -- pages -----------------------------------------------------------------------------------
    def home(self, request: Request) -> Response:
        rows, broken = self.index.rows()
        try:
            counts = self.store.counts()
        except LabError as exc:  # a read-only reports folder: served, without labels
            counts, broken = {}, broken + [{"key": "labels.sqlite", "why": f"{exc} ({exc.hint})"}]
        for r in rows:
            r["n_labels"] = counts.get(f"{r['name']}/{r['run_id']}", 0)
        running = self.index.running(broken)
        html = self.env.get_template("serve_runs.html").render(
            groups=groups(rows), broken=broken, running=running, n=len(rows), root=str(self.root))
        return HTMLResponse(html)

    def run_page(self, request: Request) -> Response:
        found = self._run(request)
        if found is None:
            return not_found()
        folder, base = found

        def make():
            results, samples = self._loaded(folder)
            return run_html(results, samples, served={"home": "/", "label": f"{base}/label",
                                                      "command": f"lab report {shlex.quote(str(folder))}"})
        return HTMLResponse(self._cached(("run",) + self._stamp(folder), make))

    def compare(self, request: Request) -> Response:
        keys = request.query_params.getlist("run")
        if len(keys) < 2:
            return plain("pick two runs or more: /compare?run=NAME/RUN-ID&run=NAME/RUN-ID", 400)
        folders = []
        for key in keys:
            name, _, run_id = key.partition("/")
            folder = self.index.folder(name, run_id)
            if folder is None:
                return not_found()
            folders.append(folder)

        def make():
            runs = []
            for f in folders:
                results, samples = self._loaded(f)
                runs.append(Run(f, results, samples))
            runs = labelled(runs)
            links = {r.label: f"/runs/{quote(r.results['name'])}/{quote(r.results['run_id'])}" for r in runs}
            cmd = "lab compare " + " ".join(shlex.quote(str(f)) for f in folders)
            return compare_html(runs, links, served={"home": "/", "command": cmd})
        try:
            html = self._cached(("compare",) + tuple(self._stamp(f) for f in folders), make)
        except LabError as exc:
            return plain(f"{exc}", 400)
        return HTMLResponse(html)

    def run_file(self, request: Request) -> Response:
        found = self._run(request)
        name = request.path_params["file"]
        if found is None or "/" in name or "\\" in name or name.startswith(".") or not name:
            return not_found()
        path = found[0] / name
        if not path.is_file() or path.is_symlink():
            return not_found()
        return FileResponse(path)

    def label_page(self, request: Request) -> Response:
        found = self._run(request)
        if found is None:
            return not_found()
        folder, base = found
        results, samples = self._loaded(folder)
        run = run_key(results)
        annotator = (request.query_params.get("annotator") or "").strip()
        asked = request.query_params.get("q")
        item = queue = None
        error = None
        answered = [s for s in samples if s.get("answer")]
        if annotator:
            try:
                queue = self.store.queue(run, [s["id"] for s in answered], annotator)
            except LabError as exc:
                error, annotator = str(exc), ""
        if queue is not None:
            by_id = {s["id"]: s for s in answered}
            qid = asked if asked in by_id else queue["next"]
            if qid is not None:
                s = by_id[qid]
                item = {"sample": s, "label": queue["labels"].get(qid),
                        "position": queue["order"].index(qid) + 1 if qid in queue["order"] else None}
        html = self.env.get_template("serve_label.html").render(
            r=results, base=base, run=run, annotator=annotator, queue=queue, item=item, error=error,
            n_answers=len(answered))
        return HTMLResponse(html)

    def agreement_page(self, request: Request) -> Response:
        found = self._run(request)
        if found is None:
            return not_found()
        folder, base = found
        results, samples = self._loaded(folder)
        try:
            a = agreement(self.store, results, samples, folder)
            assigned = self.store.assigned(run_key(results))
        except LabError as exc:  # no labels store (a read-only reports folder), or labels it cannot pair
            return plain(f"{exc}" + (f"\nfix: {exc.hint}" if exc.hint else ""), 503)
        html = self.env.get_template("serve_agreement.html").render(
            r=results, base=base, a=a, assigned={k: len(v) for k, v in assigned.items()},
            command=f"lab agree {shlex.quote(str(folder))}",
            n_answers=sum(1 for s in samples if s.get("answer")))
        return HTMLResponse(html)

    def labels_json(self, request: Request) -> Response:
        found = self._run(request)
        if found is None:
            return not_found()
        results, _ = self._loaded(found[0])
        annotator = request.query_params.get("annotator") or ""
        try:
            labels = self.store.export(results, annotator)
        except LabError as exc:  # no labels store (a read-only reports folder)
            return plain(f"{exc}" + (f"\nfix: {exc.hint}" if exc.hint else ""), 503)
        return Response(dumps(labels), media_type="application/json",
                        headers={"Content-Disposition": 'attachment; filename="labels.json"'})

    # -- JSON --------------------------------------------------------------------------------------
    def api_runs(self, request: Request) -> Response:
        rows, broken = self.index.rows()
        return JSONResponse({"runs": rows, "broken": broken})

    def api_running(self, request: Request) -> Response:
        broken: list[dict] = []
        return JSONResponse({"running": self.index.running(broken), "broken": broken})

    async def _body(self, request: Request) -> dict:
        try:
            doc = await request.json()
        except ValueError:
            raise LabError("the request body is not JSON", hint="send a JSON object") from None
        if not isinstance(doc, dict):
            raise LabError("the request body is not a JSON object", hint="send a JSON object")
        return doc

    def _run_of(self, key: object) -> tuple[Path, dict, list[dict]]:
        name, _, run_id = str(key or "").partition("/")
        folder = self.index.folder(name, run_id)
        if folder is None:
            raise LookupError(key)
        results, samples = self._loaded(folder)
        return folder, results, samples

    async def api_label(self, request: Request) -> Response:
        try:
            doc = await self._body(request)
            _, results, samples = self._run_of(doc.get("run"))
            ids = [s["id"] for s in samples if s.get("answer")]
            if doc.get("id") not in ids:
                return JSONResponse({"error": f"question {doc.get('id')!r} has no answer in run {doc.get('run')!r}"},
                                    status_code=404)
            saved = self.store.put(run_key(results), results["config_fingerprint"], doc["id"], doc.get("annotator"),
                                   doc.get("label"), doc.get("accuracy"), doc.get("note"))
            queue = self.store.queue(run_key(results), ids, saved["annotator"])
        except LookupError:
            return JSONResponse({"error": "no such run"}, status_code=404)
        except LabError as exc:
            return JSONResponse({"error": str(exc), "fix": exc.hint}, status_code=400)
        return JSONResponse({"saved": saved, "next": queue["next"], "todo": queue["todo"]})

    async def api_assign(self, request: Request) -> Response:
        try:
            doc = await self._body(request)
            _, results, samples = self._run_of(doc.get("run"))
            annotators = doc.get("annotators")
            if isinstance(annotators, str):
                annotators = [a for a in annotators.split(",") if a.strip()]
            if not isinstance(annotators, list):
                raise LabError("annotators: a list of names", hint="e.g. [\"ana\", \"ben\"]")
            run = run_key(results)
            order = queue_order(run, [s["id"] for s in samples if s.get("answer")])
            overlap = doc.get("overlap", 0)
            if isinstance(overlap, str) and overlap.strip().isdigit():
                overlap = int(overlap)
            counts = self.store.assign(run, order, annotators, overlap)
        except LookupError:
            return JSONResponse({"error": "no such run"}, status_code=404)
        except LabError as exc:
            return JSONResponse({"error": str(exc), "fix": exc.hint}, status_code=400)
        return JSONResponse({"assigned": counts})


def create_app(reports_root: Path, token: str | None = None, local: bool = True,
               review_sets: tuple[ReviewSet, ...] = ()) -> Guard:
    """The app over ``reports_root``: ``token`` needed on every request when set; ``local``: bound
    to a loopback address (the Host header must name this machine); ``review_sets``: the eval
    sets offered in the review queue (``/review``)."""
    pages = Pages(reports_root)
    reviews = ReviewPages(pages.root, pages.env, review_sets, pages._body)
    # loaded now, not by the first comparison a user waits for (1.2 s together)
    import scipy.stats  # noqa: F401
    import statsmodels.stats.multitest  # noqa: F401

    run = "/runs/{name}/{run_id}"
    app = Starlette(routes=[
        Route("/", pages.home),
        Route("/compare", pages.compare),
        Route(run, pages.run_page),
        Route(run + "/label", pages.label_page),
        Route(run + "/agreement", pages.agreement_page),
        Route(run + "/labels.json", pages.labels_json),
        Route(run + "/files/{file}", pages.run_file),
        Route("/favicon.ico", lambda request: Response(status_code=204)),  # browsers ask; there is none
        Route("/static/{file}", script),  # the pages' scripts (lab.serve.static)
        Route("/api/runs", pages.api_runs),
        Route("/api/running", pages.api_running),
        Route("/api/labels", pages.api_label, methods=["POST"]),
        Route("/api/assign", pages.api_assign, methods=["POST"]),
        Route("/review", reviews.sets_page),
        Route("/review/{key}", reviews.page),
        Route("/api/review", reviews.api_review, methods=["POST"]),
    ])
    app.state.pages = pages

    async def unreadable(request: Request, exc: Exception) -> Response:  # a hand-edited run, a bug: said, not a traceback
        return plain(f"{request.url.path}: this page cannot be made from the run's files ({type(exc).__name__}: {exc}); "
                     "lab report RUN-FOLDER says more", 500)

    app.add_exception_handler(Exception, unreadable)
    return Guard(app, token, local)
