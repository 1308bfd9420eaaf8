"""``python -m benchmarks``: run every case interleaved and write the results table.

Example:

    python -m benchmarks                          # full run -> benchmarks/results/latest.md
    python -m benchmarks --quick                  # < 3 min smoke run -> results/quick.md
    python -m benchmarks --cases mlp,serving --repeats 5   # -> results/partial.md
    python -m benchmarks --cases mlp --python 2.21=.venv-2.21/bin/python   # this stack and 2.21

Only a run of every case in which no variant failed writes ``latest``; a subset of the cases,
or a run with errors, writes ``partial`` so that it never replaces the last complete results.
Exit status: 1 when any variant raised, returned bad metrics or timed out; 0 otherwise, even
when goals FAIL (a goal not met is a result, not a failure of the run).

``--python LABEL=PATH`` (repeatable) adds a TensorFlow stack: its variants run in processes of
that interpreter, interleaved with this one's (labelled with its TensorFlow's major.minor), and
the report compares each stack with the one of the oldest TensorFlow.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import shutil
import sys
import tempfile
import time
from typing import Optional

from benchmarks import _harness, _stacks

_RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def _case_list(text: str) -> list:
    # Repeated names would run a case twice as often and list its goals twice: keep the first.
    names = list(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    unknown = [n for n in names if n not in _harness.CASE_NAMES]
    if not names or unknown:
        raise argparse.ArgumentTypeError(
            f"unknown case(s) {unknown or text!r}; choose from {', '.join(_harness.CASE_NAMES)}"
        )
    return names


def _repeats(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"--repeats must be an int >= 1. Got: {text!r}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(
            f"--timeout must be a positive, finite number of seconds. Got: {text!r}"
        )
    return value


def _python(text: str) -> tuple:
    label, sep, path = text.partition("=")
    if not sep or not path or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._+-]*", label):
        raise argparse.ArgumentTypeError(
            "--python must be LABEL=PATH, the label letters, digits and . _ + - (e.g. "
            f"2.21=.venv-2.21/bin/python). Got: {text!r}"
        )
    return label, path


def _pythons(parser: argparse.ArgumentParser, given: list) -> dict:
    """{label: versions} of the stacks to run, oldest TensorFlow first; exits 2 on a bad one.

    This interpreter is one of them, under its TensorFlow's major.minor, unless a ``--python``
    takes that label, or it has no TensorFlow and ``--python`` names others.
    """
    stacks = {}
    for label, path in given:
        flag = f"--python {label}={path}"
        if label in stacks:
            parser.error(f"{flag}: the label {label!r} is given twice; one interpreter per label")
        path = os.path.abspath(path)  # children start in the repository root; no realpath: venvs
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            parser.error(f"{flag}: {path} is not an executable file; pass a Python interpreter")
        try:
            versions = _stacks.stack_versions(path)
        except ValueError as e:
            parser.error(f"{flag}: {path} {e}")
        if not versions["tensorflow"]:
            parser.error(
                f"{flag}: {path} has no TensorFlow; pass the python of a project venv "
                "(`make setup STACK=2.21` makes .venv-2.21)"
            )
        stacks[label] = versions
    own = _stacks.stack_versions()
    label = _stacks.stack_label(own)
    if label is None and not stacks:
        parser.error(
            f"{sys.executable} has no TensorFlow; run the benchmarks with a project venv's "
            "python, or name the stacks with --python LABEL=PATH"
        )
    if label is not None and label not in stacks:
        stacks = {label: own, **stacks}
    return dict(sorted(stacks.items(), key=lambda item: _version_key(item[1]["tensorflow"])))


def _version_key(version: str) -> tuple:
    return tuple(int(part) if part.isdigit() else 0 for part in version.split(".")[:3])


def _check_out_dir(parser: argparse.ArgumentParser, out_dir: str) -> None:
    """Creates ``out_dir`` and checks a file can be written there, before a run of minutes."""
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        parser.error(
            f"--out-dir {out_dir!r} is a file, not a directory; pass a directory (one that "
            "does not exist yet is created)"
        )
    try:
        os.makedirs(out_dir, exist_ok=True)
        # A real write, not os.access: access() says yes to root even where writes fail.
        with tempfile.TemporaryFile(dir=out_dir):
            pass
    except OSError as e:
        parser.error(
            f"--out-dir {out_dir!r} cannot be created or written to ({e.strerror or e}); "
            "choose another --out-dir or fix its permissions"
        )


def _stem(args: argparse.Namespace, results: _harness.Results) -> str:
    """The report's file name stem: only a complete, error-free full run replaces latest.*."""
    if args.stem:
        return args.stem
    if args.quick:
        return "quick"
    complete = set(args.cases) == set(_harness.CASE_NAMES) and not results.errors
    return "latest" if complete else "partial"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="Side-by-side benchmarks of tfest_kit, tf.estimator, TPUEstimator and Keras. "
        "Cases run interleaved, each repetition one variant later (A B C, B C A, C A B …), "
        "each (case, variant) in a fresh process.",
    )
    parser.add_argument(
        "--quick", action="store_true", help="fewer steps, one process per repetition (< 3 min)"
    )
    parser.add_argument(
        "--cases",
        type=_case_list,
        default=list(_harness.CASE_NAMES),
        help=f"comma-separated subset of: {', '.join(_harness.CASE_NAMES)}",
    )
    parser.add_argument(
        "--repeats", type=_repeats, default=3, help="repetitions per variant (default 3)"
    )
    parser.add_argument(
        "--out-dir",
        default=_RESULTS,
        help="where <stem>.md and <stem>.json go (default benchmarks/results)",
    )
    parser.add_argument(
        "--stem",
        default=None,
        help="file name stem (default: quick with --quick; latest for a run of every case "
        "without errors; partial otherwise)",
    )
    parser.add_argument(
        "--workdir", default=None, help="scratch directory to keep (default: a temp dir)"
    )
    parser.add_argument(
        "--timeout", type=_seconds, default=900.0, help="seconds per child process (default 900)"
    )
    parser.add_argument(
        "--python",
        type=_python,
        action="append",
        default=[],
        metavar="LABEL=PATH",
        help="also run every variant under this interpreter's TensorFlow stack, labelled LABEL "
        "(repeatable; this interpreter runs too, labelled with its TensorFlow's major.minor); "
        "the report compares each stack with the oldest TensorFlow's",
    )
    return parser


def main(argv: Optional[list] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    _check_out_dir(parser, args.out_dir)
    stacks = _pythons(parser, args.python)
    if args.repeats < 3:
        print(f"note: --repeats {args.repeats} < 3; medians of fewer than 3 runs are fragile")
    start = time.time()
    machine = _harness.machine_info(stacks)
    workdir = args.workdir or tempfile.mkdtemp(prefix="tfest_kit_bench_")
    try:
        results = _harness.run_benchmarks(
            args.cases,
            repeats=args.repeats,
            quick=args.quick,
            workdir=workdir,
            timeout=args.timeout,
            log=lambda line: print(line, flush=True),
            pythons={label: versions["executable"] for label, versions in stacks.items()},
        )
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    goals = [g for name in args.cases for g in _harness.load_case(name).GOALS]
    shown_argv = " ".join(argv if argv is not None else sys.argv[1:])
    settings = {
        "command": f" {shown_argv}" if shown_argv else "",
        "cases": args.cases,
        "repeats": args.repeats,
        "quick": args.quick,
        "stacks": list(stacks),
        "seconds": time.time() - start,
    }
    stem = _stem(args, results)
    md_path, json_path = _harness.write_report(
        results, goals, machine, settings, args.out_dir, stem
    )
    with open(md_path) as f:
        print(f.read())
    print(f"wrote {md_path} and {json_path}")
    if stem == "partial":
        why = "with errors" if results.errors else "of some cases only"
        print(
            f"not latest.*: a run {why} writes partial.*, so latest.* stays the last complete run"
        )
    return 1 if results.errors else 0


if __name__ == "__main__":
    sys.exit(main())
