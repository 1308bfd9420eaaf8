"""``python -m tfest_kit``: runs :func:`tfest_kit.cli.main` (the commands are in ``cli/``)."""

from tfest_kit.cli import main

__all__ = ["main"]

if __name__ == "__main__":
    raise SystemExit(main())
