// The annotation queue of lab serve (serve_label.html): pick a verdict, save it, go on to the next
// answer. Served as a file (/static/serve_label.js): the app's Content-Security-Policy runs no inline
// script; the page's values come in its #page-data JSON.
(function () {
  var data = JSON.parse(document.getElementById("page-data").textContent);
  var run = data.run, id = data.id, annotator = data.annotator, base = data.base, chosen = data.chosen;
  var buttons = document.querySelectorAll(".choices button"), save = document.getElementById("save");
  function paint() {
    buttons.forEach(function (b) { b.setAttribute("aria-pressed", b.dataset.label === chosen ? "true" : "false"); });
    save.disabled = !chosen;
  }
  buttons.forEach(function (b) { b.addEventListener("click", function () { chosen = b.dataset.label; paint(); }); });
  paint();
  function pick(label) { return function () { chosen = label; paint(); }; }
  queueKeys({c: pick("correct"), p: pick("partly"), w: pick("wrong")}, save);  // _queue_keys.js
  save.addEventListener("click", function () {
    save.disabled = true;
    var acc = document.getElementById("accuracy").value;
    fetch("/api/labels", {method: "POST", credentials: "same-origin", headers: {"Content-Type": "application/json"},
      body: JSON.stringify({run: run, id: id, annotator: annotator, label: chosen, accuracy: acc ? Number(acc) : null,
                            note: document.getElementById("note").value})})
      .then(function (r) { return r.json().then(function (doc) { return [r.ok, doc]; }); })
      .then(function (x) {
        if (!x[0]) { document.getElementById("label-error").textContent = x[1].error + (x[1].fix ? " (" + x[1].fix + ")" : ""); save.disabled = false; return; }
        document.getElementById("saved").textContent = "saved";
        window.location.href = base + "/label?annotator=" + encodeURIComponent(annotator);
      })
      .catch(function () { document.getElementById("label-error").textContent = "not saved: the server cannot be reached; press again"; save.disabled = false; });
  });
})();
