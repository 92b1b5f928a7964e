// Human labels of answers (runs with a judge): "correct / partly correct / wrong" and an optional
// corrected accuracy (1-5) in each answer's detail panel, kept in this browser's localStorage
// under the run and its config fingerprint, so a reload keeps them. The bar (#labels-bar) counts
// them and downloads labels.json for `lab agree`. Detail panels are inserted when a row first
// opens (_table.js) with an empty .hl placeholder (the page carries no controls for panels nobody
// opens), so listeners on the document serve them all, and a placeholder gets its controls and
// the stored marks when it appears. No server: nothing leaves the page but the downloaded file.
(function () {
  var bar = document.getElementById("labels-bar");
  if (!bar) return;
  var run = bar.dataset.run, fingerprint = bar.dataset.fingerprint, total = Number(bar.dataset.total);
  var key = "lab-labels:" + run + ":" + fingerprint;
  var store = null, labels = Object.create(null);  // no prototype: any question id is a plain key
  try {
    store = window.localStorage;
    var saved = JSON.parse(store.getItem(key) || "{}") || {};
    Object.keys(saved).forEach(function (id) { labels[id] = saved[id]; });
  } catch (e) {  // storage off for files (kept in the page only), or a damaged entry (started afresh)
    if (!(e instanceof SyntaxError)) store = null;
  }
  var ids = Array.prototype.slice.call(document.querySelectorAll("#questions tr.qrow"))
    .sort(function (a, b) { return a.dataset.i - b.dataset.i; })
    .map(function (row) { return row.dataset.id; });
  var countNode = document.getElementById("labels-count"), download = document.getElementById("labels-download");

  function count() {
    var n = ids.filter(function (id) { return labels[id]; }).length;
    countNode.textContent = n + " of " + total + " answers labelled" +
      (store ? "" : " (this browser keeps no storage for files: download the labels before closing the page)");
    download.disabled = n === 0;
  }
  function save() {
    if (store) {
      try { store.setItem(key, JSON.stringify(labels)); } catch (e) { store = null; }
    }
    count();
  }
  var controls = '<b>Your label:</b> <button type="button" data-label="correct">correct</button>' +
    '<button type="button" data-label="partly">partly correct</button>' +
    '<button type="button" data-label="wrong">wrong</button> <label class="meta">accuracy ' +
    '<input type="number" min="1" max="5" step="1" placeholder="1-5" ' +
    'title="optional: the accuracy you would give (1-5)"></label>';
  function paint(box) {
    if (!box.firstChild) box.innerHTML = controls;
    var mark = labels[box.dataset.qid] || null;
    box.querySelectorAll("button[data-label]").forEach(function (b) {
      b.setAttribute("aria-pressed", String(mark !== null && mark.label === b.dataset.label));
    });
    var input = box.querySelector("input");
    input.disabled = mark === null;
    var value = mark !== null && mark.accuracy !== null ? String(mark.accuracy) : "";
    if (input.value !== value && document.activeElement !== input) input.value = value;
  }
  function paintAll() { document.querySelectorAll("#questions .hl[data-qid]").forEach(paint); }

  document.addEventListener("click", function (ev) {
    var button = ev.target.closest(".hl button[data-label]");
    if (button) {  // the chosen label; choosing it again takes the mark away
      var box = button.closest(".hl"), id = box.dataset.qid, mark = labels[id];
      if (mark && mark.label === button.dataset.label) delete labels[id];
      else labels[id] = {label: button.dataset.label, accuracy: mark ? mark.accuracy : null};
      save();
      paint(box);
    } else if (ev.target.closest("#questions tr.qrow")) {
      paintAll();  // runs after _table.js (on the table body) has filled the panel
    }
  });
  document.addEventListener("input", function (ev) {
    var input = ev.target.closest(".hl input");
    if (!input) return;
    var mark = labels[input.closest(".hl").dataset.qid];
    if (!mark) return;
    var text = input.value.trim(), value = Number(text);
    var ok = !input.validity.badInput && (text === "" || (Number.isInteger(value) && value >= 1 && value <= 5));
    input.setCustomValidity(ok ? "" : "an integer from 1 to 5");
    if (!ok) return;
    mark.accuracy = text === "" ? null : value;
    save();
  });
  download.addEventListener("click", function () {
    // no prototype here either: in a plain object, labels["__proto__"] = x sets the prototype, and the
    // label of a question whose id is "__proto__" would silently be left out of the file
    var doc = {format: "lab-labels-v1", run: run, fingerprint: fingerprint, labels: Object.create(null)};
    ids.forEach(function (id) { if (labels[id]) doc.labels[id] = labels[id]; });
    var link = document.createElement("a");
    link.href = URL.createObjectURL(new Blob([JSON.stringify(doc, null, 2) + "\n"], {type: "application/json"}));
    link.download = "labels.json";
    document.body.appendChild(link);
    link.click();
    link.remove();
    setTimeout(function () { URL.revokeObjectURL(link.href); }, 1000);
  });
  count();
})();
