"""``python -m tfest_kit``: runs :func:`tfest_kit.cli.main` (the commands are in ``cli/``)."""

from __future__ import annotations

import os
import sys

from tfest_kit.cli import main

__all__ = ["main"]


def _main_on_a_pipe() -> int:
    """Runs :func:`main`; a reader that stops early (``| head``) ends it quietly with 141
    (128 + SIGPIPE), as Unix tools end, instead of a BrokenPipeError traceback."""
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
