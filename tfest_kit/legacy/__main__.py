"""``python -m tfest_kit.legacy [--report] SCRIPT.py [script flags…]``."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Optional

USAGE = """\
usage: python -m tfest_kit.legacy [--report] SCRIPT.py [script flags...]

Runs a TF1-era TensorFlow script unchanged on TensorFlow 2.15: `import tensorflow as tf` in the
script and in modules from its directory sees tf.compat.v1 plus tf.contrib.{tpu,
cluster_resolver, data, layers.layer_norm}; TPUEstimator falls back to CPU/GPU without a TPU.

runner options (before SCRIPT.py):
  --report    at the end, list the TF1 symbols the script used and where they live in TF 2.15
  -h, --help  show this message
"""


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Parses the runner's own options, then runs the script with the rest.

    Args:
      argv: command line without the program name; default ``sys.argv[1:]``.

    Returns:
      The exit status: the script's, or 2 for a usage error.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    report = False
    while args and args[0].startswith("-"):
        option = args.pop(0)
        if option in ("-h", "--help"):
            print(USAGE, end="")
            return 0
        if option == "--report":
            report = True
        else:
            print(
                f"{USAGE}\nerror: unknown runner option {option!r} (script flags go after "
                "SCRIPT.py)",
                file=sys.stderr,
            )
            return 2
    if not args:
        print(f"{USAGE}\nerror: SCRIPT.py is required", file=sys.stderr)
        return 2
    script, *script_args = args
    from tfest_kit.legacy._runner import ScriptNotFoundError, run

    try:
        return run(script, script_args, report=report)
    except ScriptNotFoundError as e:  # the script's own errors keep their traceback
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
