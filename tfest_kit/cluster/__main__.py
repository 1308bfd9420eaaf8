"""``python -m tfest_kit.cluster``: runs :func:`tfest_kit.cluster.launcher.main`."""

from tfest_kit.cluster.launcher import main

if __name__ == "__main__":
    raise SystemExit(main())
