"""Headless Chromium for the report pages: the browser tests use it, and so does
``make screenshots`` (``python tests/pages.py --run turn13 --compare turn13 turn18 turn22-offline``),
which writes the PNGs under ``docs/img/`` that the docs site shows (``--review URL``: a served
review queue's, ``serve-review.png``, made of attrs' generated rows).

Debian's chromium (``make browser`` installs it), driven by Playwright; Playwright downloads
nothing. The flags keep Chromium off the network (this machine has none to offer).
"""

from __future__ import annotations

import argparse
import os
import sys
from contextlib import contextmanager
from pathlib import Path

CHROMIUM = os.environ.get("LAB_CHROMIUM", "/usr/bin/chromium")
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]


@contextmanager
def browser():
    if not Path(CHROMIUM).is_file():
        raise RuntimeError(f"{CHROMIUM} not found: `make browser` installs Debian's chromium")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            yield b
        finally:
            b.close()


class Page:
    """A page with every console error and uncaught exception collected."""

    def __init__(self, b, path: Path, width: int = 1400, height: int = 1000):
        self.page = b.new_page(viewport={"width": width, "height": height})
        self.errors: list[str] = []
        self.page.on("console", lambda m: self.errors.append(f"console {m.type}: {m.text}")
                     if m.type in ("error", "warning") else None)
        self.page.on("pageerror", lambda e: self.errors.append(f"page error: {e}"))
        self.dialogs: list[str] = []
        self.page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        self.requests: list[str] = []
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.goto(path.resolve().as_uri())

    def __getattr__(self, name):
        return getattr(self.page, name)


def shoot(page: Page, out: Path, selector: str | None = None, height: int = 1800) -> Path:
    """A PNG of the page's top ``height`` pixels, or of one element."""
    out.parent.mkdir(parents=True, exist_ok=True)
    if selector:
        page.locator(selector).first.screenshot(path=str(out))
    else:
        width = page.viewport_size["width"]
        full = page.evaluate("document.documentElement.scrollHeight")
        page.screenshot(path=str(out), clip={"x": 0, "y": 0, "width": width, "height": min(height, full)},
                        full_page=True)
    return out


def screenshots(run_dir: Path, compare_html: Path, out: Path, b=None) -> list[Path]:
    """The docs' pictures: a run report (top, and one question opened) and a comparison
    (top, and the paired statistics). Uses browser ``b``, or starts one."""
    if b is None:
        with browser() as b:
            return screenshots(run_dir, compare_html, out, b)
    page = Page(b, run_dir / "report.html")
    shots = [shoot(page, out / "report.png")]
    page.locator("#questions tr.qrow").nth(1).click()
    shots.append(shoot(page, out / "report-question.png", selector="#questions tr.qdetail:not([hidden])"))
    page = Page(b, compare_html)
    shots.append(shoot(page, out / "compare.png"))
    shots.append(shoot(page, out / "compare-paired.png", selector="div.pair table.stats"))
    return shots


def judge_screenshots(run_dir: Path, out: Path, b=None) -> list[Path]:
    """The judge's pictures: a judged run's perturbation-check panel, and the labelling controls
    (one answer marked "partly correct", the bar counting it)."""
    if b is None:
        with browser() as b:
            return judge_screenshots(run_dir, out, b)
    page = Page(b, run_dir / "report.html")
    shots = [shoot(page, out / "report-judge-checks.png", selector="#judge-checks")]
    page.evaluate("localStorage.clear()")
    page.locator("#questions tr.qrow").nth(0).click()
    page.locator("#questions tr.qdetail:not([hidden]) .hl button[data-label='partly']").click()
    page.evaluate("document.querySelector('#labels-bar').scrollIntoView()")
    shots.append(shoot(page, out / "report-labels.png", selector="#questions tr.qdetail:not([hidden])"))
    return shots


def serve_screenshots(url: str, pair: list[str], judged: str, out: Path, b=None) -> list[Path]:
    """The served app's pictures (``lab serve`` running at ``url``): the runs table, the
    comparison of ``pair`` (run keys ``NAME/RUN-ID``), ``judged``'s annotation queue and its
    agreement page."""
    if b is None:
        with browser() as b:
            return serve_screenshots(url, pair, judged, out, b)
    page = b.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(url + "/")
    for key in pair:
        page.locator(f"tr.run[data-key='{key}'] input.pick").check()
    shots = [shoot(page, out / "serve-runs.png", height=900)]
    with page.expect_navigation():
        page.locator("#compare-button").click()
    shots.append(shoot(page, out / "serve-compare.png", height=900))
    page.goto(f"{url}/runs/{judged}/label?annotator=ana")
    page.locator(".choices button[data-label='partly']").click()
    page.fill("#note", "right product, wrong year")
    shots.append(shoot(page, out / "serve-label.png", height=900))
    page.goto(f"{url}/runs/{judged}/agreement")
    shots.append(shoot(page, out / "serve-agreement.png", height=900))
    return shots


def review_screenshot(queue: str, out: Path, b=None) -> Path:
    """A served review queue's page (``lab serve --review``; ``queue``: its address
    ``http://HOST:PORT/review/KEY``) as a reviewer named ana meets its first row."""
    if b is None:
        with browser() as b:
            return review_screenshot(queue, out, b)
    page = b.new_page(viewport={"width": 1400, "height": 1300})
    page.goto(f"{queue}?reviewer=ana")
    page.wait_for_selector("#item")
    return shoot(page, out / "serve-review.png", height=1300)


def docs_screenshot(site: Path, out: Path, b=None) -> Path:
    """The docs site's home page (``make docs`` builds ``site/``), as the layout page shows it."""
    if b is None:
        with browser() as b:
            return docs_screenshot(site, out, b)
    page = Page(b, site / "index.html", width=1280, height=800)
    return shoot(page, out / "docs-home.png", height=800)


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from lab.report.compare import default_folder, load_runs, render_compare
    from lab.paths import resolve_run

    ap = argparse.ArgumentParser(description="PNG screenshots of a run report and a comparison, for docs/img/")
    ap.add_argument("--run", help="experiment NAME or run folder for the run report")
    ap.add_argument("--compare", nargs="+", help="runs to compare (NAMEs or folders)")
    ap.add_argument("--reports", type=Path, default=Path("reports"))
    ap.add_argument("--out", type=Path, default=Path("docs") / "img")
    ap.add_argument("--judged", help="a judged run (NAME or folder): also its judge checks and labelling controls")
    ap.add_argument("--docs", type=Path, metavar="SITE", help="a built docs site (make docs: site/): its home page")
    ap.add_argument("--review", metavar="URL", help="a served review queue (lab serve --review), as "
                                                   "http://127.0.0.1:8765/review/KEY: its first row")
    args = ap.parse_args(argv)
    if bool(args.run) != bool(args.compare) or not (args.run or args.judged or args.docs or args.review):
        ap.error("give --run and --compare together, or --judged, or --docs, or --review")
    if args.review:
        print(review_screenshot(args.review.rstrip("/"), args.out))
    if args.docs:
        print(docs_screenshot(args.docs, args.out))
    if args.judged:
        for path in judge_screenshots(resolve_run(args.judged, args.reports), args.out):
            print(path)
    if not args.run:
        return 0
    runs = load_runs(args.compare, args.reports)
    compare_html = render_compare(runs, default_folder(runs, args.reports))
    for path in screenshots(resolve_run(args.run, args.reports), compare_html, args.out):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
