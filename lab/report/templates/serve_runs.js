// The runs page of lab serve (serve_runs.html): pick runs of one eval set to compare, filter and sort
// the tables, and poll the runs in progress. Served as a file (/static/serve_runs.js): the app's
// Content-Security-Policy runs no inline script.
(function () {
  var picked = [], group = null;
  var button = document.getElementById("compare-button"), count = document.getElementById("picked-count");
  var rows = Array.prototype.slice.call(document.querySelectorAll("tr.run"));
  function paint() {
    rows.forEach(function (r) {
      r.classList.toggle("picked", picked.indexOf(r.dataset.key) >= 0);
      r.classList.toggle("other", group !== null && r.dataset.group !== group);
    });
    button.disabled = picked.length < 2;
    count.textContent = picked.length ? picked.length + " picked: " + picked.join(", ") : "pick two runs or more of one eval set";
  }
  document.addEventListener("change", function (ev) {
    if (!ev.target.classList.contains("pick")) return;
    var row = ev.target.closest("tr.run"), key = row.dataset.key;
    if (ev.target.checked) {
      if (group !== null && row.dataset.group !== group) { ev.target.checked = false; return; }
      group = row.dataset.group; picked.push(key);
    } else {
      picked = picked.filter(function (k) { return k !== key; });
      if (!picked.length) group = null;
    }
    paint();
  });
  button.addEventListener("click", function () {
    window.location.href = "/compare?" + picked.map(function (k) { return "run=" + encodeURIComponent(k); }).join("&");
  });
  var find = document.getElementById("runs-filter"), status = document.getElementById("runs-status");
  function filter() {
    var q = find.value.trim().toLowerCase(), st = status.value;
    rows.forEach(function (r) { r.hidden = (q && r.dataset.text.indexOf(q) < 0) || (st && r.dataset.status !== st); });
  }
  find.addEventListener("input", filter); status.addEventListener("change", filter);
  var collator = new Intl.Collator();
  document.querySelectorAll("table.runs").forEach(function (table) {
    var body = table.tBodies[0];
    table.querySelectorAll("th[data-key]").forEach(function (th) {
      th.addEventListener("click", function () {
        var key = th.dataset.key, asc = !th.classList.contains("asc"), numeric = th.dataset.type === "num";
        table.querySelectorAll("th[data-key]").forEach(function (h) { h.classList.remove("asc", "desc"); });
        th.classList.add(asc ? "asc" : "desc");
        var list = Array.prototype.slice.call(body.rows).map(function (r, i) {
          var v = r.getAttribute("data-" + key);
          return [numeric ? (v === "" || v === null ? null : Number(v)) : String(v || ""), r, i];
        });
        list.sort(function (a, b) {
          var x = a[0], y = b[0];
          if (numeric) {
            if (x === null && y === null) return a[2] - b[2];
            if (x === null) return 1;
            if (y === null) return -1;
            return (asc ? x - y : y - x) || a[2] - b[2];
          }
          return (asc ? collator.compare(x, y) : collator.compare(y, x)) || a[2] - b[2];
        });
        var frag = document.createDocumentFragment();
        list.forEach(function (x) { frag.appendChild(x[1]); });
        body.appendChild(frag);
      });
    });
  });
  var section = document.getElementById("running-section"), tbody = document.querySelector("#running tbody");
  var seen = JSON.parse(document.getElementById("page-data").textContent).running;
  // a status file is written by whoever can write the reports folder: every value becomes a text
  // node, numbers are numbers (never markup, never an attribute built from a string)
  function number(v) { return typeof v === "number" && isFinite(v) ? v : null; }
  function cell(value, cls) {
    var td = document.createElement("td");
    if (cls) td.className = cls;
    if (value !== null && value !== undefined) td.appendChild(document.createTextNode(String(value)));
    return td;
  }
  function row(x) {
    var tr = document.createElement("tr"), done = number(x.done), total = number(x.total);
    tr.dataset.name = String(x.name);
    tr.appendChild(cell(x.name));
    tr.appendChild(cell(x.stage));
    var progress = cell(null), bar = document.createElement("span"), fill = document.createElement("i");
    bar.className = "bar";
    fill.style.width = (total ? Math.max(0, Math.min(100, Math.round(100 * (done || 0) / total))) : 0) + "%";
    bar.appendChild(fill);
    progress.appendChild(bar);
    progress.appendChild(document.createTextNode(" " + (done === null ? "-" : done) + "/" + (total === null ? "-" : total)));
    tr.appendChild(progress);
    tr.appendChild(cell(Math.round(number(x.running_s) || 0) + " s", "num"));
    tr.appendChild(cell(number(x.eta_s) === null ? "-" : Math.round(x.eta_s) + " s", "num"));
    return tr;
  }
  function poll() {
    fetch("/api/running", {credentials: "same-origin"}).then(function (r) { return r.json(); }).then(function (doc) {
      var names = doc.running.map(function (x) { return x.name; });
      if (seen.some(function (n) { return names.indexOf(n) < 0; })) { window.location.reload(); return; }
      seen = names;
      section.hidden = !names.length;
      var frag = document.createDocumentFragment();
      doc.running.forEach(function (x) { frag.appendChild(row(x)); });
      tbody.replaceChildren(frag);
    }).catch(function () {});
  }
  setInterval(poll, 2000);
})();
