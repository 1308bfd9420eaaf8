"""Runs a TF1-era script (or ``-m`` module) as ``__main__`` inside the scoped TF1 stand-in."""

from __future__ import annotations

import importlib
import importlib.util
import logging
import os
import re
import runpy
import sys
import sysconfig
import traceback
import warnings
from collections.abc import Sequence
from importlib.machinery import PathFinder
from typing import IO, Callable, Optional

import numpy
from absl import flags as absl_flags

from tfest_kit import logs
from tfest_kit._checks import TfestKitError
from tfest_kit._tf import KERAS_PACKAGE, tf
from tfest_kit.legacy._contrib import TF1_RUNTIME
from tfest_kit.legacy._importer import (
    INSTALLED_DIRS,
    SERVED_LIBRARIES,
    Scope,
    served_libraries,
    user_code_roots,
)
from tfest_kit.legacy._namespace import REAL_PACKAGES, build_namespace
from tfest_kit.legacy._shim import Report

__all__ = [
    "run",
    "run_module",
    "enable_tf1_behavior",
    "tf1_package_hint",
    "ScriptNotFoundError",
]

_MODULE_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


class ScriptNotFoundError(TfestKitError, ValueError):
    """The script to run is not an existing ``.py`` file, or the module is not importable."""


def enable_tf1_behavior() -> None:
    """Switches the process to the TF1 behaviour legacy scripts assume.

    The switches are process-wide and cannot be undone once graphs exist, which is why only
    :func:`run` calls this. ``tf.compat.v1.disable_v2_behavior()``, which makes these:

    - TF 2 off for Keras too: ``tf.layers`` / ``tf.keras.layers`` take TF1's initializers, which
      a graph seed (``tf.set_random_seed``, ``RunConfig(tf_random_seed=…)``) makes repeat (TF2's
      draw a seed of their own); TF1's ``tf.data`` classes and tensor equality;
    - ``tf.compat.v1.disable_v2_tensorshape()``: ``tensor.shape[-1]`` is a ``Dimension`` with
      ``.value`` (TF2 returns an ``int``, and BERT's ``shape[-1].value`` fails);
    - ``tf.compat.v1.disable_eager_execution()``: module-level ``tf.placeholder`` /
      ``tf.Session`` code works as in TF1.  Estimators build their own graphs either way;
    - ``tf.compat.v1.disable_resource_variables()``: ``tf.get_variable`` / ``tf.Variable``
      make reference variables (``initialized_value()``, TF1's read / assign order), as TF
      1.15 did; ``use_resource=True`` and ``tf.enable_resource_variables()`` still give
      resource variables;
    - ``tf.compat.v1.disable_control_flow_v2()``: ``tf.cond`` / ``tf.while_loop`` build TF1's
      Switch / Merge ops, which run only the branch taken (a functional ``If`` reads its
      reference-variable inputs first: ``ExponentialMovingAverage.apply`` failed on an
      uninitialised one).

    And on NumPy 2, ``numpy.set_printoptions(legacy="1.25")``: NumPy scalars print as in NumPy
    1 (``0.0625``, not ``np.float32(0.0625)``), in the dicts TF1 scripts log.  Keras 2's
    ``Layer`` gets back TF 1.15's ``apply``, "an alias of ``self.__call__``" that later Keras
    dropped (``tf.keras.layers.Conv2D(8, 3).apply(x)``); the legacy ``tf.layers`` keep their own.
    """
    tf.disable_v2_behavior()
    TF1_RUNTIME["on"] = True  # the TPUEstimator fallback: one step per Session.run
    # Keras' legacy tf.layers print a UserWarning per call; --report lists them once instead,
    # as tfest_kit.logs.setup() does for TensorFlow's own deprecation warnings.
    warnings.filterwarnings("ignore", message=r"`tf\.layers\.", category=UserWarning)
    # tf_slim (tf.contrib.layers / slim) calls Layer.apply, which warns on every layer.
    warnings.filterwarnings("ignore", message=r"`layer\.apply` is deprecated", category=UserWarning)
    # NumPy 2 prints a scalar as `np.float32(0.0625)`: TF 1.15-era scripts log their eval dict
    # (`Evaluation results: {'accuracy': 0.0625}`) as NumPy 1 printed it.
    if int(numpy.__version__.split(".")[0]) >= 2:
        numpy.set_printoptions(legacy="1.25")
    layer = importlib.import_module(KERAS_PACKAGE).layers.Layer  # loaded by TensorFlow already
    if not hasattr(layer, "apply"):
        layer.apply = _layer_apply


def _layer_apply(self, inputs, *args, **kwargs):
    """TF 1.15's ``Layer.apply(inputs, *args, **kwargs)``: ``self.__call__`` under its old name."""
    return self(inputs, *args, **kwargs)


def _exit_status(exit_: SystemExit) -> int:
    # The same conversion the interpreter applies to an uncaught SystemExit.
    if exit_.code is None:
        return 0
    if isinstance(exit_.code, int):
        return exit_.code
    print(exit_.code, file=sys.stderr)
    return 1


# The libraries that are TensorFlow itself, and the runner: a TF1 name missing inside them is not
# a TF1 library's.
_TENSORFLOW_OWN = frozenset(
    {"tensorflow", "tensorflow_estimator", "keras", "tf_keras", "absl", "tfest_kit"}
)
_TF1_NAME_MISSING = re.compile(
    r"module '(tensorflow(\.[\w.]+)?)' has no attribute|"
    r"No module named '(tensorflow(\.[\w.]+)?)'|"
    r"cannot import name '\w+' from '(tensorflow(\.[\w.]+)?)'"
)


def _installed_package(filename: str) -> Optional[str]:
    """The top-level import name of an installed file (``…/site-packages/lib/x.py`` → ``lib``)."""
    parts = os.path.realpath(filename).split(os.sep)
    below = [i for i, part in enumerate(parts) if part in INSTALLED_DIRS]
    if not below or below[-1] + 1 >= len(parts):
        return None
    name = parts[below[-1] + 1]
    name = name[:-3] if name.endswith(".py") else name
    return name if name.isidentifier() else None


def _standard_library(filename: str) -> bool:
    # `<frozen importlib._bootstrap>` and the like, or a file of the standard library.
    if filename.startswith("<"):
        return True
    real = os.path.realpath(filename)
    stdlib = os.path.realpath(sysconfig.get_paths()["stdlib"])
    return real.startswith(stdlib + os.sep) and not INSTALLED_DIRS.intersection(real.split(os.sep))


def tf1_package_hint(error: BaseException) -> Optional[str]:
    """For a TF1 name missing in an installed library, the sentence saying what to do.

    An installed library keeps the real TensorFlow 2 under the runner, so a TF1-era one fails
    with ``AttributeError: module 'tensorflow' has no attribute 'contrib'`` (or an ImportError
    of ``tensorflow.contrib…``); the innermost frame of the traceback outside TensorFlow's own
    packages and the standard library names the package, and the hint names
    ``--tf1-package``.  A name missing in TensorFlow's private modules
    (``tensorflow.python…``), or in a library the runner serves itself (``tf_slim``), gets a
    hint saying that ``--tf1-package`` would not help: the runner leaves private modules as
    TensorFlow 2 has them.

    Args:
      error: the exception the script raised.

    Returns:
      The hint, or None when the error is not a TF1 name missing in an installed package
      (user code's own errors get none).
    """
    if not isinstance(error, (AttributeError, ImportError)):
        return None
    match = _TF1_NAME_MISSING.search(str(error))
    if match is None:
        return None
    module = next(group for group in match.groups()[::2] if group)
    for frame in reversed(traceback.extract_tb(error.__traceback__)):
        package = _installed_package(frame.filename)
        if package in _TENSORFLOW_OWN or _standard_library(frame.filename):
            continue
        if package is None:
            return None  # raised by the user's code: its own traceback says it all
        where = f"{frame.filename}:{frame.lineno}"
        private = module.partition(".")[2].partition(".")[0] in REAL_PACKAGES
        if not private and package not in SERVED_LIBRARIES:
            return (
                f"The installed package {package!r} ({where}) uses TF1 names but got the real "
                f"TensorFlow 2: installed packages keep it under the legacy runner. Pass "
                f"`--tf1-package {package}` (python -m tfest_kit.legacy --tf1-package "
                f"{package} SCRIPT.py …) to hand it the TF1 namespace."
            )
        missing = f"reads a name TensorFlow {tf.version.VERSION} no longer has in {module}"
        unchanged = (
            "`--tf1-package` would not help: the runner leaves TensorFlow's own modules as "
            "TensorFlow 2 has them."
        )
        if package in SERVED_LIBRARIES:
            return (
                f"{package} ({where}), which the runner serves as {SERVED_LIBRARIES[package]}, "
                f"{missing}: this function of {package} does not run on TensorFlow 2 and the "
                f"runner has no port of it. {unchanged} Call a ported equivalent "
                "(docs/compatibility.md lists them: slim.learning.create_train_op, "
                "clip_gradient_norms, tf.contrib.layers.optimize_loss …) or replace the call."
            )
        return (
            f"The installed package {package!r} ({where}) {missing}. {unchanged} Use a release "
            f"of {package} made for TensorFlow 2, or replace the call."
        )
    return None


def _pytest_argv(argv: Sequence[str]) -> list[str]:
    """pytest's command line under the runner: ``--assert=plain`` unless it names a mode.

    pytest's assertion rewriting imports test modules and ``conftest.py`` with its own
    loader, which runs them with Python's builtins: they would get the real TensorFlow 2.
    With ``--assert=plain`` pytest imports them through ``import``, which the runner scopes.
    """
    argv = list(argv)
    modes = [
        argv[i + 1] if a == "--assert" and i + 1 < len(argv) else a.partition("=")[2]
        for i, a in enumerate(argv)
        if a == "--assert" or a.startswith("--assert=")
    ]
    if not modes:
        print(
            "tfest_kit.legacy: running pytest with --assert=plain: its assertion rewriting "
            "imports test modules and conftest.py itself, where the runner cannot give them "
            "TF1's tensorflow (a failing assert shows its plain message).",
            file=sys.stderr,
            flush=True,
        )
        return ["--assert=plain", *argv]
    if modes[-1] != "plain":
        print(
            "tfest_kit.legacy: pytest's assertion rewriting is on: the test modules and "
            "conftest.py it rewrites get the real TensorFlow 2, not TF1; drop --assert (the "
            "runner then passes --assert=plain) to give them TF1.",
            file=sys.stderr,
            flush=True,
        )
    return argv


def _check_packages(packages: Sequence[str]) -> list[str]:
    packages = [packages] if isinstance(packages, str) else list(packages)
    for name in packages:
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(
                "`tf1_packages` must hold top-level import names of installed packages "
                f"(e.g. 'mytf1lib'). Got: {name!r}"
            )
    return packages


def _run_scoped(
    main: Callable[[Scope], None],
    *,
    argv: Sequence[str],
    path_entry: str,
    roots: Sequence[str],
    name: str,
    report: bool,
    report_stream: Optional[IO[str]],
    tf1_packages: Sequence[str] = (),
) -> int:
    # What run() and run_module() share: TF1 behaviour, sys.argv/sys.path as `python` sets
    # them, the scope, the exit status and the report.
    # One route per log line. As on TF 1.x, TensorFlow's logger has no level of its own: it
    # follows the root logger, which absl.app.run (tf.app.run too) sets to absl's verbosity
    # (INFO unless set otherwise), else WARNING; tf.logging.set_verbosity sets its own.
    logs.setup(logging.NOTSET)
    enable_tf1_behavior()
    served = Report()
    old_argv = sys.argv
    sys.argv = [name, *argv]
    sys.path.insert(0, path_entry)
    status = 0
    try:
        for name in tf1_packages:
            if name in sys.modules:
                # Its modules already ran with the real TensorFlow 2 and are not run again.
                tf.logging.warning(
                    "--tf1-package %s: %s is already imported, so it keeps the real "
                    "TensorFlow 2.",
                    name,
                    name,
                )
        scope = Scope(roots, build_namespace(served), served, packages=tf1_packages)
        with served_libraries(), scope:
            try:
                main(scope)
            except (AttributeError, ImportError) as error:
                hint = tf1_package_hint(error)
                if hint is not None:
                    add_note = getattr(error, "add_note", None)  # Python 3.11+
                    if add_note is not None:
                        add_note(hint)
                    else:
                        print(hint, file=sys.stderr, flush=True)
                raise
            except absl_flags.Error as error:  # a bad value, a flag without one
                if not any(
                    frame.name == "_parse_flags_tolerate_undef"  # tf.app.run's parser
                    for frame in traceback.extract_tb(error.__traceback__)
                ):
                    raise
                # TF 1.15's tf.app.run let it out as a 60-line traceback; absl.app.run's own
                # parser says it so: a bad command line, not a bug of the script.
                print(
                    f"FATAL Flags parsing error: {error}\n"
                    "Pass --helpshort or --helpfull to see help on flags.",
                    file=sys.stderr,
                )
                raise SystemExit(1) from None
    except SystemExit as exit_:
        status = _exit_status(exit_)
    except ScriptNotFoundError:
        report = False  # nothing ran: a report would only repeat the error
        raise
    finally:
        sys.argv = old_argv
        if sys.path and sys.path[0] == path_entry:
            del sys.path[0]
        if report:
            stream = report_stream or sys.stdout
            print(served.format(os.path.basename(name)), file=stream, flush=True)
    return status


def run(
    script: str,
    argv: Sequence[str] = (),
    *,
    report: bool = False,
    report_stream: Optional[IO[str]] = None,
    tf1_packages: Sequence[str] = (),
) -> int:
    """Runs ``script`` as ``__main__`` with ``import tensorflow`` giving the TF1 stand-in.

    The script's directory goes first on ``sys.path`` (as ``python script.py`` would put it),
    ``sys.argv`` is ``[script, *argv]`` so ``tf.app.run()`` / ``absl.app.run()`` parse the
    script's flags, and ``tfest_kit.logs.setup()`` makes each log line (the loss lines too)
    print once, at the level TF 1.x had: absl's verbosity under ``absl.app.run`` /
    ``tf.app.run`` (INFO unless ``absl.logging.set_verbosity`` or ``--verbosity`` say
    otherwise), else warnings, or what ``tf.logging.set_verbosity`` sets.  absl flags are
    process-global: run one script per process.

    The stand-in is given to the script and to the modules it imports from its directory,
    the current directory and ``PYTHONPATH`` entries (a ``mylib`` package beside
    ``scripts/``); libraries under ``site-packages`` and the standard library keep the real
    TensorFlow 2.

    Args:
      script: path of the ``.py`` file to run.
      argv: the script's command-line flags.
      report: print, once at the end (also when the script fails), which TF1 symbols the
        script asked for and did not get, which were served by the shim and which came from
        ``tf.compat.v1``.
      report_stream: where the report goes; default ``sys.stdout``.
      tf1_packages: top-level import names of installed packages (a TF1-era library in
        site-packages) whose modules get the stand-in too.  When an installed package fails
        on a TF1 name, the error says to name it here (``--tf1-package NAME``).

    Returns:
      The script's exit status (``tf.app.run`` ends with ``sys.exit``).

    Raises:
      ScriptNotFoundError: (a ``ValueError``) if ``script`` is not an existing ``.py`` file.
      ValueError: if a ``tf1_packages`` entry is not a top-level import name.

    Example:

        from tfest_kit import legacy
        status = legacy.run("run_classifier.py", ["--do_train=true", "--output_dir=/tmp/out"])
    """
    tf1_packages = _check_packages(tf1_packages)
    path = os.path.abspath(script)
    if not path.endswith(".py") or not os.path.isfile(path):
        raise ScriptNotFoundError(
            f"`script` must be an existing .py file (for a module, use run_module or "
            f"`-m MODULE`). Got: {script!r}"
        )
    # As `python script.py` does for sys.path[0]: a symlinked script imports its modules
    # (modeling.py beside run_classifier.py) from where the file really is.
    script_dir = os.path.dirname(os.path.realpath(path))

    def main(scope: Scope) -> None:
        runpy.run_path(path, init_globals={"__builtins__": scope.builtins}, run_name="__main__")

    return _run_scoped(
        main,
        argv=argv,
        path_entry=script_dir,
        roots=user_code_roots(script_dir),
        name=path,
        report=report,
        report_stream=report_stream,
        tf1_packages=tf1_packages,
    )


def run_module(
    module: str,
    argv: Sequence[str] = (),
    *,
    report: bool = False,
    report_stream: Optional[IO[str]] = None,
    tf1_packages: Sequence[str] = (),
) -> int:
    """Runs ``module`` as ``__main__``, as ``python -m module`` would, with the TF1 stand-in.

    The current directory goes first on ``sys.path`` (as with ``python -m``), so
    ``run_module("scripts.train")`` from a project root finds ``scripts/train.py`` and the
    project's ``mylib``; both get the stand-in, as in :func:`run`.  ``pytest`` (a project's own
    tests) runs with ``--assert=plain`` unless ``argv`` names an ``--assert`` mode: its
    assertion rewriting would import the test modules outside the runner's scope.

    Args:
      module: dotted module name, e.g. ``"scripts.train"``; a package runs its ``__main__``.
      argv: the module's command-line flags.
      report: as for :func:`run`.
      report_stream: where the report goes; default ``sys.stdout``.
      tf1_packages: as for :func:`run`.

    Returns:
      The module's exit status.

    Raises:
      ScriptNotFoundError: (a ``ValueError``) if ``module`` is not a module name or no such
        module is found on ``sys.path``.

    Example:

        from tfest_kit import legacy
        status = legacy.run_module("scripts.train", ["--steps=100"])
    """
    tf1_packages = _check_packages(tf1_packages)
    if not isinstance(module, str) or not _MODULE_NAME.fullmatch(module):
        raise ScriptNotFoundError(
            f"`module` must be a dotted module name such as 'scripts.train'. Got: {module!r}"
        )
    cwd = os.getcwd()

    def not_found(detail: str) -> ScriptNotFoundError:
        return ScriptNotFoundError(
            f"`module` must be importable from the current directory ({cwd}) or PYTHONPATH, "
            f"as for `python -m`: {detail}. Got: {module!r}"
        )

    # The top-level package is looked up without importing it, so a typo fails before the
    # process is switched to TF1 behaviour.
    top = module.partition(".")[0]
    if top not in sys.modules and PathFinder.find_spec(top, [cwd, *sys.path]) is None:
        raise not_found(f"no module named {top!r}")

    def main(scope: Scope) -> None:
        # Found inside the scope: a parent package's __init__ may import tensorflow too.
        try:
            spec = importlib.util.find_spec(module)
        except ModuleNotFoundError as e:
            parents = {module.rsplit(".", i)[0] for i in range(module.count(".") + 1)}
            if e.name not in parents:
                raise  # an import inside the user's package: its traceback and the report
            raise not_found(f"no module named {e.name!r}") from e
        if spec is None:
            raise not_found(f"no module named {module!r}")
        runpy.run_module(
            module,
            init_globals={"__builtins__": scope.builtins},
            run_name="__main__",
            alter_sys=True,
        )

    if module in ("pytest", "py.test"):
        argv = _pytest_argv(argv)
    return _run_scoped(
        main,
        argv=argv,
        path_entry=cwd,
        roots=user_code_roots(),
        name=module,
        report=report,
        report_stream=report_stream,
        tf1_packages=tf1_packages,
    )
