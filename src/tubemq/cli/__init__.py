"""The ``tubemq`` command: serve, topic, broker, produce, consume, bench, demo.

Exit status: 0 success, 1 failure (one line on stderr, no traceback for expected errors), 2 usage
error, 130 interrupted by Ctrl-C (after in-flight work was settled and reported).
``main(argv)`` never calls ``sys.exit`` itself so it can be driven from tests and other programs.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence

from .. import __version__
from . import bench, broker, consume, demo, group, produce, serve, topic
from .common import EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, CliError, describe_error, eprint
from .parser import Parser

__all__ = ["main", "build_parser"]

_COMMANDS = (serve, topic, broker, group, produce, consume, bench, demo)

_EPILOG = """\
examples:
  tubemq demo                                   # embedded server, 1M events in and out, summary
  tubemq serve --data-dir ./data                # a local master+broker on 8715/8123, admin on 8080
  tubemq topic create orders --partitions 6     # on the local server
  tubemq produce --topic orders events.jsonl --format jsonl
  tubemq consume --topic orders --group g1 --from earliest --count 10

Without --master the client commands use $TUBEMQ_MASTER or the local default 127.0.0.1:8715.
The admin API (topic commands) is --admin-url, or --admin-port on the host of --master, or
$TUBEMQ_ADMIN_URL; only with no master named at all is it the local default 127.0.0.1:8080.
-v / -vv (logging) go before or after the subcommand.
"""


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="tubemq",
        description="Apache InLong TubeMQ from Python: embedded server, producer, consumer, benchmarks.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"tubemq {__version__}")
    parser.add_argument(
        "-v", "--verbose", action="count", default=0, help="log to stderr (-v info, -vv debug)"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for module in _COMMANDS:
        module.register(sub)
    _verbose_everywhere(parser)
    return parser


def _verbose_everywhere(parser: argparse.ArgumentParser) -> None:
    """Accept ``-v`` after the subcommand too (``tubemq produce -v ...``), counted with the global one.

    A separate destination per level: argparse copies a subparser's namespace over the parent's, so
    sharing ``verbose`` would drop the count given before the subcommand.
    """
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in set(action.choices.values()):
                if not any("-v" in a.option_strings for a in child._actions):
                    child.add_argument("-v", "--verbose", dest="verbose_after", action="count",
                                       default=argparse.SUPPRESS, help="log to stderr (-v info, -vv debug)")
                _verbose_everywhere(child)


def _setup_logging(verbosity: int, command: str) -> None:
    if command == "serve":
        # a foreground server logs like a server: timestamps, INFO for its own listener lines
        logging.basicConfig(level=logging.DEBUG if verbosity > 1 else logging.WARNING,
                            format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        return
    if verbosity <= 0:
        # The outcome is reported by the command itself (one line on failure); the retries and
        # warnings that led to it are for -v, so a failing command stays a one-line answer.
        logging.basicConfig(level=logging.ERROR, format="tubemq: %(levelname)s %(name)s: %(message)s")
        return
    level = logging.INFO if verbosity == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def _hint(exc: BaseException) -> str:
    from ..errors import AuthenticationError, TopicNotDeployedError, TopicNotPublishedError

    if isinstance(exc, AuthenticationError):
        return " (authentication: pass -X auth_user=NAME -X auth_password=SECRET)"
    if isinstance(exc, TopicNotDeployedError | TopicNotPublishedError):
        return " (the topic does not exist: create it with `tubemq topic create NAME`)"
    return ""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(list(argv) if argv is not None else None)
    except SystemExit as exc:  # argparse: --help/--version (0) or a usage error (2)
        return int(exc.code) if isinstance(exc.code, int) else EXIT_USAGE
    args.verbose += getattr(args, "verbose_after", 0)
    args.argv = list(argv) if argv is not None else sys.argv[1:]  # `serve --detach` starts itself again
    _setup_logging(args.verbose, args.command)
    try:
        return int(args.func(args) or EXIT_OK)
    except CliError as exc:
        eprint(f"tubemq {args.command}: {exc.message}")
        if exc.code == EXIT_USAGE:
            eprint(f"try `tubemq {args.command} --help`")
        return exc.code
    except KeyboardInterrupt:
        eprint(f"tubemq {args.command}: interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # `tubemq consume ... | head`: the reader went away; that is not an error of ours.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return EXIT_OK
    except Exception as exc:
        from ..errors import TubeMQError

        if isinstance(exc, TubeMQError | OSError) and args.verbose < 2:
            eprint(f"tubemq {args.command}: {describe_error(exc)}{_hint(exc)}")
            return EXIT_FAILURE
        raise
