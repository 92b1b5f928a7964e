"""``lab serve``: the reports folder as a web app (reads run files only; no model is loaded)."""

from __future__ import annotations

import argparse
import secrets
from typing import Any

from lab.cli import options
from lab.errors import LabError

DEFAULT_PORT = 8765


def add_parsers(sub: Any, common: Any) -> None:
    srv = sub.add_parser(
        "serve", help="the reports folder as a web app: every run, comparisons, runs in progress, labelling",
        description="Serve the reports folder: every run in one sortable, filterable table grouped by eval set "
                    "(with its headline metrics and intervals), any runs of one eval set compared on the fly "
                    "(the page lab compare writes), runs in progress with their stage and ETA, each run's page, "
                    "and an annotation queue where named annotators label answers one by one (kept in the "
                    "reports folder's labels.sqlite; agreement between annotators and with the judge). Binds to "
                    "127.0.0.1; another --host needs a token (--token, or one is made and printed). Ctrl-C stops "
                    "it; every label given is kept.",
        epilog="example: lab serve\n"
               "         lab serve --host 0.0.0.0 --port 8080    (a team on the network: prints the address with its token)",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    options.reports(srv)
    srv.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})")
    srv.add_argument("--host", default="127.0.0.1",
                     help="address to bind (default 127.0.0.1: this machine only; any other needs a token)")
    srv.add_argument("--token", default=None,
                     help="the token every request must carry when bound beyond this machine (default: one is made "
                          "and printed)")


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from lab.serve.app import create_app, loopback

    if not 1 <= args.port <= 65535:
        raise LabError(f"--port {args.port}: not a port", hint=f"a number from 1 to 65535 (default {DEFAULT_PORT})")
    if args.token is not None and len(args.token) < 16:
        raise LabError("--token: too short to guard anything", hint="16 characters or more (or leave it out: one is made)")
    local = loopback(args.host)
    token = args.token or (None if local else secrets.token_urlsafe(24))
    reports = args.reports
    if not reports.is_dir():
        raise LabError(f"--reports {reports}: no such folder", hint="pass the folder lab run writes into (default reports)")
    app = create_app(reports, token=token, local=local)
    shown = "127.0.0.1" if args.host in ("0.0.0.0", "::") else args.host
    address = f"http://{shown}:{args.port}/" + (f"?token={token}" if token else "")
    print(f"lab serve: {address}  (reports {reports}; labels in {reports / 'labels.sqlite'}; Ctrl-C stops)", flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning", access_log=False)
    return 0


COMMANDS = {"serve": cmd_serve}
