"""``lab serve``: the reports folder as a web app (reads run files only; no model is loaded), and
the review queue of the eval sets named by ``--review`` (their documents read by the lab's loader
here, their rows checked by the audit's rules)."""

from __future__ import annotations

import argparse
import json
import re
import secrets
from pathlib import Path
from typing import Any

from lab.cli import options
from lab.errors import DataError, LabError

DEFAULT_PORT = 8765
#: The audit's findings that put a row first in the review queue, with their notes (the others, such
#: as a row without keywords, say nothing against the row).
DOUBTS = {"checks", "answer-check", "spans", "exact", "nowhere", "unsupported", "size", "near", "touching_none"}


def add_parsers(sub: Any, common: Any) -> None:
    srv = sub.add_parser(
        "serve", help="the reports folder as a web app: every run, comparisons, runs in progress, labelling",
        description="Serve the reports folder: every run in one sortable, filterable table grouped by eval set "
                    "(with its headline metrics and intervals), any runs of one eval set compared on the fly "
                    "(the page lab compare writes), runs in progress with their stage and ETA, each run's page, "
                    "and an annotation queue where named annotators label answers one by one (kept in the "
                    "reports folder's labels.sqlite; agreement between annotators and with the judge), and with "
                    "--review a review queue of eval rows (keep, fix or drop each row read against its span; "
                    "the verdicts in labels.sqlite, a reviewed copy EVAL_SET.reviewed.jsonl beside the set). Binds to "
                    "127.0.0.1; another --host needs a token (--token, or one is made and printed). Ctrl-C stops "
                    "it; every label given is kept.",
        epilog="example: lab serve\n"
               "         lab serve --host 0.0.0.0 --port 8080    (a team on the network: prints the address with its token)\n"
               "         lab serve --review restic.jsonl --kb docs/    (review generated rows at /review)\n"
               "         lab serve --review restic.jsonl --config openai    (the rows lab audit --check --config "
               "openai doubted first)",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    options.reports(srv)
    srv.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})")
    srv.add_argument("--host", default="127.0.0.1",
                     help="address to bind (default 127.0.0.1: this machine only; any other needs a token)")
    srv.add_argument("--token", default=None,
                     help="the token every request must carry when bound beyond this machine (default: one is made "
                          "and printed)")
    srv.add_argument("--review", type=Path, action="append", default=[], metavar="EVAL_SET",
                     help="offer this eval set's rows for review at /review (repeat for more sets)")
    srv.add_argument("--kb", type=Path, default=None,
                     help="the knowledge-base folder the --review sets are about (default: the one their "
                          "lab generate sidecar names)")
    srv.add_argument("--llm", metavar="MODEL", help="--review: the model whose answer checks lab generate --llm "
                                                    "MODEL --answer-check left in the cache (default: the local Qwen)")
    srv.add_argument("--config", metavar="NAME", help="--review: loader and LLM from experiments/NAME.yaml, as "
                                                      "lab audit --config NAME read them")
    options.experiments(srv)


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
    review_sets = tuple(_review_set(path, args.kb, i, args) for i, path in enumerate(args.review))
    app = create_app(reports, token=token, local=local, review_sets=review_sets)
    shown = "127.0.0.1" if args.host in ("0.0.0.0", "::") else args.host
    address = f"http://{shown}:{args.port}/" + (f"?token={token}" if token else "")
    print(f"lab serve: {address}  (reports {reports}; labels in {reports / 'labels.sqlite'}; Ctrl-C stops)", flush=True)
    for rs in review_sets:  # "doubted by the rules" is the audit's word for the generator's rules alone
        flagged = sum(1 for r in rs.rows if rs.notes.get(r["id"]))
        print(f"review {rs.path}: {address.split('?')[0]}review/{rs.key}  ({len(rs.rows)} rows, {flagged} with an "
              "audit finding against them, shown first)", flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning", access_log=False)
    return 0


def _review_set(path: Path, kb: Path | None, i: int, args: argparse.Namespace | None = None) -> Any:
    """An eval set offered for review: its rows checked by the loader, its documents read, and the
    audit's rules' notes on each row, with the answer check's where its calls are cached (no model
    is run: the page opens at once). ``args``: ``--config`` and ``--llm``, the loader and the model
    whose checks to read, as ``lab audit`` takes them (default: every format, the local Qwen)."""
    from lab.cli.data import _corpus, _settings
    from lab.evalsets.audit import audit_eval_set
    from lab.evalsets.evalset import load_eval_set
    from lab.report.audit import SECTIONS
    from lab.serve.reviews import ReviewSet

    path = path.expanduser().resolve()
    eval_set = load_eval_set(path, None)
    if path.name.endswith(".reviewed.jsonl"):
        raise DataError(f"--review {path}: a reviewed copy", hint=f"review the set it was made from "
                                                                   f"({path.name.removesuffix('.reviewed.jsonl')}.jsonl)")
    text = path.read_text(encoding="utf-8").removeprefix("\ufeff")
    rows = [json.loads(line) for line in text.split("\n") if line.strip()]
    missing = [r._line for r, raw in zip(eval_set.rows, rows) if not raw.get("id")]
    if missing:
        raise DataError(f"--review {path}: rows without an id (lines {', '.join(map(str, missing[:5]))})",
                        hint="give every row an \"id\" (lab generate writes them)")
    if kb is None:
        sidecar = path.with_suffix(".gen.json")
        named = json.loads(sidecar.read_text(encoding="utf-8")).get("knowledge_base") if sidecar.is_file() else None
        if not named:
            raise DataError(f"--review {path}: which documents is it about?", hint="name them: --kb FOLDER")
        kb = Path(named)
    loader, _, llm = _settings(args or argparse.Namespace(config=None, llm=None))
    corpus = _corpus(kb, loader)
    documents = {d.metadata["source"]: d.text for d in corpus.documents}
    project = args.experiments.resolve().parent if args is not None else Path.cwd()  # as lab audit resolves it
    findings = audit_eval_set(eval_set.rows, documents, source=str(path), literal=corpus.literal,
                              answer_check=_cached_answer_check(documents, corpus.literal, path, llm, project))
    notes: dict[str, list[str]] = {}
    for anchor, (part, listed), title, _ in SECTIONS:
        if anchor not in DOUBTS:
            continue
        for item in findings.get(part, {}).get(listed, []) or []:
            notes.setdefault(item["id"], []).append(f"{title}: {item['detail']}")
    key = re.sub(r"[^A-Za-z0-9._-]+", "-", path.stem).strip("-.") or "set"
    key = key if i == 0 else f"{key}-{i + 1}"
    return ReviewSet(key=key, path=path, rows=rows, documents=documents, notes=notes)


def _cached_answer_check(documents: dict[str, str], literal: dict[str, list], path: Path, llm: Any,
                         project: Path) -> Any:
    """The answer check's verdicts that an earlier ``lab audit --check`` or ``lab generate
    --answer-check`` left in the cache (``llm``'s, with the seed the set at ``path`` was generated
    with), read without running a model: a row they doubt is shown first with its note; None
    where there is no cache."""
    from lab.evalsets.answercheck import model_checks, seed_of
    from lab.models.llm import build_llm
    from lab.models.resolve import resolve_llm
    from lab.paths import cache_dir

    if not (cache_dir() / "llm.sqlite").is_file():
        return None
    try:
        plan = resolve_llm(llm, "check", project)
    except LabError:  # no local model here: the rules' notes alone
        return None
    return model_checks(build_llm(plan, cache_dir()), documents, literal, seed_of(path), cached_only=True)[1]


COMMANDS = {"serve": cmd_serve}
