"""The review queue in a real browser against a real ``lab serve --review`` process: a reviewer
keeps a row, moves a span by selecting text in the document (the reference taken from the span
follows it), drops a row, and the reviewed copy on disk says so; HTML in a question stays text; the
seconds each row was on screen come with its verdict, the time the tab was hidden left out; the same
verdicts given by keys, with letters typed into a field staying its text."""

import json

import pytest

from lab.serve.reviews import ReviewStore, copy_paths
from test_review_queue import POLICY, review  # noqa: F401  (the fixture: a set, its documents, its sidecar)
from test_serve_browser import Server, free_port, watched

pytestmark = pytest.mark.browser


def select(page, text: str) -> None:
    """Select ``text`` in the document shown, as a mouse drag would, and let go of the button."""
    page.evaluate("""text => {
        const doc = document.getElementById("doc"), walker = document.createTreeWalker(doc, NodeFilter.SHOW_TEXT);
        let node, seen = "", nodes = [];
        while ((node = walker.nextNode())) { nodes.push([node, seen.length]); seen += node.data; }
        const at = seen.indexOf(text), end = at + text.length, range = document.createRange();
        for (const [n, off] of nodes) {
            if (at >= off && at <= off + n.data.length) { range.setStart(n, at - off); break; }
        }
        for (const [n, off] of nodes) {
            if (end >= off && end <= off + n.data.length) { range.setEnd(n, end - off); }
        }
        const sel = window.getSelection(); sel.removeAllRanges(); sel.addRange(range);
        doc.dispatchEvent(new MouseEvent("mouseup", {bubbles: true}));
    }""", text)


def test_a_reviewer_keeps_moves_a_span_and_drops_in_the_browser(chromium, review):
    server = Server(review["reports"], free_port(), ("--review", str(review["path"]))).start()
    try:
        page = chromium.new_page(viewport={"width": 1300, "height": 1000})
        seen = watched(page)
        page.clock.install()  # the page's clock, moved on by the test: reading times exact to the test's steps
        page.goto(server.url + "/review/gen")
        page.fill("#reviewer-name", "ana")
        with page.expect_navigation():  # the form's GET: the queue's page, its script run before a verdict is given
            page.click("#who button")
        # the doubted row first, its question as text, its note shown
        assert page.locator("#item").get_attribute("data-id") == "g0002"
        assert page.locator("#question").input_value() == "When was the snapshot <b>created</b>?"
        assert "transcript" in page.locator("#notes").inner_text()
        page.clock.fast_forward(40_000)  # read for 40 s
        page.click(".choices button[data-verdict='drop']")
        with page.expect_navigation():
            page.click("#save")
        assert page.locator("#item").get_attribute("data-id") == "g0003"
        part = "Snapshots are kept for 30 days unless the forget command removes them earlier."
        select(page, part)
        assert page.locator(".choices button[data-verdict='fix']").get_attribute("aria-pressed") == "true"
        assert page.locator("#reference").input_value() == part  # it was the old span's text: it follows
        with page.expect_navigation():
            page.click("#save")
        assert page.locator("#item").get_attribute("data-id") == "g0001"
        hide = "h => { Object.defineProperty(document, 'hidden', {value: h, configurable: true}); " \
               "document.dispatchEvent(new Event('visibilitychange')); }"
        page.evaluate(hide, True)
        page.clock.fast_forward(600_000)  # ten minutes in another tab: not reading
        page.evaluate(hide, False)
        page.clock.fast_forward(5_000)
        page.click(".choices button[data-verdict='keep']")
        with page.expect_navigation():
            page.click("#save")
        assert "1 kept · 1 fixed · 1 dropped · 1 unreviewed" in page.locator("#counts").inner_text()
        assert seen == {"dialogs": [], "errors": [], "elsewhere": []}
    finally:
        server.kill()
    rows = [json.loads(x) for x in copy_paths(review["path"])[0].read_text(encoding="utf-8").splitlines()]
    assert [(r["id"], r.get("review", {}).get("verdict")) for r in rows] == [("g0001", "keep"), ("g0003", "fix"),
                                                                           ("g0004", None)]
    start = POLICY.index(part)
    assert rows[1]["references"][0] == {"source": "backup.md", "content": part, "start_index": start,
                                        "end_index": start + len(part)}
    assert rows[1]["reference_answer"] == part and rows[1]["review"]["by"] == "ana"
    took = {k: v["seconds"] for k, v in ReviewStore(review["reports"]).verdicts(str(review["path"].resolve())).items()}
    assert 40 <= took["g0002"] < 70 and took["g0003"] < 30 and 5 <= took["g0001"] < 35  # real time runs on beside


def test_a_reviewer_gives_verdicts_by_keys_and_letters_typed_into_a_field_stay_text(chromium, review):
    pad = "".join(f"Line {i} of a long introduction.\n" for i in range(80)) + "\n"  # the span far down its box
    (review["kb"] / "backup.md").write_text(pad + POLICY, encoding="utf-8")
    for row in review["rows"]:
        for ref in row["references"]:
            if ref["source"] == "backup.md":
                ref["start_index"] += len(pad)
                ref["end_index"] += len(pad)
    review["path"].write_text("".join(json.dumps(r) + "\n" for r in review["rows"]), encoding="utf-8")
    server = Server(review["reports"], free_port(), ("--review", str(review["path"]))).start()
    try:
        page = chromium.new_page(viewport={"width": 1300, "height": 1000})
        seen = watched(page)
        page.goto(server.url + "/review/gen?reviewer=ana")
        assert page.locator("#item").get_attribute("data-id") == "g0002"
        box, span = page.locator("#doc").bounding_box(), page.locator("#span").bounding_box()
        assert box["y"] <= span["y"] and span["y"] + span["height"] <= box["y"] + box["height"]  # in view
        page.keyboard.press("Enter")  # no verdict yet: nothing is saved
        assert page.locator("#item").get_attribute("data-id") == "g0002" and page.locator("#save").is_disabled()
        page.keyboard.press("d")
        assert page.locator(".choices button[data-verdict='drop']").get_attribute("aria-pressed") == "true"
        with page.expect_navigation():
            page.keyboard.press("Enter")
        assert page.locator("#item").get_attribute("data-id") == "g0003"
        page.keyboard.press("f")  # the question has the focus: what follows is its text, "k" and "d" included
        page.keyboard.type(" (kept, or deleted?)")
        assert page.locator(".choices button[data-verdict='fix']").get_attribute("aria-pressed") == "true"
        with page.expect_navigation():
            page.keyboard.press("Control+Enter")
        assert page.locator("#item").get_attribute("data-id") == "g0001"
        page.click("#note")
        page.keyboard.type("dk")
        page.keyboard.press("Enter")  # a new line in the note, no verdict chosen, nothing saved
        assert page.locator("#note").input_value() == "dk\n" and page.locator("#save").is_disabled()
        page.evaluate("document.activeElement.blur()")
        page.keyboard.press("k")
        with page.expect_navigation():
            page.keyboard.press("Enter")
        assert "1 kept · 1 fixed · 1 dropped · 1 unreviewed" in page.locator("#counts").inner_text()
        assert page.locator("#keys").inner_text().startswith("keys: k keep · d drop · f edit the question")
        assert seen == {"dialogs": [], "errors": [], "elsewhere": []}
    finally:
        server.kill()
    rows = {r["id"]: r for r in map(json.loads, copy_paths(review["path"])[0].read_text(encoding="utf-8").splitlines())}
    assert sorted(rows) == ["g0001", "g0003", "g0004"]  # g0002 dropped
    assert rows["g0003"]["question"] == "How long are snapshots kept? (kept, or deleted?)"
    assert rows["g0003"]["review"]["verdict"] == "fix" and rows["g0001"]["review"]["verdict"] == "keep"
    assert rows["g0001"]["review"]["note"] == "dk\n" and "review" not in rows["g0004"]
