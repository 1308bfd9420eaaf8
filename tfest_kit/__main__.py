"""The ``python -m tfest_kit`` command line.

Each subcommand lives in its own module ``tfest_kit/_cli_<name>.py`` exposing
``add_parser(subparsers) -> argparse.ArgumentParser`` (which sets ``func=run`` as a default)
and ``run(args) -> int`` (the exit code). Modules are found by that file name, so adding a
command is adding a file; nothing here needs editing.

Example:

    python -m tfest_kit signature model_dir/export/best
    python -m tfest_kit predict model_dir/export/best --json request.json
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys
from collections.abc import Sequence
from typing import Optional

import tfest_kit

__all__ = ["build_parser", "main", "command_modules"]

_PREFIX = "_cli_"


def command_modules(only: Optional[Sequence[str]] = None) -> list:
    """Imports and returns every ``tfest_kit._cli_*`` module, sorted by command name.

    A command is a module ``tfest_kit/_cli_NAME.py`` with ``add_parser(subparsers)`` and
    ``run(args) -> int``; it is found here without being registered anywhere else.

    Args:
      only: command names to import; default: all.

    Example:

        [m.__name__ for m in command_modules()]   # ['tfest_kit._cli_doctor', ...]
    """
    names = sorted(
        info.name
        for info in pkgutil.iter_modules(tfest_kit.__path__)
        if info.name.startswith(_PREFIX) and (only is None or info.name[len(_PREFIX) :] in only)
    )
    return [importlib.import_module(f"tfest_kit.{name}") for name in names]


def build_parser(only: Optional[Sequence[str]] = None) -> argparse.ArgumentParser:
    """Returns the top-level parser with one subparser per command module (or ``only`` these).

    Example:

        args = build_parser().parse_args(["signature", "/tmp/run/export/best"])
    """
    parser = argparse.ArgumentParser(
        prog="python -m tfest_kit",
        description="tfest_kit command line: serve, inspect and check Estimator models.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in command_modules(only):
        module.add_parser(subparsers)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Parses ``argv`` (default ``sys.argv[1:]``), runs the command, returns its exit code.

    Example:

        exit_code = main(["doctor"])   # as `python -m tfest_kit doctor`
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        parser = build_parser()
    except ImportError:
        # TensorFlow is missing, broken or unsupported: the other commands need it, and doctor
        # is the one that says what to install.
        if argv[:1] != ["doctor"]:
            raise
        parser = build_parser(only=["doctor"])
    args = parser.parse_args(argv)
    return int(args.func(args) or 0)


def _main_on_a_pipe() -> int:
    """Runs :func:`main` for ``python -m``: a reader that stops early (``| head``) ends it
    quietly with 141 (128 + SIGPIPE), as Unix tools end, instead of a BrokenPipeError
    traceback."""
    try:
        try:
            return main()
        finally:  # also after --help's SystemExit; the last lines may be the ones that break
            sys.stdout.flush()
    except BrokenPipeError:
        # Python flushes stdout again at exit; pointed at /dev/null, that flush cannot fail.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(_main_on_a_pipe())
