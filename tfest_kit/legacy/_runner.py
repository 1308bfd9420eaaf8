"""Runs a TF1-era script as ``__main__`` inside the scoped TF1 stand-in."""

from __future__ import annotations

import os
import runpy
import sys
import warnings
from collections.abc import Sequence
from typing import IO, Optional

from tfest_kit import logs
from tfest_kit._errors import TfestKitError
from tfest_kit._tf import tf
from tfest_kit.legacy._importer import Scope
from tfest_kit.legacy._namespace import build_namespace
from tfest_kit.legacy._shim import Report

__all__ = ["run", "enable_tf1_behavior", "ScriptNotFoundError"]


class ScriptNotFoundError(TfestKitError, ValueError):
    """The script to run is not an existing ``.py`` file."""


def enable_tf1_behavior() -> None:
    """Switches the process to the TF1 behaviour legacy scripts assume.

    Both switches are process-wide and cannot be undone once graphs exist, which is why only
    :func:`run` calls this:

    - ``tf.compat.v1.disable_v2_tensorshape()``: ``tensor.shape[-1]`` is a ``Dimension`` with
      ``.value`` (TF2 returns an ``int``, and BERT's ``shape[-1].value`` fails);
    - ``tf.compat.v1.disable_eager_execution()``: module-level ``tf.placeholder`` /
      ``tf.Session`` code works as in TF1.  Estimators build their own graphs either way.
    """
    tf.disable_v2_tensorshape()
    tf.disable_eager_execution()
    # Keras' legacy tf.layers print a UserWarning per call; --report lists them once instead,
    # as tfest_kit.logs.setup() does for TensorFlow's own deprecation warnings.
    warnings.filterwarnings("ignore", message=r"`tf\.layers\.", category=UserWarning)


def _exit_status(exit_: SystemExit) -> int:
    # The same conversion the interpreter applies to an uncaught SystemExit.
    if exit_.code is None:
        return 0
    if isinstance(exit_.code, int):
        return exit_.code
    print(exit_.code, file=sys.stderr)
    return 1


def run(
    script: str,
    argv: Sequence[str] = (),
    *,
    report: bool = False,
    report_stream: Optional[IO[str]] = None,
) -> int:
    """Runs ``script`` as ``__main__`` with ``import tensorflow`` giving the TF1 stand-in.

    The script's directory goes first on ``sys.path`` (as ``python script.py`` would put it),
    ``sys.argv`` is ``[script, *argv]`` so ``tf.app.run()`` / ``absl.app.run()`` parse the
    script's flags, and ``tfest_kit.logs.setup()`` makes each log line (the loss lines too)
    print once, at TF 1.x's default level (warnings; a script that wants INFO lines sets
    ``tf.logging.set_verbosity`` as it did there).  absl flags are process-global: run one
    script per process.

    Args:
      script: path of the ``.py`` file to run.
      argv: the script's command-line flags.
      report: print, once at the end (also when the script fails), which TF1 symbols were
        served by the shim and which came from ``tf.compat.v1``.
      report_stream: where the report goes; default ``sys.stdout``.

    Returns:
      The script's exit status (``tf.app.run`` ends with ``sys.exit``).

    Raises:
      ScriptNotFoundError: (a ``ValueError``) if ``script`` is not an existing ``.py`` file.

    Example:

        from tfest_kit import legacy
        status = legacy.run("run_classifier.py", ["--do_train=true", "--output_dir=/tmp/out"])
    """
    path = os.path.abspath(script)
    if not path.endswith(".py") or not os.path.isfile(path):
        raise ScriptNotFoundError(f"`script` must be an existing .py file. Got: {script!r}")
    # One route per log line, at TF1's default WARN level: scripts that want INFO (BERT's
    # loss lines) call tf.logging.set_verbosity themselves, as they did on TF 1.x.
    logs.setup("warning")
    enable_tf1_behavior()
    served = Report()
    # As `python script.py` does for sys.path[0]: a symlinked script imports its modules
    # (modeling.py beside run_classifier.py) from where the file really is.
    script_dir = os.path.dirname(os.path.realpath(path))
    old_argv = sys.argv
    sys.argv = [path, *argv]
    sys.path.insert(0, script_dir)
    status = 0
    try:
        with Scope(script_dir, build_namespace(served), served) as scope:
            runpy.run_path(path, init_globals={"__builtins__": scope.builtins}, run_name="__main__")
    except SystemExit as exit_:
        status = _exit_status(exit_)
    finally:
        sys.argv = old_argv
        if sys.path and sys.path[0] == script_dir:
            del sys.path[0]
        if report:
            stream = report_stream or sys.stdout
            print(served.format(os.path.basename(path)), file=stream, flush=True)
    return status
