"""Logging set-up: each line once, no deprecation floods.

TensorFlow attaches its own ``StreamHandler`` to the ``tensorflow`` logger when it is imported
and the root logger has none yet.  ``absl.app.run`` later adds absl's handler to the *root*
logger, and every ``tf.compat.v1.logging.info`` line is then printed twice: once by
TensorFlow's handler (``INFO:tensorflow:…``) and once, after propagating, by absl's.
:func:`setup` gives the ``tensorflow`` logger exactly one route to the terminal: absl's handler
when absl's logging is in use, a plain one otherwise.

Example:

    from tfest_kit import logs

    logs.setup()                      # INFO, deprecation warnings off
    logs.setup("debug", show_deprecations=True)
    logs.setup(tensorflow_info=False)  # your INFO lines and tfest_kit's, not TensorFlow's
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import sys
import warnings
from collections.abc import Iterator
from typing import Optional, Union

from tfest_kit._tf import tf2

__all__ = ["setup", "quieted", "LEVELS"]

LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "warn": logging.WARNING,
    "error": logging.ERROR,
    "fatal": logging.FATAL,
}

_FORMAT = "%(levelname)s:%(name)s:%(message)s"


def _absl_handler() -> logging.Handler | None:
    """Returns absl's handler if absl's logging is attached to the root logger."""
    absl_logging = sys.modules.get("absl.logging")
    if absl_logging is None:
        return None
    handler = absl_logging.get_absl_handler()
    return handler if handler in logging.getLogger().handlers else None


# The packages whose INFO lines ``setup(tensorflow_info=False)`` leaves out. They all log
# through the one ``tensorflow`` logger, so the file a record comes from is what tells them
# apart from tfest_kit's lines and the program's own.
_TENSORFLOW_PACKAGES = ("tensorflow", "tensorflow_estimator", "keras", "tf_keras")


def _package_dirs(names: tuple[str, ...]) -> tuple[str, ...]:
    dirs = []
    for name in names:
        spec = importlib.util.find_spec(name)
        for location in (spec.submodule_search_locations or []) if spec else []:
            dirs.append(os.path.join(os.path.realpath(location), ""))
    return tuple(dirs)


def _prints_to_terminal(handler: logging.Handler) -> bool:
    """Whether ``handler`` prints to the terminal, as opposed to a file, a buffer or a queue.

    A ``StreamHandler`` does when its stream is stderr or stdout (a ``FileHandler`` or a
    test's ``StringIO`` capture does not), and so does pytest's live-log handler. Of the other
    kinds, ``logging``'s own send elsewhere (a queue, a socket, syslog, memory) and a
    ``NullHandler`` prints nothing, while other libraries' handlers (absl's, rich's
    ``RichHandler``) are consoles.
    """
    if isinstance(handler, logging.NullHandler):
        return False
    if type(handler).__name__ == "_LiveLoggingStreamHandler":
        # pytest --log-cli-level: its terminal writer prints the line (with `-s` the plain
        # stderr handler printed it a second time).
        return True
    if isinstance(handler, logging.StreamHandler):
        return not isinstance(handler, logging.FileHandler) and getattr(
            handler, "stream", None
        ) in (sys.stderr, sys.stdout, sys.__stderr__, sys.__stdout__)
    return type(handler).__module__ != "logging.handlers"


class _OneRouteHandler(logging.Handler):
    """Sends each ``tensorflow`` record to the terminal once, and to the root's other handlers.

    The terminal route is absl's handler when absl is active, else the root logger's own
    terminal handlers (``logging.basicConfig()``, a ``RichHandler``), else a plain one on
    stderr. The root logger's handlers that write elsewhere (a ``FileHandler`` from
    ``basicConfig(filename=…)``, a test's capture) get every record, as propagation would have
    given it to them; the INFO lines ``tensorflow_info=False`` leaves out skip the terminal
    only. Deciding per record (rather than once in :func:`setup`) keeps lines single whether
    ``setup()`` runs before or after ``absl.app.run`` installs its handler.
    """

    def __init__(self, tensorflow_info: bool = True) -> None:
        super().__init__()
        self._plain = logging.StreamHandler(sys.stderr)
        self._plain.setFormatter(logging.Formatter(_FORMAT))
        self._left_out = () if tensorflow_info else _package_dirs(_TENSORFLOW_PACKAGES)
        self._is_left_out: dict[str, bool] = {}  # by source file: a few dozen at most

    def _leaves_out(self, record: logging.LogRecord) -> bool:
        """Whether the terminal leaves ``record`` out (TensorFlow's INFO, tensorflow_info off)."""
        if record.levelno >= logging.WARNING or not self._left_out:
            return False
        left_out = self._is_left_out.get(record.pathname)
        if left_out is None:
            left_out = os.path.realpath(record.pathname).startswith(self._left_out)
            self._is_left_out[record.pathname] = left_out
        return left_out

    def emit(self, record: logging.LogRecord) -> None:
        root_handlers = logging.getLogger().handlers
        absl = _absl_handler()
        terminals = [absl] if absl else [h for h in root_handlers if _prints_to_terminal(h)]
        if not terminals:
            # Resolve sys.stderr per record so pytest's capture and redirections see it. Not
            # through setStream(): it flushes the stream it replaces, which may be closed by
            # then (a redirection that ended), and the error would reach the logging call.
            self._plain.stream = sys.stderr
            terminals = [self._plain]
        elsewhere = [
            h
            for h in root_handlers
            if not _prints_to_terminal(h) and not isinstance(h, logging.NullHandler)
        ]
        for handler in elsewhere if self._leaves_out(record) else terminals + elsewhere:
            if record.levelno >= handler.level:  # as propagation checks it
                handler.handle(record)


class _OwnModelFnParamsFilter(logging.Filter):
    """Drops Estimator's "model_fn includes params argument, but params are not passed".

    Only for model_fns built by tfest_kit: they take ``params`` because TPUEstimator passes
    ``params['batch_size']`` and work without it, so on a plain Estimator the warning is noise.
    A user's own model_fn still gets the official warning.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if "includes params argument" not in str(record.msg):
            return True
        args = record.args if isinstance(record.args, tuple) else ()
        return not any(getattr(a, "__module__", "").startswith("tfest_kit.") for a in args)


class _RacedGlobalStepFilter(logging.Filter):
    """Drops StepCounterHook's "global step has not been increased" when it is a race.

    The hook compares global-step values read in two consecutive runs, but in the same run as
    the train op: a v1 optimizer's (or Keras') increment is not ordered after that read, so
    a read that lands after one run's increment and one before the next run's gives the same
    value twice, and the hook tells a correct model_fn to increment the step (four times in
    one 500-step run of the iris recipe; in to_estimator's models too). Such a race reports
    each value once. A model_fn that really never increments the step reports the same value
    run after run: the first report of a value is dropped, the next one of that value passes.
    Only the last dropped value is kept: a later run (premade_estimators trains three models in
    one process) may race at a step an earlier one raced at.
    """

    def __init__(self) -> None:
        super().__init__()
        self._last_dropped: Optional[int] = None

    def filter(self, record: logging.LogRecord) -> bool:
        if "has not been increased" not in str(record.msg):
            return True
        args = record.args if isinstance(record.args, tuple) else ()
        try:
            stale, previous = (int(a) for a in args)
        except (TypeError, ValueError):
            return True
        if stale != previous or stale == self._last_dropped:
            return True
        self._last_dropped = stale
        return False


class _RepeatedReduceLineFilter(logging.Filter):
    """Passes MirroredStrategy's "Reduce to … then broadcast to …" once per process.

    ``ReductionToOneDevice`` (how CPU replicas, ``run_config(cpu_replicas=…)``, sum their
    gradients) says it at every reduction it builds: three lines per training graph, up to
    ten per process, each saying the same thing.
    """

    def __init__(self) -> None:
        super().__init__()
        self._said = False

    def filter(self, record: logging.LogRecord) -> bool:
        message = str(record.msg)
        if not (message.startswith("Reduce to ") and "then broadcast to" in message):
            return True
        said, self._said = self._said, True
        return not said


class _DeprecationFilter(logging.Filter):
    """Leaves out TensorFlow's deprecation warnings unless ``show`` is set.

    They are the records of TensorFlow's ``python/util/deprecation.py`` and
    ``module_wrapper.py`` (``tf.compat.v1`` names); told apart by the file they come from, as
    TensorFlow's switches for them are private module globals.
    """

    def __init__(self) -> None:
        super().__init__()
        self.show = False
        dirs = _package_dirs(("tensorflow",))
        self._util_dir = os.path.join(dirs[0], "python", "util", "") if dirs else None

    def filter(self, record: logging.LogRecord) -> bool:
        if self.show or self._util_dir is None:
            return True
        if record.module not in ("deprecation", "module_wrapper"):
            return True
        return not os.path.realpath(record.pathname).startswith(self._util_dir)


_FILTERS = (
    _OwnModelFnParamsFilter,
    _RacedGlobalStepFilter,
    _RepeatedReduceLineFilter,
    _DeprecationFilter,
)


def _install_filters() -> None:
    logger = tf2.get_logger()
    for kind in _FILTERS:
        if not any(isinstance(f, kind) for f in logger.filters):
            logger.addFilter(kind())


def _set_deprecation_warnings(show: bool) -> None:
    _install_filters()
    for installed in tf2.get_logger().filters:
        if isinstance(installed, _DeprecationFilter):
            installed.show = show
    # Keras' legacy `tf.layers` (TF1 code's dense, conv2d, batch_normalization ...) say the
    # same through Python's warnings, once per call site; the newest filter wins.
    for message in (_KERAS_LEGACY_LAYER, _GRAPH_MODE_DATASET_OPTIONS):
        warnings.filterwarnings(
            "default" if show else "ignore", message=message, category=UserWarning
        )


_KERAS_LEGACY_LAYER = r"`tf\.[\w.]+` is deprecated and will be removed in a future version"
# tf.data's note that a graph-mode Dataset.options() may be stale, said whenever a
# distribution strategy (run_config(cpu_replicas=…)) reads a training input's options.
_GRAPH_MODE_DATASET_OPTIONS = r"To make it possible to preserve tf\.data options"


def _absl_verbosity() -> Optional[int]:
    """The ``logging`` level of absl's ``--verbosity`` flag, if the command line gave one."""
    absl_flags = sys.modules.get("absl.flags")
    if absl_flags is None or "verbosity" not in absl_flags.FLAGS:
        return None
    flag = absl_flags.FLAGS["verbosity"]
    if not absl_flags.FLAGS.is_parsed() or not flag.present:
        return None
    from absl.logging import converter

    # absl's own rule: -1 WARNING, 0 INFO, 1 DEBUG, and each level above 1 one step below.
    if flag.value <= converter.ABSL_DEBUG:
        return converter.absl_to_standard(flag.value)
    return logging.DEBUG - (flag.value - 1)


def setup(
    verbosity: Union[str, int, None] = None,
    show_deprecations: bool = False,
    tensorflow_info: bool = True,
) -> logging.Logger:
    """Configures TensorFlow's logger so that each line is printed once.

    Safe to call any number of times, before or after ``absl.app.run``. Handlers a program
    added to the ``tensorflow`` logger (a ``FileHandler`` …) stay; plain ``StreamHandler``s
    (TensorFlow's own terminal output) are replaced. The root logger's handlers other than
    the terminal's (``logging.basicConfig(filename=…)``) still get TensorFlow's lines.

    Args:
      verbosity: ``"debug"``, ``"info"``, ``"warning"``, ``"error"``, ``"fatal"`` or a
        ``logging`` level number. None: the level of absl's ``--verbosity`` flag when the
        command line gives one (``app.run`` parsed it), else ``"info"``.
      show_deprecations: print TensorFlow's deprecation warnings, and Keras' for the legacy
        ``tf.layers`` (off by default: a TF1-era program otherwise prints dozens of them).
      tensorflow_info: print the INFO (and DEBUG) lines of TensorFlow, Estimator and Keras
        themselves: "Calling model_fn.", "Graph was finalized.", the whole ``RunConfig``,
        three lines per checkpoint, the official ``LoggingTensorHook``'s loss lines. With
        ``False`` the terminal keeps the lines of tfest_kit (``ProgressHook``, the fallback
        ``TPUEstimator``'s loss line) and of the program itself, and TensorFlow's warnings
        and errors: for a program that reports its own progress. A program's own handlers
        (a ``FileHandler`` …) still get every line.

    Returns:
      The ``tensorflow`` logger.

    Raises:
      ValueError: if ``verbosity`` is not one of the names above or an int.

    Example:

        from tfest_kit import logs
        logs.setup("info")
        logs.setup(tensorflow_info=False)  # progress from ProgressHook, not Estimator's lines
    """
    if verbosity is None:
        absl_level = _absl_verbosity()
        verbosity = "info" if absl_level is None else absl_level
    if isinstance(verbosity, str):
        if verbosity.lower() not in LEVELS:
            raise ValueError(
                f"`verbosity` must be one of {sorted(LEVELS)} or a logging level number. "
                f"Got: {verbosity!r}"
            )
        level = LEVELS[verbosity.lower()]
    elif isinstance(verbosity, int) and not isinstance(verbosity, bool):
        level = verbosity
    else:
        raise ValueError(
            f"`verbosity` must be a level name or a logging level number. Got: {verbosity!r}"
        )
    logger = tf2.get_logger()
    for handler in list(logger.handlers):
        # Only the routes to the terminal: TensorFlow's own StreamHandler and ours from an
        # earlier call. A program's FileHandler (or any other handler) keeps its lines.
        if type(handler) is logging.StreamHandler or isinstance(handler, _OneRouteHandler):
            logger.removeHandler(handler)
    logger.addHandler(_OneRouteHandler(tensorflow_info))
    logger.propagate = False
    logger.setLevel(level)
    _set_deprecation_warnings(show_deprecations)
    return logger


@contextlib.contextmanager
def quieted(level: int = logging.WARNING) -> Iterator[None]:
    """Raises TensorFlow's log level for the ``with`` block, e.g. around a second Estimator.

    tfest_kit sometimes builds an Estimator only to hand it on (a wrapper around a converted
    Keras model, a stand-in for an official factory); its constructor would log the whole
    ``RunConfig`` again, a duplicate of the line the user already saw.

    Args:
      level: the least severe level still printed inside the block.

    Example:

        with logs.quieted():
            est = tf.estimator.Estimator(model_fn, config=config)  # no "Using config: …"
    """
    logger = tf2.get_logger()
    previous = logger.level
    logger.setLevel(max(level, previous))
    try:
        yield
    finally:
        logger.setLevel(previous)


def _quiet_by_default() -> None:
    """Runs at import: deprecation warnings off, tfest_kit's own noise filtered.

    Handlers and levels are left alone; :func:`setup` is what configures them.
    """
    _install_filters()
    _set_deprecation_warnings(False)
