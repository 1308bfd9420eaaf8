"""The ``python -m tfest_kit`` command line: one module per command, listed in ``COMMANDS``.

Each has ``add_parser(subparsers)`` (setting ``func=run``) and ``run(args) -> int``.
"""

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import Optional

__all__ = ["COMMANDS", "build_parser", "main"]

# Imported when the parser is built; doctor must run where TensorFlow is missing or broken.
COMMANDS = {n: f"tfest_kit.cli.{n}" for n in "doctor inspect plot predict signature".split()}


def build_parser(only: Optional[Sequence[str]] = None) -> argparse.ArgumentParser:
    """Returns the top-level parser with one subparser per command (or ``only`` these).

    Example:

        args = build_parser().parse_args(["signature", "/tmp/run/export/best"])
    """
    parser = argparse.ArgumentParser(
        prog="python -m tfest_kit",
        description="tfest_kit command line: serve, inspect and check Estimator models.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in sorted(only or COMMANDS):
        importlib.import_module(COMMANDS[name]).add_parser(subparsers)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Parses ``argv`` (default ``sys.argv[1:]``), runs the command, returns its exit code.

    Example:

        exit_code = main(["doctor"])   # as `python -m tfest_kit doctor`
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        parser = build_parser()
    except ImportError:  # TensorFlow is missing, broken or unsupported: doctor says the fix
        if argv[:1] != ["doctor"]:
            raise
        parser = build_parser(only=["doctor"])
    args = parser.parse_args(argv)
    return int(args.func(args) or 0)


def _subparser(subparsers, run, help: str) -> argparse.ArgumentParser:
    """Adds the command of ``run``'s module, described by its docstring's second paragraph."""
    module = sys.modules[run.__module__]
    name, description = module.__name__.rpartition(".")[2], module.__doc__.split("\n\n")[1]
    parser = subparsers.add_parser(name, help=help, description=description)
    parser.set_defaults(func=run)
    return parser
