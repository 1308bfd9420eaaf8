"""``python -m tfest_kit.legacy [--report] (SCRIPT.py | -m MODULE) [script flags…]``."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Optional

USAGE = """\
usage: python -m tfest_kit.legacy [--report] SCRIPT.py [script flags...]
       python -m tfest_kit.legacy [--report] -m MODULE [script flags...]

Runs a TF1-era TensorFlow script unchanged on TensorFlow 2.15: `import tensorflow as tf` (and
`from tensorflow.keras.optimizers import Adam`, `from tensorflow.train import ...`, ...) in
user code sees tf.compat.v1 plus tf.contrib.{tpu, cluster_resolver, data, layers.layer_norm};
TPUEstimator falls back to CPU/GPU without a TPU.  User code is the script and the modules it
imports from the script's directory, the current directory and PYTHONPATH entries (run from
your project root, or put it on PYTHONPATH, so that `from mylib import model` gets TF1 too);
libraries in site-packages and the standard library keep the real TensorFlow 2.

runner options (before SCRIPT.py / -m MODULE):
  -m MODULE   run a module of your project as `python -m MODULE` would (e.g. scripts.train);
              the current directory goes first on sys.path
  --report    at the end, list the TF1 symbols the script asked for and did not get, then
              those it used and where they live in TF 2.15
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
    module = None
    while args and args[0].startswith("-"):
        option = args.pop(0)
        if option in ("-h", "--help"):
            print(USAGE, end="")
            return 0
        if option == "--report":
            report = True
        elif option == "-m":
            if not args:
                print(f"{USAGE}\nerror: -m needs a MODULE (e.g. scripts.train)", file=sys.stderr)
                return 2
            module = args.pop(0)
            break  # as with `python -m`, everything after MODULE is the module's
        else:
            print(
                f"{USAGE}\nerror: unknown runner option {option!r} (script flags go after "
                "SCRIPT.py)",
                file=sys.stderr,
            )
            return 2
    if module is None and not args:
        print(f"{USAGE}\nerror: SCRIPT.py is required (or -m MODULE)", file=sys.stderr)
        return 2
    from tfest_kit.legacy._runner import ScriptNotFoundError, run, run_module

    try:
        if module is not None:
            return run_module(module, args, report=report)
        script, *script_args = args
        return run(script, script_args, report=report)
    except ScriptNotFoundError as e:  # the script's own errors keep their traceback
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
