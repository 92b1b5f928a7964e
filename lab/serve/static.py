"""What runs in the served pages: only the pages' own script files, never inline script.

The Content-Security-Policy (:data:`CSP`) allows scripts from the app itself alone
(``script-src 'self'``): a script a run's files smuggle into a page (a status file, a name, an
answer) does not run, even where a value escaped its escaping. So a page's script is a file beside
the templates, ``lab/report/templates/NAME.js``, linked as ``<script src="/static/NAME.js">``
(:func:`script`), and the values it needs come in a ``<script type="application/json"
id="page-data">{{ data | tojson }}</script>`` block, which is data and never runs; the script
reads ``JSON.parse(document.getElementById("page-data").textContent)`` and puts values into the
page as text (``textContent``, ``createTextNode``), never as markup. A new page does the same: its
``NAME.js`` is served as soon as the file is there. Styles may stay inline: a style runs no script.
"""

from __future__ import annotations

import re
from pathlib import Path

from starlette.requests import Request
from starlette.responses import Response

from lab.report import html as report_html

#: The policy of every response (see the module).
CSP = ("default-src 'none'; script-src 'self'; style-src 'unsafe-inline'; img-src 'self' data:; "
       "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
#: Where the pages' scripts are: beside the templates that link them.
TEMPLATES = Path(report_html.__file__).parent / "templates"
SCRIPT_NAME = re.compile(r"[A-Za-z0-9_-]+\.js")


def script(request: Request) -> Response:
    """``/static/NAME.js``: ``lab/report/templates/NAME.js``, and nothing else of that folder or
    any other (404)."""
    name = request.path_params["file"]
    path = TEMPLATES / name
    if not SCRIPT_NAME.fullmatch(name) or not path.is_file():
        return Response("not found\n", status_code=404, media_type="text/plain; charset=utf-8")
    return Response(path.read_text(encoding="utf-8"), media_type="text/javascript; charset=utf-8")
