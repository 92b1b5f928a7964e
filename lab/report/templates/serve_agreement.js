// The agreement page of lab serve (serve_agreement.html): assign the run's questions to annotators.
// Served as a file (/static/serve_agreement.js): the app's Content-Security-Policy runs no inline
// script; the page's values come in its #page-data JSON.
(function () {
  var run = JSON.parse(document.getElementById("page-data").textContent).run;
  document.getElementById("assign-button").addEventListener("click", function () {
    var out = document.getElementById("assign-result");
    fetch("/api/assign", {method: "POST", credentials: "same-origin", headers: {"Content-Type": "application/json"},
      body: JSON.stringify({run: run, annotators: document.getElementById("assign-names").value.split(",").map(function (s) { return s.trim(); }).filter(Boolean),
                            overlap: Number(document.getElementById("assign-overlap").value || 0)})})
      .then(function (r) { return r.json(); })
      .then(function (doc) {
        if (doc.error) { out.textContent = doc.error; return; }
        out.textContent = Object.keys(doc.assigned).map(function (k) { return k + " " + doc.assigned[k]; }).join(", ") + " questions";
      });
  });
})();
