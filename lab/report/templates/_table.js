// Sortable, filterable question table: rows come in pairs (summary row, detail row). A detail
// row is filled on first opening from the page's embedded JSON (#q-details, HTML escaped when the
// page was rendered), so a page of 10,000 questions builds no DOM for details nobody opens; and
// the matching rows are shown a page at a time (#q-more), so sorting lays out only those.
(function () {
  function num(v) { return v === "" || v === undefined ? null : Number(v); }
  var detailsNode = document.getElementById("q-details"), details = null;
  function detailHtml(i) {
    if (!detailsNode) return null;
    if (details === null) details = JSON.parse(detailsNode.textContent);
    return details[i];
  }
  document.querySelectorAll("table.sortable").forEach(function (table) {
    var body = table.tBodies[0];
    var rows = [];  // [summary row, detail row, original position], cached once
    body.querySelectorAll("tr.qrow").forEach(function (row, i) { rows.push([row, row.nextElementSibling, i]); });
    var collator = new Intl.Collator();
    table.querySelectorAll("th[data-key]").forEach(function (th) {
      th.addEventListener("click", function () {
        var key = th.dataset.key, asc = !th.classList.contains("asc");
        table.querySelectorAll("th[data-key]").forEach(function (h) { h.classList.remove("asc", "desc"); });
        th.classList.add(asc ? "asc" : "desc");
        var numeric = th.dataset.type === "num";
        var keyed = rows.map(function (p) {
          var v = p[0].dataset[key];
          return [numeric ? num(v) : String(v), p];
        });
        keyed.sort(function (a, b) {
          var x = a[0], y = b[0];
          if (numeric) {
            if (x === null && y === null) return a[1][2] - b[1][2];
            if (x === null) return 1;
            if (y === null) return -1;
            return (asc ? x - y : y - x) || a[1][2] - b[1][2];
          }
          return (asc ? collator.compare(x, y) : collator.compare(y, x)) || a[1][2] - b[1][2];
        });
        var frag = document.createDocumentFragment();
        keyed.forEach(function (k) { frag.appendChild(k[1][0]); frag.appendChild(k[1][1]); });
        body.appendChild(frag);
        if (table.id === "questions") paint();
      });
    });
    body.addEventListener("click", function (ev) {
      var row = ev.target.closest("tr.qrow");
      if (!row) return;
      var detail = row.nextElementSibling, cell = detail.firstElementChild;
      if (cell && !cell.hasChildNodes() && row.dataset.i !== undefined) {
        var html = detailHtml(Number(row.dataset.i));
        if (html) cell.innerHTML = html;
      }
      detail.hidden = !detail.hidden;
      row.classList.toggle("open", !detail.hidden);
    });
  });
  var form = document.getElementById("q-filters");
  if (!form) return;
  var qrows = Array.prototype.slice.call(document.querySelectorAll("#questions tr.qrow"));
  var haystack = qrows.map(function (row) { return (row.dataset.id + " " + row.dataset.question).toLowerCase(); });
  var matches = qrows.map(function () { return true; });
  var pageRows = detailsNode ? Number(detailsNode.dataset.page) || 500 : 500, limit = pageRows, shown = 0;
  var more = document.getElementById("q-more");
  var lostSel = form.querySelector("[name=lost]");  // the loss funnel's stage filter, where the run has one
  function paint() {  // the first `limit` matching rows, in the table's current order
    var seen = 0;
    document.querySelectorAll("#questions tr.qrow").forEach(function (row) {
      var show = matches[Number(row.dataset.i)] && seen < limit;
      if (matches[Number(row.dataset.i)]) seen += 1;
      if (row.hidden !== !show) row.hidden = !show;
      if (!show && !row.nextElementSibling.hidden) { row.nextElementSibling.hidden = true; row.classList.remove("open"); }
    });
    if (more) {
      more.hidden = shown <= limit;
      document.getElementById("q-limit").textContent = Math.min(limit, shown);
    }
  }
  if (more) {
    document.getElementById("q-more-button").addEventListener("click", function () { limit += pageRows; paint(); });
    document.getElementById("q-all-button").addEventListener("click", function () { limit = qrows.length; paint(); });
  }
  function apply() {
    var text = form.querySelector("[name=text]").value.trim().toLowerCase();
    var cat = form.querySelector("[name=category]").value;
    var metric = form.querySelector("[name=metric]").value;
    var op = form.querySelector("[name=op]").value;
    var bound = num(form.querySelector("[name=value]").value);
    var fail = form.querySelector("[name=failure]").value;
    var lost = lostSel ? lostSel.value : "";
    shown = 0;
    qrows.forEach(function (row, i) {
      var ok = true;
      if (text && haystack[i].indexOf(text) < 0) ok = false;
      if (cat && row.dataset.category !== cat) ok = false;
      if (metric && bound !== null) {
        var v = num(row.dataset[metric]);
        if (v === null || (op === "le" ? v > bound : v < bound)) ok = false;
      }
      if (fail) {
        var kinds = row.dataset.failures ? row.dataset.failures.split(" ") : [];
        if (fail === "any" ? kinds.length === 0 : kinds.indexOf(fail) < 0) ok = false;
      }
      if (lost && row.dataset.lost !== lost) ok = false;
      matches[Number(row.dataset.i)] = ok;
      if (ok) shown += 1;
    });
    limit = pageRows;
    paint();
    document.getElementById("q-count").textContent = shown + " of " + qrows.length + " questions";
  }
  form.addEventListener("input", apply);
  form.addEventListener("change", apply);
  form.addEventListener("submit", function (ev) { ev.preventDefault(); });
  // a funnel bar's segment shows its questions: that stage, that category
  document.querySelectorAll("#funnel [data-stage]").forEach(function (seg) {
    seg.addEventListener("click", function () {
      if (lostSel) lostSel.value = seg.dataset.stage;
      form.querySelector("[name=category]").value = seg.dataset.category || "";
      apply();
      document.getElementById("questions").scrollIntoView();
    });
  });
  apply();
})();
