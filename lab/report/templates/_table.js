// Sortable, filterable question table: rows come in pairs (summary row, detail row).
(function () {
  function num(v) { return v === "" || v === undefined ? null : Number(v); }
  document.querySelectorAll("table.sortable").forEach(function (table) {
    var body = table.tBodies[0];
    function pairs() {
      var out = [];
      body.querySelectorAll("tr.qrow").forEach(function (row) { out.push([row, row.nextElementSibling]); });
      return out;
    }
    table.querySelectorAll("th[data-key]").forEach(function (th) {
      th.addEventListener("click", function () {
        var key = th.dataset.key, asc = !th.classList.contains("asc");
        table.querySelectorAll("th[data-key]").forEach(function (h) { h.classList.remove("asc", "desc"); });
        th.classList.add(asc ? "asc" : "desc");
        var numeric = th.dataset.type === "num";
        var list = pairs();
        list.sort(function (a, b) {
          var x = a[0].dataset[key], y = b[0].dataset[key];
          if (numeric) {
            x = num(x); y = num(y);
            if (x === null && y === null) return 0;
            if (x === null) return 1;
            if (y === null) return -1;
            return asc ? x - y : y - x;
          }
          return asc ? String(x).localeCompare(String(y)) : String(y).localeCompare(String(x));
        });
        list.forEach(function (p) { body.appendChild(p[0]); body.appendChild(p[1]); });
      });
    });
    body.addEventListener("click", function (ev) {
      var row = ev.target.closest("tr.qrow");
      if (!row) return;
      var detail = row.nextElementSibling;
      detail.hidden = !detail.hidden;
      row.classList.toggle("open", !detail.hidden);
    });
  });
  var form = document.getElementById("q-filters");
  if (!form) return;
  function apply() {
    var text = form.querySelector("[name=text]").value.trim().toLowerCase();
    var cat = form.querySelector("[name=category]").value;
    var metric = form.querySelector("[name=metric]").value;
    var op = form.querySelector("[name=op]").value;
    var bound = num(form.querySelector("[name=value]").value);
    var fail = form.querySelector("[name=failure]").value;
    var shown = 0, total = 0;
    document.querySelectorAll("#questions tr.qrow").forEach(function (row) {
      total += 1;
      var ok = true;
      if (text && (row.dataset.id + " " + row.dataset.question).toLowerCase().indexOf(text) < 0) ok = false;
      if (cat && row.dataset.category !== cat) ok = false;
      if (metric && bound !== null) {
        var v = num(row.dataset[metric]);
        if (v === null || (op === "le" ? v > bound : v < bound)) ok = false;
      }
      if (fail) {
        var kinds = row.dataset.failures ? row.dataset.failures.split(" ") : [];
        if (fail === "any" ? kinds.length === 0 : kinds.indexOf(fail) < 0) ok = false;
      }
      row.hidden = !ok;
      if (!ok) { row.nextElementSibling.hidden = true; row.classList.remove("open"); }
      if (ok) shown += 1;
    });
    document.getElementById("q-count").textContent = shown + " of " + total + " questions";
  }
  form.addEventListener("input", apply);
  form.addEventListener("change", apply);
  form.addEventListener("submit", function (ev) { ev.preventDefault(); });
  apply();
})();
