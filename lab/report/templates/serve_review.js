// The review queue's page (serve_review.html): a verdict on one eval row, a span moved by selecting text.
(function () {
  var data = JSON.parse(document.getElementById("page-data").textContent);
  var key = data.key, id = data.id, reviewer = data.reviewer;
  var chosen = null, span = null;
  // the reading time sent with the verdict: seconds this row was on screen, paused while the tab is hidden
  var shown = 0, since = document.hidden ? null : Date.now();
  function seconds() { return Math.round((shown + (since === null ? 0 : Date.now() - since)) / 100) / 10; }
  document.addEventListener("visibilitychange", function () {
    if (document.hidden && since !== null) { shown += Date.now() - since; since = null; }
    else if (!document.hidden && since === null) { since = Date.now(); }
  });
  var buttons = document.querySelectorAll(".choices button"), save = document.getElementById("save");
  var question = document.getElementById("question"), reference = document.getElementById("reference");
  var startQ = question.value, startR = reference.value, doc = document.getElementById("doc");
  function plain(t) { return t.toLowerCase().replace(/[^a-z0-9]+/g, ""); }
  // a reference taken from its span (the extractive mode's) follows a moved span until it is edited
  var follows = doc !== null && plain(document.getElementById("span").textContent) === plain(startR);
  function edited() { return question.value !== startQ || reference.value !== startR || span !== null; }
  function paint() {
    buttons.forEach(function (b) { b.setAttribute("aria-pressed", b.dataset.verdict === chosen ? "true" : "false"); });
    save.disabled = !chosen || (chosen === "fix" && !edited());
  }
  buttons.forEach(function (b) { b.addEventListener("click", function () { chosen = b.dataset.verdict; paint(); }); });
  [question, reference].forEach(function (t) { t.addEventListener("input", function () { if (edited()) { chosen = "fix"; } paint(); }); });
  if (doc) {
    // the span a third of the way down its document's box, whatever the 1,500 characters before it fill
    var mark = document.getElementById("span");
    doc.scrollTop += mark.getBoundingClientRect().top - doc.getBoundingClientRect().top - doc.clientHeight / 3;
    doc.addEventListener("mouseup", function () {
      var sel = window.getSelection();
      if (!sel.rangeCount || sel.isCollapsed) { return; }
      var r = sel.getRangeAt(0);
      if (!doc.contains(r.startContainer) || !doc.contains(r.endContainer)) { return; }
      var pre = document.createRange();
      pre.setStart(doc, 0); pre.setEnd(r.startContainer, r.startOffset);
      var text = r.toString(), start = Number(doc.dataset.base) + pre.toString().length;
      if (!text.trim()) { return; }
      span = {source: doc.dataset.source, start: start, end: start + text.length, text: text};
      document.getElementById("span-now").textContent = "new span: " + span.source + " " + span.start + "-" + span.end + " (saved with fix)";
      if (follows && (reference.value === startR || reference.dataset.followed === "1")) {
        reference.value = text.replace(/\s+/g, " ").trim(); reference.dataset.followed = "1";
      }
      chosen = "fix"; paint();
    });
  }
  paint();
  function pick(verdict) { return function () { chosen = verdict; paint(); }; }
  function edit() { question.focus(); question.setSelectionRange(question.value.length, question.value.length); }
  queueKeys({k: pick("keep"), d: pick("drop"), f: edit}, save);  // _queue_keys.js
  save.addEventListener("click", function () {
    save.disabled = true;
    var body = {set: key, id: id, reviewer: reviewer, verdict: chosen, note: document.getElementById("note").value,
      seconds: seconds()};
    if (chosen === "fix") { body.question = question.value; body.reference_answer = reference.value; if (span) { body.span = span; } }
    fetch("/api/review", {method: "POST", credentials: "same-origin", headers: {"Content-Type": "application/json"},
      body: JSON.stringify(body)})
      .then(function (r) { return r.json().then(function (doc) { return [r.ok, doc]; }); })
      .then(function (x) {
        if (!x[0]) { document.getElementById("review-error").textContent = x[1].error + (x[1].fix ? " (" + x[1].fix + ")" : ""); save.disabled = false; return; }
        document.getElementById("saved").textContent = "saved";
        window.location.href = "/review/" + encodeURIComponent(key) + "?reviewer=" + encodeURIComponent(reviewer);
      })
      .catch(function () { document.getElementById("review-error").textContent = "not saved: the server cannot be reached; press again"; save.disabled = false; });
  });
})();
