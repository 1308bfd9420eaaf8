"""``python -m tfest_kit``: runs :func:`tfest_kit.cli.main` (the commands are in ``cli/``)."""

import os
import sys

from tfest_kit.cli import main

__all__ = ["main"]

if __name__ == "__main__":
    try:
        try:
            status = main()
        finally:  # also after --help's SystemExit: the last lines may be the ones that break
            sys.stdout.flush()
    except BrokenPipeError:  # a reader that stopped early (`| head`): quiet, as Unix tools end
        # Python flushes stdout again at exit; pointed at /dev/null, that cannot fail.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        status = 141
    sys.exit(status)
