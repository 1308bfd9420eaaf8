"""``python -m tfest_kit.legacy [--report] [--tf1-package NAME]… SCRIPT.py | -m MODULE …``."""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Sequence
from typing import Optional

USAGE = """\
usage: python -m tfest_kit.legacy [--report] [--tf1-package NAME]... SCRIPT.py [script flags...]
       python -m tfest_kit.legacy [--report] [--tf1-package NAME]... -m MODULE [script flags...]

Runs a TF1-era TensorFlow script unchanged on TensorFlow 2: `import tensorflow as tf` (and
`from tensorflow.keras.optimizers import Adam`, `from tensorflow.train import ...`, ...) in
user code sees tf.compat.v1 plus tf.contrib (tpu, cluster_resolver, data, predictor, training,
metrics, lookup, rnn, framework, layers, slim, estimator, distribute, crf, seq2seq, opt, summary,
compiler, learn's constants, preprocessing and MNIST reader) and the tutorials' MNIST
input_data; the other tf.contrib modules and names TF 1.15 had import, and their first use
raises an error naming what replaces them;
TPUEstimator and the tf.tpu functions fall back to CPU/GPU without a TPU.  User code is the
script and the modules it imports from the script's directory, the current directory and
PYTHONPATH entries (run from
your project root, or put it on PYTHONPATH, so that `from mylib import model` gets TF1 too);
libraries in site-packages and the standard library keep the real TensorFlow 2 (but for
packages named with --tf1-package).

runner options (before SCRIPT.py / -m MODULE):
  -m MODULE   run a module of your project as `python -m MODULE` would (e.g. scripts.train);
              the current directory goes first on sys.path; -m pytest (your project's
              tests) runs with --assert=plain unless you name an --assert mode
  --report    first, list the tf.contrib names the script's project (the .py files under its
              directory, or under the current one for -m) reaches and the runner refuses;
              at the end, the TF1 symbols the script asked for and did not get, then those
              it used, where they live in TensorFlow 2 and the library behind each
  --tf1-package NAME
              hand the TF1 namespace to the installed package NAME too (a TF1-era library
              in site-packages, imported as NAME); repeat for several
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
    tf1_packages = []
    while args and args[0].startswith("-"):
        option = args.pop(0)
        if option in ("-h", "--help"):
            print(USAGE, end="")
            return 0
        if option == "--report":
            report = True
        elif option == "--tf1-package" or option.startswith("--tf1-package="):
            name = option.partition("=")[2] if "=" in option else (args.pop(0) if args else "")
            if not name.isidentifier():
                print(
                    f"{USAGE}\nerror: --tf1-package needs the top-level import name of an "
                    f"installed package (e.g. --tf1-package mytf1lib). Got: {name!r}",
                    file=sys.stderr,
                )
                return 2
            if importlib.util.find_spec(name) is None:  # a misspelt name changed nothing
                print(
                    f"warning: --tf1-package {name}: no installed package has that name",
                    file=sys.stderr,
                )
            tf1_packages.append(name)
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

    if report and module is not None:
        _print_refused(os.getcwd())
    elif report and os.path.isfile(args[0]):  # else run() names the missing script
        _print_refused(os.path.dirname(os.path.realpath(args[0])))
    try:
        if module is not None:
            return run_module(module, args, report=report, tf1_packages=tf1_packages)
        script, *script_args = args
        return run(script, script_args, report=report, tf1_packages=tf1_packages)
    except ScriptNotFoundError as e:  # the script's own errors keep their traceback
        print(f"error: {e}", file=sys.stderr)
        return 2


def _print_refused(project: str) -> None:
    """Prints, before the script runs, the tf.contrib names its project reaches and we refuse."""
    from tfest_kit.legacy._contrib import build_contrib
    from tfest_kit.legacy._importer import served_libraries
    from tfest_kit.legacy._refused import refused_in_project
    from tfest_kit.legacy._shim import Report

    with served_libraries():  # the scan imports tf_slim: as the script will get it
        refused = refused_in_project(project, build_contrib(Report()))
    if not refused:
        return
    lines = [
        f"tfest_kit.legacy: the project in {project} reaches {len(refused)} tf.contrib name(s) "
        "the runner does not serve:"
    ]
    width = max(len(f"{name} ({where})") for name, where, _ in refused)
    lines += [f"  {f'{name} ({where})':<{width}}  ->  {hint}" for name, where, hint in refused]
    print("\n".join(lines), flush=True)


if __name__ == "__main__":
    sys.exit(main())
