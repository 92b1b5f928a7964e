"""The ``lab`` command: the verbs the Makefile uses, each with its parser and its handler.
``lab --help`` lists them; ``lab VERB --help`` shows an example of each (docs/reference/cli.md).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys

from lab.cli import data, decide, experiments, gate, judge, options, reports, serve, track, tune
from lab.errors import LabError
from lab.progress import PrintableStream, printable, setup_logging

# One module per verb group: experiments (run, list, validate, models, ask, sweep, optimize), reports
# (report, compare, show), data (the eval-set verbs), judge, decide (power), gate, track. The verbs
# that build or run pipelines import lab.rag, lab.eval and lab.models inside their handlers.

EPILOG = ("Exit codes: 0 done, 2 bad input (config, data or model; the message says how to fix it), 3 the model "
          "calls failed (lab run: every answer or every judgement, the run is written; lab ask: an answer), "
          "130 interrupted (Ctrl-C), 143 terminated (SIGTERM); finished work is cached either way.")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lab",
        description="An evaluation-driven RAG laboratory: run versioned experiment configs and compare reports.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    common = options.experiments

    experiments.add_parsers(sub, common)
    reports.add_parsers(sub, common)
    data.add_parsers(sub, common)
    judge.add_parsers(sub, common)
    decide.add_parsers(sub, common)
    gate.add_parsers(sub, common)
    track.add_parsers(sub, common)
    tune.add_parsers(sub, common)
    serve.add_parsers(sub, common)
    return parser


#: verb -> handler, one module per verb group
COMMANDS = {**experiments.COMMANDS, **reports.COMMANDS, **data.COMMANDS, **judge.COMMANDS, **decide.COMMANDS, **tune.COMMANDS,
            **gate.COMMANDS, **track.COMMANDS, **serve.COMMANDS}


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra and getattr(args, "question", "") is None and not any(x.startswith("-") for x in extra):
        args.question = " ".join(extra)  # `lab ask NAME --kb DIR "QUESTION"`: the question after the options
    elif extra:
        parser.parse_args(argv)  # argparse's own error for what is left over (exit 2)
    if not args.command:
        parser.print_help()
        return 2
    setup_logging(args.verbose)
    previous = signal.signal(signal.SIGTERM, _terminated)
    stdout, sys.stdout = sys.stdout, PrintableStream(sys.stdout)  # names, descriptions, answers: shown, never obeyed
    try:
        return COMMANDS[args.command](args)
    except LabError as exc:
        print(f"error: {printable(str(exc))}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:  # `lab show x | head`: the reader left; say nothing
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except OSError as exc:  # the machine, not the lab: disk full, permissions, a missing folder
        where = f" ({exc.filename})" if exc.filename and str(exc.filename) not in str(exc.strerror) else ""
        print(printable(f"error: {exc.strerror or exc}{where}\n  fix: check the disk and the folder's permissions; "
                        "finished work is cached"), file=sys.stderr)
        return 2
    except Terminated:
        print("terminated (SIGTERM): finished work is cached; run the same command again to resume", file=sys.stderr)
        return 143
    except KeyboardInterrupt:
        print("interrupted: finished work is cached; run the same command again to resume", file=sys.stderr)
        return 130
    finally:
        sys.stdout = stdout
        signal.signal(signal.SIGTERM, previous)


class Terminated(BaseException):
    """SIGTERM (``timeout``, CI runners, schedulers), raised where the run is, like Ctrl-C: every
    ``finally`` and clean-up runs, temporary folders go, and finished work stays cached."""


def _terminated(signum: int, frame: object) -> None:
    raise Terminated()


if __name__ == "__main__":
    sys.exit(main())
