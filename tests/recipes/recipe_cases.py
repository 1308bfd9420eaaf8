"""Runs one recipe's command line once per case, each in a process forked after one import.

``python tests/recipes/recipe_cases.py RECIPE CASES_JSON OUT_DIR``: imports ``recipes.RECIPE``
(TensorFlow with it, seconds), then for case *i* (``{"args": [...], "env": {...}, "cwd": ...}``)
forks a child that runs the recipe as ``python -m recipes.RECIPE ARGS…`` would, its stdout and
stderr going to ``OUT_DIR/i.out`` / ``i.err`` and its exit status to ``OUT_DIR/i.status``.
Tests of command-line errors (many cases, each ending before any work) pay the import once.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import tempfile
import traceback


def _child(module, case: dict, out: str) -> int:
    with open(out + ".out", "w") as stdout, open(out + ".err", "w") as stderr:
        os.dup2(stdout.fileno(), 1)
        os.dup2(stderr.fileno(), 2)
    os.environ.update(case.get("env", {}))
    tempfile.tempdir = None  # read TMPDIR again, as a new process would
    os.chdir(case.get("cwd") or os.getcwd())
    sys.argv = [module.__file__, *case["args"]]
    sys.modules["__main__"] = module  # absl's help and the recipes' Ctrl-C line read it
    from recipes import _flags

    try:
        _flags.run(module.main)
        return 0
    except SystemExit as e:  # as the interpreter ends on one
        if e.code is None or isinstance(e.code, int):
            return e.code or 0
        print(e.code, file=sys.stderr)
        return 1
    except BaseException:
        traceback.print_exc()
        return 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()


def main(recipe: str, cases: list, out_dir: str) -> None:
    module = importlib.import_module(f"recipes.{recipe}")
    for i, case in enumerate(cases):
        out = os.path.join(out_dir, str(i))
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            os._exit(_child(module, case, out))
        _, status = os.waitpid(pid, 0)
        with open(out + ".status", "w") as f:
            f.write(str(os.waitstatus_to_exitcode(status)))


if __name__ == "__main__":
    main(sys.argv[1], json.loads(sys.argv[2]), sys.argv[3])
